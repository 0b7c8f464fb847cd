//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package bpf

import (
	"runtime"
	"testing"

	"github.com/jailsh/jail/internal/sysnum"
)

// handlerOf is the handler each traced system call needs, by the layout
// of its arguments as probes.c reads them.
var handlerOf = map[string]probesHandler{
	"open": probesHandlerH_OPEN, "openat": probesHandlerH_OPENAT, "openat2": probesHandlerH_OPENAT2,
	"creat": probesHandlerH_CREAT, "mkdir": probesHandlerH_MKDIR, "mkdirat": probesHandlerH_MKDIRAT,
	"unlink": probesHandlerH_UNLINK, "unlinkat": probesHandlerH_UNLINKAT, "rmdir": probesHandlerH_RMDIR,
	"rename": probesHandlerH_RENAME, "renameat": probesHandlerH_RENAMEAT, "renameat2": probesHandlerH_RENAMEAT2,
	"execve": probesHandlerH_EXECVE, "execveat": probesHandlerH_EXECVEAT, "connect": probesHandlerH_CONNECT,
	"chdir": probesHandlerH_CHDIR, "fchdir": probesHandlerH_FCHDIR,
}

// TestSyscallTables checks the traced system calls of both architectures,
// on any machine, against their numbers in x/sys (internal/sysnum): each
// number is the named call's, each call has the handler for its argument
// layout, and every call of the architecture that the probes can decode
// is in the table (a missing one would go unseen in learning and watch).
func TestSyscallTables(t *testing.T) {
	tables := map[string][]tracedSyscall{"amd64": amd64Syscalls, "arm64": arm64Syscalls}
	for _, arch := range sysnum.Architectures {
		sys := sysnum.Syscalls(arch)
		calls := tables[arch]
		in := map[string]bool{}
		seen := map[uint32]bool{}
		for _, c := range calls {
			in[c.name] = true
			if nr, ok := sys[c.name]; !ok || nr != c.nr {
				t.Errorf("%s %s: table says %d, the kernel %d (present %v)", arch, c.name, c.nr, nr, ok)
			}
			if want, ok := handlerOf[c.name]; !ok || c.handler != want {
				t.Errorf("%s %s: handler %d, want %d", arch, c.name, c.handler, want)
			}
			if seen[c.nr] {
				t.Errorf("%s: number %d twice", arch, c.nr)
			}
			seen[c.nr] = true
			if c.nr >= maxSyscallNr {
				t.Errorf("%s %s: number %d does not fit the probes' array of %d", arch, c.name, c.nr, maxSyscallNr)
			}
		}
		for name := range handlerOf {
			if _, ok := sys[name]; ok && !in[name] {
				t.Errorf("%s has %s, which the table does not trace", arch, name)
			}
		}
		if len(calls) < 11 {
			t.Errorf("%s: only %d calls traced", arch, len(calls))
		}
	}
}

// maxSyscallNr is MAX_SYSCALL_NR in probes.c, the size of the array the
// handlers are looked up in.
const maxSyscallNr = 512

// TestSyscallHandlerMapSize: the compiled probes' array is as large as
// the tables assume.
func TestSyscallHandlerMapSize(t *testing.T) {
	spec, err := loadProbes()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := spec.Maps["syscall_handler"]
	if !ok {
		t.Fatal("no syscall_handler map in the probes")
	}
	if m.MaxEntries != maxSyscallNr {
		t.Fatalf("syscall_handler has %d entries, the tables assume %d", m.MaxEntries, maxSyscallNr)
	}
}

// TestNativeHandlers: the table in use here is this architecture's.
func TestNativeHandlers(t *testing.T) {
	var want []tracedSyscall
	switch runtime.GOARCH {
	case "amd64":
		want = amd64Syscalls
	case "arm64":
		want = arm64Syscalls
	default:
		if len(syscallHandlers) != 0 {
			t.Fatalf("%s: the probes cannot read its registers, yet %d calls are traced", runtime.GOARCH, len(syscallHandlers))
		}
		return
	}
	if len(syscallHandlers) != len(want) {
		t.Fatalf("%d handlers, want %d", len(syscallHandlers), len(want))
	}
	for _, c := range want {
		if syscallHandlers[c.nr] != c.handler {
			t.Errorf("%s (%d): handler %d, want %d", c.name, c.nr, syscallHandlers[c.nr], c.handler)
		}
	}
}
