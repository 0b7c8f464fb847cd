package seccomp

// int80 makes an ia32 system call with int $0x80 (int80_linux_amd64.s) and
// returns the raw result (a negated errno on failure).
func int80(nr, a1, a2, a3 uintptr) uintptr

// ia32Getpid calls getpid through the ia32 ABI (nr 20 in the i386 table).
func ia32Getpid() (ret int32, supported bool) {
	return int32(int80(20, 0, 0, 0)), true
}
