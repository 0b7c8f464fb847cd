package proxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The jail's resolver: programs that resolve names themselves (getaddrinfo,
// Go's and Node's resolvers) ask it, through the bridge, on the proxy's
// DNS socket. An allowed name gets a synthetic address of this session; a
// connection captured toward that address is decided by the name. Nothing
// is forwarded or resolved at query time, so a query reaches no one: the
// name is resolved on the host only when an allowed connection is dialled.

// SyntheticNet and SyntheticNet6 are where the synthetic addresses come
// from: the IPv4 range set aside for benchmarking and a unique local IPv6
// prefix, routed nowhere. Inside the jail, the IPv6 prefix alone is routed
// (to the capture); other IPv6 addresses stay unreachable.
var (
	SyntheticNet  = netip.MustParsePrefix("198.18.0.0/15")
	SyntheticNet6 = netip.MustParsePrefix("fd6a:6169:6c00::/64")
)

// isSynthetic reports whether ip is in one of the synthetic ranges.
func isSynthetic(ip netip.Addr) bool {
	ip = ip.Unmap()
	return SyntheticNet.Contains(ip) || SyntheticNet6.Contains(ip)
}

const (
	// maxNames caps the names given an address in one session: a wildcard
	// allows any number of names below it, and each costs memory. Past
	// the cap a new name is answered REFUSED, and logged.
	maxNames = 16384
	// maxDNSMessage bounds one query; a real one is a few hundred bytes.
	maxDNSMessage = 4096
	// dnsTTL is the answers' time to live: the addresses are stable for
	// the session.
	dnsTTL = 60
	// dnsUDPSize is the UDP payload size announced in EDNS answers.
	dnsUDPSize = 1232
)

// syntheticNames is a session's map between allowed names and their
// synthetic addresses, and the refused names already logged.
type syntheticNames struct {
	mu      sync.Mutex
	byName  map[string]synthAddrs
	byAddr  map[netip.Addr]string // both addresses of every name
	refused map[string]bool       // logged once each, up to maxNames
}

// synthAddrs are one name's addresses: the n-th name gets the n-th
// address of each range (the first, which reads as a network, skipped).
type synthAddrs struct{ v4, v6 netip.Addr }

// assign returns name's addresses, giving it the next free ones the first
// time; false when the session has maxNames names already.
func (n *syntheticNames) assign(name string) (synthAddrs, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a, true
	}
	if len(n.byName) >= maxNames {
		return synthAddrs{}, false
	}
	if n.byName == nil {
		n.byName, n.byAddr = map[string]synthAddrs{}, map[netip.Addr]string{}
	}
	i := uint32(len(n.byName)) + 1
	b4, b6 := SyntheticNet.Addr().As4(), SyntheticNet6.Addr().As16()
	binary.BigEndian.PutUint32(b4[:], binary.BigEndian.Uint32(b4[:])+i)
	binary.BigEndian.PutUint32(b6[12:], i)
	a := synthAddrs{netip.AddrFrom4(b4), netip.AddrFrom16(b6)}
	n.byName[name], n.byAddr[a.v4], n.byAddr[a.v6] = a, name, name
	return a, true
}

// lookup is the name that a was given, if any.
func (n *syntheticNames) lookup(a netip.Addr) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byAddr[a.Unmap()]
	return name, ok
}

// firstRefusal reports whether name's refusal is to be logged: once per
// name, and every time once maxNames refused names are remembered.
func (n *syntheticNames) firstRefusal(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.refused[name] {
		return false
	}
	if n.refused == nil {
		n.refused = map[string]bool{}
	}
	if len(n.refused) < maxNames {
		n.refused[name] = true
	}
	return true
}

// SyntheticName is the name the session's resolver gave the synthetic
// address a, if any.
func (s *Server) SyntheticName(a netip.Addr) (string, bool) { return s.names.lookup(a) }

// ServeDNS serves DNS over TCP framing (each message after its two-byte
// length) on l: the jail's bridge relays both its UDP and its TCP queries
// here. It returns nil when l or the Server is closed.
func (s *Server) ServeDNS(l net.Listener) error { return s.serve(l, s.serveDNSConn, false) }

func (s *Server) serveDNSConn(c net.Conn) {
	var n [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(s.timeouts.Idle))
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		size := int(binary.BigEndian.Uint16(n[:]))
		if size == 0 || size > maxDNSMessage {
			return
		}
		q := make([]byte, size)
		c.SetReadDeadline(time.Now().Add(s.timeouts.Header))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		a := s.answerDNS(q)
		if a == nil {
			return
		}
		c.SetWriteDeadline(time.Now().Add(s.timeouts.Read))
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(a))), a...)); err != nil {
			return
		}
	}
}

