//go:build linux && (amd64 || arm64)

package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as the traced process (see TestMain).
const helperEnv = "JAIL_BPF_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helper()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper runs in a new PID namespace with the test's temporary directory as
// working directory. Line 1 on stdin: do an open before the tracer is aimed
// at the namespace. Line 2: make every traced syscall, then exec /bin/true.
func helper() {
	in := bufio.NewReader(os.Stdin)
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "helper: %s: %v\n", what, err)
		os.Exit(3)
	}
	in.ReadString('\n')
	if fd, err := unix.Openat(unix.AT_FDCWD, "f-before-target", unix.O_RDONLY|unix.O_CREAT, 0o644); err == nil {
		unix.Close(fd)
	}
	fmt.Println("ok")
	wd, _ := os.Getwd()
	in.ReadString('\n')
	// As in a jail, where every process descends from one whose chdir the
	// tracer saw: relative paths resolve from the traced chdir, not from
	// /proc after the process has gone.
	if err := unix.Chdir(wd); err != nil {
		fail("chdir", err)
	}

	// Untraced syscalls on a path: must not produce events.
	var st unix.Stat_t
	unix.Fstatat(unix.AT_FDCWD, "f-not-traced", &st, 0)
	unix.Faccessat(unix.AT_FDCWD, "f-not-traced", unix.R_OK, 0)
	unix.Readlinkat(unix.AT_FDCWD, "f-not-traced", make([]byte, 64))

	fd, err := unix.Openat(unix.AT_FDCWD, "f-openat", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		fail("openat", err)
	}
	unix.Close(fd)
	if fd, err := unix.Openat2(unix.AT_FDCWD, "f-openat", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC}); err == nil {
		unix.Close(fd)
	}
	unix.Openat(unix.AT_FDCWD, "missing-openat", unix.O_RDONLY, 0)
	if err := unix.Mkdirat(unix.AT_FDCWD, "d-mkdirat", 0o750); err != nil {
		fail("mkdirat", err)
	}
	// dirfd-relative rename: resolved through /proc/PID/fd.
	dfd, err := unix.Open("d-mkdirat", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		fail("open dir", err)
	}
	if err := unix.Renameat(unix.AT_FDCWD, "f-openat", dfd, "f-renameat"); err != nil {
		fail("renameat", err)
	}
	if err := unix.Renameat2(dfd, "f-renameat", unix.AT_FDCWD, "f-renameat2", unix.RENAME_NOREPLACE); err != nil {
		fail("renameat2", err)
	}
	if err := unix.Unlinkat(unix.AT_FDCWD, "f-renameat2", 0); err != nil {
		fail("unlinkat", err)
	}
	unix.Close(dfd)
	if err := unix.Unlinkat(unix.AT_FDCWD, "d-mkdirat", unix.AT_REMOVEDIR); err != nil {
		fail("unlinkat dir", err)
	}
	legacySyscalls(fail)
	// Blocking connects, so the result is the connection's (Go's net
	// package connects non-blocking and gets EINPROGRESS).
	for _, a := range strings.Fields(os.Getenv(helperEnv)) {
		network, addr, _ := strings.Cut(a, "=")
		var sa unix.Sockaddr
		family := unix.AF_UNIX
		if network == "tcp4" {
			ap := netip.MustParseAddrPort(addr)
			sa, family = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, unix.AF_INET
		} else {
			sa = &unix.SockaddrUnix{Name: addr}
		}
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fail("socket", err)
		}
		unix.Connect(fd, sa)
		unix.Close(fd)
	}
	arg0, _ := unix.BytePtrFromString("x")
	argv := []*byte{arg0, nil}
	path, _ := unix.BytePtrFromString("no-such-program")
	unix.Syscall6(unix.SYS_EXECVEAT, uintptr(unix.AT_FDCWD&0xffffffff), uintptr(unsafePointer(path)), uintptr(unsafePointer(&argv[0])), uintptr(unsafePointer(&argv[0])), 0, 0)
	// Exec from a thread other than the leader (main is locked to it, see
	// init): the thread comes back from execve as the leader, with another
	// thread id, and its exec must still be reported.
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		done <- syscall.Exec("/bin/true", []string{"true"}, nil)
	}()
	fail("exec", <-done)
}

func init() {
	if os.Getenv(helperEnv) != "" {
		runtime.LockOSThread() // the helper's main goroutine keeps the leader thread
	}
}

type want struct {
	name string
	ok   func(Event) bool
}

