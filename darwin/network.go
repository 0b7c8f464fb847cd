package darwin

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/proxy"
)

// socksVersion is the first byte a SOCKS5 client sends; an HTTP proxy
// request starts with a method name, never with it.
const socksVersion = 0x05

// firstByteWait bounds how long a new connection may stay silent before
// it is dropped: the proxy's own timeouts start once it is dispatched.
const firstByteWait = 30 * time.Second

// Listen opens the proxy's loopback listener. Its port goes into the plan
// before the profile is generated: it is the only port the jail reaches.
func Listen() (net.Listener, int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, fmt.Errorf("starting the proxy on 127.0.0.1: %w", err)
	}
	return l, l.Addr().(*net.TCPAddr).Port, nil
}

// Network is a macOS jail's network: the proxy serving HTTP and SOCKS5 on
// one loopback port.
type Network struct {
	srv   *proxy.Server
	log   *proxy.Log
	split *splitListener
}

// Prepare makes the session directory, the jail's private temp dir and
// the CA bundle (the host's CAs and the jail CA, creating the CA on first
// use).
func Prepare(p *Plan) error {
	if err := os.Mkdir(p.SessionDir, 0o700); err != nil {
		return fmt.Errorf("creating the session directory: %w", err)
	}
	if err := os.Mkdir(p.TempDir, 0o700); err != nil {
		return fmt.Errorf("creating the jail's temp dir: %w", err)
	}
	if p.NoNetwork {
		return nil
	}
	if _, err := proxy.LoadOrCreateCA(p.CADir); err != nil {
		return fmt.Errorf("creating the jail CA in %s: %w", p.CADir, err)
	}
	return jail.WriteCABundle(p.Bundle, filepath.Join(p.CADir, "ca.pem"), p.HostCAFile)
}

// StartNetwork serves the plan's proxy on l: decisions by the policy's
// rules, TLS intercepted with the per-user CA, secrets swapped back on
// the wire, every decision in the log.
func StartNetwork(p *Plan, l net.Listener, warn io.Writer) (*Network, error) {
	ca, err := proxy.LoadOrCreateCA(p.CADir)
	if err != nil {
		return nil, fmt.Errorf("loading the jail CA in %s: %w", p.CADir, err)
	}
	n := &Network{log: proxy.OpenLogOrWarn(p.StateDir, warn)}
	n.srv, err = proxy.New(proxy.Config{
		Rules: proxy.Rules{
			Allow: p.Rules.Allow, Deny: p.Rules.Deny, Ask: p.Rules.Ask, Unknown: p.Rules.Unknown,
			Hosts: p.Rules.Hosts, Passthrough: p.Rules.Passthrough,
		},
		CA: ca, Log: n.log, Session: p.Session, Secrets: p.Secrets, DenyCommands: p.DenyCommands,
	})
	if err != nil {
		n.log.Close()
		return nil, fmt.Errorf("starting the proxy: %w", err)
	}
	n.split = newSplitListener(l)
	go n.srv.ServeHTTP(n.split.http)
	go n.srv.ServeSOCKS(n.split.socks)
	return n, nil
}

// Close stops the proxy and returns the one-line summary of what it
// denied ("" when nothing was).
func (n *Network) Close() string {
	if n == nil {
		return ""
	}
	n.split.Close()
	summary := proxy.Summary(n.srv.Denied())
	n.srv.Close()
	n.log.Close()
	return summary
}

// splitListener hands each connection of one listener to the HTTP or the
// SOCKS5 side by its first byte, so that one port, the only one the
// profile opens, serves both.
type splitListener struct {
	l           net.Listener
	http, socks *chanListener
	once        sync.Once
}

func newSplitListener(l net.Listener) *splitListener {
	done := make(chan struct{})
	s := &splitListener{l: l,
		http:  &chanListener{c: make(chan net.Conn), done: done, addr: l.Addr()},
		socks: &chanListener{c: make(chan net.Conn), done: done, addr: l.Addr()},
	}
	go s.run(done)
	return s
}

func (s *splitListener) run(done chan struct{}) {
	defer s.once.Do(func() { close(done) })
	for {
		c, err := s.l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go s.dispatch(c, done)
	}
}

// dispatch reads the first byte and queues the connection on its side.
func (s *splitListener) dispatch(c net.Conn, done chan struct{}) {
	c.SetReadDeadline(time.Now().Add(firstByteWait))
	r := bufio.NewReader(c)
	first, err := r.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	side := s.http
	if first[0] == socksVersion {
		side = s.socks
	}
	select {
	case side.c <- &peekedConn{Conn: c, r: r}:
	case <-done:
		c.Close()
	}
}

// Close closes the listener and both sides.
func (s *splitListener) Close() error {
	err := s.l.Close()
	s.once.Do(func() { close(s.http.done) })
	return err
}

// chanListener is one side of a splitListener.
type chanListener struct {
	c    chan net.Conn
	done chan struct{}
	addr net.Addr
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error   { return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

// peekedConn is a connection whose first bytes were read ahead.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection when it can.
func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
