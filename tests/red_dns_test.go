package tests

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
)

// The jail's resolver attacked from inside: names past the session's cap,
// malformed and oversized messages over UDP and TCP, names that would
// mislead the log or a terminal, queries to port 53 of the host's own
// address, and synthetic addresses in other spellings.

// reddnsPy makes the attacks and prints "##NAME=RESULT":
//
//	exhaust N       N distinct names under a wildcard, one query each
//	malformed       messages that are not one well-formed query, then a
//	                well-formed one (the resolver must still answer)
//	tcp             DNS over TCP: no length, too long, pipelined, a byte
//	                at a time, many connections held
//	spellings HOSTIP  a name resolved, then dialled as an IPv4-mapped
//	                IPv6 address; other IPv6 destinations; port 53 of the
//	                host's address
const reddnsPy = `
import errno, os, random, socket, struct, sys, time

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

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}

def qname(name):
    b = b""
    for label in name.split(b"."):
        if label:
            b += bytes([len(label)]) + label
    return b + b"\0"

def query(name, qtype=1, qid=None, raw_name=None):
    qid = random.randrange(65536) if qid is None else qid
    q = raw_name if raw_name is not None else qname(name if isinstance(name, bytes) else name.encode())
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + struct.pack(">HH", qtype, 1)

def parse(msg):
    # rcode and the addresses of the A and AAAA answers.
    if len(msg) < 12:
        return "short"
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", msg[:12])
    p = 12
    for _ in range(qd):
        while msg[p] != 0:
            if msg[p] & 0xc0 == 0xc0:
                p += 1
                break
            p += msg[p] + 1
        p += 1 + 4
    addrs = []
    for _ in range(an):
        if msg[p] & 0xc0 == 0xc0:
            p += 2
        else:
            while msg[p] != 0:
                p += msg[p] + 1
            p += 1
        typ, cls, ttl, rdlen = struct.unpack(">HHIH", msg[p:p + 10])
        p += 10
        rd = msg[p:p + rdlen]
        p += rdlen
        if typ == 1:
            addrs.append(socket.inet_ntop(socket.AF_INET, rd))
        elif typ == 28:
            addrs.append(socket.inet_ntop(socket.AF_INET6, rd))
    res = RCODES.get(flags & 0xf, str(flags & 0xf))
    return res + (" " + ",".join(addrs) if addrs else "")

def udp(msg, server=("127.0.0.1", 53), tries=3):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    for _ in range(tries):
        s.sendto(msg, server)
        try:
            return parse(s.recvfrom(65535)[0])
        except socket.timeout:
            continue
    return "timeout"

def exhaust(n):
    n = int(n)
    got = {}
    first = None
    for i in range(n):
        r = udp(query("n%d.wide.allowed.test" % i))
        k = r.split(" ")[0]
        got[k] = got.get(k, 0) + 1
        if i == 0:
            first = r
    out("exhaust", ",".join("%s:%d" % kv for kv in sorted(got.items())))
    out("exhaust-first-again", "same" if udp(query("n0.wide.allowed.test")) == first else "changed")
    out("exhaust-new", udp(query("api.allowed.test")).split(" ")[0])

def malformed():
    cases = {
        "empty": b"",
        "header-only": struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0),
        "two-questions": struct.pack(">HHHHHH", 2, 0x0100, 2, 0, 0, 0) + (qname(b"api.allowed.test") + b"\0\1\0\1") * 2,
        "response": struct.pack(">HHHHHH", 3, 0x8100, 1, 0, 0, 0) + qname(b"api.allowed.test") + b"\0\1\0\1",
        "pointer-loop": struct.pack(">HHHHHH", 4, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c" + b"\0\1\0\1",
        "notify": struct.pack(">HHHHHH", 5, 0x2100, 1, 0, 0, 0) + qname(b"api.allowed.test") + b"\0\1\0\1",
        "class-chaos": struct.pack(">HHHHHH", 6, 0x0100, 1, 0, 0, 0) + qname(b"version.bind") + b"\0\x10\0\3",
        "huge": query("api.allowed.test") + b"\0" * 8000,
    }
    for k, m in cases.items():
        out("malformed-" + k, udp(m, tries=1) if m else udp(m, tries=1))
    # A dot inside a label, an escape sequence, bytes that are not a name.
    out("dot-label", udp(query(None, raw_name=b"\x0bapi.allowed\x04test\0")))
    out("esc-label", udp(query(b"evil\x1b]0;owned\x07.test")))
    out("bin-label", udp(query(b"\xff\xfe\x00x.allowed.test")))
    out("long-name", udp(query(b".".join([b"a" * 63] * 4))))
    out("ptr", udp(query("1.0.18.198.in-addr.arpa", 12)))
    out("any", udp(query("api.allowed.test", 255)))
    out("txt", udp(query("api.allowed.test", 16)))
    out("after", udp(query("api.allowed.test")))

def tcpq(chunks, want, hold=None):
    s = socket.create_connection(("127.0.0.1", 53), timeout=5)
    for c in chunks:
        s.sendall(c)
        if hold:
            time.sleep(hold)
    answers = []
    data = b""
    try:
        while len(answers) < want:
            d = s.recv(65535)
            if not d:
                break
            data += d
            while len(data) >= 2 and len(data) >= 2 + struct.unpack(">H", data[:2])[0]:
                n = struct.unpack(">H", data[:2])[0]
                answers.append(parse(data[2:2 + n]))
                data = data[2 + n:]
    except socket.timeout:
        answers.append("timeout")
    s.close()
    return ";".join(answers) if answers else "closed"

def framed(m):
    return struct.pack(">H", len(m)) + m

def tcp():
    out("tcp-zero", tcpq([b"\0\0"], 1))
    out("tcp-long", tcpq([b"\xff\xff" + b"\0" * 100], 1))
    pipe = b"".join(framed(query("api.allowed.test", qid=i)) for i in range(50))
    r = tcpq([pipe], 50)
    out("tcp-pipelined", "%d answers" % len([a for a in r.split(";") if a.startswith("NOERROR")]))
    one = framed(query("api.allowed.test"))
    out("tcp-bytes", tcpq([one[i:i + 1] for i in range(len(one))], 1, hold=0.01))
    held = []
    for i in range(300):
        try:
            held.append(socket.create_connection(("127.0.0.1", 53), timeout=5))
        except OSError as e:
            break
    out("tcp-held", len(held))
    for s in held:
        s.close()
    time.sleep(1)
    out("tcp-after", tcpq([framed(query("api.allowed.test"))], 1))

def spellings(hostip):
    a = udp(query("plain.allowed.test")).split(" ")
    addr = a[1] if len(a) > 1 else ""
    out("addr", addr)
    def get6(ip, host, proto=0, port=80):
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM, proto)
        s.settimeout(10)
        s.connect((ip, port))
        if host:
            s.sendall(("GET /mapped HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
        d = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            d += b
        return d.split(b"\r\n")[0].decode(errors="replace").split(" ")[1] if d else "closed"
    attempt("mapped", lambda: get6("::ffff:" + addr, "plain.allowed.test"))
    a6 = udp(query("plain.allowed.test", 28)).split(" ")
    addr6 = a6[1] if len(a6) > 1 else ""
    out("addr6", addr6)
    attempt("mptcp6", lambda: get6(addr6, "plain.allowed.test", 262))
    attempt("direct6", lambda: get6("::1", "", port=3129))
    def conn6(ip):
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect((ip, 80))
        return "connected"
    attempt("v6-doc", lambda: conn6("2001:db8::1"))
    attempt("v6-next-prefix", lambda: conn6("fd6a:6169:6c01::1"))
    attempt("v6-ula", lambda: conn6("fd00::1"))
    attempt("udp53-host", lambda: udp(query("api.allowed.test"), (hostip, 53)))
    attempt("udp53-host-evil", lambda: udp(query("evil.test"), (hostip, 53)))

cmd = sys.argv[1]
{"exhaust": exhaust, "malformed": malformed, "tcp": tcp, "spellings": spellings}[cmd](*sys.argv[2:])
`

