package tests

import (
	"bytes"
	gocontext "context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/remote"
)

// The project sync over a real OpenSSH server on loopback: the sync
// library as jail --remote runs it, with the system ssh (host key
// checked) carrying its scripts, rsync riding the same ssh options, and
// the remote user's real tar and find.

// sshCarrier runs the sync's scripts over /usr/bin/ssh to the test sshd.
type sshCarrier struct {
	opts []string // ssh and its options, the host left out
	host string
}

func newSSHCarrier(t *testing.T, d *sshd) *sshCarrier {
	t.Helper()
	dir := t.TempDir()
	key, kh := filepath.Join(dir, "key"), filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(key, []byte(d.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kh, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n", d.Port, d.HostPub)), 0o600); err != nil {
		t.Fatal(err)
	}
	return &sshCarrier{host: "127.0.0.1", opts: []string{"/usr/bin/ssh", "-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + kh, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-p", fmt.Sprint(d.Port), "-l", d.User}}
}

func (c *sshCarrier) Run(ctx gocontext.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	args := append(append([]string{}, c.opts[1:]...), c.host, "/bin/sh -c "+jail.ShellQuote(script))
	cmd := exec.CommandContext(ctx, c.opts[0], args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	return cmd.Run()
}

// TestRemoteSyncOverSSH syncs a project holding a masked .env, a denied
// file and a hard link to it to the sshd's user, by rsync and by tar:
// no secret value is anywhere in the remote tree, a second sync sends
// nothing, a remote edit comes back, a planted hook does not, and a file
// edited on both sides keeps the local version with the remote's beside
// it.
func TestRemoteSyncOverSSH(t *testing.T) {
	d := startSSHD(t)
	carrier := newSSHCarrier(t, d)
	for _, mode := range []string{"rsync", "tar"} {
		t.Run(mode, func(t *testing.T) {
			base := t.TempDir()
			root, home, state := filepath.Join(base, "proj"), filepath.Join(base, "home"), filepath.Join(base, "state")
			const key, pass, deniedValue = "sk-live-0a1b2c3d4e5f60718293a4b5c6d7e8f9", "pg-Pa55w0rd-x81", "DENIED-OVER-SSH-5e1d"
			files := map[string]string{
				".env":           "API_KEY=" + key + "\nDATABASE_URL=postgres://app:" + pass + "@db.example.test/app\n",
				"private/id.pem": deniedValue,
				"src/app.py":     "print('hi')\n",
				"both.txt":       "base\n",
				".git/HEAD":      "ref: refs/heads/main\n",
			}
			for p, c := range files {
				os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
				if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			os.MkdirAll(home, 0o755)
			if err := os.Link(filepath.Join(root, "private/id.pem"), filepath.Join(root, "innocent.txt")); err != nil {
				t.Fatal(err)
			}
			pol := &jail.Policy{ProjectRoot: root, DenyRead: []string{filepath.Join(root, "private")}}
			phs := jail.NewPlaceholders(jail.NewSessionKey())
			ws := filepath.Join(d.Dir, "work-"+mode, "proj")
			cfg := remote.SyncConfig{Conn: carrier, Host: d.Addr(), Dir: ws, Policy: pol, Home: home, StateDir: state, Mask: remote.EnvMasker(pol, phs)}
			if mode == "rsync" {
				cfg.Rsh, cfg.RshHost = carrier.opts, carrier.host // rsync rides the same ssh options
			}
			ctx := gocontext.Background()
			rep, err := remote.Sync(ctx, cfg)
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if rep.Via != mode {
				t.Errorf("sent by %q, want %q", rep.Via, mode)
			}
			grepRemote(t, filepath.Dir(ws), key, pass, deniedValue)
			if b, err := os.ReadFile(filepath.Join(ws, "src/app.py")); err != nil || string(b) != files["src/app.py"] {
				t.Fatalf("src/app.py did not arrive: %q %v", b, err)
			}
			if ph, _ := phs.Mask("API_KEY", key); !bytes.Contains(readOr(filepath.Join(ws, ".env")), []byte("API_KEY="+ph)) {
				t.Errorf("the remote .env does not hold the run's placeholder:\n%s", readOr(filepath.Join(ws, ".env")))
			}
			start := time.Now()
			if err := carrier.Run(ctx, "true", nil, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			plain := time.Since(start)
			start = time.Now()
			again, err := remote.Sync(ctx, cfg)
			if err != nil || again.Sent != 0 || again.Deleted != 0 || again.Via != "" {
				t.Errorf("a second sync with nothing changed sent %+v, %v", again, err)
			}
			t.Logf("a sync with nothing changed took %v, plain ssh true %v (no control master)", time.Since(start), plain)
			// The remote side works: as the remote user, over ssh.
			edit := `cd "$1" && printf 'print("edited")\n' > src/app.py && printf 'remote\n' > both.txt &&
mkdir -p .git/hooks && printf '#!/bin/sh\ntouch /tmp/pwned-by-remote\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`
			var stderr bytes.Buffer
			if err := carrier.Run(ctx, "set -- "+jail.ShellQuote(ws)+"\n"+edit, nil, io.Discard, &stderr); err != nil {
				t.Fatalf("editing on the remote: %v: %s", err, stderr.String())
			}
			os.WriteFile(filepath.Join(root, "both.txt"), []byte("local\n"), 0o644)
			back, err := remote.SyncBack(ctx, cfg)
			if err != nil {
				t.Fatalf("SyncBack: %v", err)
			}
			if got := string(readOr(filepath.Join(root, "src/app.py"))); got != "print(\"edited\")\n" {
				t.Errorf("the remote edit did not come back: %q", got)
			}
			if got := string(readOr(filepath.Join(root, "both.txt"))); got != "local\n" {
				t.Errorf("the local edit was overwritten: %q", got)
			}
			if got := string(readOr(filepath.Join(root, "both.txt"+remote.ConflictSuffix))); got != "remote\n" {
				t.Errorf("the remote version of a conflict is not beside it: %q (%+v)", got, back)
			}
			if _, err := os.Lstat(filepath.Join(root, ".git/hooks/pre-commit")); err == nil {
				t.Error("a hook planted on the remote was applied locally")
			}
			if !strings.Contains(strings.Join(back.Kept, " "), ".git/hooks/pre-commit") {
				t.Errorf("the planted hook is not reported: %+v", back)
			}
			if err := remote.RemoveWorkspace(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(ws); err == nil {
				t.Error("the workspace outlived RemoveWorkspace")
			}
		})
	}
}

func readOr(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// grepRemote fails for every regular file under dir holding a value.
func grepRemote(t *testing.T, dir string, values ...string) {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		n++
		b, _ := os.ReadFile(p)
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("the remote file %s holds the secret %q", p, v)
			}
		}
		return nil
	})
	if n == 0 {
		t.Fatalf("nothing under %s to grep: the sync sent nothing", dir)
	}
}
