package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsQuery packs a query for name and type, with an EDNS record when
// edns is set.
func dnsQuery(t testing.TB, id uint16, name string, typ dnsmessage.Type, edns bool) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	if edns {
		var rh dnsmessage.ResourceHeader
		rh.SetEDNS0(1232, dnsmessage.RCodeSuccess, false)
		b.StartAdditionals()
		b.OPTResource(rh, dnsmessage.OPTResource{})
	}
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// dnsAnswer is what a test reads in an answer.
type dnsAnswer struct {
	id    uint16
	rcode dnsmessage.RCode
	qname string
	addrs []netip.Addr
	opt   bool
}

func parseAnswer(t *testing.T, msg []byte) dnsAnswer {
	t.Helper()
	m := new(dnsmessage.Message)
	if err := m.Unpack(msg); err != nil {
		t.Fatalf("unpacking the answer: %v", err)
	}
	a := dnsAnswer{id: m.ID, rcode: m.RCode}
	if !m.Response {
		t.Fatal("the answer is not a response")
	}
	if len(m.Questions) == 1 {
		a.qname = m.Questions[0].Name.String()
	}
	for _, r := range m.Answers {
		if ar, ok := r.Body.(*dnsmessage.AResource); ok {
			a.addrs = append(a.addrs, netip.AddrFrom4(ar.A))
		} else if ar, ok := r.Body.(*dnsmessage.AAAAResource); ok {
			a.addrs = append(a.addrs, netip.AddrFrom16(ar.AAAA))
		} else {
			t.Errorf("unexpected answer %v", r)
		}
	}
	for _, r := range m.Additionals {
		if r.Header.Type == dnsmessage.TypeOPT {
			a.opt = true
		}
	}
	return a
}

// TestSyntheticNames: a name gets the same addresses every time, names
// get distinct addresses in the synthetic ranges, an address maps back to
// its name, and past the cap no new name gets one.
func TestSyntheticNames(t *testing.T) {
	t.Parallel()
	var n syntheticNames
	a1, ok1 := n.assign("a.example.test")
	a2, ok2 := n.assign("b.example.test")
	again, _ := n.assign("a.example.test")
	if !ok1 || !ok2 || a1.v4 == a2.v4 || a1.v6 == a2.v6 || again != a1 {
		t.Fatalf("assign: %v %v %v", a1, a2, again)
	}
	for _, a := range []synthAddrs{a1, a2} {
		if !SyntheticNet.Contains(a.v4) || a.v4 == SyntheticNet.Addr() || !SyntheticNet6.Contains(a.v6) || a.v6 == SyntheticNet6.Addr() {
			t.Errorf("%v is not a usable pair of synthetic addresses", a)
		}
	}
	for _, ip := range []netip.Addr{a2.v4, a2.v6, netip.AddrFrom16(a2.v4.As16())} {
		if name, ok := n.lookup(ip); !ok || name != "b.example.test" {
			t.Errorf("lookup %v: %q %v", ip, name, ok)
		}
	}
	for _, ip := range []string{"198.18.200.1", "fd6a:6169:6c00::c8:1", "fd6a:6169:6c00:1::1"} {
		if _, ok := n.lookup(netip.MustParseAddr(ip)); ok {
			t.Errorf("%s, never given, maps to a name", ip)
		}
	}
	for i := len(n.byName); i < maxNames; i++ {
		if a, ok := n.assign(fmt.Sprintf("n%d.example.test", i)); !ok || !SyntheticNet.Contains(a.v4) || !SyntheticNet6.Contains(a.v6) {
			t.Fatalf("name %d: %v %v", i, a, ok)
		}
	}
	if len(n.byAddr) != 2*maxNames {
		t.Fatalf("%d addresses for %d names", len(n.byAddr), maxNames)
	}
	if _, ok := n.assign("one.more.example.test"); ok {
		t.Error("a name past the cap got an address")
	}
	if a, ok := n.assign("a.example.test"); !ok || a != a1 {
		t.Errorf("a name given before the cap lost its address: %v %v", a, ok)
	}
}

