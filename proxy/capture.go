package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// maxCaptureHeader caps the line that names a captured connection's
// original destination.
const maxCaptureHeader = 64

// ServeCapture serves connections that the jail's bridge captured without
// the client asking for a proxy: each starts with one line, the original
// destination as "ip:port\n", sent with the client's socket itself (see
// takeCapturedSocket) or followed by the client's bytes. A captured
// connection is decided like a CONNECT to the name the client itself
// sends (a TLS ClientHello's server name, a plain HTTP request's Host
// header) or, when it sends neither, to the IP literal, which the rules
// refuse unless they name it. A destination among the synthetic addresses
// of the jail's resolver (see ServeDNS) is decided by the name it was
// given, and a name the client sends must be that one. The line is
// written by the bridge but any jailed process can reach the socket and
// write its own: it decides nothing that the client could not have asked
// for in a CONNECT (or a query to the resolver).
func (s *Server) ServeCapture(l net.Listener) error { return s.serve(l, s.serveCaptureConn, false) }

func (s *Server) serveCaptureConn(c net.Conn) {
	e := Entry{Time: time.Now(), Method: "CAPTURE", Scheme: "tcp"}
	conn, pre, err := takeCapturedSocket(c, s.timeouts.Header)
	if err != nil {
		e.Verdict, e.Reason = verdictDeny, "invalid host"
		var he *handoffError
		if errors.As(err, &he) {
			e.Reason = "invalid capture: " + err.Error()
		}
		s.record(e)
		return
	}
	if conn != c {
		c.Close() // the bridge is done with it
		wc := &watchedConn{Conn: conn}
		if !s.track(wc) {
			conn.Close()
			return
		}
		defer s.untrack(wc)
		defer wc.Close()
		c = wc
	}
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(pre), c), readBufSize)
	dst, err := readCaptureHeader(c, br, s.timeouts.Header)
	if err != nil {
		e.Verdict, e.Reason = verdictDeny, "invalid host"
		s.record(e)
		return
	}
	port := int(dst.Port())
	sent := capturedName(c, br, s)
	e.Host, e.Port = sent, port
	if reason := s.sec().inHostName(sent); reason != "" {
		e.Host, e.Verdict, e.Rule, e.Reason = s.sec().redactString(sent), verdictDeny, "secret", reason
		s.record(e)
		return
	}
	host, reason := s.capturedHost(dst.Addr(), sent)
	if reason != "" {
		e.Host, e.Verdict, e.Reason = host, verdictDeny, reason
		s.record(e)
		return
	}
	e.Host = host
	t, r := s.check(s.ctx, host, port, true, heldBy{c, br, e})
	if r != nil {
		if n, ok := normalizeHost(host); ok {
			e.Host = n.name
		}
		e.Verdict, e.Rule, e.Reason = r.verdict, r.rule, r.reason
		s.record(e)
		return
	}
	e.Host, e.Rule, e.Verdict = t.norm.name, t.rule, verdictAllow
	s.open(c, br, t, e, func(err error) error { return err })
}

// capturedHost is the host a captured connection to ip is decided by:
// for a synthetic address, the name the jail's resolver gave it, which
// the name the client sent (if any) must equal; otherwise the name the
// client sent, or else the IP literal. A reason is returned when the
// connection is refused before any rule: a synthetic address no name was
// given, or a client naming another host than the one it resolved.
func (s *Server) capturedHost(ip netip.Addr, sent string) (host, reason string) {
	if !isSynthetic(ip) {
		if sent == "" {
			return ip.String(), ""
		}
		return sent, ""
	}
	name, ok := s.names.lookup(ip)
	if !ok {
		return ip.String(), "synthetic address given to no name"
	}
	if sent == "" {
		return name, ""
	}
	if n, ok := normalizeHost(sent); !ok || n.name != name {
		return name, fmt.Sprintf("the client named %s, not %s, which resolved to %s", strconv.Quote(sent), name, ip)
	}
	return name, ""
}

// namedHost is host or, for a synthetic address, the name the jail's
// resolver gave it: a client that resolved the name itself and then asked
// the proxy for the address (SOCKS5 without remote resolution) asked for
// the name. A synthetic address given to no name comes back with a reason.
func (s *Server) namedHost(host string) (string, string) {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil || !isSynthetic(a) {
		return host, ""
	}
	if name, ok := s.names.lookup(a); ok {
		return name, ""
	}
	return host, "synthetic address given to no name"
}

// readCaptureHeader reads the "ip:port\n" line before a captured stream.
func readCaptureHeader(c net.Conn, br *bufio.Reader, d time.Duration) (netip.AddrPort, error) {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	var line []byte
	for len(line) <= maxCaptureHeader {
		b, err := br.ReadByte()
		if err != nil {
			return netip.AddrPort{}, err
		}
		if b == '\n' {
			ap, err := netip.ParseAddrPort(string(line))
			if err == nil && (ap.Port() == 0 || ap.Addr().Zone() != "") {
				err = errors.New("captured destination: no port, or a zone")
			}
			return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), err
		}
		line = append(line, b)
	}
	return netip.AddrPort{}, errors.New("captured destination: line too long")
}

// capturedName is the name a captured client asks for in its first bytes:
// the server name of its TLS ClientHello or the Host header of its plain
// HTTP request (without a port); "" when it sends neither.
func capturedName(c net.Conn, br *bufio.Reader, s *Server) string {
	first, err := peekWithin(c, br, 1, sniffTimeout)
	if err != nil {
		return "" // silent: a protocol in which the server speaks first
	}
	if first[0] == tlsRecord {
		return peekServerName(c, br, s.timeouts.Header)
	}
	if !s.speaksHTTP(c, br) {
		return ""
	}
	return peekHostHeader(c, br, s.timeouts.Header)
}

// peekServerName returns the server name of the ClientHello at the head
// of br without consuming it ("" without one, or when it is not a
// ClientHello).
func peekServerName(c net.Conn, br *bufio.Reader, d time.Duration) string {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	for {
		b, _ := br.Peek(br.Buffered())
		_, sni, err := readClientHello(bytes.NewReader(b))
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			if err != nil {
				return ""
			}
			return sni
		}
		if br.Buffered() == br.Size() {
			return ""
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return ""
		}
	}
}

// peekHostHeader returns the host of the Host header of the request at the
// head of br without consuming it, or "" when there is none.
func peekHostHeader(c net.Conn, br *bufio.Reader, d time.Duration) string {
	c.SetReadDeadline(time.Now().Add(d))
	head, err := peekHead(br)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		return ""
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return ""
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return ""
	}
	host := h.Get("Host")
	if name, port, err := net.SplitHostPort(host); err == nil {
		if _, err := strconv.Atoi(port); err == nil {
			return name
		}
		return ""
	}
	return host
}
