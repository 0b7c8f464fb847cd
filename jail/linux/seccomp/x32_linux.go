//go:build linux && cgo

package seccomp

import (
	"errors"

	"golang.org/x/sys/unix"
)

// x32SyscallBit marks x32 system call numbers on x86_64: they come with
// AUDIT_ARCH_X86_64 like native calls, so the arch check alone lets them in.
const x32SyscallBit = 0x40000000

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
)

// guardX32 prepends to an x86_64 program a check that refuses x32 system
// calls (nr >= 0x40000000) with BadArchErrno, numbered as in errnos
// (x86_64's). libseccomp (2.5.4 at least) already emits such a check after
// its arch check, but libseccomp is linked dynamically, so the guard keeps
// the guarantee whatever version is loaded. Jumps in classic BPF are
// relative and forward, so prepending does not change the meaning of the
// original program. nr == -1 (0xffffffff) is refused too, which is
// harmless: the kernel answers ENOSYS to it anyway.
func guardX32(prog []SockFilter, errnos map[string]uint32) ([]SockFilter, error) {
	e, ok := errnos[string(BadArchErrno)]
	if !ok {
		return nil, errors.New("unknown errno " + string(BadArchErrno))
	}
	guard := []SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offArch},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: unix.AUDIT_ARCH_X86_64},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offNr},
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: 0, Jf: 1, K: x32SyscallBit},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | e},
	}
	return append(guard, prog...), nil
}