// TestDNSAnswers: A and AAAA for allowed names (any port of an allow
// entry, the question echoed as asked, EDNS echoed), empty NOERROR for
// other types, NXDOMAIN logged once for names that are not allowed, IP
// literals, names denied without a port, and names carrying a secret
// (logged redacted).
func TestDNSAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Rules: Rules{
		Allow: []string{"api.example.test", "*.wild.test", "db.example.test:5432", "ssh.example.test:22"},
		Deny:  []string{"bad.wild.test", "ssh.example.test:2222"},
		Hosts: map[string]string{"mapped.example.test": "127.0.0.1:1"},
	}, Secrets: testSecrets()})
	ask := func(name string, typ dnsmessage.Type, edns bool) dnsAnswer {
		return parseAnswer(t, e.srv.answerDNS(dnsQuery(t, 7, name, typ, edns)))
	}
	api := ask("API.Example.TEST.", dnsmessage.TypeA, true)
	if api.rcode != dnsmessage.RCodeSuccess || len(api.addrs) != 1 || !SyntheticNet.Contains(api.addrs[0]) || api.qname != "API.Example.TEST." || !api.opt || api.id != 7 {
		t.Fatalf("allowed name: %+v", api)
	}
	if name, ok := e.srv.SyntheticName(api.addrs[0]); !ok || name != "api.example.test" {
		t.Errorf("the address maps back to %q %v", name, ok)
	}
	if again := ask("api.example.test.", dnsmessage.TypeA, false); len(again.addrs) != 1 || again.addrs[0] != api.addrs[0] || again.opt {
		t.Errorf("the same name again: %+v", again)
	}
	for _, name := range []string{"x.wild.test.", "db.example.test.", "ssh.example.test."} {
		if a := ask(name, dnsmessage.TypeA, false); a.rcode != dnsmessage.RCodeSuccess || len(a.addrs) != 1 {
			t.Errorf("%s: %+v", name, a)
		}
	}
	v6 := ask("api.example.test.", dnsmessage.TypeAAAA, false)
	if v6.rcode != dnsmessage.RCodeSuccess || len(v6.addrs) != 1 || !SyntheticNet6.Contains(v6.addrs[0]) {
		t.Fatalf("AAAA: %+v", v6)
	}
	if name, ok := e.srv.SyntheticName(v6.addrs[0]); !ok || name != "api.example.test" {
		t.Errorf("the IPv6 address maps back to %q %v", name, ok)
	}
	if all := ask("api.example.test.", dnsmessage.TypeALL, false); len(all.addrs) != 2 || all.addrs[0] != api.addrs[0] || all.addrs[1] != v6.addrs[0] {
		t.Errorf("ANY: %+v", all)
	}
	for _, typ := range []dnsmessage.Type{dnsmessage.TypeMX, dnsmessage.TypeTXT, dnsmessage.Type(65)} {
		if a := ask("api.example.test.", typ, false); a.rcode != dnsmessage.RCodeSuccess || len(a.addrs) != 0 {
			t.Errorf("type %v: %+v", typ, a)
		}
	}
	hexName := fmt.Sprintf("%x", valTok) + ".wild.test."
	denied := []string{"other.example.test.", "bad.wild.test.", "mapped.example.test.", "192.0.2.1.", "127.1.", "wild.test.", hexName}
	for _, name := range denied {
		for _, typ := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
			if a := ask(name, typ, false); a.rcode != dnsmessage.RCodeNameError || len(a.addrs) != 0 {
				t.Errorf("%s %v: %+v", name, typ, a)
			}
		}
	}
	e.entry(t, func(x Entry) bool { return x.Method == "DNS" && x.Host == "wild.test" })
	log := e.logText(t)
	if strings.Contains(log, fmt.Sprintf("%x", valTok)) || !strings.Contains(log, "in the host name") {
		t.Errorf("the secret's refusal is missing or not redacted:\n%s", log)
	}
	if n := strings.Count(log, `"method":"DNS"`); n != len(denied) {
		t.Errorf("%d DNS entries for %d refused names (one each):\n%s", n, len(denied), log)
	}
	if strings.Contains(log, "api.example.test") {
		t.Errorf("an allowed name was logged as refused:\n%s", log)
	}
}