// A wildcard allows any number of names, each given addresses for the
// session: past the session's cap a new name is refused (REFUSED, logged
// once), the names given addresses keep them, and the host process stays
// small.
func TestRedDNSNameExhaustion(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		s.WriteFile(s.Project+"/reddns.py", reddnsPy, 0o644)
		cmd := s.JailCmd("--", "sh", "-c", "echo session=$JAIL_SESSION; python3 reddns.py exhaust 16400")
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
			t.Fatalf("the run failed: %v\n%s", err, r)
		}
		t.Logf("the jail's host process peaked at %d kB VmHWM", peak.hwm)
		wantKV(t, r, "exhaust", is("NOERROR:16384,REFUSED:16"), "16384 names given addresses, the 16 past the cap refused")
		wantKV(t, r, "exhaust-first-again", is("same"), "the first name keeps its address")
		wantKV(t, r, "exhaust-new", is("REFUSED"), "REFUSED for a new name past the cap")
		if peak.hwm == 0 || peak.hwm > 160<<10 {
			t.Errorf("the jail's host process peaked at %d kB, want under 160 MB", peak.hwm)
		}
		var limited int
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Method == "DNS" && d.Rule == "limit names" {
				limited++
			}
		}
		if limited != 17 {
			t.Errorf("the log has %d names refused at the cap, want 17 (each logged once)", limited)
		}
	})
}

