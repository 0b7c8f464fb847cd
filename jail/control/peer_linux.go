package control

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// peerFDAllowed reports whether the other end of the unix socket fd is
// this user, in this user namespace: a process of this uid inside a jail
// is in another one (bubblewrap makes it), and is refused too. The peer's
// user namespace is read through its PID; where the kernel gives a pidfd
// of the peer (Linux >= 6.5), the peer is then checked to be still alive,
// so that the PID read was not another process's, reused meanwhile.
func peerFDAllowed(fd int) bool {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || int(cred.Uid) != os.Geteuid() || cred.Pid <= 0 {
		return false
	}
	pidfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	switch {
	case err == nil:
		defer unix.Close(pidfd)
	case errors.Is(err, unix.ENOPROTOOPT):
		pidfd = -1
	default:
		return false
	}
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return false
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(int(cred.Pid)) + "/ns/user")
	if err != nil || theirs != own {
		return false
	}
	return pidfd < 0 || unix.PidfdSendSignal(pidfd, 0, nil, 0) == nil
}
