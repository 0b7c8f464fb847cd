package inside

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FDNotify is the unix socket on which init hands the host the listener of
// the exec filter.
const FDNotify = 8

// execFilter is a second seccomp filter, installed on init's main thread
// only (the command is forked from it), that sends every execve and
// execveat to the supervisor in the host process as a user notification.
// Other architectures' calls fall through: the main filter refuses them.
func execFilter() []unix.SockFilter {
	var arch uint32
	var execve, execveat uint32
	switch runtime.GOARCH {
	case "amd64":
		arch, execve, execveat = unix.AUDIT_ARCH_X86_64, 59, 322
	case "arm64":
		arch, execve, execveat = unix.AUDIT_ARCH_AARCH64, 221, 281
	}
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
	)
	return []unix.SockFilter{
		{Code: ldAbs, K: 4},                    // seccomp_data.arch
		{Code: jeq, K: arch, Jt: 0, Jf: 4},     // foreign: allow here
		{Code: ldAbs, K: 0},                    // seccomp_data.nr
		{Code: jeq, K: execve, Jt: 2, Jf: 0},   // execve: notify
		{Code: jeq, K: execveat, Jt: 1, Jf: 0}, // execveat: notify
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ret, K: unix.SECCOMP_RET_USER_NOTIF},
	}
}

// installExecFilter installs the exec filter on this thread and sends its
// listener to the host over FDNotify. Init keeps no copy: if the host is
// gone, the command's execs fail instead of waiting for an answer.
func installExecFilter() error {
	prog := execFilter()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("installing the exec filter: %w (Hint: seccomp user notification needs Linux >= 5.0)", errno)
	}
	defer unix.Close(int(fd))
	if err := unix.Sendmsg(FDNotify, []byte{0}, unix.UnixRights(int(fd)), nil, 0); err != nil {
		return fmt.Errorf("handing the exec filter to the supervisor: %w", err)
	}
	unix.Close(FDNotify)
	return nil
}