// answerDNS answers one query, or returns nil for a message that is not
// one (an answer, or bytes without a header).
func (s *Server) answerDNS(msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return dnsReply(h, nil, dnsmessage.RCodeFormatError, nil, false)
	}
	q := qs[0]
	edns := hasEDNS(&p)
	if h.OpCode != 0 {
		return dnsReply(h, &q, dnsmessage.RCodeNotImplemented, nil, edns)
	}
	if q.Class != dnsmessage.ClassINET && q.Class != dnsmessage.ClassANY {
		return dnsReply(h, &q, dnsmessage.RCodeRefused, nil, edns)
	}
	rcode, addrs := s.resolveSynthetic(q.Name.String())
	var ans []netip.Addr
	if rcode == dnsmessage.RCodeSuccess {
		switch q.Type {
		case dnsmessage.TypeA:
			ans = []netip.Addr{addrs.v4}
		case dnsmessage.TypeAAAA:
			ans = []netip.Addr{addrs.v6}
		case dnsmessage.TypeALL:
			ans = []netip.Addr{addrs.v4, addrs.v6}
		}
	}
	return dnsReply(h, &q, rcode, ans, edns)
}

// hasEDNS reports whether the query's additional section, after its
// question, holds an OPT record.
func hasEDNS(p *dnsmessage.Parser) bool {
	if p.SkipAllAnswers() != nil || p.SkipAllAuthorities() != nil {
		return false
	}
	for {
		h, err := p.AdditionalHeader()
		if err != nil {
			return false
		}
		if h.Type == dnsmessage.TypeOPT {
			return true
		}
		if p.SkipAdditional() != nil {
			return false
		}
	}
}

// resolveSynthetic decides a queried name: addresses for an allowed one,
// NXDOMAIN for the others, REFUSED past the session's cap. Refusals are
// logged once per name, a name that carries a secret redacted.
func (s *Server) resolveSynthetic(qname string) (dnsmessage.RCode, synthAddrs) {
	name := strings.TrimSuffix(qname, ".")
	e := Entry{Time: time.Now(), Method: "DNS", Scheme: "dns", Host: name, Port: 53, Verdict: verdictDeny}
	if reason := s.sec().inHostName(name); reason != "" {
		e.Host, e.Rule, e.Reason = s.sec().redactString(name), "secret", reason
		s.refuseName(e)
		return dnsmessage.RCodeNameError, synthAddrs{}
	}
	h, ok := normalizeHost(name)
	if !ok {
		e.Reason = "invalid host"
		s.refuseName(e)
		return dnsmessage.RCodeNameError, synthAddrs{}
	}
	e.Host = h.name
	if d := s.rules.Load().decideName(h); !d.Allow {
		e.Rule, e.Reason = d.Rule, d.Reason
		s.refuseName(e)
		return dnsmessage.RCodeNameError, synthAddrs{}
	}
	a, ok := s.names.assign(h.name)
	if !ok {
		e.Rule, e.Reason = "limit names", fmt.Sprintf("more than %d names resolved in this session", maxNames)
		s.refuseName(e)
		return dnsmessage.RCodeRefused, synthAddrs{}
	}
	return dnsmessage.RCodeSuccess, a
}

// refuseName records a refused query, once per name.
func (s *Server) refuseName(e Entry) {
	if s.names.firstRefusal(e.Host) {
		s.record(e)
	}
}

// decideName decides a name for the resolver, whatever port a connection
// to it will use: allowed when an Allow or Ask entry names it with any
// port (or Unknown allows or asks for it), denied when a Deny entry names it without a port.
// The connection is decided again with its port. An IP literal, or a name
// that reads as one, is never a name to resolve.
func (r Rules) decideName(h host) Decision {
	unknown := r.unknownRule()
	if h.ip.IsValid() || looksNumeric(h.name) {
		return Decision{Rule: unknown, Reason: "ip literal"}
	}
	for _, s := range r.Deny {
		if e, err := parseEntry(s); err == nil && e.port == 0 && e.matches(h, 0) {
			return Decision{Rule: "deny " + s, Reason: "denied by network.deny"}
		}
	}
	for _, s := range slices.Concat(r.Allow, r.live) {
		if e, err := parseEntry(s); err == nil && e.matches(h, e.port) {
			return Decision{Allow: true, Rule: "allow " + s}
		}
	}
	// A name that may be asked for resolves: the connection is held, and
	// decided, with its port.
	for _, s := range r.Ask {
		if e, err := parseEntry(s); err == nil && e.matches(h, e.port) {
			return Decision{Allow: true, Rule: "ask " + s}
		}
	}
	if r.Unknown == "allow" || r.Unknown == "ask" {
		return Decision{Allow: true, Rule: unknown}
	}
	return Decision{Rule: unknown, Reason: "not in network.allow"}
}

// dnsReply builds the answer to the query with header h and question q:
// rcode, and an A or AAAA record for each address of as. The answer is
// authoritative and recursion is offered, as from a local resolver; an
// EDNS query gets an OPT record back.
func dnsReply(h dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode, as []netip.Addr, edns bool) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID: h.ID, Response: true, OpCode: h.OpCode, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rcode,
	})
	b.EnableCompression()
	if q != nil {
		if b.StartQuestions() != nil || b.Question(*q) != nil {
			return nil
		}
	}
	if len(as) > 0 && b.StartAnswers() != nil {
		return nil
	}
	for _, a := range as {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
		var err error
		if a.Is4() {
			err = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		} else {
			err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil
		}
	}
	if edns {
		var rh dnsmessage.ResourceHeader
		if rh.SetEDNS0(dnsUDPSize, dnsmessage.RCodeSuccess, false) != nil ||
			b.StartAdditionals() != nil || b.OPTResource(rh, dnsmessage.OPTResource{}) != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
