package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A kernel without nftables' nat cannot capture: the jail must still run,
// with the proxy variables its only way out, and `jail check` must say so.
// The kernel here has it, so its absence is simulated: jail runs under a
// seccomp filter (inherited by bubblewrap and init) that fails every
// netfilter netlink socket as a kernel without nf_tables does.

// nonetfilterGo execs its arguments with netfilter netlink sockets
// refused (EPROTONOSUPPORT); every other system call is allowed.
const nonetfilterGo = `package main

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type sockFprog struct {
	n      uint16
	filter *sockFilter
}

func main() {
	arch := map[string]uint32{"amd64": 0xc000003e, "arm64": 0xc00000b7}[runtime.GOARCH]
	if arch == 0 {
		panic("unsupported architecture " + runtime.GOARCH)
	}
	const ld, jeq, ret = 0x20, 0x15, 0x06
	prog := []sockFilter{
		{ld, 0, 0, 4}, // arch
		{jeq, 0, 7, arch},
		{ld, 0, 0, 0}, // system call number
		{jeq, 0, 5, syscall.SYS_SOCKET},
		{ld, 0, 0, 16}, // domain
		{jeq, 0, 3, syscall.AF_NETLINK},
		{ld, 0, 0, 32}, // protocol
		{jeq, 0, 1, 12}, // NETLINK_NETFILTER
		{ret, 0, 0, 0x00050000 | uint32(syscall.EPROTONOSUPPORT)},
		{ret, 0, 0, 0x7fff0000},
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, 38 /* PR_SET_NO_NEW_PRIVS */, 1, 0); e != 0 {
		panic(e)
	}
	fp := sockFprog{uint16(len(prog)), &prog[0]}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, 22 /* PR_SET_SECCOMP */, 2 /* FILTER */, uintptr(unsafe.Pointer(&fp))); e != 0 {
		panic(e)
	}
	if err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ()); err != nil {
		panic(err)
	}
}
`

var nonetfilter struct {
	once sync.Once
	path string
	err  []byte
}

// nonetfilterBin builds nonetfilterGo once, where every runner can run it.
func nonetfilterBin(t *testing.T) string {
	t.Helper()
	nonetfilter.once.Do(func() {
		dir, err := os.MkdirTemp("", "jail-nonetfilter-")
		if err == nil {
			os.Chmod(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "main.go"), []byte(nonetfilterGo), 0o644)
			os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module nonetfilter\n\ngo 1.21\n"), 0o644)
			build := exec.Command("go", "build", "-o", "nonetfilter", ".")
			build.Dir = dir
			build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
			if out, err := build.CombinedOutput(); err != nil {
				nonetfilter.err = append(out, err.Error()...)
				return
			}
			nonetfilter.path = filepath.Join(dir, "nonetfilter")
		} else {
			nonetfilter.err = []byte(err.Error())
		}
	})
	if nonetfilter.path == "" {
		t.Fatalf("building the netfilter-refusing launcher: %s", nonetfilter.err)
	}
	return nonetfilter.path
}

// jailWithoutNetfilter runs jail with args in the project, under the
// launcher.
func jailWithoutNetfilter(t *testing.T, s *Sandbox, args ...string) Result {
	t.Helper()
	s.autoTrust(s.Project)
	cmd := exec.Command(nonetfilterBin(t), append([]string{jailBin}, args...)...)
	cmd.Dir = s.Project
	s.as(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running jail under the launcher: %v", err)
	}
	return r
}

// fallbackSh reaches an allowed name through the proxy variables, then
// without them by the name and by an IP literal.
const fallbackSh = probeSh + `
echo session=$JAIL_SESSION
probe via-proxy https://api.allowed.test/fb-proxy
` + unsetProxy + `
probe no-proxy --connect-timeout 5 --resolve api.allowed.test:443:192.0.2.30 https://api.allowed.test/fb-direct
probe no-proxy-ip --connect-timeout 5 http://192.0.2.31:8080/fb-ip
python3 -c '
import errno, socket
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("192.0.2.32", 443))
    print("errno=none")
except OSError as e:
    print("errno=" + str(errno.errorcode.get(e.errno, e)))
'
`

func TestCaptureUnavailableStillRuns(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")

		// The control: with the capture, the client without proxy
		// variables gets through, so the launcher is what takes it away.
		ctl := probes(t, s.Sh(fallbackSh))
		wantOK(t, ctl["no-proxy"], "/fb-direct")

		r := jailWithoutNetfilter(t, s, "--", "sh", "-c", fallbackSh)
		if r.Code != 0 {
			t.Fatalf("jail without the capture did not run the command:\n%s", r)
		}
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "via-proxy"), "/fb-proxy")
		for _, name := range []string{"no-proxy", "no-proxy-ip"} {
			wantNoRoute(t, getProbe(t, ps, r, name))
		}
		if !strings.Contains(r.Stdout, "errno=ENETUNREACH\n") {
			t.Errorf("a connection out without the capture: want network unreachable (no route at all)\n%s", r)
		}
		if got := n.API.SawPrefix("/fb-direct"); len(got) != 1 {
			t.Errorf("the upstream server saw %v for /fb-direct: want only the control's request", got)
		}
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Method == "CAPTURE" {
				t.Errorf("a connection was captured in a jail without the capture: %s", d)
			}
		}

		c := jailWithoutNetfilter(t, s, "check")
		row := ""
		for _, l := range lines(c.Stdout) {
			if f := strings.Fields(l); len(f) > 1 && f[1] == "capture" {
				row = l
			}
		}
		if !strings.HasPrefix(row, "opt") || !strings.Contains(row, "only programs that honour HTTP_PROXY reach the network") ||
			!strings.Contains(row, "fix: a kernel with nftables NAT") {
			t.Errorf("jail check without netfilter: want an opt row for the capture naming what is lost and the fix, got %q\n%s", row, c)
		}
		if c.Code != 0 {
			t.Errorf("jail check failed without the capture, which the default jail does not need:\n%s", c)
		}
	})
}
