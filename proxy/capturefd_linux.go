package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// takeCapturedSocket reads the first message of a connection to the
// capture socket. The jail's bridge sends the TCP socket it accepted with
// the line that names its original destination, so that the proxy reads
// and writes the client's socket itself and no byte is copied through the
// bridge. It returns the connection to serve (that socket, or c when the
// message carried none) and the bytes read from c.
//
// Any jailed process can write to the capture socket, and so send any
// descriptor it holds: one that is not a connected TCP socket (a file, a
// pipe, a unix or UDP socket), or more than one, refuses the connection,
// and every descriptor received is closed.
func takeCapturedSocket(c net.Conn, d time.Duration) (net.Conn, []byte, error) {
	uc := unixConnOf(c)
	if uc == nil {
		return c, nil, nil
	}
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, maxCaptureHeader+1)
	oob := make([]byte, unix.CmsgSpace(4)) // one descriptor; the kernel drops the rest (MSG_CTRUNC)
	n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
	if n == 0 && oobn == 0 && err != nil {
		return nil, nil, err
	}
	if oobn == 0 && flags&unix.MSG_CTRUNC == 0 {
		return c, buf[:n], nil
	}
	fds, err := receivedFDs(oob[:oobn])
	if err == nil && (len(fds) != 1 || flags&unix.MSG_CTRUNC != 0) {
		err = errors.New("more than one descriptor")
	}
	if err == nil {
		err = connectedTCP(fds[0])
	}
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, &handoffError{err}
	}
	f := os.NewFile(uintptr(fds[0]), "captured")
	tc, err := net.FileConn(f) // a duplicate: f is closed either way
	f.Close()
	if err != nil {
		return nil, nil, &handoffError{err}
	}
	return tc, buf[:n], nil
}

// unixConnOf is the unix connection under c, or nil.
func unixConnOf(c net.Conn) *net.UnixConn {
	if w, ok := c.(*watchedConn); ok {
		c = w.Conn
	}
	uc, _ := c.(*net.UnixConn)
	return uc
}

// receivedFDs are the descriptors of every SCM_RIGHTS message in oob.
func receivedFDs(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return fds, err
		}
		fds = append(fds, got...)
	}
	if len(fds) == 0 {
		return nil, errors.New("a control message without a descriptor")
	}
	return fds, nil
}

// connectedTCP checks that fd is a connected TCP socket over IPv4 or
// IPv6 (or Multipath TCP, which a client may ask for and which Go's
// listeners offer).
func connectedTCP(fd int) error {
	var v [3]int
	for i, opt := range []int{unix.SO_TYPE, unix.SO_DOMAIN, unix.SO_PROTOCOL} {
		var err error
		if v[i], err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt); err != nil {
			return fmt.Errorf("not a socket: %w", err)
		}
	}
	typ, dom, proto := v[0], v[1], v[2]
	if typ != unix.SOCK_STREAM || (dom != unix.AF_INET && dom != unix.AF_INET6) || (proto != unix.IPPROTO_TCP && proto != unix.IPPROTO_MPTCP) {
		return errors.New("not a TCP socket")
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return fmt.Errorf("not connected: %w", err)
	}
	return nil
}
