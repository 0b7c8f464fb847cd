//go:build linux && cgo

package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	libseccomp "github.com/seccomp/libseccomp-golang"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retErrno = unix.SECCOMP_RET_ERRNO

	auditArchI386    = 0x40000003
	auditArchX8664   = 0xc000003e
	auditArchAArch64 = 0xc00000b7
)

func errnoRet(e unix.Errno) uint32 { return retErrno | uint32(e) }

func nativeAuditArch(t *testing.T) uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return auditArchX8664
	case "arm64":
		return auditArchAArch64
	}
	t.Fatalf("no AUDIT_ARCH for %s", runtime.GOARCH)
	return 0
}

// seccompData builds the input of the filter, struct seccomp_data
// {int nr; u32 arch; u64 instruction_pointer; u64 args[6]} (64 bytes).
// The kernel's BPF loads 32-bit words in native byte order, whereas the
// x/net/bpf VM (made for packets) loads them big-endian: so the struct is
// laid out natively, then every 32-bit word is stored big-endian, which
// makes each VM load see the value the kernel would see.
func seccompData(nr int32, arch uint32, args ...uint64) []byte {
	native := make([]byte, 64)
	binary.NativeEndian.PutUint32(native[0:], uint32(nr))
	binary.NativeEndian.PutUint32(native[4:], arch)
	binary.NativeEndian.PutUint64(native[8:], 0x401000)
	for i, a := range args {
		binary.NativeEndian.PutUint64(native[16+8*i:], a)
	}
	vm := make([]byte, 64)
	for off := 0; off < 64; off += 4 {
		binary.BigEndian.PutUint32(vm[off:], binary.NativeEndian.Uint32(native[off:]))
	}
	return vm
}

