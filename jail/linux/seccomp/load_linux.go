//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Load installs prog in the calling process: it sets no_new_privs, then
// calls seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC) so that
// every thread of the (Go) process gets the filter, and so does every
// process it starts afterwards. It does not use libseccomp. The filter
// cannot be removed.
func Load(prog []SockFilter) error {
	if err := load(prog); err != nil {
		return fmt.Errorf("loading seccomp filter: %w", err)
	}
	return nil
}

func load(prog []SockFilter) error {
	if len(prog) == 0 {
		return errors.New("empty program")
	}
	if len(prog) > 0xffff { // sock_fprog.len is an unsigned short
		return fmt.Errorf("program too long (%d instructions)", len(prog))
	}
	// no_new_privs and the filter must be set on the same thread: TSYNC
	// then copies both to the other threads.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP,
		unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	if r != 0 {
		// With TSYNC, a positive result is the id of a thread that could
		// not be synchronized (it has a diverging filter).
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): thread %d could not be synchronized", r)
	}
	return nil
}
