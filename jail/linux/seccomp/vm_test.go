//go:build linux && cgo

package seccomp

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	libseccomp "github.com/seccomp/libseccomp-golang"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/jailsh/jail/internal/sysnum"
)

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retErrno = unix.SECCOMP_RET_ERRNO

	auditArchI386    = 0x40000003
	auditArchX8664   = 0xc000003e
	auditArchARM     = 0x40000028 // AArch32, the compat ABI of arm64
	auditArchAArch64 = 0xc00000b7
)

// target is an architecture a program is made for, with its own system
// call and errno numbers: the tests run every architecture's program on
// this machine, whatever it is. Flag, family and ioctl values (CLONE_*,
// AF_*, SOCK_*, TCGETS, ...) are the same on amd64 and arm64, so the
// host's unix constants serve both; system call numbers differ.
type target struct {
	goarch string
	audit  uint32
	// foreign are the AUDIT_ARCH values of the other ABIs: the compat
	// ABI a process on this architecture can use, and the other
	// architectures'. All of them must be refused.
	foreign []uint32
	sys     map[string]uint32
	errnos  map[string]uint32
	// absent are the system calls of DefaultRules that this architecture
	// does not have: there is nothing to filter.
	absent []string
}

func allTargets(t *testing.T) []target {
	t.Helper()
	ts := []target{
		{goarch: "amd64", audit: auditArchX8664,
			foreign: []uint32{auditArchI386, auditArchAArch64, auditArchARM}},
		{goarch: "arm64", audit: auditArchAArch64,
			foreign: []uint32{auditArchARM, auditArchX8664, auditArchI386},
			absent:  []string{"iopl", "ioperm", "uselib"}},
	}
	for i := range ts {
		ts[i].sys = sysnum.Syscalls(ts[i].goarch)
		ts[i].errnos = sysnum.Errnos(ts[i].goarch)
		if ts[i].sys == nil || ts[i].errnos == nil {
			t.Fatalf("no system call or errno table for %s", ts[i].goarch)
		}
	}
	return ts
}

func targetOf(t *testing.T, goarch string) target {
	t.Helper()
	for _, tg := range allTargets(t) {
		if tg.goarch == goarch {
			return tg
		}
	}
	t.Fatalf("no target %s", goarch)
	return target{}
}

// nr returns the number of system call name on the target.
func (tg target) nr(t *testing.T, name string) int32 {
	t.Helper()
	n, ok := tg.sys[name]
	if !ok {
		t.Fatalf("%s has no system call %s", tg.goarch, name)
	}
	return int32(n)
}

// ret returns what the filter answers for want, "ALLOW" or an errno name
// numbered as on the target.
func (tg target) ret(t *testing.T, want string) uint32 {
	t.Helper()
	if want == allow {
		return retAllow
	}
	e, ok := tg.errnos[want]
	if !ok {
		t.Fatalf("%s has no errno %s", tg.goarch, want)
	}
	return retErrno | e
}

func (tg target) retString(r uint32) string {
	switch {
	case r == retAllow:
		return allow
	case r&unix.SECCOMP_RET_ACTION_FULL == retErrno:
		for name, e := range tg.errnos {
			if e == r&unix.SECCOMP_RET_DATA {
				return "ERRNO(" + name + ")"
			}
		}
		return fmt.Sprintf("ERRNO(%d)", r&unix.SECCOMP_RET_DATA)
	}
	return fmt.Sprintf("%#x", r)
}

const allow = "ALLOW"

// seccompData builds the input of the filter, struct seccomp_data
// {int nr; u32 arch; u64 instruction_pointer; u64 args[6]} (64 bytes), as
// a little-endian kernel lays it out: amd64 and arm64 both are. The
// kernel's BPF loads 32-bit words in native byte order, whereas the
// x/net/bpf VM (made for packets) loads them big-endian: so the struct is
// laid out, then every 32-bit word is stored big-endian, which makes each
// VM load see the value the kernel would see.
func seccompData(nr int32, arch uint32, args ...uint64) []byte {
	le := make([]byte, 64)
	binary.LittleEndian.PutUint32(le[0:], uint32(nr))
	binary.LittleEndian.PutUint32(le[4:], arch)
	binary.LittleEndian.PutUint64(le[8:], 0x401000)
	for i, a := range args {
		binary.LittleEndian.PutUint64(le[16+8*i:], a)
	}
	vm := make([]byte, 64)
	for off := 0; off < 64; off += 4 {
		binary.BigEndian.PutUint32(vm[off:], binary.LittleEndian.Uint32(le[off:]))
	}
	return vm
}