// TestDNSMalformed: answers are never queries, a query with no question
// gets FORMERR, another opcode NOTIMP, and bytes that are no message get
// nothing.
func TestDNSMalformed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Rules: Rules{Unknown: "allow"}})
	q := dnsQuery(t, 1, "x.example.test.", dnsmessage.TypeA, false)
	resp := append([]byte(nil), q...)
	resp[2] |= 0x80 // QR: an answer
	if a := e.srv.answerDNS(resp); a != nil {
		t.Errorf("an answer was answered: %x", a)
	}
	if a := e.srv.answerDNS([]byte{1, 2, 3}); a != nil {
		t.Errorf("garbage was answered: %x", a)
	}
	noQ := append([]byte(nil), q[:12]...)
	binary.BigEndian.PutUint16(noQ[4:], 0)
	if a := parseAnswer(t, e.srv.answerDNS(noQ)); a.rcode != dnsmessage.RCodeFormatError {
		t.Errorf("no question: %+v", a)
	}
	notify := append([]byte(nil), q...)
	notify[2] |= 4 << 3
	if a := parseAnswer(t, e.srv.answerDNS(notify)); a.rcode != dnsmessage.RCodeNotImplemented || len(a.addrs) != 0 {
		t.Errorf("opcode 4: %+v", a)
	}
}

// TestDNSCap: past the session's cap a new name is REFUSED and logged,
// while names given before keep their address.
func TestDNSCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"*.wild.test"}}})
	first := parseAnswer(t, e.srv.answerDNS(dnsQuery(t, 1, "first.wild.test.", dnsmessage.TypeA, false)))
	for i := 1; i < maxNames; i++ {
		e.srv.names.assign(fmt.Sprintf("n%d.wild.test", i))
	}
	if a := parseAnswer(t, e.srv.answerDNS(dnsQuery(t, 2, "late.wild.test.", dnsmessage.TypeA, false))); a.rcode != dnsmessage.RCodeRefused || len(a.addrs) != 0 {
		t.Errorf("past the cap: %+v", a)
	}
	if a := parseAnswer(t, e.srv.answerDNS(dnsQuery(t, 3, "first.wild.test.", dnsmessage.TypeA, false))); len(a.addrs) != 1 || a.addrs[0] != first.addrs[0] {
		t.Errorf("a name given before the cap: %+v", a)
	}
	en := e.entry(t, func(x Entry) bool { return x.Method == "DNS" && x.Host == "late.wild.test" })
	if en.Rule != "limit names" || en.Verdict != verdictDeny {
		t.Errorf("logged %+v", en)
	}
}

// dnsEnv serves ServeDNS and ServeCapture on unix sockets, as for a
// jail's bridge.
func dnsEnv(t *testing.T, cfg Config) (e *env, dnsSock, capSock string) {
	t.Helper()
	e, capSock = captureEnv(t, cfg)
	dnsSock = filepath.Join(t.TempDir(), "dns.sock")
	l, err := net.Listen("unix", dnsSock)
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.ServeDNS(l)
	t.Cleanup(func() { l.Close() })
	return e, dnsSock, capSock
}

// exchange sends queries on one connection in DNS-over-TCP framing and
// reads their answers.
func exchange(t *testing.T, sock string, qs ...[]byte) []dnsAnswer {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var out []dnsAnswer
	for _, q := range qs {
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
			t.Fatal(err)
		}
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			t.Fatal(err)
		}
		a := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, a); err != nil {
			t.Fatal(err)
		}
		out = append(out, parseAnswer(t, a))
	}
	return out
}

