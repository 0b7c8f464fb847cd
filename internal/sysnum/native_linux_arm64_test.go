package sysnum

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNativeTable: on arm64 the table agrees with x/sys as compiled.
func TestNativeTable(t *testing.T) {
	checkNative(t, "arm64", map[string]uint32{
		"openat": unix.SYS_OPENAT, "openat2": unix.SYS_OPENAT2, "mkdirat": unix.SYS_MKDIRAT,
		"unlinkat": unix.SYS_UNLINKAT, "renameat": unix.SYS_RENAMEAT, "renameat2": unix.SYS_RENAMEAT2,
		"execve": unix.SYS_EXECVE, "execveat": unix.SYS_EXECVEAT, "connect": unix.SYS_CONNECT,
		"chdir": unix.SYS_CHDIR, "fchdir": unix.SYS_FCHDIR, "ptrace": unix.SYS_PTRACE,
		"clone": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3, "socket": unix.SYS_SOCKET,
		"personality": unix.SYS_PERSONALITY, "ioctl": unix.SYS_IOCTL,
	})
}
