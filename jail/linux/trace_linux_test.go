package linux

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/jailsh/jail/jail/learn"
	"github.com/jailsh/jail/jail/linux/inside"
	"golang.org/x/sys/unix"
)

func TestOpenKind(t *testing.T) {
	for _, c := range []struct {
		flags uint64
		kind  learn.Kind
		write bool
	}{
		{unix.O_RDONLY, learn.Open, false},
		{unix.O_RDONLY | unix.O_CLOEXEC | unix.O_DIRECTORY, learn.Open, false},
		{unix.O_WRONLY, learn.Open, true},
		{unix.O_RDWR, learn.Open, true},
		{unix.O_RDONLY | unix.O_TRUNC, learn.Open, true},
		{unix.O_WRONLY | unix.O_APPEND, learn.Open, true},
		{unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC, learn.Create, true},
		{unix.O_RDONLY | unix.O_CREAT, learn.Create, true},
	} {
		if k, w := openKind(c.flags); k != c.kind || w != c.write {
			t.Errorf("openKind(%#x) = %s, %v; want %s, %v", c.flags, k, w, c.kind, c.write)
		}
	}
}

func TestJoinPath(t *testing.T) {
	for _, c := range []struct{ base, path, want string }{
		{"/home/u/p", "a.txt", "/home/u/p/a.txt"},
		{"/home/u/p", "../q/./b", "/home/u/q/b"},
		{"/home/u/p", "/etc//passwd", "/etc/passwd"},
		{"", "/abs", "/abs"},
		{"", "rel", ""},            // working directory unreadable
		{"pipe:[1234]", "rel", ""}, // dirfd is no directory
		{"/home/u", "", ""},        // empty path: nothing opened
		{"/", "../../x", "/x"},
	} {
		if got := joinPath(c.base, c.path); got != c.want {
			t.Errorf("joinPath(%q, %q) = %q, want %q", c.base, c.path, got, c.want)
		}
	}
}

func TestParseSockaddr(t *testing.T) {
	unixAddr := func(path string, abstract bool) []byte {
		b := make([]byte, 2, 110)
		*(*uint16)(unsafe.Pointer(&b[0])) = unix.AF_UNIX
		if abstract {
			b = append(b, 0)
		}
		return append(b, path...)
	}
	inet4 := []byte{0, 0, 0x01, 0xbb, 10, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0}
	*(*uint16)(unsafe.Pointer(&inet4[0])) = unix.AF_INET
	inet6 := make([]byte, 28)
	*(*uint16)(unsafe.Pointer(&inet6[0])) = unix.AF_INET6
	inet6[2], inet6[3] = 0x1f, 0x90 // 8080
	inet6[23] = 1                   // ::1
	mapped := make([]byte, 28)
	copy(mapped, inet6)
	copy(mapped[8:24], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 2})
	other := []byte{byte(unix.AF_NETLINK), 0, 0, 0}
	for _, c := range []struct {
		name       string
		b          []byte
		path, addr string
	}{
		{"unix path", append(unixAddr("/run/a.sock", false), 0, 0, 0), "/run/a.sock", ""},
		{"unix path without NUL", unixAddr("/run/a.sock", false), "/run/a.sock", ""},
		{"unix relative", unixAddr("s.sock", false), "s.sock", ""},
		{"unix abstract", unixAddr("name", true), "@name", ""},
		{"unix unnamed", unixAddr("", false), "", ""},
		{"inet", inet4, "", "10.0.0.7:443"},
		{"inet6", inet6, "", "[::1]:8080"},
		{"inet6 mapped", mapped, "", "192.168.1.2:8080"},
		{"inet short", inet4[:6], "", ""},
		{"netlink", other, "", ""},
		{"empty", nil, "", ""},
	} {
		if p, a := parseSockaddr(c.b); p != c.path || a != c.addr {
			t.Errorf("%s: parseSockaddr = %q, %q; want %q, %q", c.name, p, a, c.path, c.addr)
		}
	}
}

// runFilter evaluates the notify filter (loads, compares and returns only)
// for one call.
func runFilter(t *testing.T, prog []unix.SockFilter, arch, nr uint32) uint32 {
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = map[uint32]uint32{0: nr, 4: arch}[ins.K]
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if acc == ins.K {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return ins.K
		default:
			t.Fatalf("instruction %d: unexpected code %#x", pc, ins.Code)
		}
	}
	t.Fatal("the filter runs off its end")
	return 0
}

