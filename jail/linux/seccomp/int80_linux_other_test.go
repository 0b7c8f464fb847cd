//go:build linux && !amd64

package seccomp

// ia32Getpid: there is no ia32 ABI to probe outside x86_64.
func ia32Getpid() (ret int32, supported bool) { return 0, false }
