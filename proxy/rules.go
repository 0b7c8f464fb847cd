package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Rules is the domain policy.
//
// Entries in Allow and Deny are a name ("api.example.com"), a wildcard at a
// dot boundary ("*.example.com" matches its subdomains but not the apex) or
// an IP literal ("10.1.2.3", "::1"), each with an optional port
// ("example.com:8443", "127.0.0.1:9000", "[::1]:9000"). Deny beats allow.
// An entry without a port allows TLS and HTTP on any port; a raw stream
// (SSH, a database protocol) needs an Allow entry with its port, unless
// Unknown is "allow".
type Rules struct {
	Allow, Deny []string
	// Ask entries (same syntax) hold a connection until a person answers
	// (Config.Ask): deny beats ask, ask beats allow.
	Ask []string
	// Unknown is what happens to a name no entry matches: "deny" (the
	// default when empty), "ask" or "allow". IP literals are never let
	// through or asked by Unknown; only an entry naming the address allows
	// or asks for one. "allow" opens
	// every name on every port to every protocol: a raw stream (neither
	// TLS nor HTTP) to a name needs no entry with its port then, while one
	// to an IP literal still does.
	Unknown string
	// Hosts maps a name to the "ip:port" it is dialled at, whatever port
	// the client asked for. The mapping is explicit consent: a mapped name
	// may point at loopback or private addresses. It does not allow the
	// name; Allow (or Unknown) still decides.
	Hosts map[string]string
	// Passthrough names hosts (same syntax as Allow) whose TLS is tunnelled
	// rather than intercepted.
	Passthrough []string

	// live are the entries a person allowed while the Server runs
	// (Server.AddRule): between Deny and Ask.
	live []string
}

// Decision is the verdict of Rules.Decide.
type Decision struct {
	Allow bool
	// Ask means a person decides: the connection is held until Config.Ask
	// answers (Allow is false meanwhile).
	Ask bool
	// Rule is the entry that decided: "allow api.example.com",
	// "deny *.evil.test", "ask *.example.org", "unknown=ask",
	// "unknown=deny".
	Rule string
	// Reason says why a connection is refused ("ip literal",
	// "invalid host", "loopback address 127.0.0.1 after resolving x", ...).
	Reason string
}

// Decide decides a connection to host:port by the rules alone, without
// resolving anything. Names are lower-cased and a trailing dot is
// stripped; a host that is not a plain name or IP literal (userinfo,
// spaces, slashes, percent signs, ...) is denied.
func (r Rules) Decide(host string, port int) Decision {
	h, ok := normalizeHost(host)
	if !ok || port < 1 || port > 65535 {
		return Decision{Reason: "invalid host"}
	}
	for _, e := range r.Deny {
		if p, err := parseEntry(e); err == nil && p.matches(h, port) {
			return Decision{Rule: "deny " + e, Reason: "denied by network.deny"}
		}
	}
	for _, e := range r.live {
		if p, err := parseEntry(e); err == nil && p.matches(h, port) {
			return Decision{Allow: true, Rule: "allow " + e}
		}
	}
	for _, e := range r.Ask {
		if p, err := parseEntry(e); err == nil && p.matches(h, port) {
			return Decision{Ask: true, Rule: "ask " + e}
		}
	}
	for _, e := range r.Allow {
		if p, err := parseEntry(e); err == nil && p.matches(h, port) {
			return Decision{Allow: true, Rule: "allow " + e}
		}
	}
	unknown := r.unknownRule()
	if h.ip.IsValid() || looksNumeric(h.name) {
		return Decision{Rule: unknown, Reason: "ip literal"}
	}
	switch r.Unknown {
	case "allow":
		return Decision{Allow: true, Rule: unknown}
	case "ask":
		return Decision{Ask: true, Rule: unknown}
	}
	return Decision{Rule: unknown, Reason: "not in network.allow"}
}

// unknownRule is the rule a name no entry matches is decided by.
func (r Rules) unknownRule() string {
	switch r.Unknown {
	case "allow", "ask":
		return "unknown=" + r.Unknown
	}
	return "unknown=deny"
}

// Validate reports the first malformed entry, with a hint.
func (r Rules) Validate() error {
	for _, list := range []struct {
		name    string
		entries []string
	}{{"allow", r.Allow}, {"deny", r.Deny}, {"ask", r.Ask}, {"passthrough", r.Passthrough}} {
		for _, e := range list.entries {
			if _, err := parseEntry(e); err != nil {
				return fmt.Errorf("network.%s entry %q: %w", list.name, e, err)
			}
		}
	}
	switch r.Unknown {
	case "", "deny", "ask", "allow":
	default:
		return fmt.Errorf("network.unknown %q: must be \"deny\", \"ask\" or \"allow\"", r.Unknown)
	}
	for name, addr := range r.Hosts {
		if h, ok := normalizeHost(name); !ok || h.ip.IsValid() {
			return fmt.Errorf("network.hosts name %q: not a host name", name)
		}
		if _, err := netip.ParseAddrPort(addr); err != nil {
			return fmt.Errorf("network.hosts %q: address %q: want ip:port such as 127.0.0.1:8080", name, addr)
		}
	}
	return nil
}