func TestNotifyFilter(t *testing.T) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		t.Skip("no notify filter on", runtime.GOARCH)
	}
	for _, trace := range []bool{false, true} {
		prog := inside.NotifyFilter(trace)
		calls := inside.NotifyCalls(trace)
		notified := map[uint32]bool{}
		for _, c := range calls {
			notified[c.Nr] = true
			if opByName[c.Name] == opNone {
				t.Errorf("%s: the supervisor does not decode it", c.Name)
			}
		}
		if got := len(calls); trace && got < 7 || !trace && got != 2 {
			t.Errorf("trace=%v: %d calls notified", trace, got)
		}
		for nr := uint32(0); nr < 512; nr++ {
			want := uint32(unix.SECCOMP_RET_ALLOW)
			if notified[nr] {
				want = unix.SECCOMP_RET_USER_NOTIF
			}
			if got := runFilter(t, prog, arch, nr); got != want {
				t.Errorf("trace=%v, call %d: %#x, want %#x", trace, nr, got, want)
			}
			// Another architecture's calls are the main filter's business.
			if got := runFilter(t, prog, unix.AUDIT_ARCH_I386, nr); got != unix.SECCOMP_RET_ALLOW {
				t.Errorf("trace=%v, foreign call %d: %#x, want allow", trace, nr, got)
			}
		}
	}
}

// traceThread installs the notify filter (trace on) on a thread of its
// own, starts a supervisor on its listener, runs f on that thread, and
// returns what was reported. The thread ends with f: Go does not reuse a
// thread left locked.
func traceThread(t testing.TB, f func()) func() []learn.Event {
	var mu sync.Mutex
	var events []learn.Event
	s := newSupervisor(nil, nil, "", nil)
	s.trace = func(e learn.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	installed := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			installed <- err
			return
		}
		prog := inside.NotifyFilter(true)
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
		if errno != 0 {
			installed <- errno
			return
		}
		s.fd = int(fd)
		go s.run() // blocks in the kernel once the thread is gone: a leak of the test
		installed <- nil
		f()
	}()
	if err := <-installed; err != nil {
		t.Skip("seccomp user notification unavailable:", err)
	}
	<-done
	return func() []learn.Event {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}
}

func TestTraceEvents(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "present"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	var errs []error
	must := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	events := traceThread(t, func() {
		fd, err := unix.Open(filepath.Join(dir, "present"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		must(err)
		unix.Close(fd)
		if _, err := unix.Open(filepath.Join(dir, "missing"), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != unix.ENOENT {
			errs = append(errs, err)
		}
		dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		must(err)
		fd, err = unix.Openat(dfd, "created", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		must(err)
		unix.Close(fd)
		fd, err = unix.Openat2(dfd, "present", &unix.OpenHow{Flags: unix.O_RDWR | unix.O_CLOEXEC})
		must(err)
		unix.Close(fd)
		must(unix.Mkdirat(dfd, "sub", 0o755))
		must(unix.Renameat(dfd, "created", dfd, "sub/moved"))
		must(unix.Unlinkat(dfd, "sub/moved", 0))
		must(unix.Unlinkat(dfd, "sub", unix.AT_REMOVEDIR))
		unix.Close(dfd)
		sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		must(err)
		must(unix.Connect(sock, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}))
		unix.Close(sock)
		sock, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		must(err)
		unix.Connect(sock, &unix.SockaddrUnix{Name: "@jail-test-none"}) // ECONNREFUSED
		unix.Close(sock)
	})
	for _, err := range errs {
		t.Error("in the traced thread:", err)
	}
	want := []learn.Event{
		{Kind: learn.Open, Path: filepath.Join(dir, "present")},
		{Kind: learn.Open, Path: filepath.Join(dir, "missing"), Errno: int(unix.ENOENT)},
		{Kind: learn.Open, Path: dir},
		{Kind: learn.Create, Path: filepath.Join(dir, "created"), Write: true},
		{Kind: learn.Open, Path: filepath.Join(dir, "present"), Write: true},
		{Kind: learn.Mkdir, Path: filepath.Join(dir, "sub"), Write: true},
		{Kind: learn.Rename, Path: filepath.Join(dir, "created"), Write: true},
		{Kind: learn.Rename, Path: filepath.Join(dir, "sub/moved"), Write: true},
		{Kind: learn.Unlink, Path: filepath.Join(dir, "sub/moved"), Write: true},
		{Kind: learn.Unlink, Path: filepath.Join(dir, "sub"), Write: true},
		{Kind: learn.Connect, Addr: "127.0.0.1:" + strconv.Itoa(port)},
		{Kind: learn.Connect, Path: "@jail-test-none"},
	}
	// The last event is reported just after the call's answer.
	var got []learn.Event
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = events(); len(got) >= len(want) {
			break
		}
	}
	pid := 0
	for i := range got {
		if pid == 0 {
			pid = got[i].Pid
		}
		if got[i].Pid != pid || pid == 0 {
			t.Errorf("event %d from pid %d, want %d (the traced thread)", i, got[i].Pid, pid)
		}
		got[i].Pid = 0
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%v\nwant:\n%v", got, want)
	}
}

// BenchmarkTraceOpen is one open and close of a file by a traced thread,
// next to the same untraced: the tracer's cost per call.
func BenchmarkTraceOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	loop := func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	}
	b.Run("untraced", loop)
	b.Run("traced", func(b *testing.B) {
		traceThread(b, func() { b.ResetTimer(); loop(b) })
	})
}
