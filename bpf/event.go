package bpf

import (
	"fmt"
	"net/netip"
)

// Kind is what a traced syscall did.
type Kind uint32

// Event kinds, matching enum kind in probes.c.
const (
	KindOpen    Kind = 1
	KindExec    Kind = 2
	KindConnect Kind = 3
	KindMkdir   Kind = 4
	KindUnlink  Kind = 5
	KindRename  Kind = 6
	KindRmdir   Kind = 7
	// KindChdir and KindFork keep the tracer's view of each process's
	// working directory exact; Events does not deliver them.
	KindChdir Kind = 8
	KindFork  Kind = 9
)

func (k Kind) String() string {
	switch k {
	case KindOpen:
		return "open"
	case KindExec:
		return "exec"
	case KindConnect:
		return "connect"
	case KindMkdir:
		return "mkdir"
	case KindUnlink:
		return "unlink"
	case KindRename:
		return "rename"
	case KindRmdir:
		return "rmdir"
	case KindChdir:
		return "chdir"
	case KindFork:
		return "fork"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// AtFDCWD is the dirfd value meaning "relative to the working directory".
const AtFDCWD = -100

// Address families reported for KindConnect.
const (
	AFUnix  = 1
	AFInet  = 2
	AFInet6 = 10
)

// Event is one completed syscall of a traced process.
type Event struct {
	Pid   uint32 // thread id, host PID namespace
	Tgid  uint32 // process id, host PID namespace
	Kind  Kind
	Flags uint32 // open(2) flags, unlinkat/renameat2 flags, mkdir mode; execveat flags
	// Ret is the syscall's result: >= 0 on success, -errno on failure.
	Ret  int64
	Comm string
	// Path is the path as the process passed it (may be relative), or the
	// unix socket path for connect (abstract sockets start with "@").
	Path string
	// Path2 is the rename destination.
	Path2 string
	// Dirfd/Dirfd2 are the directory fds Path/Path2 are relative to
	// (AtFDCWD for the working directory). For connect, Dirfd is the socket.
	Dirfd, Dirfd2 int32
	// AbsPath/AbsPath2 are Path/Path2 resolved against the process's working
	// directory or dirfd, read from /proc when the event is received (best
	// effort: empty if the process has already gone).
	AbsPath, AbsPath2 string
	// Connect: address family and, for AF_INET/AF_INET6, address and port.
	Family uint16
	Addr   netip.AddrPort
}

// OK reports whether the syscall succeeded.
func (e Event) OK() bool { return e.Ret >= 0 }

// Errno returns the error number of a failed syscall, 0 on success.
func (e Event) Errno() int {
	if e.Ret >= 0 {
		return 0
	}
	return int(-e.Ret)
}
