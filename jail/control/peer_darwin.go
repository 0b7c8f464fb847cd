package control

import (
	"os"

	"golang.org/x/sys/unix"
)

// peerFDAllowed reports whether the other end of the unix socket fd is
// this user (LOCAL_PEERCRED). macOS has no user namespaces: a process in
// the Seatbelt sandbox is kept from the socket by its profile.
func peerFDAllowed(fd int) bool {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	return err == nil && int(cred.Uid) == os.Geteuid()
}