// host is a normalized host: a lower-case name without trailing dot, and
// the address when the host is an IP literal (IPv4-mapped IPv6 unmapped).
type host struct {
	name string
	ip   netip.Addr
}

func normalizeHost(s string) (host, bool) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		ip, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return host{}, false
		}
		return host{name: ip.Unmap().String(), ip: ip.Unmap()}, true
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		if ip.Zone() != "" {
			return host{}, false
		}
		return host{name: ip.Unmap().String(), ip: ip.Unmap()}, true
	}
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" || len(s) > 253 {
		return host{}, false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return host{}, false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return host{}, false
			}
		}
	}
	return host{name: s}, true
}

// looksNumeric reports whether a name that is not a canonical IP literal
// would still be read as an address by some resolver ("127.1",
// "2130706433", "0x7f.1"): its last label is a number.
func looksNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		return true
	}
	_, err := strconv.ParseUint(last, 10, 64)
	return err == nil
}

// entry is a parsed Allow, Deny or Passthrough entry.
type entry struct {
	name     string // exact name, or the suffix (with leading dot) of a wildcard
	wildcard bool
	ip       netip.Addr
	port     int // 0: any
}

func parseEntry(s string) (entry, error) {
	var e entry
	hostPart := s
	if ap, err := netip.ParseAddrPort(s); err == nil {
		hostPart, e.port = ap.Addr().String(), int(ap.Port())
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 && strings.Count(s, ":") == 1 {
		p, err := strconv.Atoi(s[i+1:])
		if err != nil || p < 1 || p > 65535 {
			return e, fmt.Errorf("bad port %q", s[i+1:])
		}
		hostPart, e.port = s[:i], p
	}
	if rest, ok := strings.CutPrefix(hostPart, "*."); ok {
		h, ok := normalizeHost(rest)
		if !ok || h.ip.IsValid() {
			return e, fmt.Errorf("not a name after \"*.\"")
		}
		e.name, e.wildcard = "."+h.name, true
		return e, nil
	}
	if strings.Contains(hostPart, "*") {
		return e, fmt.Errorf("a wildcard is only allowed as a leading \"*.\" (to allow everything, set network.unknown to \"allow\")")
	}
	h, ok := normalizeHost(hostPart)
	if !ok {
		return e, fmt.Errorf("not a host name or IP address")
	}
	e.name, e.ip = h.name, h.ip
	return e, nil
}

func (e entry) matches(h host, port int) bool {
	if e.port != 0 && e.port != port {
		return false
	}
	switch {
	case e.ip.IsValid():
		return h.ip == e.ip
	case h.ip.IsValid():
		return false
	case e.wildcard:
		return len(h.name) > len(e.name) && strings.HasSuffix(h.name, e.name)
	default:
		return h.name == e.name
	}
}

// explicitlyAllowed reports whether an entry of Allow names h with this
// very port ("git.example.com:22", "*.example.com:22", "10.1.2.3:22"):
// the consent a raw stream needs, and SSH while git push is denied.
func (r Rules) explicitlyAllowed(h host, port int) bool {
	for _, s := range slices.Concat(r.Allow, r.live) {
		if e, err := parseEntry(s); err == nil && e.port == port && e.matches(h, port) {
			return true
		}
	}
	return false
}

// rawAllowed reports whether a raw stream (neither TLS nor HTTP: SSH, a
// database protocol) may reach h:port, which Decide allowed: an Allow
// entry names it with this port, or Unknown opens every name (not an IP
// literal) on every port.
func (r Rules) rawAllowed(h host, port int) bool {
	if r.explicitlyAllowed(h, port) {
		return true
	}
	return r.Unknown == "allow" && !h.ip.IsValid() && !looksNumeric(h.name)
}

// matchAny reports whether any entry of list matches host:port.
func matchAny(list []string, h host, port int) bool {
	for _, s := range list {
		if e, err := parseEntry(s); err == nil && e.matches(h, port) {
			return true
		}
	}
	return false
}

// blocked ranges: never dialled after resolving a name.
var blocked = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "CGNAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// addrClass names why ip must not be dialled for a resolved name, or
// returns "" when it may be. IPv4 addresses embedded in IPv6 (mapped,
// NAT64, 6to4) are judged as the IPv4 address.
func addrClass(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(ip):
			return addrClass(netip.AddrFrom4([4]byte(b[12:16])))
		case netip.MustParsePrefix("2002::/16").Contains(ip):
			return addrClass(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, b := range blocked {
		if b.prefix.Contains(ip) {
			return b.class
		}
	}
	return ""
}
