//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// SockFilter is one classic-BPF instruction (struct sock_filter). On Linux
// it is unix.SockFilter.
type SockFilter = unix.SockFilter
