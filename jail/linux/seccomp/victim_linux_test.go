//go:build linux && cgo

package seccomp

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// roleEnv selects the role of a re-executed test binary.
const roleEnv = "JAIL_SECCOMP_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "victim":
		os.Exit(victim())
	case "thread":
		os.Exit(threadVictim())
	}
	os.Exit(m.Run())
}

// victim runs in a child process: it installs the default filter, then
// tries forbidden things and prints one "probe result" line per attempt,
// where result is "errno=NAME", "ok=VALUE" or another single word.
func victim() int {
	report := func(probe, result string) { fmt.Printf("%s %s\n", probe, result) }
	errResult := func(err error) string {
		if err == nil {
			return "ok=0"
		}
		if e, ok := err.(unix.Errno); ok {
			return "errno=" + unix.ErrnoName(e)
		}
		return "error=" + strings.ReplaceAll(err.Error(), " ", "_")
	}
	rawResult := func(r uintptr, e unix.Errno) string {
		if e != 0 {
			return "errno=" + unix.ErrnoName(e)
		}
		return "ok=" + strconv.FormatUint(uint64(r), 10)
	}

	prog, err := Compile(DefaultRules())
	if err != nil {
		report("load", errResult(err))
		return 1
	}
	if err := Load(prog); err != nil {
		report("load", errResult(err))
		return 1
	}
	report("load", "ok=0")

	// A few extra threads, to check that TSYNC reached all of them.
	done := make(chan struct{})
	for range 3 {
		go func() {
			runtime.LockOSThread()
			<-done
		}()
	}
	defer close(done)

	report("unshare_newuser", errResult(unix.Unshare(unix.CLONE_NEWUSER)))

	var c byte = 'x'
	r, _, e := unix.Syscall(unix.SYS_IOCTL, 0, 0xdead00005412, uintptr(unsafe.Pointer(&c)))
	report("ioctl_tiocsti_highbits", rawResult(r, e))

	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err == nil {
		unix.Close(fd)
	}
	report("socket_packet", errResult(err))

	var params [120]byte // struct io_uring_params
	r, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if e == 0 {
		unix.Close(int(r))
	}
	report("io_uring_setup", rawResult(r, e))

	if runtime.GOARCH == "amd64" {
		r, _, e = unix.RawSyscall(unix.SYS_GETPID|x32SyscallBit, 0, 0, 0)
		report("x32_getpid", rawResult(r, e))
	}
	if ret, ok := ia32Getpid(); ok {
		if ret < 0 {
			report("ia32_getpid", "errno="+unix.ErrnoName(unix.Errno(-ret)))
		} else {
			report("ia32_getpid", "ok="+strconv.Itoa(int(ret)))
		}
	}

	r, _, e = unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
	report("getpid", rawResult(r, e))

	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		report("status", errResult(err))
		return 1
	}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":\t"); ok && (k == "NoNewPrivs" || k == "Seccomp") {
			report(k, v)
		}
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	filtered := 0
	for _, s := range tasks {
		if b, err := os.ReadFile(s); err == nil && strings.Contains(string(b), "\nSeccomp:\t2\n") {
			filtered++
		}
	}
	report("threads", fmt.Sprintf("%d/%d", filtered, len(tasks)))

	// Last: if the filter were missing this would make the child a tracee
	// of the test binary, which could stop it (the parent has a timeout).
	_, _, e = unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	report("ptrace_traceme", rawResult(0, e))
	return 0
}

// TestVictim re-executes the test binary as a victim that loads the default
// filter, and checks the errno of each forbidden call. Every expectation
// differs from what the kernel answers without the filter (see comments),
// except x32 on kernels built without CONFIG_X86_X32_ABI; the program logic
// for x32 is covered by TestVMDefaultRules.
func TestVictim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=victim")
	cmd.Stderr = os.Stderr // stdin is /dev/null: TIOCSTI would get ENOTTY
	out, err := cmd.Output()
	t.Logf("victim output:\n%s", out)
	if err != nil {
		t.Fatalf("victim: %v", err)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			got[k] = v // last one wins (ptrace_traceme)
		}
	}
	expect := func(probe string, want ...string) {
		t.Helper()
		v, ok := got[probe]
		if !ok {
			t.Errorf("%s: no result", probe)
			return
		}
		for _, w := range want {
			if v == w {
				return
			}
		}
		t.Errorf("%s: got %s, want %s", probe, v, strings.Join(want, " or "))
	}
	expect("load", "ok=0")
	expect("NoNewPrivs", "1")
	expect("Seccomp", "2")
	// Without the filter: EINVAL (Go processes are multithreaded).
	expect("unshare_newuser", "errno=EPERM")
	// Without the filter: ENOTTY on /dev/null.
	expect("ioctl_tiocsti_highbits", "errno=EPERM")
	// Without the filter: a socket (root) or EPERM (no CAP_NET_RAW).
	expect("socket_packet", "errno=EAFNOSUPPORT")
	// Without the filter: a ring (here), ENOSYS, or EPERM if the
	// kernel.io_uring_disabled sysctl is 2.
	expect("io_uring_setup", "errno=EPERM")
	// Without the filter: 0 (success).
	expect("ptrace_traceme", "errno=EPERM")
	expect("getpid", "ok="+strconv.Itoa(cmd.Process.Pid))
	if runtime.GOARCH == "amd64" {
		expect("x32_getpid", "errno=ENOSYS", "errno=EPERM")
		// Without the filter (CONFIG_IA32_EMULATION): the pid.
		expect("ia32_getpid", "errno=ENOSYS", "errno=EPERM")
	}
	if th := got["threads"]; th == "" {
		t.Error("threads: no result")
	} else if a, b, _ := strings.Cut(th, "/"); a != b || a == "0" {
		t.Errorf("threads with the filter: %s, want all", th)
	}
}