// Messages that are not one well-formed query, over UDP and TCP, get an
// error or nothing; the resolver answers the next query as before; TCP
// connections held open past the session's cap are refused and the
// resolver serves again once they are let go. A name with an escape
// sequence is logged in a form that cannot drive the user's terminal.
func TestRedDNSMalformed(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		s.WriteFile(s.Project+"/reddns.py", reddnsPy, 0o644)
		r := s.Sh("echo session=$JAIL_SESSION; python3 reddns.py malformed; python3 reddns.py tcp")
		noAnswer := func(v string) bool { return !strings.HasPrefix(v, "NOERROR 198.") }
		for _, k := range []string{"empty", "header-only", "two-questions", "response", "pointer-loop", "notify", "class-chaos", "huge"} {
			wantKV(t, r, "malformed-"+k, noAnswer, "no address")
		}
		wantKV(t, r, "esc-label", is("NXDOMAIN"), "NXDOMAIN")
		wantKV(t, r, "bin-label", noAnswer, "no address")
		wantKV(t, r, "long-name", noAnswer, "no address")
		wantKV(t, r, "ptr", noAnswer, "no address")
		wantKV(t, r, "txt", is("NOERROR"), "NOERROR without answers")
		wantKV(t, r, "any", func(v string) bool { return strings.HasPrefix(v, "NOERROR 198.") && strings.Contains(v, ",fd6a:") }, "both synthetic addresses")
		wantKV(t, r, "after", func(v string) bool { return strings.HasPrefix(v, "NOERROR 198.") }, "an address: the resolver still answers")
		wantKV(t, r, "dot-label", func(v string) bool { return !strings.HasPrefix(v, "NOERROR") || v == kvs(r)["after"] }, "no address other than the allowed name's own")
		for _, k := range []string{"tcp-zero", "tcp-long"} {
			wantKV(t, r, k, is("closed"), "closed")
		}
		wantKV(t, r, "tcp-pipelined", is("50 answers"), "an answer to each of 50 pipelined queries")
		wantKV(t, r, "tcp-bytes", func(v string) bool { return strings.HasPrefix(v, "NOERROR 198.") }, "an answer to a query sent a byte at a time")
		wantKV(t, r, "tcp-after", func(v string) bool { return strings.HasPrefix(v, "NOERROR 198.") }, "an answer once the held connections are let go")
		table := s.Jail("log")
		if strings.ContainsRune(table.Stdout, 0x1b) || strings.ContainsRune(table.Stdout, 0x07) {
			t.Errorf("jail log prints a queried name's escape sequence raw:\n%q", table.Stdout)
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, d := range ds {
			if d.Method == "DNS" && d.Verdict != "deny" {
				t.Errorf("the log shows a query as %v; only refusals are logged", d)
			}
		}
	})
}

// A synthetic address in another spelling (IPv4-mapped IPv6) is still
// decided by its name; IPv6 destinations outside the synthetic prefix have
// no route; a query to port 53 of the host's own address is answered by
// the jail's resolver, and the host's port 53 sees nothing.
func TestRedDNSSpellings(t *testing.T) {
	t.Parallel()
	hostIP := hostIPv4()
	if hostIP == "" {
		t.Fatalf("this machine has no non-loopback IPv4 address to test against")
	}
	// One listener for both runners: the host's UDP and TCP port 53.
	dns := newUDPCounterAt(t, net.JoinHostPort(hostIP, "53"))
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/reddns.py", reddnsPy, 0o644)
		r := s.Sh(unsetProxy + "echo session=$JAIL_SESSION; python3 reddns.py spellings " + hostIP)
		wantKV(t, r, "addr", synthetic, "a synthetic address")
		wantKV(t, r, "mapped", is("200"), "200: an IPv4-mapped synthetic address is decided by its name")
		wantKV(t, r, "mptcp6", is("200"), "200: a Multipath TCP client of a synthetic IPv6 address is captured like any other")
		wantKV(t, r, "direct6", is("closed"), "closed: the capture port on ::1 dialled directly names itself")
		if !n.Plain.Saw("/mapped") {
			t.Errorf("control: the plain server did not see /mapped")
		}
		for _, k := range []string{"v6-doc", "v6-next-prefix", "v6-ula"} {
			wantKV(t, r, k, is("ENETUNREACH"), "ENETUNREACH (outside the synthetic prefix, IPv6 has no route)")
		}
		wantKV(t, r, "udp53-host", func(v string) bool { return strings.HasPrefix(v, "NOERROR 198.") }, "the jail's resolver's answer")
		wantKV(t, r, "udp53-host-evil", is("NXDOMAIN"), "NXDOMAIN from the jail's resolver")
		if c := dns.n.Load(); c != 0 {
			t.Errorf("the host's port 53 on %s received %d datagrams from inside the jail", hostIP, c)
		}
		ds := decisions(t, s, sessionOf(t, r))
		noMappedSpelling(t, ds)
		var mapped int
		for _, d := range ds {
			if d.Host == "plain.allowed.test" && d.Path == "/mapped" && d.Verdict == "allow" {
				mapped++
			}
		}
		if mapped != 2 {
			t.Errorf("%d requests to synthetic addresses logged as allowed under their name, want 2 (mapped, MPTCP over IPv6):\n%s", mapped, dumpDecisions(ds))
		}
		if d, ok := findDecision(ds, "::1", ""); !ok || d.Verdict != "deny" || d.Port != 3129 {
			t.Errorf("the capture port on ::1 dialled directly: want ::1:3129 denied, got %v in:\n%s", d, dumpDecisions(ds))
		}
	})
}
