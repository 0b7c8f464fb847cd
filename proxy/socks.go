package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928) constants.
const (
	socksVersion        = 5
	socksNoAuth         = 0x00
	socksNoAcceptable   = 0xff
	socksConnect        = 0x01
	socksBind           = 0x02
	socksUDPAssociate   = 0x03
	socksIPv4           = 0x01
	socksDomain         = 0x03
	socksIPv6           = 0x04
	socksSucceeded      = 0x00
	socksGeneralFailure = 0x01
	socksNotAllowed     = 0x02
	socksHostUnreach    = 0x04
	socksRefused        = 0x05
	socksCmdUnsupport   = 0x07
	socksAddrUnsupport  = 0x08
)

var socksCommands = map[byte]string{socksConnect: "CONNECT", socksBind: "BIND", socksUDPAssociate: "UDP ASSOCIATE"}

// serveSOCKSConn serves one SOCKS5 client: no authentication, CONNECT
// only, then the same tunnel as after an HTTP CONNECT (TLS intercepted,
// anything else raw to the checked address).
func (s *Server) serveSOCKSConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(s.timeouts.Header))
	br := bufio.NewReaderSize(c, 4<<10)
	var b [262]byte
	if _, err := io.ReadFull(br, b[:2]); err != nil || b[0] != socksVersion {
		return
	}
	methods := b[2 : 2+int(b[1])]
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	method := byte(socksNoAcceptable)
	for _, m := range methods {
		if m == socksNoAuth {
			method = socksNoAuth
		}
	}
	if _, err := c.Write([]byte{socksVersion, method}); err != nil || method != socksNoAuth {
		return
	}

	if _, err := io.ReadFull(br, b[:4]); err != nil || b[0] != socksVersion {
		return
	}
	cmd, atyp := b[1], b[3]
	e := Entry{Time: time.Now(), Method: socksCommands[cmd], Scheme: "socks5"}
	if e.Method == "" {
		e.Method = fmt.Sprintf("COMMAND %#02x", cmd)
	}
	switch atyp {
	case socksIPv4, socksIPv6:
		n := 4
		if atyp == socksIPv6 {
			n = 16
		}
		if _, err := io.ReadFull(br, b[:n]); err != nil {
			return
		}
		ip, _ := netip.AddrFromSlice(b[:n])
		e.Host = ip.Unmap().String()
	case socksDomain:
		if _, err := io.ReadFull(br, b[:1]); err != nil {
			return
		}
		n := int(b[0])
		if _, err := io.ReadFull(br, b[:n]); err != nil {
			return
		}
		e.Host = string(b[:n])
	default:
		socksReply(c, socksAddrUnsupport)
		return
	}
	if _, err := io.ReadFull(br, b[:2]); err != nil {
		return
	}
	e.Port = int(b[0])<<8 | int(b[1])
	if n, ok := normalizeHost(e.Host); ok {
		e.Host = n.name
	}

	if cmd != socksConnect {
		e.Verdict, e.Reason = verdictDeny, "command not supported (TCP CONNECT only)"
		s.record(e)
		socksReply(c, socksCmdUnsupport)
		return
	}
	if reason := s.sec().inHostName(e.Host); reason != "" {
		e.Host, e.Verdict, e.Rule, e.Reason = s.sec().redactString(e.Host), verdictDeny, "secret", reason
		s.record(e)
		socksReply(c, socksNotAllowed)
		return
	}
	var reason string
	if e.Host, reason = s.namedHost(e.Host); reason != "" {
		e.Verdict, e.Reason = verdictDeny, reason
		s.record(e)
		socksReply(c, socksNotAllowed)
		return
	}
	t, r := s.check(s.ctx, e.Host, e.Port, true, heldBy{c, br, e})
	if r != nil {
		e.Verdict, e.Rule, e.Reason = r.verdict, r.rule, r.reason
		s.record(e)
		code := byte(socksNotAllowed)
		if r.verdict == verdictError {
			code = socksHostUnreach
		}
		socksReply(c, code)
		return
	}
	e.Host, e.Rule, e.Verdict = t.norm.name, t.rule, verdictAllow
	s.open(c, br, t, e, func(err error) error {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return socksReply(c, socksRefused)
		case err != nil:
			return socksReply(c, socksHostUnreach)
		}
		c.SetDeadline(time.Time{})
		return socksReply(c, socksSucceeded)
	})
}

// socksReply answers a request with code; the bound address is not
// disclosed (0.0.0.0:0).
func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
