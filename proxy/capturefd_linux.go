package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
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
	fc, err := net.FileConn(f) // a duplicate: f is closed either way
	f.Close()
	if err != nil {
		return nil, nil, &handoffError{err}
	}
	hc, err := newHandedConn(fc)
	if err != nil {
		fc.Close()
		return nil, nil, &handoffError{err}
	}
	return hc, buf[:n], nil
}

// handedConn is a handed socket that the proxy reads and writes without
// ever waiting in the kernel. The jailed process that sent it may keep a
// copy, which shares the open file and so its flags: it can make the
// socket blocking again after the proxy made it non-blocking, and a read
// or write left to the file's flags would then wait in the kernel, where
// no deadline reaches it and a close waits for it (the proxy's shutdown,
// and with it jail, would never end). Every call asks the kernel not to
// wait (MSG_DONTWAIT) and waits in the runtime's poller instead.
type handedConn struct {
	net.Conn // only its addresses, deadlines and Close
	rc       syscall.RawConn
}

func newHandedConn(c net.Conn) (*handedConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a socket the proxy can read")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &handedConn{Conn: c, rc: rc}, nil
}

func (c *handedConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if rerr := c.rc.Read(func(fd uintptr) bool {
		for {
			n, _, err = unix.Recvfrom(int(fd), p, unix.MSG_DONTWAIT)
			if err != unix.EINTR {
				return err != unix.EAGAIN
			}
		}
	}); rerr != nil {
		return 0, rerr
	}
	switch {
	case err != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Addr: c.LocalAddr(), Err: os.NewSyscallError("recvfrom", err)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *handedConn) Write(p []byte) (int, error) {
	var n int
	var err error
	if werr := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			var m int
			m, err = unix.SendmsgN(int(fd), p[n:], nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
			switch {
			case err == unix.EINTR:
			case err != nil:
				return err != unix.EAGAIN
			default:
				n += m
			}
		}
		return true
	}); werr != nil {
		return n, werr
	}
	if err != nil {
		return n, &net.OpError{Op: "write", Net: "tcp", Addr: c.LocalAddr(), Err: os.NewSyscallError("sendmsg", err)}
	}
	return n, nil
}

// Close closes the socket without lingering: a copy the jailed process
// kept may have asked for a linger, which would make the last close wait
// in the kernel for a peer that reads nothing. Once the proxy's is the
// last copy, nobody can ask for it again between the two calls.
func (c *handedConn) Close() error {
	c.rc.Control(func(fd uintptr) {
		unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{})
	})
	return c.Conn.Close()
}

// CloseWrite half-closes the socket.
func (c *handedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
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
