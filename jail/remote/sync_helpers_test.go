package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// localConn carries the sync's scripts to a second directory on this
// machine standing for the remote home: the scripts, tar, find and rsync
// are the real ones, only ssh is left out.
type localConn struct {
	home string
	rsh  string // the program rsync runs in ssh's place
}

func (c *localConn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Dir, cmd.Env = c.home, []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	return cmd.Run()
}

// tarConn is a carrier with no ssh command line for rsync: the sync
// falls back to tar.
type tarConn struct{ c *localConn }

func (t tarConn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	return t.c.Run(ctx, script, stdin, stdout, stderr)
}

// syncEnv is a project, a local home and state dir, and a remote home.
type syncEnv struct {
	t                      *testing.T
	root, home, state, rem string
	conn                   *localConn
	phs                    *jail.Placeholders
	pol                    *jail.Policy
}

func newSyncEnv(t *testing.T) *syncEnv {
	t.Helper()
	for _, tool := range []string{"tar", "find", "xargs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	base := t.TempDir()
	e := &syncEnv{t: t, root: filepath.Join(base, "proj"), home: filepath.Join(base, "home"),
		state: filepath.Join(base, "state"), rem: filepath.Join(base, "remotehome")}
	for _, d := range []string{e.root, e.home, e.state, e.rem} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rsh := filepath.Join(base, "fake-ssh")
	// rsync runs "RSH HOST rsync --server ..."; this one drops HOST and
	// runs the rest here, as sshd would on the remote.
	if err := os.WriteFile(rsh, []byte("#!/bin/sh\nshift\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.conn = &localConn{home: e.rem, rsh: rsh}
	e.phs = jail.NewPlaceholders(jail.NewSessionKey())
	e.pol = &jail.Policy{ProjectRoot: e.root}
	return e
}

// needRsync skips a test of the rsync transport where rsync is missing
// (make unit installs only what jail needs; make test-deps adds rsync).
func needRsync(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skipf("rsync is not installed (tests/deps.sh --test installs it): %v", err)
	}
}

func (e *syncEnv) cfg(conn SyncConn) SyncConfig {
	cfg := SyncConfig{Conn: conn, Host: "remote.example.test", Dir: "~/work/proj", Policy: e.pol, Home: e.home,
		StateDir: e.state, Mask: EnvMasker(e.pol, e.phs)}
	if _, tarOnly := conn.(tarConn); !tarOnly {
		cfg.Rsh, cfg.RshHost = []string{e.conn.rsh}, "remote.example.test"
	}
	return cfg
}

func (e *syncEnv) workspace() string { return filepath.Join(e.rem, "work", "proj") }

func (e *syncEnv) write(dir, rel, content string) {
	e.t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *syncEnv) read(dir, rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		e.t.Fatalf("reading %s: %v", rel, err)
	}
	return string(b)
}

func (e *syncEnv) sync(conn SyncConn) *SyncReport {
	e.t.Helper()
	rep, err := Sync(context.Background(), e.cfg(conn))
	if err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
	return rep
}

func (e *syncEnv) back(conn SyncConn) *BackReport {
	e.t.Helper()
	rep, err := SyncBack(context.Background(), e.cfg(conn))
	if err != nil {
		e.t.Fatalf("SyncBack: %v", err)
	}
	return rep
}

// grepTree fails the test for every file under dir (symlinks not
// followed) that holds one of values.
func grepTree(t *testing.T, dir string, values ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds the secret %q:\n%s", p, v, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func hasPrefixIn(list []string, prefix string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, prefix) {
			return true
		}
	}
	return false
}

// lyingConn is a compromised remote: its listing holds extra names, and
// its tar of fetched files holds tarName instead of what was asked.
type lyingConn struct {
	SyncConn
	extra   []string
	tarName string
}

func (c *lyingConn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch {
	case strings.Contains(script, "echo LIST"):
		if err := c.SyncConn.Run(ctx, script, stdin, stdout, stderr); err != nil {
			return err
		}
		for _, n := range c.extra {
			if _, err := io.WriteString(stdout, "f 644 5 1700000000.0000000000 "+n+"\x00\x00"); err != nil {
				return err
			}
		}
		return nil
	case strings.Contains(script, "--no-recursion") && c.tarName != "":
		io.Copy(io.Discard, stdin)
		tw := tar.NewWriter(stdout)
		tw.WriteHeader(&tar.Header{Name: c.tarName, Typeflag: tar.TypeReg, Mode: 0o644, Size: 5})
		tw.Write([]byte("evil\n"))
		return tw.Close()
	}
	return c.SyncConn.Run(ctx, script, stdin, stdout, stderr)
}

// dropConn loses the link when the fetch starts, as ssh does when the
// network goes.
type dropConn struct{ SyncConn }

func (c *dropConn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	if strings.Contains(script, "--no-recursion") {
		io.WriteString(stdout, "partial")
		return errors.New("ssh: connection to remote.example.test closed")
	}
	return c.SyncConn.Run(ctx, script, stdin, stdout, stderr)
}
