package inside

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/jailsh/jail/internal/sysnum"
)

// notifiable are the calls the supervisor decodes: every one of them that
// an architecture has must be notified when tracing, or a command could
// write or connect unseen by learning.
var notifiable = []string{
	"execve", "execveat", "open", "openat", "openat2", "creat", "mkdir", "mkdirat",
	"unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2", "connect",
}

var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// TestNotifyCallsNumbers checks the notified calls of every architecture,
// on any machine, against its system call numbers from x/sys.
func TestNotifyCallsNumbers(t *testing.T) {
	for _, goarch := range sysnum.Architectures {
		sys := sysnum.Syscalls(goarch)
		arch, calls := notifyCalls(goarch, true)
		if arch != auditArch[goarch] {
			t.Errorf("%s: audit arch %#x, want %#x", goarch, arch, auditArch[goarch])
		}
		listed := map[string]bool{}
		for _, c := range calls {
			listed[c.Name] = true
			if nr, ok := sys[c.Name]; !ok || nr != c.Nr {
				t.Errorf("%s %s: filter compares %d, the kernel's number is %d (present %v)", goarch, c.Name, c.Nr, nr, ok)
			}
		}
		for _, name := range notifiable {
			if _, ok := sys[name]; ok && !listed[name] {
				t.Errorf("%s has %s, which tracing does not notify", goarch, name)
			}
		}
		_, execs := notifyCalls(goarch, false)
		if len(execs) != 2 || execs[0].Name != "execve" || execs[1].Name != "execveat" {
			t.Errorf("%s: without tracing %v are notified, want execve and execveat", goarch, execs)
		}
	}
}

// TestNotifyFilterEveryArch runs each architecture's notify filter in a
// BPF VM: exactly the listed calls of that architecture are notified, and
// calls of another ABI are left to the main filter, which refuses them.
func TestNotifyFilterEveryArch(t *testing.T) {
	for _, goarch := range sysnum.Architectures {
		for _, trace := range []bool{false, true} {
			arch, calls := notifyCalls(goarch, trace)
			vm := notifyVM(t, notifyFilter(goarch, trace))
			notified := map[uint32]bool{}
			for _, c := range calls {
				notified[c.Nr] = true
			}
			for nr := uint32(0); nr < 1024; nr++ {
				want := uint32(unix.SECCOMP_RET_ALLOW)
				if notified[nr] {
					want = unix.SECCOMP_RET_USER_NOTIF
				}
				if got := runNotify(t, vm, arch, nr); got != want {
					t.Errorf("%s trace=%v %s (%d): %#x, want %#x", goarch, trace, sysnum.Name(goarch, nr), nr, got, want)
				}
				for _, other := range []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_ARM, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_AARCH64} {
					if other == arch {
						continue
					}
					if got := runNotify(t, vm, other, nr); got != unix.SECCOMP_RET_ALLOW {
						t.Errorf("%s trace=%v: arch %#x call %d: %#x, want allow", goarch, trace, other, nr, got)
					}
				}
			}
		}
	}
}

func notifyVM(t *testing.T, prog []unix.SockFilter) *bpf.VM {
	t.Helper()
	insns := make([]bpf.Instruction, len(prog))
	for i, ins := range prog {
		insns[i] = bpf.RawInstruction{Op: ins.Code, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}.Disassemble()
		if _, raw := insns[i].(bpf.RawInstruction); raw {
			t.Fatalf("instruction %d (%#v) is not understood by the VM", i, ins)
		}
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// runNotify runs the filter on struct seccomp_data with nr and arch; the
// VM loads words big-endian, so they are stored so.
func runNotify(t *testing.T, vm *bpf.VM, arch, nr uint32) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], arch)
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ret)
}
