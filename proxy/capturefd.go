package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"time"
)

// handoffError is a descriptor sent to the capture socket that is not a
// socket the proxy serves.
type handoffError struct{ err error }

func (e *handoffError) Error() string { return "the socket handed over: " + e.err.Error() }

// handOffMark is the one byte the jail's bridge sends with a client
// socket it hands to the HTTP or SOCKS socket.
const handOffMark = "\x00"

// takeHandedSocket reads the first message of a connection to the HTTP or
// SOCKS socket and returns the connection to serve in c's place. The
// jail's bridge sends the TCP socket it accepted on the proxy port, with
// handOffMark alone: that socket is returned and c closed, so that the
// proxy reads and writes the client's socket itself and no byte is
// copied through the bridge. A connection without a descriptor is served
// itself, the bytes read put back in front.
//
// Any jailed process can reach these sockets: a descriptor is checked as
// the capture's is (one connected TCP socket, anything else refused and
// closed), and one sent with other bytes than the mark is refused too.
func takeHandedSocket(c net.Conn, d time.Duration) (net.Conn, error) {
	conn, pre, err := takeCapturedSocket(c, d)
	switch {
	case err != nil:
		return nil, err
	case conn != c && string(pre) != handOffMark:
		conn.Close()
		return nil, &handoffError{errors.New("sent with other bytes than the bridge's mark")}
	case conn != c:
		c.Close() // the bridge is done with it
		return conn, nil
	case len(pre) == 0:
		return c, nil
	}
	if w, ok := c.(*watchedConn); ok {
		return &watchedConn{Conn: &prefixedConn{Conn: w.Conn, r: io.MultiReader(bytes.NewReader(pre), w.Conn)}}, nil
	}
	return &prefixedConn{Conn: c, r: io.MultiReader(bytes.NewReader(pre), c)}, nil
}

// prefixedConn is a connection whose reads return bytes already read
// from it first.
type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the connection when it can.
func (c *prefixedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
