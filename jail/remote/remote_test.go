package remote

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
)

// TestParseTargetRefusesOptions: nothing --remote names reaches ssh as an
// option or as more than a host: a leading dash, spaces, shell and ssh
// token characters are refused.
func TestParseTargetRefusesOptions(t *testing.T) {
	for _, s := range []string{
		"-oProxyCommand=touch /tmp/pwn", "host -oProxyCommand=x", "-l", "u@-host", "-u@host",
		"host;id", "host`id`", "$(id)", "host:0", "host:65536", "host:22x", "host:", "[::1", "[x]:22", "[::1]x",
		"a@b@c", "", "@host", "user@", "ho%st", "host name",
	} {
		if tg, err := ParseTarget(s, nil); err == nil {
			t.Errorf("ParseTarget(%q) = %+v, want it refused", s, tg)
		}
	}
	for s, want := range map[string]Target{
		"box":                 {Host: "box"},
		"me@box.example.test": {User: "me", Host: "box.example.test"},
		"me@10.0.0.1:2222":    {User: "me", Host: "10.0.0.1", Port: 2222},
		"[::1]:22":            {Host: "::1", Port: 22},
	} {
		if got, err := ParseTarget(s, nil); err != nil || got != want {
			t.Errorf("ParseTarget(%q) = %+v, %v, want %+v", s, got, err, want)
		}
	}
	named := map[string]jail.RemoteHost{"hetzner": {Host: "h.example.test", User: "u", Port: 2200, Dir: "~/w/{project}"}}
	if got, _ := ParseTarget("hetzner", named); got != (Target{Name: "hetzner", Host: "h.example.test", User: "u", Port: 2200, Dir: "~/w/{project}"}) {
		t.Errorf("a named host: %+v", got)
	}
}

// TestSSHArgsCheckHostKeys: every ssh jail runs checks host keys strictly
// (on the command line, where it wins over a config file's "no"), and
// the destination follows "--".
func TestSSHArgsCheckHostKeys(t *testing.T) {
	s := &SSH{Target: Target{User: "me", Host: "box", Port: 2222}, ControlDir: filepath.Join(t.TempDir(), "ssh")}
	for _, batch := range []bool{true, false} {
		args := s.Args("true", batch, false)
		joined := strings.Join(args, " ")
		if !strings.Contains(joined, "-o StrictHostKeyChecking=yes") || !strings.Contains(joined, "-p 2222") {
			t.Errorf("ssh args %q", joined)
		}
		if i := slices.Index(args, "--"); i < 0 || args[i+1] != "me@box" || args[i+2] != "true" || i+3 != len(args) {
			t.Errorf("the destination does not follow --: %q", args)
		}
		if batch != strings.Contains(joined, "BatchMode=yes") {
			t.Errorf("batch %v: %q", batch, joined)
		}
		if !strings.Contains(joined, "ControlPath="+s.ControlDir+"/") || !strings.Contains(joined, "ControlPersist=60s") {
			t.Errorf("no control master in its directory: %q", joined)
		}
	}
	fi, err := os.Stat(s.ControlDir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the control directory is not private: %v %v", fi.Mode(), err)
	}
	// A directory others can write to, or a path too long for a socket:
	// no control master rather than one another user can reach.
	os.Chmod(s.ControlDir, 0o777)
	if j := strings.Join(s.Args("true", true, false), " "); !strings.Contains(j, "ControlPath=none") {
		t.Errorf("a shared control directory is used: %q", j)
	}
	long := &SSH{Target: Target{Host: "box"}, ControlDir: filepath.Join(t.TempDir(), strings.Repeat("d", 90))}
	if j := strings.Join(long.Args("true", true, false), " "); !strings.Contains(j, "ControlPath=none") {
		t.Errorf("a control path too long for a unix socket: %q", j)
	}
}

