package jail

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A quoted value spanning lines (a PEM key) is masked whole: no line of
// the key's body is left in the copy.
func TestMaskEnvFileMultiline(t *testing.T) {
	body := "MIIEowIBAAKCAQEAsecretbodyline1\nsecretbodyline2"
	in := "A=1\nKEY=\"-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----\" # key\r\nB='open\nC=3\n"
	got, found := MaskEnvFile([]byte(in), nil, newPlaceholders("k").mask)
	out := string(got)
	if strings.Contains(out, "secretbodyline") || !strings.HasPrefix(out, "A=1\nKEY=\"jail-secret-KEY-") || !strings.Contains(out, "\" # key\r\n") {
		t.Errorf("masked:\n%s", out)
	}
	if len(found) != 1 || !strings.Contains(found[0].Value, body) {
		t.Errorf("found %+v", found)
	}
	// B's quote never closes: the rest of the file is its value, kept
	// as written since it is not a secret.
	if !strings.HasSuffix(out, "B='open\nC=3\n") {
		t.Errorf("an unclosed ordinary value changed:\n%s", out)
	}
}

// readEnvFile reads regular files only, bounded, without following a last
// symlink or blocking on a FIFO; /proc, /dev and /sys are never read.
func TestReadEnvFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, []byte("A=1\n"), 0o600)
	os.Symlink(reg, filepath.Join(dir, "link"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)
	os.WriteFile(filepath.Join(dir, "big"), make([]byte, maxEnvFile+1), 0o600)
	if got := string(readEnvFile(reg)); got != "A=1\n" {
		t.Errorf("regular file: %q", got)
	}
	done := make(chan bool)
	go func() {
		for _, p := range []string{"link", "fifo", "big", "."} {
			if b := readEnvFile(filepath.Join(dir, p)); b != nil {
				t.Errorf("%s: read %d bytes, want none", p, len(b))
			}
		}
		for _, p := range []string{"/proc/self/environ", "/dev/zero", "/sys/kernel/mm/transparent_hugepage/enabled"} {
			if b := readEnvFile(p); b != nil {
				t.Errorf("%s: read %d bytes, want none", p, len(b))
			}
		}
		done <- true
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("readEnvFile blocked (on the FIFO?)")
	}
}

// A .env linking into a tree the jail shows through a symlink (allowRead
// ~/link-dir -> ~/real-dir) is masked where the jail sees the target, under
// the link's directory, with one copy for every name of the file.
func TestPlanEnvFileThroughLinkedBind(t *testing.T) {
	f := fakeFacts(map[string]PathInfo{
		"/home/u/link-dir":            {Exists: true, Dir: true, Link: "/home/u/real-dir", Resolved: "/home/u/real-dir"},
		"/home/u/proj/.env.linked":    {Exists: true, Link: "/home/u/link-dir/app.env", Resolved: "/home/u/real-dir/app.env"},
		"/home/u/proj/.env.same":      {Exists: true, Link: ".env.linked", Resolved: "/home/u/real-dir/app.env"},
		"/home/u/proj/.env.inproject": {Exists: true, Link: "config/app.txt", Resolved: "/home/u/proj/config/app.txt"},
	}, map[string][]string{
		"/home/u/proj/**/.env.*": {"/home/u/proj/.env.inproject", "/home/u/proj/.env.linked", "/home/u/proj/.env.same"},
	})
	pol := Policy{ProjectRoot: "/home/u/proj", AllowRead: []string{"/home/u/link-dir"}}
	p, err := Build(&pol, f, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	masked := map[string]string{}
	for _, op := range p.Ops {
		if op.Why == "secrets masked" {
			masked[op.Dest] = op.Src
		}
	}
	if masked["/home/u/link-dir/app.env"] == "" || masked["/home/u/proj/config/app.txt"] == "" {
		t.Errorf("masked copies bound at %v; want /home/u/link-dir/app.env and /home/u/proj/config/app.txt", masked)
	}
	if len(p.EnvFiles) != 2 {
		t.Errorf("want one copy per file read (2), got %+v", p.EnvFiles)
	}
}

// An escaped quote does not end a double-quoted value: no tail of the
// secret is left after the placeholder.
func TestMaskEnvFileEscapedQuote(t *testing.T) {
	in := `DB_PASSWORD="abc\"tail-of-the-secret" # c` + "\nSINGLE_TOKEN='x\\'\n"
	got, found := MaskEnvFile([]byte(in), nil, newPlaceholders("k").mask)
	if strings.Contains(string(got), "tail-of-the-secret") || len(found) != 2 || found[0].Value != `abc\"tail-of-the-secret` || found[1].Value != `x\` {
		t.Errorf("masked %q, found %+v", got, found)
	}
	if !strings.HasSuffix(strings.SplitN(string(got), "\n", 2)[0], `" # c`) {
		t.Errorf("the comment after the closing quote is lost: %q", got)
	}
}
