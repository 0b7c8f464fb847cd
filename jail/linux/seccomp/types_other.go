//go:build !linux

package seccomp

// SockFilter is one classic-BPF instruction (struct sock_filter), with the
// same layout as golang.org/x/sys/unix.SockFilter on Linux.
type SockFilter struct {
	Code uint16
	Jt   uint8
	Jf   uint8
	K    uint32
}
