package sysnum

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNativeTable: on amd64 the table agrees with x/sys as compiled.
func TestNativeTable(t *testing.T) {
	checkNative(t, "amd64", map[string]uint32{
		"open": unix.SYS_OPEN, "openat": unix.SYS_OPENAT, "openat2": unix.SYS_OPENAT2,
		"creat": unix.SYS_CREAT, "mkdir": unix.SYS_MKDIR, "rename": unix.SYS_RENAME,
		"execve": unix.SYS_EXECVE, "execveat": unix.SYS_EXECVEAT, "connect": unix.SYS_CONNECT,
		"chdir": unix.SYS_CHDIR, "fchdir": unix.SYS_FCHDIR, "ptrace": unix.SYS_PTRACE,
		"clone": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3, "socket": unix.SYS_SOCKET,
		"personality": unix.SYS_PERSONALITY, "ioctl": unix.SYS_IOCTL, "iopl": unix.SYS_IOPL,
	})
}