// TestDNSThenCapture: a name resolved on the DNS socket and then dialled
// at its synthetic address is decided and logged by the name; a client
// naming another host at that address, or dialling a synthetic address
// never given, is refused and logged.
func TestDNSThenCapture(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	plain := newUpstream(t, nil, nil)
	e, dnsSock, capSock := dnsEnv(t, Config{
		Rules: Rules{Allow: []string{"api.example.test", "plain.example.test", "plain.example.test:80", "other.example.test"},
			Hosts: map[string]string{"api.example.test": up.addr(), "plain.example.test": plain.addr(), "other.example.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	as := exchange(t, dnsSock,
		dnsQuery(t, 1, "api.example.test.", dnsmessage.TypeA, false),
		dnsQuery(t, 2, "plain.example.test.", dnsmessage.TypeA, false),
		dnsQuery(t, 3, "nope.example.test.", dnsmessage.TypeA, false))
	if len(as[0].addrs) != 1 || len(as[1].addrs) != 1 || as[2].rcode != dnsmessage.RCodeNameError || as[1].id != 2 {
		t.Fatalf("answers: %+v", as)
	}
	api, pl := as[0].addrs[0], as[1].addrs[0]
	// TLS with the same name (in another case), and plain HTTP.
	resp, body := get(t, captured(capSock, api.String()+":443", e), "https://API.example.test/tls")
	if resp.StatusCode != 200 || !strings.Contains(body, "/tls") {
		t.Fatalf("TLS: %d %q", resp.StatusCode, body)
	}
	v6 := exchange(t, dnsSock, dnsQuery(t, 4, "api.example.test.", dnsmessage.TypeAAAA, false))[0]
	if len(v6.addrs) != 1 {
		t.Fatalf("AAAA: %+v", v6)
	}
	resp, body = get(t, captured(capSock, netip.AddrPortFrom(v6.addrs[0], 443).String(), e), "https://api.example.test/tls6")
	if resp.StatusCode != 200 || !strings.Contains(body, "/tls6") {
		t.Fatalf("TLS over IPv6: %d %q", resp.StatusCode, body)
	}
	resp, body = get(t, captured(capSock, pl.String()+":80", e), "http://plain.example.test/plain")
	if resp.StatusCode != 200 || body != "hello from plain.example.test /plain" {
		t.Fatalf("plain: %d %q", resp.StatusCode, body)
	}
	// A client that sends no name (a protocol other than TLS and HTTP)
	// is decided by the name of the address, and relayed raw (an entry
	// names the port).
	c, err := net.Dial("unix", capSock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, pl.String()+":80\n")
	time.Sleep(2 * sniffTimeout)
	io.WriteString(c, "\x00\x01 not http\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(c)
	c.Close()
	if !strings.Contains(string(got), "400 Bad Request") {
		t.Errorf("a nameless client at a synthetic address did not reach the server: %q", got)
	}
	e.entry(t, func(x Entry) bool {
		return x.Method == "CAPTURE" && x.Host == "plain.example.test" && x.Verdict == verdictAllow
	})
	// Another name (allowed itself) at api's address: refused.
	for _, u := range []string{"https://other.example.test/x", "http://other.example.test/x"} {
		if _, err := captured(capSock, api.String()+":443", e).Get(u); err == nil {
			t.Errorf("%s at %s: served", u, api)
		}
	}
	en := e.entry(t, func(x Entry) bool { return x.Method == "CAPTURE" && strings.Contains(x.Reason, `"other.example.test"`) })
	if en.Verdict != verdictDeny || en.Host != "api.example.test" {
		t.Errorf("mismatch logged %+v", en)
	}
	// An address given to no name: refused.
	if _, err := captured(capSock, "198.19.255.254:443", e).Get("https://api.example.test/x"); err == nil {
		t.Error("a synthetic address given to no name was served")
	}
	en = e.entry(t, func(x Entry) bool { return x.Method == "CAPTURE" && x.Host == "198.19.255.254" })
	if en.Verdict != verdictDeny || en.Reason != "synthetic address given to no name" {
		t.Errorf("unassigned logged %+v", en)
	}
}

// FuzzAnswerDNS: any message gets no answer or one that parses, answers
// its ID, and gives addresses only for a name the rules allow, each one
// mapping back to that name.
func FuzzAnswerDNS(f *testing.F) {
	for _, q := range [][]byte{
		dnsQuery(f, 1, "api.example.test.", dnsmessage.TypeA, true),
		dnsQuery(f, 2, "x.wild.test.", dnsmessage.TypeAAAA, false),
		dnsQuery(f, 3, "evil.example.", dnsmessage.TypeALL, false),
		{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, // a name pointing at itself
	} {
		f.Add(q)
	}
	srv, err := New(Config{CA: memCA(f), Rules: Rules{Allow: []string{"api.example.test", "*.wild.test"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		a := srv.answerDNS(msg)
		if a == nil {
			return
		}
		m := new(dnsmessage.Message)
		if err := m.Unpack(a); err != nil {
			t.Fatalf("the answer to %x does not parse: %v", msg, err)
		}
		if !m.Response || len(msg) < 2 || m.ID != binary.BigEndian.Uint16(msg) {
			t.Fatalf("the answer to %x is not a response to it: %+v", msg, m.Header)
		}
		for _, r := range m.Answers {
			var ip netip.Addr
			switch b := r.Body.(type) {
			case *dnsmessage.AResource:
				ip = netip.AddrFrom4(b.A)
			case *dnsmessage.AAAAResource:
				ip = netip.AddrFrom16(b.AAAA)
			default:
				t.Fatalf("unexpected record %v", r)
			}
			name, ok := srv.SyntheticName(ip)
			if d := srv.rules.Load().Decide(name, 443); !ok || !d.Allow || !strings.EqualFold(strings.TrimSuffix(r.Header.Name.String(), "."), name) {
				t.Fatalf("%v answered for %q, given to %q (%v)", ip, r.Header.Name, name, d)
			}
		}
	})
}