func newVM(t *testing.T, prog []SockFilter) *bpf.VM {
	t.Helper()
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

func retString(r uint32) string {
	switch {
	case r == retAllow:
		return "ALLOW"
	case r&unix.SECCOMP_RET_ACTION_FULL == retErrno:
		return fmt.Sprintf("ERRNO(%s)", unix.ErrnoName(unix.Errno(r&unix.SECCOMP_RET_DATA)))
	}
	return fmt.Sprintf("%#x", r)
}

func compileDefault(t *testing.T) []SockFilter {
	t.Helper()
	prog, err := Compile(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// programs are the default program as compiled here and as embedded in
// the binary (what jail actually loads on amd64).
func programs(t *testing.T) map[string][]SockFilter {
	out := map[string][]SockFilter{"compiled": compileDefault(t)}
	if len(embedded) > 0 {
		prog, err := Unmarshal(embedded)
		if err != nil {
			t.Fatal(err)
		}
		out["embedded"] = prog
	}
	return out
}

func TestVMDefaultRules(t *testing.T) {
	for name, prog := range programs(t) {
		t.Run(name, func(t *testing.T) { testVMDefaultRules(t, prog) })
	}
}

func testVMDefaultRules(t *testing.T, prog []SockFilter) {
	vm := newVM(t, prog)
	native := nativeAuditArch(t)
	const notAllow = 1    // sentinel: any action but ALLOW
	const foreignArch = 1 // sentinel: the 64-bit architecture we are not
	sockRaw := uint64(unix.SOCK_RAW | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK)
	tests := []struct {
		name      string
		nr        int32
		arch      uint32 // 0: native
		args      []uint64
		want      uint32
		amd64Only bool
	}{
		{"ptrace", unix.SYS_PTRACE, 0, []uint64{unix.PTRACE_TRACEME}, errnoRet(unix.EPERM), false},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV, 0, []uint64{1, 0, 1, 0, 1, 0}, errnoRet(unix.EPERM), false},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, 0, []uint64{1, 0, 1, 0, 1, 0}, errnoRet(unix.EPERM), false},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD, 0, []uint64{3, 0, 0}, errnoRet(unix.EPERM), false},
		{"pidfd_open", unix.SYS_PIDFD_OPEN, 0, []uint64{1, 0}, retAllow, false},
		{"read", unix.SYS_READ, 0, []uint64{0, 0, 0}, retAllow, false},
		{"getpid", unix.SYS_GETPID, 0, nil, retAllow, false},
		{"clone CLONE_NEWUSER", unix.SYS_CLONE, 0, []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, errnoRet(unix.EPERM), false},
		{"clone CLONE_NEWNET|thread flags", unix.SYS_CLONE, 0, []uint64{0x3d0f00 | unix.CLONE_NEWNET}, errnoRet(unix.EPERM), false},
		{"clone CLONE_NEWTIME", unix.SYS_CLONE, 0, []uint64{unix.CLONE_NEWTIME}, errnoRet(unix.EPERM), false},
		{"clone thread flags", unix.SYS_CLONE, 0, []uint64{0x3d0f00}, retAllow, false},
		{"clone fork", unix.SYS_CLONE, 0, []uint64{uint64(unix.SIGCHLD)}, retAllow, false},
		{"clone3", unix.SYS_CLONE3, 0, []uint64{0, 88}, errnoRet(unix.ENOSYS), false},
		{"unshare CLONE_NEWNS", unix.SYS_UNSHARE, 0, []uint64{unix.CLONE_NEWNS}, errnoRet(unix.EPERM), false},
		{"unshare CLONE_NEWUSER", unix.SYS_UNSHARE, 0, []uint64{unix.CLONE_NEWUSER}, errnoRet(unix.EPERM), false},
		{"unshare CLONE_NEWCGROUP", unix.SYS_UNSHARE, 0, []uint64{unix.CLONE_NEWCGROUP}, errnoRet(unix.EPERM), false},
		{"unshare CLONE_FILES", unix.SYS_UNSHARE, 0, []uint64{unix.CLONE_FILES}, retAllow, false},
		{"ioctl TIOCSTI", unix.SYS_IOCTL, 0, []uint64{0, 0x5412, 0}, errnoRet(unix.EPERM), false},
		{"ioctl TIOCSTI high bits", unix.SYS_IOCTL, 0, []uint64{0, 0xdead00005412, 0}, errnoRet(unix.EPERM), false},
		{"ioctl TIOCLINUX", unix.SYS_IOCTL, 0, []uint64{0, 0x541C, 0}, errnoRet(unix.EPERM), false},
		{"ioctl TCGETS", unix.SYS_IOCTL, 0, []uint64{0, unix.TCGETS, 0}, retAllow, false},
		{"ioctl 0x15412", unix.SYS_IOCTL, 0, []uint64{0, 0x15412, 0}, retAllow, false},
		{"socket AF_INET", unix.SYS_SOCKET, 0, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, retAllow, false},
		{"socket AF_INET6", unix.SYS_SOCKET, 0, []uint64{unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, 0}, retAllow, false},
		{"socket AF_UNIX", unix.SYS_SOCKET, 0, []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, retAllow, false},
		{"socket AF_PACKET", unix.SYS_SOCKET, 0, []uint64{unix.AF_PACKET, sockRaw, 0}, errnoRet(unix.EAFNOSUPPORT), false},
		{"socket AF_NETLINK ROUTE", unix.SYS_SOCKET, 0, []uint64{unix.AF_NETLINK, sockRaw, unix.NETLINK_ROUTE}, retAllow, false},
		{"socket AF_NETLINK AUDIT", unix.SYS_SOCKET, 0, []uint64{unix.AF_NETLINK, sockRaw, unix.NETLINK_AUDIT}, errnoRet(unix.EPERM), false},
		{"socket AF_NETLINK NETFILTER", unix.SYS_SOCKET, 0, []uint64{unix.AF_NETLINK, sockRaw, unix.NETLINK_NETFILTER}, errnoRet(unix.EPERM), false},
		{"socket AF_NETLINK proto high bits", unix.SYS_SOCKET, 0, []uint64{unix.AF_NETLINK, sockRaw, 1 << 32}, errnoRet(unix.EPERM), false},
		{"socket AF_VSOCK", unix.SYS_SOCKET, 0, []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, errnoRet(unix.EAFNOSUPPORT), false},
		{"socket 999", unix.SYS_SOCKET, 0, []uint64{999, unix.SOCK_STREAM, 0}, errnoRet(unix.EAFNOSUPPORT), false},
		{"socket AF_UNSPEC", unix.SYS_SOCKET, 0, []uint64{unix.AF_UNSPEC, unix.SOCK_STREAM, 0}, errnoRet(unix.EAFNOSUPPORT), false},
		{"socket AF_PACKET high bits", unix.SYS_SOCKET, 0, []uint64{0x1_0000_0000 | unix.AF_PACKET, sockRaw, 0}, errnoRet(unix.EAFNOSUPPORT), false},
		{"socket AF_INET high bits", unix.SYS_SOCKET, 0, []uint64{0x1_0000_0000 | unix.AF_INET, sockRaw, 0}, errnoRet(unix.EAFNOSUPPORT), false},
		{"socketpair AF_UNIX", unix.SYS_SOCKETPAIR, 0, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0, 0}, retAllow, false},
		{"socketpair AF_INET", unix.SYS_SOCKETPAIR, 0, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0, 0}, errnoRet(unix.EAFNOSUPPORT), false},
		{"mount", unix.SYS_MOUNT, 0, []uint64{0, 0, 0, 0, 0}, errnoRet(unix.EPERM), false},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, 0, nil, errnoRet(unix.EPERM), false},
		{"bpf", unix.SYS_BPF, 0, nil, errnoRet(unix.EPERM), false},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, 0, []uint64{1, 0}, errnoRet(unix.EPERM), false},
		{"io_uring_enter", unix.SYS_IO_URING_ENTER, 0, nil, errnoRet(unix.EPERM), false},
		{"keyctl", unix.SYS_KEYCTL, 0, nil, errnoRet(unix.EPERM), false},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, 0, nil, errnoRet(unix.EPERM), false},
		{"personality(0)", unix.SYS_PERSONALITY, 0, []uint64{0}, retAllow, false},
		{"personality(PER_LINUX32)", unix.SYS_PERSONALITY, 0, []uint64{8}, retAllow, false},
		{"personality(UNAME26)", unix.SYS_PERSONALITY, 0, []uint64{0x20000}, retAllow, false},
		{"personality(UNAME26|PER_LINUX32)", unix.SYS_PERSONALITY, 0, []uint64{0x20008}, retAllow, false},
		{"personality(query)", unix.SYS_PERSONALITY, 0, []uint64{0xffffffff}, retAllow, false},
		{"personality(READ_IMPLIES_EXEC)", unix.SYS_PERSONALITY, 0, []uint64{0x0400000}, errnoRet(unix.EPERM), false},
		{"personality(ADDR_NO_RANDOMIZE)", unix.SYS_PERSONALITY, 0, []uint64{0x0040000}, errnoRet(unix.EPERM), false},
		{"personality(1)", unix.SYS_PERSONALITY, 0, []uint64{1}, errnoRet(unix.EPERM), false},
		{"personality(0xfffffffe)", unix.SYS_PERSONALITY, 0, []uint64{0xfffffffe}, errnoRet(unix.EPERM), false},
		{"personality(1<<32)", unix.SYS_PERSONALITY, 0, []uint64{1 << 32}, errnoRet(unix.EPERM), false},
		{"personality(0x20009)", unix.SYS_PERSONALITY, 0, []uint64{0x20009}, errnoRet(unix.EPERM), false},
		{"x32 getpid", 0x40000000 | 39, auditArchX8664, nil, errnoRet(unix.ENOSYS), true},
		{"x32 read", 0x40000000 | 0, auditArchX8664, nil, errnoRet(unix.ENOSYS), true},
		{"x32 ptrace", 0x40000000 | 521, auditArchX8664, nil, errnoRet(unix.ENOSYS), true},
		{"i386 ptrace", 26, auditArchI386, nil, notAllow, false},
		{"i386 read", 3, auditArchI386, nil, notAllow, false},
		{"i386 getpid", 20, auditArchI386, nil, errnoRet(unix.ENOSYS), false},
		// The other 64-bit architecture: AArch64 on amd64, x86_64 on arm64.
		{"foreign 64-bit arch getpid", 172, foreignArch, nil, notAllow, false},
		{"foreign 64-bit arch read", 63, foreignArch, nil, notAllow, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.amd64Only && runtime.GOARCH != "amd64" {
				t.Skipf("x86_64-specific case, running on %s", runtime.GOARCH)
			}
			arch := tc.arch
			switch arch {
			case 0:
				arch = native
			case foreignArch:
				arch = auditArchAArch64
				if native == auditArchAArch64 {
					arch = auditArchX8664
				}
			}
			got := run(t, vm, seccompData(tc.nr, arch, tc.args...))
			switch {
			case tc.want == notAllow:
				if got == retAllow {
					t.Errorf("nr %#x arch %#x: got ALLOW, want anything else", tc.nr, arch)
				}
			case got != tc.want:
				t.Errorf("nr %#x arch %#x args %#x: got %s, want %s", tc.nr, arch, tc.args, retString(got), retString(tc.want))
			}
		})
	}
}

