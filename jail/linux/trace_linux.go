package linux

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"github.com/jailsh/jail/jail/learn"
	"github.com/jailsh/jail/jail/linux/inside"
	"golang.org/x/sys/unix"
)

// The unprivileged tracer: the notify filter sends each traced call to the
// supervisor, which reads its arguments from the caller, answers
// "continue" and reports what the call was about to do. Its answer holds
// the call back, so decoding stays short: no file opened per call (memory
// is read with process_vm_readv), the /proc paths built in reused buffers,
// and the events reported after the answer.
//
// Errno is an approximation: a call let go on with "continue" is done by
// the kernel after the supervisor has answered, so its result is never
// seen. Reads (opens without a write flag) and execs are checked before the
// answer by looking for the file through /proc/PID/root: missing (or
// otherwise not reachable from the host) gives that errno, present gives 0,
// whatever Landlock or permissions then say. A mkdir of what exists is
// reported EEXIST, a connect to a unix socket path that is missing ENOENT.
// Other writes, unlinks, renames and connects are reported with Errno 0:
// the tool meant to do them.
// The check resolves absolute symlinks in the host's view, not the jail's.

// op is how a notified call's arguments are laid out.
type op uint8

const (
	opNone op = iota
	opExecve
	opExecveat
	opOpen     // path, flags
	opOpenat   // dirfd, path, flags
	opOpenat2  // dirfd, path, *open_how
	opCreat    // path
	opMkdir    // path
	opMkdirat  // dirfd, path
	opUnlink   // path (unlink, rmdir)
	opUnlinkat // dirfd, path
	opRename   // old, new
	opRenameat // olddirfd, old, newdirfd, new (renameat, renameat2)
	opConnect  // fd, sockaddr, len
)

var opByName = map[string]op{
	"execve": opExecve, "execveat": opExecveat,
	"open": opOpen, "openat": opOpenat, "openat2": opOpenat2, "creat": opCreat,
	"mkdir": opMkdir, "mkdirat": opMkdirat,
	"unlink": opUnlink, "rmdir": opUnlink, "unlinkat": opUnlinkat,
	"rename": opRename, "renameat": opRenameat, "renameat2": opRenameat,
	"connect": opConnect,
}

// ops maps this machine's call numbers to their layout, from the list the
// notify filter is built from.
var ops = func() (t [512]op) {
	for _, c := range inside.NotifyCalls(true) {
		if c.Nr < uint32(len(t)) {
			t[c.Nr] = opByName[c.Name]
		}
	}
	return t
}()

func opOf(nr int32) op {
	if nr < 0 || int(nr) >= len(ops) {
		return opNone
	}
	return ops[nr]
}

// traced is a decoded call: up to two events (a rename's source and
// destination), built after the answer.
type traced struct {
	kind  learn.Kind
	write bool
	errno int
	n     int
	path  [2]string
	addr  string
}

func (t *traced) report(pid int, emit func(learn.Event)) {
	for i := 0; i < t.n; i++ {
		emit(learn.Event{Kind: t.kind, Path: t.path[i], Write: t.write, Errno: t.errno, Pid: pid, Addr: t.addr})
	}
}

// openKind classifies open flags: O_CREAT is a create, any of write-only,
// read-write, create, truncate or append a write.
func openKind(flags uint64) (learn.Kind, bool) {
	write := flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_APPEND) != 0
	if flags&unix.O_CREAT != 0 {
		return learn.Create, write
	}
	return learn.Open, write
}

// joinPath resolves a call's path against the directory it is relative to
// (the working directory or dirfd's, as read from /proc): "" when neither
// gives an absolute path.
func joinPath(base, path string) string {
	if path == "" {
		return ""
	}
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	if !filepath.IsAbs(base) {
		return ""
	}
	return filepath.Join(base, path)
}

// parseSockaddr reads a connect's address: a unix socket's path ("@name"
// when abstract, possibly relative) or an inet address as "ip:port";
// neither for other families and unnamed sockets.
func parseSockaddr(b []byte) (path, addr string) {
	if len(b) < 2 {
		return "", ""
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_UNIX:
		p := b[2:]
		if len(p) == 0 {
			return "", ""
		}
		if p[0] == 0 {
			return "@" + string(p[1:]), ""
		}
		if i := bytes.IndexByte(p, 0); i >= 0 {
			p = p[:i]
		}
		return string(p), ""
	case unix.AF_INET:
		if len(b) < 8 {
			return "", ""
		}
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return "", netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
	case unix.AF_INET6:
		if len(b) < 24 {
			return "", ""
		}
		ip := netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		return "", netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
	}
	return "", ""
}

