// Package tests runs the built jail binary end to end, as root and as an
// unprivileged user, against real bubblewrap, Landlock and seccomp.
package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testUser is the unprivileged account `make test` creates.
const testUser = "jailtest"

// jailBin is the jail binary under test, built once by TestMain.
var jailBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jail-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Chmod(dir, 0o755)
	jailBin = filepath.Join(dir, "jail")
	// The binary as `make build` ships it: static, no cgo.
	// jail and jail-init side by side, as `make install` puts them.
	for _, target := range [][2]string{{jailBin, "../cmd/jail"}, {filepath.Join(dir, "jail-init"), "../cmd/jail-init"}} {
		build := exec.Command("go", "build", "-o", target[0], target[1])
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", target[1], err)
			os.Exit(2)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Runner is one identity the tests run jail as.
type Runner struct {
	Name     string // "root" or "user"
	UID, GID int
}

// runners returns root (when the tests run as root) and the unprivileged
// test user. As root the test user must exist: `make test` creates it.
func runners(t *testing.T) []Runner {
	t.Helper()
	if os.Geteuid() != 0 {
		return []Runner{{Name: "user", UID: os.Getuid(), GID: os.Getgid()}}
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatalf("user %q does not exist; `make test` creates it (sudo useradd -m %s): %v", testUser, testUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return []Runner{{Name: "root", UID: 0, GID: 0}, {Name: "user", UID: uid, GID: gid}}
}

// forEachRunner runs f as a subtest for every runner, each with a fresh
// sandbox.
func forEachRunner(t *testing.T, f func(t *testing.T, s *Sandbox)) {
	for _, r := range runners(t) {
		t.Run(r.Name, func(t *testing.T) {
			f(t, NewSandbox(t, r))
		})
	}
}

// Secret values planted on the host; tests assert they never appear inside.
const (
	SSHKeySecret = "SSH-PRIVATE-KEY-9f8e7d6c5b4a"
	AWSSecret    = "AWS-SECRET-1a2b3c4d5e6f"
	EnvSecret    = "sk-ant-REALSECRET-0123456789abcdef"
)

// Sandbox is a fake home and a project, owned by the runner.
type Sandbox struct {
	t       *testing.T
	R       Runner
	Base    string // parent of Home and Project
	Home    string
	Project string
	Env     []string // extra environment for jail
	// NoAutoTrust: do not `jail trust` the project's jail.json before each
	// run (the trust tests check what happens without it).
	NoAutoTrust bool
}

// NewSandbox creates base/home (with ~/.ssh, ~/.aws, ~/.bashrc holding
// secrets) and base/project (a git repository with one commit).
func NewSandbox(t *testing.T, r Runner) *Sandbox {
	t.Helper()
	base, err := os.MkdirTemp("", "jailtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	s := &Sandbox{t: t, R: r, Base: base, Home: filepath.Join(base, "home"), Project: filepath.Join(base, "project")}
	s.WriteFile(s.Home+"/.ssh/id_ed25519", SSHKeySecret+"\n", 0o600)
	s.WriteFile(s.Home+"/.ssh/id_rsa", SSHKeySecret+"\n", 0o600)
	s.WriteFile(s.Home+"/.aws/credentials", "[default]\naws_secret_access_key = "+AWSSecret+"\n", 0o600)
	s.WriteFile(s.Home+"/.bashrc", "# host bashrc\n", 0o644)
	s.WriteFile(s.Home+"/notes.txt", "host file in home\n", 0o644)
	s.WriteFile(s.Project+"/README.md", "# project\n", 0o644)
	os.Chmod(s.Home, 0o700)
	s.Host("git", "init", "-q", "-b", "main", s.Project)
	s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "add", "-A")
	s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "commit", "-qm", "init")
	return s
}

// WriteFile creates a file (and its directories) owned by the runner.
func (s *Sandbox) WriteFile(path, content string, mode os.FileMode) {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		s.t.Fatal(err)
	}
	s.chownUp(path)
}

// chownUp gives path and its parents up to Base to the runner.
func (s *Sandbox) chownUp(path string) {
	for p := path; under(p, s.Base) && p != s.Base; p = filepath.Dir(p) {
		os.Lchown(p, s.R.UID, s.R.GID)
	}
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// Host runs a command on the host (not jailed) as the runner, failing the
// test if it fails.
func (s *Sandbox) Host(name string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = s.Base
	s.as(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("host %s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func (s *Sandbox) as(cmd *exec.Cmd) {
	cmd.Env = append([]string{
		"HOME=" + s.Home,
		"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"LANG=C.UTF-8",
		"USER=" + map[bool]string{true: "root", false: testUser}[s.R.UID == 0],
	}, s.Env...)
	if s.R.UID != os.Geteuid() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.R.UID), Gid: uint32(s.R.GID), Groups: []uint32{}}}
	}
}

// Result is one run of jail.
type Result struct {
	Stdout, Stderr string
	Code           int
	Took           time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.Code, r.Stdout, r.Stderr)
}

// Jail runs the jail binary with args in the project directory.
func (s *Sandbox) Jail(args ...string) Result {
	return s.JailIn(s.Project, "", args...)
}

// JailIn runs jail in dir with stdin.
func (s *Sandbox) JailIn(dir, stdin string, args ...string) Result {
	s.t.Helper()
	if len(args) == 0 || args[0] != "trust" {
		s.autoTrust(dir)
	}
	cmd := exec.Command(jailBin, args...)
	cmd.Dir = dir
	s.as(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("running jail: %v", err)
	}
	return r
}

// Sh runs a shell script inside the jail: jail -- sh -c SCRIPT.
func (s *Sandbox) Sh(script string) Result {
	s.t.Helper()
	return s.Jail("--", "sh", "-c", script)
}

// MustSh runs a script that must succeed.
func (s *Sandbox) MustSh(script string) Result {
	s.t.Helper()
	r := s.Sh(script)
	if r.Code != 0 {
		s.t.Fatalf("jail -- sh -c %q failed:\n%s", script, r)
	}
	return r
}

// autoTrust runs `jail trust` in dir: tests write jail.json files that
// widen the jail, and trusting them is the user's step, taken here so that
// each test needs no ceremony (unless NoAutoTrust).
func (s *Sandbox) autoTrust(dir string) {
	if s.NoAutoTrust {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "jail.json")); err != nil && dir == s.Project {
		return
	}
	trust := exec.Command(jailBin, "trust")
	trust.Dir = dir
	s.as(trust)
	trust.Run() // no jail.json above dir: nothing to trust
}
