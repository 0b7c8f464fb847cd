package remote

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidRemoteDir: the directory the remote prints is used in ssh's
// forwarding syntax and removed after the run: anything but the shape
// PrepareScript makes (a colon or a newline smuggling another forwarding,
// a relative or dotted path, another directory to remove, a path too long
// for a socket) is refused.
func TestValidRemoteDir(t *testing.T) {
	good := []string{"/tmp/jail-r.AbC123xyz0", "/run/user/1000/jail-r.0123456789"}
	bad := []string{
		"", "tmp/jail-r.0123456789", "/tmp/jail-r.01234:6789", "/tmp/jail-r.0123456789\n-R /x:/y",
		"/tmp/../home/u/jail-r.0123456789", "/home/u", "/", "/tmp/jail-r.012345678", "/tmp/jail-r.0123456789/",
		"/tmp/a b/jail-r.0123456789", "/" + strings.Repeat("d", 90) + "/jail-r.0123456789",
	}
	for _, d := range good {
		if err := ValidRemoteDir(d); err != nil {
			t.Errorf("ValidRemoteDir(%q) = %v, want nil", d, err)
		}
	}
	for _, d := range bad {
		if err := ValidRemoteDir(d); err == nil {
			t.Errorf("ValidRemoteDir(%q) accepted it", d)
		}
		if _, err := CleanupScript(d); err == nil {
			t.Errorf("CleanupScript(%q) accepted it", d)
		}
	}
	if s, err := CleanupScript(good[0]); err != nil || s != "rm -rf -- "+good[0]+"\n" {
		t.Errorf("CleanupScript = %q, %v", s, err)
	}
}

// TestSSHArgsForwardEverySocket: one -R REMOTE:LOCAL per proxy socket into
// the remote directory's net/ and one for the control socket beside it
// (out of the jail's sight), ssh told to give up when one cannot be made;
// without a proxy, the control socket alone; a local directory ssh's
// syntax would misread is refused.
func TestSSHArgsForwardEverySocket(t *testing.T) {
	f := &Forward{LocalDir: "/run/user/0/jail/s1", CAFile: "/home/u/.config/jail/ca/ca.pem"}
	args, err := f.SSHArgs("/tmp/jail-r.0123456789")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-o", "ExitOnForwardFailure=yes",
		"-R", "/tmp/jail-r.0123456789/net/http.sock:/run/user/0/jail/s1/http.sock",
		"-R", "/tmp/jail-r.0123456789/net/socks.sock:/run/user/0/jail/s1/socks.sock",
		"-R", "/tmp/jail-r.0123456789/net/capture.sock:/run/user/0/jail/s1/capture.sock",
		"-R", "/tmp/jail-r.0123456789/net/dns.sock:/run/user/0/jail/s1/dns.sock",
		"-R", "/tmp/jail-r.0123456789/control.sock:/run/user/0/jail/s1/control.sock"}
	if strings.Join(args, " ") != strings.Join(want, " ") {
		t.Errorf("SSHArgs =\n%q\nwant\n%q", args, want)
	}
	cancel, _ := f.CancelArgs("/tmp/jail-r.0123456789")
	if strings.Join(cancel[2:], " ") != strings.Join(want[2:], " ") || cancel[0] != "-O" || cancel[1] != "cancel" {
		t.Errorf("CancelArgs = %q", cancel)
	}
	link, _ := (&Forward{LocalDir: f.LocalDir}).SSHArgs("/tmp/jail-r.0123456789")
	if strings.Join(link, " ") != strings.Join(append(want[:2:2], want[len(want)-2:]...), " ") {
		t.Errorf("SSHArgs without a proxy = %q, want the control socket alone", link)
	}
	for _, local := range []string{"/tmp/a:b", "relative/dir", "/tmp/[x]"} {
		if _, err := (&Forward{LocalDir: local, CAFile: f.CAFile}).SSHArgs("/tmp/jail-r.0123456789"); err == nil {
			t.Errorf("SSHArgs with the local directory %q: no error", local)
		}
	}
	if _, err := f.SSHArgs("/tmp/x:y"); err == nil {
		t.Error("SSHArgs with a bad remote directory: no error")
	}
}

// TestPrepareScriptFreshPrivateShort: every run makes a new directory of
// its own (mode 0700, net/ in it, the CA from stdin), short enough for
// its sockets even when the runtime or temporary directory named is long,
// and never in a runtime directory another user owns.
func TestPrepareScriptFreshPrivateShort(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("l", 60))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	foreign := t.TempDir()
	if os.Geteuid() == 0 {
		os.Chown(foreign, 1, 1) // daemon's: not the user's own
	}
	short, err := os.MkdirTemp("/tmp", "rt")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	cases := []struct{ name, xdg, tmp string }{
		{"runtime dir", short, ""},
		{"long runtime dir", long, ""},
		{"long TMPDIR", "", long},
		{"foreign runtime dir", foreign, ""},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		for i := 0; i < 2; i++ {
			sh := exec.Command("/bin/sh", "-c", PrepareScript)
			sh.Env = []string{"PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + c.xdg, "TMPDIR=" + c.tmp}
			sh.Stdin = strings.NewReader("CA PEM\n")
			out, err := sh.Output()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			dir, err := ParseRemoteDir(string(out))
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			defer os.RemoveAll(dir)
			if seen[dir] {
				t.Errorf("%s: %s made twice", c.name, dir)
			}
			seen[dir] = true
			if c.xdg == short && filepath.Dir(dir) != short {
				t.Errorf("%s: %s is not in the user's own short runtime directory %s", c.name, dir, short)
			}
			if strings.HasPrefix(dir, long) || (os.Geteuid() == 0 && strings.HasPrefix(dir, foreign)) {
				t.Errorf("%s: the directory %s is under a long or foreign one", c.name, dir)
			}
			fi, err := os.Stat(dir)
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %s not private: %v", c.name, dir, err)
			}
			if fi, err := os.Stat(filepath.Join(dir, "net")); err != nil || !fi.IsDir() {
				t.Errorf("%s: no net/ in %s", c.name, dir)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(b) != "CA PEM\n" {
				t.Errorf("%s: ca.pem holds %q", c.name, b)
			}
		}
	}
}