// procMem reads a process's memory: with process_vm_readv, which needs no
// file and always reads the process's current address space (a /proc/PID/mem
// kept open would still read the one before an exec), else through
// /proc/PID/mem opened once per call.
type procMem struct {
	pid  int
	file *os.File
}

var noVMReadv bool // the kernel lacks process_vm_readv (CONFIG_CROSS_MEMORY_ATTACH)

func (m *procMem) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !noVMReadv {
		local := unix.Iovec{Base: &p[0]}
		local.SetLen(len(p))
		remote := unix.RemoteIovec{Base: uintptr(off), Len: len(p)}
		n, _, errno := unix.Syscall6(unix.SYS_PROCESS_VM_READV, uintptr(m.pid),
			uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
		switch {
		case errno == unix.ENOSYS:
			noVMReadv = true
		case errno != 0:
			return 0, errno
		case n == 0:
			return 0, io.EOF
		default:
			return int(n), nil
		}
	}
	if m.file == nil {
		f, err := os.Open("/proc/" + strconv.Itoa(m.pid) + "/mem")
		if err != nil {
			return 0, err
		}
		m.file = f
	}
	return m.file.ReadAt(p, off)
}

// release closes what reading opened; the reader is reused for the next
// call.
func (m *procMem) release() {
	if m.file != nil {
		m.file.Close()
		m.file = nil
	}
}