// TestEverySyscall makes each traced syscall in a fresh PID namespace and
// checks its event: kind, paths (as passed and resolved), flags, result.
func TestEverySyscall(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f-not-traced"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	refused, _ := net.Listen("tcp4", "127.0.0.1:0")
	refusedAddr := refused.Addr().String()
	refused.Close()
	sock := filepath.Join(dir, "sock")
	ux, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ux.Close()
	tcpAddr := netip.MustParseAddrPort(tcp.Addr().String())

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), helperEnv+"=tcp4="+tcp.Addr().String()+" tcp4="+refusedAddr+" unix="+sock)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	ino := startInPidNS(t, cmd)
	defer cmd.Process.Kill()

	// Loaded and attached with no target: traces nothing.
	tr, err := Start(0)
	if err != nil {
		if errors.Is(err, ErrPermission) {
			t.Skipf("needs CAP_BPF and CAP_PERFMON: %v", err)
		}
		t.Fatal(err)
	}
	defer tr.Close()
	stdin.Write([]byte("1\n"))
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := tr.Target(ino); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("2\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}

	abs := func(p string) string { return filepath.Join(dir, p) }
	path := func(k Kind, p string, ret func(int64) bool) func(Event) bool {
		return func(e Event) bool {
			return e.Kind == k && e.Path == p && ret(e.Ret) && (e.AbsPath == abs(p) || e.AbsPath == "")
		}
	}
	ok := func(r int64) bool { return r >= 0 }
	enoent := func(r int64) bool { return r == -int64(unix.ENOENT) }
	wants := []want{
		{"openat", func(e Event) bool {
			return path(KindOpen, "f-openat", ok)(e) && e.Flags&unix.O_CREAT != 0 && e.Dirfd == AtFDCWD
		}},
		{"openat2", func(e Event) bool {
			return path(KindOpen, "f-openat", ok)(e) && e.Flags == unix.O_RDONLY|unix.O_CLOEXEC
		}},
		{"openat missing", path(KindOpen, "missing-openat", enoent)},
		{"mkdirat", func(e Event) bool { return path(KindMkdir, "d-mkdirat", ok)(e) && e.Flags == 0o750 }},
		{"renameat", func(e Event) bool {
			return e.Kind == KindRename && e.Path == "f-openat" && e.Path2 == "f-renameat" && e.OK() &&
				e.Dirfd == AtFDCWD && e.Dirfd2 >= 0 && e.AbsPath == abs("f-openat") &&
				(e.AbsPath2 == "" || e.AbsPath2 == abs("d-mkdirat/f-renameat"))
		}},
		{"renameat2", func(e Event) bool {
			return e.Kind == KindRename && e.Path == "f-renameat" && e.Path2 == "f-renameat2" && e.OK() &&
				e.Flags == unix.RENAME_NOREPLACE && e.Dirfd >= 0 && e.Dirfd2 == AtFDCWD
		}},
		{"unlinkat", path(KindUnlink, "f-renameat2", ok)},
		{"unlinkat dir", func(e Event) bool {
			return path(KindRmdir, "d-mkdirat", ok)(e) && e.Flags == unix.AT_REMOVEDIR
		}},
		{"connect tcp", func(e Event) bool {
			return e.Kind == KindConnect && e.Family == AFInet && e.Addr == tcpAddr && e.OK()
		}},
		{"connect refused", func(e Event) bool {
			return e.Kind == KindConnect && e.Family == AFInet && e.Addr.String() == refusedAddr && e.Errno() == int(unix.ECONNREFUSED)
		}},
		{"connect unix", func(e Event) bool {
			return e.Kind == KindConnect && e.Family == AFUnix && e.Path == sock && e.OK()
		}},
		{"execveat missing", func(e Event) bool {
			return e.Kind == KindExec && e.Path == "no-such-program" && e.Errno() == int(unix.ENOENT)
		}},
		{"execve", func(e Event) bool {
			return e.Kind == KindExec && e.Path == "/bin/true" && e.OK()
		}},
	}
	wants = append(wants, legacyWants(abs)...)

	found := make([]bool, len(wants))
	var got []Event
	timeout := time.After(5 * time.Second)
	missing := len(wants)
	for missing > 0 {
		select {
		case e := <-tr.Events():
			got = append(got, e)
			if e.Path == "f-before-target" || e.Path == "f-not-traced" {
				t.Errorf("unexpected event: %+v", e)
			}
			if e.Kind < KindOpen || e.Kind > KindRmdir {
				t.Errorf("unknown kind: %+v", e)
			}
			for i, w := range wants {
				if !found[i] && w.ok(e) {
					found[i] = true
					missing--
					break
				}
			}
		case <-timeout:
			missing = -1
		}
	}
	for i, w := range wants {
		if !found[i] {
			t.Errorf("no %s event", w.name)
		}
	}
	if t.Failed() {
		for _, e := range got {
			t.Logf("event: %+v", e)
		}
	}
}
