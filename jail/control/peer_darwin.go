package control

import (
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// peerAllowed reports whether the other end of c is this user
// (LOCAL_PEERCRED). macOS has no user namespaces: a process in the
// Seatbelt sandbox is kept from the socket by its profile. What cannot
// be checked is refused.
func peerAllowed(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Xucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return int(cred.Uid) == os.Geteuid()
}