func newVM(t *testing.T, prog []SockFilter) *bpf.VM {
	t.Helper()
	if len(prog) == 0 {
		t.Fatal("empty program")
	}
	insns := make([]bpf.Instruction, len(prog))
	for i, ins := range prog {
		d := bpf.RawInstruction{Op: ins.Code, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}.Disassemble()
		switch d := d.(type) {
		case bpf.RawInstruction:
			t.Fatalf("instruction %d (%#v) is not understood by the VM", i, ins)
		case bpf.LoadAbsolute:
			// Only aligned 32-bit loads are valid in seccomp, and only
			// those are emulated faithfully (see seccompData).
			if d.Size != 4 || d.Off%4 != 0 || d.Off >= 64 {
				t.Fatalf("instruction %d: unexpected load %v", i, d)
			}
		case bpf.LoadIndirect, bpf.LoadMemShift, bpf.LoadExtension:
			t.Fatalf("instruction %d: unexpected load %v", i, d)
		}
		insns[i] = d
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func run(t *testing.T, vm *bpf.VM, data []byte) uint32 {
	t.Helper()
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ret)
}

func compileDefault(t *testing.T) []SockFilter {
	t.Helper()
	return compileDefaultFor(t, runtime.GOARCH)
}

func compileDefaultFor(t *testing.T, goarch string) []SockFilter {
	t.Helper()
	prog, err := compileFor(goarch, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// embeddedFile reads the program generated for goarch (default_GOARCH.bpf),
// the one a jail built for goarch embeds and loads.
func embeddedFile(t *testing.T, goarch string) []SockFilter {
	t.Helper()
	b, err := os.ReadFile("default_" + goarch + ".bpf")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// forEachProgram runs f on every architecture's default program, as
// compiled here and as embedded in the binary for that architecture.
func forEachProgram(t *testing.T, f func(t *testing.T, tg target, prog []SockFilter)) {
	for _, tg := range allTargets(t) {
		progs := map[string][]SockFilter{
			"compiled": compileDefaultFor(t, tg.goarch),
			"embedded": embeddedFile(t, tg.goarch),
		}
		for name, prog := range progs {
			t.Run(tg.goarch+"/"+name, func(t *testing.T) { f(t, tg, prog) })
		}
	}
}

// TestVMDefaultRules runs chosen calls through every program: the
// conditional rules (masked ioctl compares, clone and unshare flags,
// socket families and netlink protocols, personality) and the foreign ABIs.
func TestVMDefaultRules(t *testing.T) {
	forEachProgram(t, testVMDefaultRules)
}

func testVMDefaultRules(t *testing.T, tg target, prog []SockFilter) {
	vm := newVM(t, prog)
	sockRaw := uint64(unix.SOCK_RAW | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK)
	tests := []struct {
		name string
		sys  string
		args []uint64
		want string
	}{
		{"ptrace", "ptrace", []uint64{unix.PTRACE_TRACEME}, "EPERM"},
		{"process_vm_readv", "process_vm_readv", []uint64{1, 0, 1, 0, 1, 0}, "EPERM"},
		{"process_vm_writev", "process_vm_writev", []uint64{1, 0, 1, 0, 1, 0}, "EPERM"},
		{"pidfd_getfd", "pidfd_getfd", []uint64{3, 0, 0}, "EPERM"},
		{"pidfd_open", "pidfd_open", []uint64{1, 0}, allow},
		{"read", "read", []uint64{0, 0, 0}, allow},
		{"getpid", "getpid", nil, allow},
		{"clone CLONE_NEWUSER", "clone", []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, "EPERM"},
		{"clone CLONE_NEWNET|thread flags", "clone", []uint64{0x3d0f00 | unix.CLONE_NEWNET}, "EPERM"},
		{"clone CLONE_NEWTIME", "clone", []uint64{unix.CLONE_NEWTIME}, "EPERM"},
		{"clone CLONE_NEWPID high bits", "clone", []uint64{0xffff_0000_0000_0000 | unix.CLONE_NEWPID}, "EPERM"},
		{"clone thread flags", "clone", []uint64{0x3d0f00}, allow},
		{"clone fork", "clone", []uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone3", "clone3", []uint64{0, 88}, "ENOSYS"},
		{"unshare CLONE_NEWNS", "unshare", []uint64{unix.CLONE_NEWNS}, "EPERM"},
		{"unshare CLONE_NEWUSER", "unshare", []uint64{unix.CLONE_NEWUSER}, "EPERM"},
		{"unshare CLONE_NEWCGROUP", "unshare", []uint64{unix.CLONE_NEWCGROUP}, "EPERM"},
		{"unshare CLONE_NEWIPC|CLONE_NEWUTS", "unshare", []uint64{unix.CLONE_NEWIPC | unix.CLONE_NEWUTS}, "EPERM"},
		{"unshare CLONE_FILES", "unshare", []uint64{unix.CLONE_FILES}, allow},
		{"ioctl TIOCSTI", "ioctl", []uint64{0, 0x5412, 0}, "EPERM"},
		{"ioctl TIOCSTI high bits", "ioctl", []uint64{0, 0xdead00005412, 0}, "EPERM"},
		{"ioctl TIOCLINUX", "ioctl", []uint64{0, 0x541C, 0}, "EPERM"},
		{"ioctl TIOCLINUX high bits", "ioctl", []uint64{0, 0xffffffff0000541C, 0}, "EPERM"},
		{"ioctl TCGETS", "ioctl", []uint64{0, unix.TCGETS, 0}, allow},
		{"ioctl 0x15412", "ioctl", []uint64{0, 0x15412, 0}, allow},
		{"ioctl 0x5413", "ioctl", []uint64{0, 0x5413, 0}, allow},
		{"socket AF_INET", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, allow},
		{"socket AF_INET6", "socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, 0}, allow},
		{"socket AF_UNIX", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, allow},
		{"socket AF_PACKET", "socket", []uint64{unix.AF_PACKET, sockRaw, 0}, "EAFNOSUPPORT"},
		{"socket AF_INET TCP", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP}, allow},
		{"socket AF_INET MPTCP", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP}, allow},
		{"socket AF_INET ICMP ping", "socket", []uint64{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP}, allow},
		{"socket AF_INET6 ICMPv6 ping", "socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6}, allow},
		{"socket AF_INET SCTP", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, "EPROTONOSUPPORT"},
		{"socket AF_INET6 UDPLite", "socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE}, "EPROTONOSUPPORT"},
		{"socket AF_INET L2TP", "socket", []uint64{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_L2TP}, "EPROTONOSUPPORT"},
		{"socket AF_INET TCP high bits", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, 1<<32 | unix.IPPROTO_TCP}, "EPROTONOSUPPORT"},
		{"socket AF_NETLINK ROUTE", "socket", []uint64{unix.AF_NETLINK, sockRaw, unix.NETLINK_ROUTE}, allow},
		{"socket AF_NETLINK AUDIT", "socket", []uint64{unix.AF_NETLINK, sockRaw, unix.NETLINK_AUDIT}, "EPERM"},
		{"socket AF_NETLINK NETFILTER", "socket", []uint64{unix.AF_NETLINK, sockRaw, unix.NETLINK_NETFILTER}, "EPERM"},
		{"socket AF_NETLINK proto high bits", "socket", []uint64{unix.AF_NETLINK, sockRaw, 1 << 32}, "EPERM"},
		{"socket AF_VSOCK", "socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, "EAFNOSUPPORT"},
		{"socket 999", "socket", []uint64{999, unix.SOCK_STREAM, 0}, "EAFNOSUPPORT"},
		{"socket AF_UNSPEC", "socket", []uint64{unix.AF_UNSPEC, unix.SOCK_STREAM, 0}, "EAFNOSUPPORT"},
		{"socket AF_PACKET high bits", "socket", []uint64{0x1_0000_0000 | unix.AF_PACKET, sockRaw, 0}, "EAFNOSUPPORT"},
		{"socket AF_INET high bits", "socket", []uint64{0x1_0000_0000 | unix.AF_INET, sockRaw, 0}, "EAFNOSUPPORT"},
		{"socketpair AF_UNIX", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0, 0}, allow},
		{"socketpair AF_INET", "socketpair", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0, 0}, "EAFNOSUPPORT"},
		{"mount", "mount", []uint64{0, 0, 0, 0, 0}, "EPERM"},
		{"mount_setattr", "mount_setattr", nil, "EPERM"},
		{"bpf", "bpf", nil, "EPERM"},
		{"io_uring_setup", "io_uring_setup", []uint64{1, 0}, "EPERM"},
		{"io_uring_enter", "io_uring_enter", nil, "EPERM"},
		{"keyctl", "keyctl", nil, "EPERM"},
		{"open_by_handle_at", "open_by_handle_at", nil, "EPERM"},
		{"personality(0)", "personality", []uint64{0}, allow},
		{"personality(PER_LINUX32)", "personality", []uint64{8}, allow},
		{"personality(UNAME26)", "personality", []uint64{0x20000}, allow},
		{"personality(UNAME26|PER_LINUX32)", "personality", []uint64{0x20008}, allow},
		{"personality(query)", "personality", []uint64{0xffffffff}, allow},
		{"personality(READ_IMPLIES_EXEC)", "personality", []uint64{0x0400000}, "EPERM"},
		{"personality(ADDR_NO_RANDOMIZE)", "personality", []uint64{0x0040000}, "EPERM"},
		{"personality(1)", "personality", []uint64{1}, "EPERM"},
		{"personality(0xfffffffe)", "personality", []uint64{0xfffffffe}, "EPERM"},
		{"personality(1<<32)", "personality", []uint64{1 << 32}, "EPERM"},
		{"personality(0x20009)", "personality", []uint64{0x20009}, "EPERM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nr := tg.nr(t, tc.sys)
			got := run(t, vm, seccompData(nr, tg.audit, tc.args...))
			if want := tg.ret(t, tc.want); got != want {
				t.Errorf("%s nr %d args %#x: got %s, want %s", tg.goarch, nr, tc.args, tg.retString(got), tc.want)
			}
		})
	}
	t.Run("foreign ABIs", func(t *testing.T) { testVMForeign(t, tg, vm) })
}

// testVMForeign: a system call through any other ABI than the target's
// fails with ENOSYS, whatever its number (the rules are written in the
// target's numbers, which mean other calls elsewhere), and on x86_64 so
// does any x32 call.
func testVMForeign(t *testing.T, tg target, vm *bpf.VM) {
	enosys := tg.ret(t, "ENOSYS")
	for _, arch := range tg.foreign {
		for _, nr := range []int32{0, 1, 3, 20, 26, 39, 56, 63, 101, 117, 172, 221, 435, 0x40000000, -1} {
			if got := run(t, vm, seccompData(nr, arch)); got != enosys {
				t.Errorf("%s program, arch %#x nr %d: got %s, want ERRNO(ENOSYS)", tg.goarch, arch, nr, tg.retString(got))
			}
		}
	}
	if tg.goarch != "amd64" {
		return
	}
	for _, name := range []string{"read", "getpid", "ptrace", "openat", "execve"} {
		nr := 0x40000000 | tg.nr(t, name)
		if got := run(t, vm, seccompData(nr, tg.audit)); got != enosys {
			t.Errorf("x32 %s (nr %#x): got %s, want ERRNO(ENOSYS)", name, nr, tg.retString(got))
		}
	}
}

// TestVMEverySyscall goes through every system call number of every
// architecture (and the gaps and beyond): a call a rule denies outright
// fails with that rule's errno, numbered for the architecture, and a call
// no rule names is allowed. Calls with conditional rules are checked by
// TestVMDefaultRules.
func TestVMEverySyscall(t *testing.T) {
	forEachProgram(t, testVMEverySyscall)
}

func testVMEverySyscall(t *testing.T, tg target, prog []SockFilter) {
	vm := newVM(t, prog)
	deny := map[string]string{} // name -> errno of an unconditional rule
	conditional := map[string]bool{}
	for _, r := range DefaultRules() {
		if len(r.Conds) == 0 {
			deny[r.Syscall] = string(r.Errno)
		} else {
			conditional[r.Syscall] = true
		}
	}
	denied := 0
	for nr := int32(0); nr < 1024; nr++ {
		name := sysnum.Name(tg.goarch, uint32(nr))
		if conditional[name] {
			continue
		}
		want := allow
		if e, ok := deny[name]; ok {
			want = e
			denied++
		}
		if got := run(t, vm, seccompData(nr, tg.audit, 0, 0, 0, 0, 0, 0)); got != tg.ret(t, want) {
			t.Errorf("%s %s (nr %d): got %s, want %s", tg.goarch, name, nr, tg.retString(got), want)
		}
	}
	// Every unconditional rule was met, or names a call this architecture
	// does not have (and only those the target lists as absent).
	var missing []string
	for name := range deny {
		if _, ok := tg.sys[name]; !ok {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	absent := slices.Sorted(slices.Values(tg.absent))
	if !slices.Equal(missing, absent) {
		t.Errorf("%s: rules without such a system call %q, want %q", tg.goarch, missing, absent)
	}
	if denied != len(deny)-len(missing) {
		t.Errorf("%s: %d calls denied, want %d", tg.goarch, denied, len(deny)-len(missing))
	}
	for name := range conditional {
		if _, ok := tg.sys[name]; !ok {
			t.Errorf("%s has no system call %s, which a conditional rule names", tg.goarch, name)
		}
	}
}

// TestX32WithoutGuard documents that libseccomp itself already refuses x32
// numbers and foreign architectures (guardX32 is defence in depth against
// another libseccomp version): the unguarded program must agree.
func TestX32WithoutGuard(t *testing.T) {
	tg := targetOf(t, "amd64")
	prog := compileDefaultFor(t, "amd64")
	guard, err := guardX32(nil, tg.errnos)
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) < len(guard) {
		t.Fatal("program shorter than the guard")
	}
	for i := range guard {
		if prog[i] != guard[i] {
			t.Fatalf("program does not start with the x32 guard (instruction %d)", i)
		}
	}
	vm := newVM(t, prog[len(guard):])
	enosys := tg.ret(t, "ENOSYS")
	for _, nr := range []int32{0x40000000, 0x40000000 | 39, 0x40000000 | 101, 0x7fffffff} {
		if got := run(t, vm, seccompData(nr, auditArchX8664)); got != enosys {
			t.Errorf("libseccomp's program alone: x32 nr %#x -> %s, want ERRNO(ENOSYS)", nr, tg.retString(got))
		}
	}
	if got := run(t, vm, seccompData(20, auditArchI386)); got != enosys {
		t.Errorf("libseccomp's program alone: i386 getpid -> %s, want ERRNO(ENOSYS)", tg.retString(got))
	}
}

// TestNoX32GuardOnArm64: the x32 guard is x86_64's; an arm64 program must
// not start with it (it would compare arm64 calls with the x86_64 arch).
func TestNoX32GuardOnArm64(t *testing.T) {
	prog := compileDefaultFor(t, "arm64")
	if prog[1].K == auditArchX8664 {
		t.Fatal("arm64 program starts with the x32 guard")
	}
	for i, ins := range prog {
		if ins.Code == unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K && ins.K == auditArchAArch64 {
			return
		}
		if i > 4 {
			break
		}
	}
	t.Fatal("arm64 program does not begin by checking AUDIT_ARCH_AARCH64")
}

// TestVMSocketFamilies checks every family number up to AF_MAX and beyond.
func TestVMSocketFamilies(t *testing.T) {
	forEachProgram(t, testVMSocketFamilies)
}

func testVMSocketFamilies(t *testing.T, tg target, prog []SockFilter) {
	vm := newVM(t, prog)
	allowed := map[uint64]bool{unix.AF_UNIX: true, unix.AF_INET: true, unix.AF_INET6: true, unix.AF_NETLINK: true}
	socket, socketpair := tg.nr(t, "socket"), tg.nr(t, "socketpair")
	for fam := uint64(0); fam < 300; fam++ {
		want := "EAFNOSUPPORT"
		if allowed[fam] {
			want = allow
		}
		if got := run(t, vm, seccompData(socket, tg.audit, fam, unix.SOCK_STREAM, 0)); got != tg.ret(t, want) {
			t.Errorf("%s socket(%d): got %s, want %s", tg.goarch, fam, tg.retString(got), want)
		}
		want = "EAFNOSUPPORT"
		if fam == unix.AF_UNIX {
			want = allow
		}
		if got := run(t, vm, seccompData(socketpair, tg.audit, fam, unix.SOCK_STREAM, 0, 0)); got != tg.ret(t, want) {
			t.Errorf("%s socketpair(%d): got %s, want %s", tg.goarch, fam, tg.retString(got), want)
		}
	}
}

// TestVMCloneFlags tries every single flag bit of clone and unshare: the
// namespace flags are refused, each alone and with the others, the rest
// allowed.
func TestVMCloneFlags(t *testing.T) {
	forEachProgram(t, testVMCloneFlags)
}

func testVMCloneFlags(t *testing.T, tg target, prog []SockFilter) {
	vm := newVM(t, prog)
	const ns = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME
	for _, name := range []string{"clone", "unshare"} {
		nr := tg.nr(t, name)
		for bit := range 64 {
			flags := uint64(1) << bit
			want := allow
			if flags&ns != 0 {
				want = "EPERM"
			}
			if got := run(t, vm, seccompData(nr, tg.audit, flags)); got != tg.ret(t, want) {
				t.Errorf("%s %s(%#x): got %s, want %s", tg.goarch, name, flags, tg.retString(got), want)
			}
			if got := run(t, vm, seccompData(nr, tg.audit, flags|unix.CLONE_NEWUSER)); got != tg.ret(t, "EPERM") {
				t.Errorf("%s %s(%#x|CLONE_NEWUSER): got %s, want EPERM", tg.goarch, name, flags, tg.retString(got))
			}
		}
	}
}

// TestEmptyPolicy makes sure the VM harness is not trivially passing: with
// no rules every native call is allowed and foreign ones still refused.
func TestEmptyPolicy(t *testing.T) {
	for _, tg := range allTargets(t) {
		prog, err := compileFor(tg.goarch, nil)
		if err != nil {
			t.Fatal(err)
		}
		vm := newVM(t, prog)
		if got := run(t, vm, seccompData(tg.nr(t, "ptrace"), tg.audit)); got != retAllow {
			t.Errorf("%s empty policy: ptrace -> %s, want ALLOW", tg.goarch, tg.retString(got))
		}
		for _, arch := range tg.foreign {
			if got := run(t, vm, seccompData(20, arch)); got != tg.ret(t, "ENOSYS") {
				t.Errorf("%s empty policy: arch %#x getpid -> %s, want ERRNO(ENOSYS)", tg.goarch, arch, tg.retString(got))
			}
		}
	}
}

// TestDefaultRulesResolve: every system call of the policy is known to
// libseccomp on every architecture, except the ones the architecture does
// not have, so Compile's "skip unknown names" never applies.
func TestDefaultRulesResolve(t *testing.T) {
	for _, tg := range allTargets(t) {
		arch := targets[tg.goarch]
		for _, r := range DefaultRules() {
			nr, err := libseccomp.GetSyscallFromNameByArch(r.Syscall, arch)
			if slices.Contains(tg.absent, r.Syscall) {
				if err != nil || nr >= 0 {
					t.Errorf("%s %s: nr %d, err %v; want a negative pseudo number", tg.goarch, r.Syscall, nr, err)
				}
				continue
			}
			if err != nil || nr < 0 || uint32(nr) != tg.sys[r.Syscall] {
				t.Errorf("%s %s: libseccomp nr %d, err %v; x/sys nr %d", tg.goarch, r.Syscall, nr, err, tg.sys[r.Syscall])
			}
		}
	}
}

// TestCompileForUnknownArch: a program for an architecture the rules are
// not written for is an error, not a program.
func TestCompileForUnknownArch(t *testing.T) {
	if _, err := compileFor("riscv64", DefaultRules()); err == nil {
		t.Fatal("compiled a program for riscv64")
	}
}

func TestCompileErrors(t *testing.T) {
	if _, err := Compile([]Rule{{Syscall: "ptrace", Errno: "EBOGUS"}}); err == nil {
		t.Error("unknown errno accepted")
	}
	if _, err := Compile([]Rule{{Syscall: "ptrace", Errno: EPERM, Conds: []Cond{{Arg: 0, Op: OpGt, Value: 1}, {Arg: 0, Op: OpLt, Value: 5}}}}); err == nil {
		t.Error("unsupported condition accepted")
	}
	// A name libseccomp does not know is skipped, not an error.
	prog, err := Compile([]Rule{{Syscall: "no_such_syscall_jail", Errno: EPERM}})
	if err != nil {
		t.Fatalf("unknown syscall name: %v", err)
	}
	empty, err := Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prog, empty) {
		t.Error("unknown syscall name changed the program")
	}
	// A name libseccomp knows but that does not exist on this architecture
	// (an ARM-only call here) resolves to a negative pseudo number, which
	// libseccomp accepts and ignores.
	foreign := "arm_fadvise64_64"
	if runtime.GOARCH == "arm64" {
		foreign = "iopl"
	}
	if nr, err := libseccomp.GetSyscallFromName(foreign); err != nil || nr >= 0 {
		t.Fatalf("%s: nr %d, err %v; want a negative pseudo number", foreign, nr, err)
	}
	prog, err = Compile([]Rule{{Syscall: foreign, Errno: EPERM, Conds: []Cond{{Arg: 0, Op: OpNe, Value: 1}, {Arg: 0, Op: OpNe, Value: 2}}}})
	if err != nil {
		t.Fatalf("%s: %v", foreign, err)
	}
	if !slices.Equal(prog, empty) {
		t.Errorf("%s changed the program", foreign)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	prog := compileDefault(t)
	b := Marshal(prog)
	if len(b) != 8*len(prog) {
		t.Fatalf("Marshal: %d bytes for %d instructions", len(b), len(prog))
	}
	// Same bytes as the kernel's struct sock_filter array.
	if got := unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), len(b)); !slices.Equal(got, b) {
		t.Error("Marshal differs from the in-memory struct sock_filter layout")
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, prog) {
		t.Error("Unmarshal(Marshal(prog)) != prog")
	}
	if _, err := Unmarshal(b[:len(b)-3]); err == nil {
		t.Error("Unmarshal accepted a truncated program")
	}
}

// TestCompileTime reports how long Compile takes (it runs on every jail
// start) and fails if it is grossly slow.
func TestCompileTime(t *testing.T) {
	rules := DefaultRules()
	const n = 20
	var best time.Duration = 1 << 62
	var total time.Duration
	for range n {
		start := time.Now()
		if _, err := Compile(rules); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		total += d
		best = min(best, d)
	}
	prog := compileDefault(t)
	t.Logf("Compile(DefaultRules()): %d instructions, best %v, mean %v over %d runs", len(prog), best, total/n, n)
	if best > 100*time.Millisecond {
		t.Errorf("Compile is too slow: %v", best)
	}
}

func BenchmarkCompile(b *testing.B) {
	rules := DefaultRules()
	for b.Loop() {
		if _, err := Compile(rules); err != nil {
			b.Fatal(err)
		}
	}
}