// procLink reads /proc/PID/cwd (dirfd AT_FDCWD) or /proc/PID/fd/DIRFD:
// the directory a relative path starts from, as the jailed process sees it.
// The /proc paths are built in a reused buffer and are absolute (the
// syscalls' directory argument is ignored).
func (s *supervisor) procLink(pid int, dirfd int32) string {
	b := append(s.procBuf[:0], "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	if dirfd == unix.AT_FDCWD {
		b = append(b, "/cwd"...)
	} else {
		b = append(b, "/fd/"...)
		b = strconv.AppendInt(b, int64(dirfd), 10)
	}
	b = append(b, 0)
	s.procBuf = b
	buf := s.linkBuf[:]
	n, _, errno := unix.Syscall6(unix.SYS_READLINKAT, 0, uintptr(unsafe.Pointer(&b[0])),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if errno != 0 || int(n) >= len(buf) {
		return ""
	}
	return string(buf[:n])
}

// absent looks for a path of the jail through /proc/PID/root: 0 when it is
// there, else why not (ENOENT mostly).
func (s *supervisor) absent(pid int, inJail string) int {
	b := append(s.procBuf[:0], "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, "/root"...)
	b = append(b, inJail...)
	b = append(b, 0)
	s.procBuf = b
	_, _, errno := unix.Syscall(unix.SYS_FACCESSAT, 0, uintptr(unsafe.Pointer(&b[0])), unix.F_OK)
	return int(errno)
}

// readPath reads a path argument and resolves it in the jail: against
// dirfd, or the working directory for AT_FDCWD. ok is false when the
// memory could not be read; path is "" when it cannot be resolved.
func (s *supervisor) readPath(mem io.ReaderAt, pid int, dirfd int32, addr uint64) (path string, ok bool) {
	b, err := appendCString(s.strBuf[:0], mem, addr, 4096)
	s.strBuf = b[:0]
	if err != nil {
		return "", false
	}
	if len(b) > 0 && b[0] == '/' {
		return filepath.Clean(string(b)), true
	}
	if len(b) == 0 {
		return "", true
	}
	return joinPath(s.procLink(pid, dirfd), string(b)), true
}

// decodeTrace decodes a traced call that is not an exec. It returns false
// when nothing is to be reported (unreadable memory, unresolvable path,
// a family connect does not record).
func (s *supervisor) decodeTrace(n *seccompNotif, o op, t *traced) bool {
	pid := int(n.Pid)
	s.mem.pid = pid
	defer s.mem.release()
	mem := &s.mem
	a := &n.Args
	dirfd := func(i int) int32 { return int32(uint32(a[i])) }
	path := func(fd int32, addr uint64) bool {
		p, ok := s.readPath(mem, pid, fd, addr)
		if !ok || p == "" {
			return false
		}
		t.path[t.n] = p
		t.n++
		return true
	}
	switch o {
	case opOpen, opOpenat, opOpenat2:
		fd, addr, flags := int32(unix.AT_FDCWD), a[0], a[1]
		if o != opOpen {
			fd, addr, flags = dirfd(0), a[1], a[2]
		}
		if o == opOpenat2 {
			var how [8]byte // struct open_how starts with the u64 flags
			if _, err := mem.ReadAt(how[:], int64(a[2])); err != nil {
				return false
			}
			flags = binary.NativeEndian.Uint64(how[:])
		}
		if !path(fd, addr) {
			return false
		}
		t.kind, t.write = openKind(flags)
		if !t.write {
			t.errno = s.absent(pid, t.path[0])
		}
	case opCreat:
		t.kind, t.write = learn.Create, true
		return path(unix.AT_FDCWD, a[0])
	case opMkdir, opMkdirat:
		t.kind, t.write = learn.Mkdir, true
		ok := false
		if o == opMkdir {
			ok = path(unix.AT_FDCWD, a[0])
		} else {
			ok = path(dirfd(0), a[1])
		}
		if ok && s.absent(pid, t.path[0]) == 0 {
			t.errno = int(unix.EEXIST) // mkdir -p probing what exists
		}
		return ok
	case opUnlink, opUnlinkat:
		t.kind, t.write = learn.Unlink, true
		if o == opUnlink {
			return path(unix.AT_FDCWD, a[0])
		}
		return path(dirfd(0), a[1])
	case opRename, opRenameat:
		t.kind, t.write = learn.Rename, true
		if o == opRename {
			return path(unix.AT_FDCWD, a[0]) && path(unix.AT_FDCWD, a[1])
		}
		return path(dirfd(0), a[1]) && path(dirfd(2), a[3])
	case opConnect:
		size := min(a[2], uint64(len(s.sockBuf)))
		k, err := mem.ReadAt(s.sockBuf[:size], int64(a[1]))
		if err != nil && k == 0 {
			return false
		}
		p, addr := parseSockaddr(s.sockBuf[:k])
		switch {
		case addr != "":
			t.addr = addr
			t.n = 1
		case p != "" && p[0] == '@':
			t.path[0] = p
			t.n = 1
		case p != "":
			if t.path[0] = joinPath(s.procLink(pid, unix.AT_FDCWD), p); t.path[0] == "" {
				return false
			}
			t.n = 1
			t.errno = s.absent(pid, t.path[0]) // no socket there: ENOENT
		default:
			return false
		}
		t.kind = learn.Connect
	default:
		return false
	}
	return t.n > 0
}

// traceExec reads an exec's path when no command rule asks for more: the
// exec goes on, and the event says whether the file was there.
func (s *supervisor) traceExec(n *seccompNotif, o op, t *traced) bool {
	pid := int(n.Pid)
	s.mem.pid = pid
	defer s.mem.release()
	p, ok := s.execPath(&s.mem, n, o)
	if !ok || p == "" {
		return false
	}
	t.kind, t.path[0], t.n = learn.Exec, p, 1
	t.errno = s.absent(pid, p)
	return true
}

// execPath reads an exec's file, as seen in the jail: relative to the
// working directory or to dirfd, or dirfd itself (AT_EMPTY_PATH).
func (s *supervisor) execPath(mem io.ReaderAt, n *seccompNotif, o op) (string, bool) {
	pid := int(n.Pid)
	if o == opExecve {
		return s.readPath(mem, pid, unix.AT_FDCWD, n.Args[0])
	}
	dirfd := int32(uint32(n.Args[0]))
	p, ok := s.readPath(mem, pid, dirfd, n.Args[1])
	if ok && p == "" && n.Args[4]&unix.AT_EMPTY_PATH != 0 && dirfd >= 0 {
		p = s.procLink(pid, dirfd)
	}
	return p, ok
}