// TestScriptQuotesArguments: arguments reach the script as "$1".. and are
// never run as shell text, whatever they hold.
func TestScriptQuotesArguments(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	evil := []string{"a'b", `$(touch ` + marker + `)`, "`touch " + marker + "`", "x\ny; touch " + marker, "'; touch " + marker + "; '", ""}
	out, err := exec.Command("/bin/sh", "-c", remoteCommand(Script(`for a; do printf '[%s]' "$a"; done`, evil...))).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, a := range evil {
		want += "[" + a + "]"
	}
	if string(out) != want {
		t.Errorf("the script saw %q, want %q", out, want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("an argument ran as shell text")
	}
}

// TestProbeRefusals: the probe's findings that cannot jail each refuse
// with the fix, and a remote that reports no session is never used.
func TestProbeRefusals(t *testing.T) {
	tg := Target{Host: "box"}
	ok := "home /home/u\nos Linux " + Uname(hostArch()) + "\nbwrap /usr/bin/bwrap\nuserns ok\nsession /tmp/jail-r.abcdefghij\n"
	if err := parseProbe(ok).CanJail(tg); err != nil {
		t.Fatalf("a good remote: %v", err)
	}
	for _, tc := range []struct{ out, want string }{
		{"os Darwin arm64\n", "needs a Linux host"},
		{"os Linux mips\n", "GOOS=linux GOARCH=mips"},
		{"os Linux " + Uname(hostArch()) + "\n", "apt-get install bubblewrap"},
		{"os Linux " + Uname(hostArch()) + "\nbwrap /usr/bin/bwrap\nuserns no setting up uid map: Permission denied\nsysctl kernel/apparmor_restrict_unprivileged_userns 1\n", "apparmor_restrict_unprivileged_userns=0"},
		{"os Linux " + Uname(hostArch()) + "\nbwrap /usr/bin/bwrap\nuserns no No permissions\nsysctl user/max_user_namespaces 0\n", "user.max_user_namespaces"},
		{"os Linux " + Uname(hostArch()) + "\nbwrap /usr/bin/bwrap\nuserns ok\n", "no session directory"},
	} {
		err := parseProbe(tc.out).CanJail(tg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("probe %q: %v, want %q", tc.out, err, tc.want)
		}
	}
}

func hostArch() string { a := Arches(); return a[0] }

// TestFrames: the input arrives whole and ends with the end frame while
// the link stays; a link that ends, with or without the input's end, is
// lost; silence is lost after the timeout, heartbeats are not; a command
// that does not read its input is not taken for a silent link.
func TestFrames(t *testing.T) {
	// Input, its end, then the link ends.
	pr, pw := io.Pipe()
	var got bytes.Buffer
	out := &closeBuffer{Buffer: &got}
	done := make(chan error, 1)
	go func() { done <- ReadFrames(pr, out, time.Second) }()
	stop := make(chan struct{})
	WriteFrames(pw, strings.NewReader("hello\nworld\n"), 20*time.Millisecond, stop)
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the end of input ended the link: %v", err)
	default:
	}
	if got.String() != "hello\nworld\n" || !out.closed {
		t.Fatalf("input %q closed %v", got.String(), out.closed)
	}
	close(stop)
	pw.Close()
	if err := <-done; !errors.Is(err, ErrLinkLost) {
		t.Fatalf("the link's end: %v", err)
	}

	// Silence past the timeout, while heartbeats would have kept it.
	pr, pw = io.Pipe()
	go func() { done <- ReadFrames(pr, &closeBuffer{Buffer: &bytes.Buffer{}}, 150*time.Millisecond) }()
	beats := make(chan struct{})
	go WriteFrames(pw, blockingReader{}, 30*time.Millisecond, beats)
	select {
	case err := <-done:
		t.Fatalf("a link with heartbeats was lost: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(beats)
	select {
	case err := <-done:
		if !errors.Is(err, ErrLinkLost) {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a silent link was not lost")
	}

	// A frame that is no frame ends the link.
	if err := ReadFrames(strings.NewReader("zzzzzzzz"), &closeBuffer{Buffer: &bytes.Buffer{}}, time.Second); !errors.Is(err, ErrLinkLost) {
		t.Fatalf("garbage: %v", err)
	}
}

type closeBuffer struct {
	*bytes.Buffer
	closed bool
}

func (c *closeBuffer) Close() error { c.closed = true; return nil }

type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { select {} }

// TestSpecTranslate: the policy's paths under the local project and home
// move to the remote ones; a path merely sharing a prefix does not.
func TestSpecTranslate(t *testing.T) {
	s := &Spec{LocalHome: "/home/me", LocalRoot: "/home/me/src/app", LocalCwd: "/home/me/src/app/sub", Dir: "~/.local/share/jail/work/app-1"}
	to, err := s.Paths("/home/r")
	if err != nil || to.Root != "/home/r/.local/share/jail/work/app-1" || to.Cwd != to.Root+"/sub" {
		t.Fatalf("paths %+v %v", to, err)
	}
	pol := &jail.Policy{ProjectRoot: s.LocalRoot, AllowRead: []string{"/home/me/.gitconfig", "/usr/share", "/home/me2/x"}, AllowWrite: []string{"/home/me/src/app/out"}, DenyRead: []string{"/home/me/src/app/.env*"}}
	s.Translate(pol, to)
	want := []string{"/home/r/.gitconfig", "/usr/share", "/home/me2/x"}
	if !slices.Equal(pol.AllowRead, want) || pol.AllowWrite[0] != to.Root+"/out" || pol.DenyRead[0] != to.Root+"/.env*" || pol.ProjectRoot != to.Root {
		t.Errorf("translated %+v", pol)
	}
	for _, dir := range []string{"~", "/", "relative/dir"} {
		if _, err := (&Spec{Dir: dir}).Paths("/home/r"); err == nil {
			t.Errorf("remote dir %q accepted", dir)
		}
	}
}