// TestX32WithoutGuard documents that libseccomp itself already refuses x32
// numbers and foreign architectures (guardX32 is defence in depth against
// another libseccomp version): the unguarded program must agree.
func TestX32WithoutGuard(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("x32 exists only on x86_64, running on %s", runtime.GOARCH)
	}
	prog := compileDefault(t)
	guard, err := guardX32(nil)
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
	for _, nr := range []int32{0x40000000, 0x40000000 | 39, 0x40000000 | 101, 0x7fffffff} {
		if got := run(t, vm, seccompData(nr, auditArchX8664)); got != errnoRet(unix.ENOSYS) {
			t.Errorf("libseccomp's program alone: x32 nr %#x -> %s, want ERRNO(ENOSYS)", nr, retString(got))
		}
	}
	if got := run(t, vm, seccompData(20, auditArchI386)); got != errnoRet(unix.ENOSYS) {
		t.Errorf("libseccomp's program alone: i386 getpid -> %s, want ERRNO(ENOSYS)", retString(got))
	}
}

// TestVMSocketFamilies checks every family number up to AF_MAX and beyond.
func TestVMSocketFamilies(t *testing.T) {
	for name, prog := range programs(t) {
		t.Run(name, func(t *testing.T) { testVMSocketFamilies(t, prog) })
	}
}

