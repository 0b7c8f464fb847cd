package control

import (
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// peerAllowed reports whether the other end of c is this user, in this
// user namespace: a process of this uid inside a jail is in another one
// (bubblewrap makes it), and is refused too. What cannot be checked is
// refused.
func peerAllowed(c net.Conn) bool {
	cred, ok := peerCred(c)
	if !ok || int(cred.Uid) != os.Geteuid() || cred.Pid <= 0 {
		return false
	}
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return false
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(int(cred.Pid)) + "/ns/user")
	return err == nil && theirs == own
}

// peerCred is the SO_PEERCRED of a unix socket connection: the peer's
// credentials when it connected (or, for a client, when the server
// listened).
func peerCred(c net.Conn) (*unix.Ucred, bool) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return nil, false
	}
	return cred, true
}
