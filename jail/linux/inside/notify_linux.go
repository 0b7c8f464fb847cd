package inside

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FDNotify is the unix socket on which init hands the host the listener of
// the notify filter.
const FDNotify = 8

// NotifyCall is a system call the notify filter hands to the host.
type NotifyCall struct {
	Name string // as in syscalls(2): "execve", "openat"…
	Nr   uint32
}

// NotifyCalls lists the calls the notify filter sends on this machine:
// the execs, and with trace the file and connect calls the unprivileged
// tracer records. The host decodes notifications by these names.
func NotifyCalls(trace bool) []NotifyCall {
	_, calls := notifyCalls(runtime.GOARCH, trace)
	return calls
}

// notifyCalls gives the audit architecture and the notified calls of an
// architecture, the most frequent first (the filter tests them in order).
func notifyCalls(goarch string, trace bool) (uint32, []NotifyCall) {
	var arch uint32
	var execs, traced []NotifyCall
	switch goarch {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
		execs = []NotifyCall{{"execve", 59}, {"execveat", 322}}
		traced = []NotifyCall{
			{"openat", 257}, {"open", 2}, {"connect", 42}, {"openat2", 437},
			{"creat", 85}, {"mkdir", 83}, {"mkdirat", 258},
			{"unlink", 87}, {"unlinkat", 263}, {"rmdir", 84},
			{"rename", 82}, {"renameat", 264}, {"renameat2", 316},
		}
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
		execs = []NotifyCall{{"execve", 221}, {"execveat", 281}}
		traced = []NotifyCall{
			{"openat", 56}, {"connect", 203}, {"openat2", 437},
			{"mkdirat", 34}, {"unlinkat", 35}, {"renameat", 38}, {"renameat2", 276},
		}
	}
	if !trace {
		return arch, execs
	}
	return arch, append(traced, execs...)
}

// NotifyFilter is the program installNotifyFilter installs, for this
// machine.
func NotifyFilter(trace bool) []unix.SockFilter { return notifyFilter(runtime.GOARCH, trace) }

// notifyFilter is a second seccomp filter, installed on init's main thread
// only (the command is forked from it), that sends every execve and
// execveat — and with trace every traced call — to the supervisor in the
// host process as a user notification: a chain of compares of the call
// number. Other architectures' calls are allowed here: the main filter
// refuses them.
func notifyFilter(goarch string, trace bool) []unix.SockFilter {
	arch, calls := notifyCalls(goarch, trace)
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
	)
	k := len(calls)
	// 0 load arch, 1 test arch, 2 load nr, 3…3+k-1 one compare per call,
	// 3+k allow, 4+k notify.
	prog := []unix.SockFilter{
		{Code: ldAbs, K: 4},                           // seccomp_data.arch
		{Code: jeq, K: arch, Jt: 0, Jf: uint8(k + 1)}, // foreign: allow
		{Code: ldAbs, K: 0},                           // seccomp_data.nr
	}
	for i, c := range calls {
		prog = append(prog, unix.SockFilter{Code: jeq, K: c.Nr, Jt: uint8(k - i)})
	}
	return append(prog,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_USER_NOTIF})
}

// installNotifyFilter installs the notify filter on this thread and sends
// its listener to the host over FDNotify. Init keeps no copy: if the host
// is gone, the notified calls fail instead of waiting for an answer.
func installNotifyFilter(trace bool) error {
	prog := NotifyFilter(trace)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("installing the notify filter: %w (Hint: seccomp user notification needs Linux >= 5.0)", errno)
	}
	defer unix.Close(int(fd))
	if err := unix.Sendmsg(FDNotify, []byte{0}, unix.UnixRights(int(fd)), nil, 0); err != nil {
		return fmt.Errorf("handing the notify filter to the supervisor: %w", err)
	}
	unix.Close(FDNotify)
	return nil
}