func testVMSocketFamilies(t *testing.T, prog []SockFilter) {
	vm := newVM(t, prog)
	native := nativeAuditArch(t)
	allowed := map[uint64]bool{unix.AF_UNIX: true, unix.AF_INET: true, unix.AF_INET6: true, unix.AF_NETLINK: true}
	for fam := uint64(0); fam < 300; fam++ {
		want := errnoRet(unix.EAFNOSUPPORT)
		if allowed[fam] {
			want = retAllow
		}
		if got := run(t, vm, seccompData(unix.SYS_SOCKET, native, fam, unix.SOCK_STREAM, 0)); got != want {
			t.Errorf("socket(%d): got %s, want %s", fam, retString(got), retString(want))
		}
	}
}

// TestEmptyPolicy makes sure the VM harness is not trivially passing: with
// no rules everything native is allowed.
func TestEmptyPolicy(t *testing.T) {
	prog, err := Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	vm := newVM(t, prog)
	native := nativeAuditArch(t)
	if got := run(t, vm, seccompData(unix.SYS_PTRACE, native)); got != retAllow {
		t.Errorf("empty policy: ptrace -> %s, want ALLOW", retString(got))
	}
	if got := run(t, vm, seccompData(20, auditArchI386)); got != errnoRet(unix.ENOSYS) {
		t.Errorf("empty policy: i386 getpid -> %s, want ERRNO(ENOSYS)", retString(got))
	}
}

// TestDefaultRulesResolve: on amd64 every system call of the policy must be
// known to libseccomp, so Compile's "skip unknown names" never applies.
func TestDefaultRulesResolve(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("some rules name x86-only system calls (iopl, ...); running on %s", runtime.GOARCH)
	}
	for _, r := range DefaultRules() {
		nr, err := libseccomp.GetSyscallFromName(r.Syscall)
		if err != nil || nr < 0 {
			t.Errorf("%s: nr %d, err %v", r.Syscall, nr, err)
		}
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
