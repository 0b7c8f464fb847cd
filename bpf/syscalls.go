//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package bpf

// tracedSyscall is a system call the probes trace: its name, its number
// on one architecture and the probes' handler for its arguments (enum
// handler in probes.c).
type tracedSyscall struct {
	name    string
	nr      uint32
	handler probesHandler
}

// The tables of both architectures build everywhere, so that a test on
// either machine checks both against the kernel's numbers.

// amd64Syscalls are the traced system calls of x86_64.
var amd64Syscalls = []tracedSyscall{
	{"open", 2, probesHandlerH_OPEN},
	{"openat", 257, probesHandlerH_OPENAT},
	{"openat2", 437, probesHandlerH_OPENAT2},
	{"creat", 85, probesHandlerH_CREAT},
	{"mkdir", 83, probesHandlerH_MKDIR},
	{"mkdirat", 258, probesHandlerH_MKDIRAT},
	{"unlink", 87, probesHandlerH_UNLINK},
	{"unlinkat", 263, probesHandlerH_UNLINKAT},
	{"rmdir", 84, probesHandlerH_RMDIR},
	{"rename", 82, probesHandlerH_RENAME},
	{"renameat", 264, probesHandlerH_RENAMEAT},
	{"renameat2", 316, probesHandlerH_RENAMEAT2},
	{"execve", 59, probesHandlerH_EXECVE},
	{"execveat", 322, probesHandlerH_EXECVEAT},
	{"connect", 42, probesHandlerH_CONNECT},
	{"chdir", 80, probesHandlerH_CHDIR},
	{"fchdir", 81, probesHandlerH_FCHDIR},
}

// arm64Syscalls are the traced system calls of arm64, from the kernel's
// generic table: it has only the *at variants of the path system calls.
var arm64Syscalls = []tracedSyscall{
	{"openat", 56, probesHandlerH_OPENAT},
	{"openat2", 437, probesHandlerH_OPENAT2},
	{"mkdirat", 34, probesHandlerH_MKDIRAT},
	{"unlinkat", 35, probesHandlerH_UNLINKAT},
	{"renameat", 38, probesHandlerH_RENAMEAT},
	{"renameat2", 276, probesHandlerH_RENAMEAT2},
	{"execve", 221, probesHandlerH_EXECVE},
	{"execveat", 281, probesHandlerH_EXECVEAT},
	{"connect", 203, probesHandlerH_CONNECT},
	{"chdir", 49, probesHandlerH_CHDIR},
	{"fchdir", 50, probesHandlerH_FCHDIR},
}

// handlerTable maps the numbers of calls to their handlers.
func handlerTable(calls []tracedSyscall) map[uint32]probesHandler {
	m := make(map[uint32]probesHandler, len(calls))
	for _, c := range calls {
		m[c.nr] = c.handler
	}
	return m
}
