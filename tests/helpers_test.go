package tests

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// uniq returns a short random string for names that must not collide
// between parallel tests and runners.
func uniq() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// noSecret fails the test if any secret appears in the run's output.
func noSecret(t *testing.T, r Result, what string, secrets ...string) {
	t.Helper()
	var leaked []string
	for _, sec := range secrets {
		if strings.Contains(r.Stdout, sec) || strings.Contains(r.Stderr, sec) {
			leaked = append(leaked, sec)
		}
	}
	if len(leaked) > 0 {
		t.Errorf("%s: secrets %q leaked into the jail's output:\n%s", what, leaked, r)
	}
}

// hostFile reads a file on the host (as the test process), failing the test
// if it cannot.
func hostFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s on the host: %v", path, err)
	}
	return string(b)
}

// hostAbsent fails the test if path exists on the host.
func hostAbsent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s exists on the host after the jail exited; a write escaped the jail", path)
	}
}

// hostUnchanged fails the test if the host file's content is not want.
func hostUnchanged(t *testing.T, path, want string) {
	t.Helper()
	if got := hostFile(t, path); got != want {
		t.Errorf("host file %s changed by the jail: got %q, want %q", path, got, want)
	}
}

// HostOut runs a command on the host as the runner and returns its combined
// output and exit code, without failing the test.
func (s *Sandbox) HostOut(dir string, name string, args ...string) (string, int) {
	s.t.Helper()
	cmd := exec.Command(sandboxLookPath(name), args...)
	cmd.Dir = dir
	s.as(cmd)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return b.String(), ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("host %s %v: %v", name, args, err)
	}
	return b.String(), 0
}

// JailCmd returns an unstarted exec.Cmd running jail with args in the
// project directory as the runner, for tests that need to interact with the
// running jail (signals, observing processes).
func (s *Sandbox) JailCmd(args ...string) *exec.Cmd {
	s.autoTrust(s.Project)
	cmd := exec.Command(jailBin, args...)
	cmd.Dir = s.Project
	s.as(cmd)
	return cmd
}

// Py runs a python3 script inside the jail.
func (s *Sandbox) Py(script string, args ...string) Result {
	s.t.Helper()
	return s.Jail(append([]string{"--", "python3", "-c", script}, args...)...)
}

// procsWithArgv lists host PIDs whose argv equals argv exactly.
func procsWithArgv(argv ...string) []string {
	want := strings.Join(argv, "\x00") + "\x00"
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == want {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitFor polls cond every 50 ms for up to d and reports whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// statUID is the owner of a host file.
func statUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// jailLines returns the lines of stderr that jail itself wrote ("jail: ...").
func jailLines(stderr string) []string {
	var out []string
	for _, l := range lines(stderr) {
		if strings.HasPrefix(l, "jail:") {
			out = append(out, l)
		}
	}
	return out
}

// sandboxLookPath resolves name in the PATH the sandbox gives commands
// (Sandbox.as), not the test process's PATH, which may point at tools the
// unprivileged runner cannot execute (e.g. a pyenv shim under /root).
func sandboxLookPath(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	for _, dir := range []string{"/usr/local/go/bin", "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return filepath.Join(dir, name)
		}
	}
	return name
}

// testCache is a directory kept between test runs for installs from the
// npm registry: under /var/cache/jail-tests as root (readable by the
// unprivileged runner), else under the user's cache directory.
func testCache(t *testing.T, name string) string {
	t.Helper()
	root := "/var/cache/jail-tests"
	if os.Geteuid() != 0 {
		c, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("no cache directory for %s: %v", name, err)
		}
		root = filepath.Join(c, "jail-tests")
	}
	return filepath.Join(root, name)
}
