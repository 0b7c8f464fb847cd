//go:build linux

package bpf

import "golang.org/x/sys/unix"

// syscallHandlers maps this architecture's syscall numbers to the probes'
// handlers (enum handler in probes.c); the probes trace nothing else.
var syscallHandlers = map[uint32]probesHandler{
	unix.SYS_OPEN:      probesHandlerH_OPEN,
	unix.SYS_OPENAT:    probesHandlerH_OPENAT,
	unix.SYS_OPENAT2:   probesHandlerH_OPENAT2,
	unix.SYS_CREAT:     probesHandlerH_CREAT,
	unix.SYS_MKDIR:     probesHandlerH_MKDIR,
	unix.SYS_MKDIRAT:   probesHandlerH_MKDIRAT,
	unix.SYS_UNLINK:    probesHandlerH_UNLINK,
	unix.SYS_UNLINKAT:  probesHandlerH_UNLINKAT,
	unix.SYS_RMDIR:     probesHandlerH_RMDIR,
	unix.SYS_RENAME:    probesHandlerH_RENAME,
	unix.SYS_RENAMEAT:  probesHandlerH_RENAMEAT,
	unix.SYS_RENAMEAT2: probesHandlerH_RENAMEAT2,
	unix.SYS_EXECVE:    probesHandlerH_EXECVE,
	unix.SYS_EXECVEAT:  probesHandlerH_EXECVEAT,
	unix.SYS_CONNECT:   probesHandlerH_CONNECT,
	unix.SYS_CHDIR:     probesHandlerH_CHDIR,
	unix.SYS_FCHDIR:    probesHandlerH_FCHDIR,
}
