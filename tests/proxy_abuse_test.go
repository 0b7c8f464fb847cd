package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// abusePy attacks the proxy from inside the jail through the bridge's
// ports and prints "##NAME=RESULT" lines:
//
//	cap N          hold N silent connections, then try one more over HTTP
//	               and one over SOCKS, let go, and try again
//	slow           a request head and a TLS ClientHello, a byte a second
//	sni NAME       TLS in a CONNECT and a SOCKS tunnel to NAME with the
//	               right server name, another one, and none
const abusePy = `
import socket, ssl, struct, sys, threading, time

HTTP, SOCKS = ("127.0.0.1", 3128), ("127.0.0.1", 1080)

def out(name, res):
    print("##%s=%s" % (name, str(res).replace("\n", " ").replace("\r", "")), flush=True)

def recv_all(s, limit=65536):
    b = b""
    while len(b) < limit:
        try:
            d = s.recv(4096)
        except OSError as e:
            break
        if not d:
            break
        b += d
    return b

def closed(s):
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)

def get(path):
    s = socket.create_connection(HTTP, timeout=10)
    s.sendall(("GET http://plain.allowed.test%s HTTP/1.1\r\nHost: plain.allowed.test\r\nConnection: close\r\n\r\n" % path).encode())
    r = recv_all(s)
    s.close()
    return r.decode(errors="replace")

def socks_connect(host, port):
    s = socket.create_connection(SOCKS, timeout=10)
    s.sendall(b"\x05\x01\x00")
    g = s.recv(2)
    if g != b"\x05\x00":
        return s, "greeting:" + g.hex()
    h = host.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
    rep = s.recv(10)
    return s, "rep=%d" % rep[1] if len(rep) >= 2 else "closed"

def cap(n):
    held = [socket.create_connection(HTTP, timeout=10) for _ in range(n)]
    time.sleep(1.5)  # the bridge hands each one to the proxy
    out("held-refused", sum(1 for s in held if closed(s)))
    r = get("/over-cap")
    out("http-over", r.split("\r\n")[0] + "|" + r.split("\r\n\r\n", 1)[-1].strip())
    s, rep = socks_connect("plain.allowed.test", 80)
    out("socks-over", rep)
    s.close()
    for s in held:
        s.close()
    for i in range(100):
        r = get("/after-cap")
        if r.startswith("HTTP/1.1 200"):
            out("after", "200 after %d tries" % (i + 1))
            return
        time.sleep(0.1)
    out("after", r.split("\r\n")[0])

def trickle(name, s, data):
    start = time.time()
    for i in range(len(data)):
        try:
            s.send(data[i:i+1])
        except OSError:
            break
        deadline = time.time() + 1
        while time.time() < deadline:
            if closed(s):
                out(name, "closed after %.1fs and %d bytes" % (time.time() - start, i + 1))
                return
            time.sleep(0.05)
        if time.time() - start > 40:
            break
    out(name, "open after %.1fs" % (time.time() - start))

def slow_head():
    s = socket.create_connection(HTTP, timeout=60)
    trickle("slow-head", s, b"GET http://plain.allowed.test/slowloris HTTP/1.1\r\nHost: plain.allowed.test\r\nX-Pad: " + b"a" * 100)

def slow_hello():
    s = socket.create_connection(HTTP, timeout=60)
    s.sendall(b"CONNECT api.allowed.test:443 HTTP/1.1\r\nHost: api.allowed.test:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="api.allowed.test")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    trickle("slow-hello", s, outgoing.read())

def slow():
    ts = [threading.Thread(target=f) for f in (slow_head, slow_hello)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

def tls_fetch(s, server_name, path, host):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        t = ctx.wrap_socket(s, server_hostname=server_name)
        t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
        r = recv_all(t).decode(errors="replace")
        return r.split("\r\n")[0] + "|" + r.split("\r\n\r\n", 1)[-1].strip()
    except (OSError, ssl.SSLError) as e:
        return "refused:" + type(e).__name__

def connect(host):
    s = socket.create_connection(HTTP, timeout=10)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    return s

def sni(host):
    for via in ("connect", "socks"):
        for case, name in (("ok", host), ("fronted", "evil.test"), ("none", None)):
            s = connect(host) if via == "connect" else socks_connect(host, 443)[0]
            out("%s-%s" % (via, case), tls_fetch(s, name, "/sni-%s-%s" % (via, case), name or host))

cmd = sys.argv[1]
if cmd == "cap":
    cap(int(sys.argv[2]))
elif cmd == "slow":
    slow()
elif cmd == "sni":
    sni(sys.argv[2])
`

// abuseResults parses the "##NAME=RESULT" lines of a run.
func abuseResults(r Result) map[string]string {
	out := map[string]string{}
	for _, l := range lines(r.Stdout) {
		if k, v, ok := strings.Cut(strings.TrimPrefix(l, "##"), "="); ok && strings.HasPrefix(l, "##") {
			out[k] = v
		}
	}
	return out
}

func TestProxyAbuseConnectionCap(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/abuse.py", abusePy, 0o644)
		r := s.Jail("--", "python3", "abuse.py", "cap", "256")
		got := abuseResults(r)
		if got["held-refused"] != "0" {
			t.Errorf("of 256 connections (the session's cap), %s were refused:\n%s", got["held-refused"], r)
		}
		if h := got["http-over"]; !strings.HasPrefix(h, "HTTP/1.1 503") || !strings.Contains(h, "connection limit reached: 256 connections of this session") {
			t.Errorf("the 257th connection over HTTP: %q, want 503 naming the limit\n%s", h, r)
		}
		if got["socks-over"] != "rep=1" {
			t.Errorf("the 257th connection over SOCKS: %q, want a general failure (rep=1)\n%s", got["socks-over"], r)
		}
		if !strings.HasPrefix(got["after"], "200") {
			t.Errorf("after the flood: %q, want the jail working again\n%s", got["after"], r)
		}
		if n.Plain.Saw("/over-cap") || !n.Plain.Saw("/after-cap") {
			t.Errorf("the upstream saw %v: want /after-cap and never /over-cap", n.Plain.Paths())
		}
		var refusals int
		for _, d := range decisions(t, s, "") {
			if d.Verdict == "deny" && d.Rule == "limit connections" {
				refusals++
			}
		}
		if refusals != 2 {
			t.Errorf("the log has %d connection-limit refusals, want 2 (HTTP and SOCKS)", refusals)
		}
	})
}

func TestProxyAbuseSlowloris(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/abuse.py", abusePy, 0o644)
		r := s.Jail("--", "python3", "abuse.py", "slow")
		got := abuseResults(r)
		// The proxy gives a request head and a handshake 10 s each, not
		// reset by a byte.
		for _, name := range []string{"slow-head", "slow-hello"} {
			var secs float64
			var sent int
			if _, err := fmt.Sscanf(got[name], "closed after %fs and %d bytes", &secs, &sent); err != nil || secs < 8 || secs > 14 {
				t.Errorf("%s, a byte a second: %q, want closed after about 10 s\n%s", name, got[name], r)
			}
		}
		if n.Plain.Saw("/slowloris") || n.API.Conns() != 0 {
			t.Errorf("the upstreams saw %v and %d TLS connections", n.Plain.Paths(), n.API.Conns())
		}
	})
}

func TestProxyAbusePassthroughSNI(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		n := setupNet(t, s, "")
		addPassthrough(t, s, "api.allowed.test")
		s.WriteFile(s.Project+"/abuse.py", abusePy, 0o644)
		r := s.Jail("--", "python3", "abuse.py", "sni", "api.allowed.test")
		got := abuseResults(r)
		for _, via := range []string{"connect", "socks"} {
			if ok := got[via+"-ok"]; ok != "HTTP/1.1 200 OK|upstream says /sni-"+via+"-ok" {
				t.Errorf("%s, the tunnel's own name: %q, want the upstream's answer\n%s", via, ok, r)
			}
			for _, c := range []string{"fronted", "none"} {
				if v := got[via+"-"+c]; !strings.HasPrefix(v, "refused:") {
					t.Errorf("%s, server name %s: %q, want the tunnel refused\n%s", via, c, v, r)
				}
			}
		}
		if fronted := n.API.SawPrefix("/sni-"); len(fronted) != 2 {
			t.Errorf("the upstream saw %v, want only the two requests with the right name", fronted)
		}
		var fronting, none int
		for _, d := range decisions(t, s, "") {
			if d.Verdict != "deny" || d.Host != "api.allowed.test" {
				continue
			}
			if strings.Contains(d.Reason, `"evil.test"`) && strings.Contains(d.Reason, "api.allowed.test") {
				fronting++
			}
			if strings.Contains(d.Reason, "without a server name") {
				none++
			}
		}
		if fronting != 2 || none != 2 {
			t.Errorf("the log has %d fronting and %d no-SNI refusals, want 2 each", fronting, none)
		}
	})
}

// addPassthrough adds names to network.passthrough in the project's
// jail.json as setupNet wrote it.
func addPassthrough(t *testing.T, s *Sandbox, names ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Project, "jail.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["network"]["passthrough"] = names
	m := map[string]any{}
	for k, v := range cfg {
		m[k] = v
	}
	writeJailJSON(t, s, m)
}

// TestProxySoak runs 10,000 intercepted HTTPS requests over 64 concurrent
// connections from curl inside the jail, as the unprivileged user, and
// checks that the jail's host process (the proxy's) stays under 64 MB
// RSS. It reports requests per second, the p99 latency against the same
// curl run directly on the host, and the peak RSS.
func TestProxySoak(t *testing.T) {
	requests := 10000
	if v, err := strconv.Atoi(os.Getenv("JAIL_SOAK_REQUESTS")); err == nil && v > 0 {
		requests = v // make bench runs a longer soak
	}
	rs := runners(t)
	soak(t, NewSandbox(t, rs[len(rs)-1]), requests, 64)
}

func soak(t *testing.T, s *Sandbox, requests, parallel int) {
	n := setupNet(t, s, "")
	var cfg strings.Builder
	for i := range requests {
		fmt.Fprintf(&cfg, "url = \"https://api.allowed.test/soak/%d\"\noutput = \"/dev/null\"\n", i)
	}
	s.WriteFile(s.Project+"/urls.cfg", cfg.String(), 0o644)
	curl := []string{"curl", "-sS", "--no-progress-meter", "--parallel", "--parallel-max", strconv.Itoa(parallel), "-w", "%{http_code} %{time_total}\n", "-K", s.Project + "/urls.cfg"}

	cmd := s.JailCmd(append([]string{"--"}, curl...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := make(chan [2]int)
	go func() { peak <- sampleRSS(cmd.Process.Pid) }()
	err := cmd.Wait()
	took := time.Since(start)
	mem := <-peak
	if err != nil {
		t.Fatalf("curl in the jail: %v\n%s\n%.3000s", err, stderr.String(), stdout.String())
	}
	jailed := curlTimes(t, stdout.String(), requests)
	if got := len(n.API.SawPrefix("/soak/")); got != requests {
		t.Errorf("the upstream served %d of %d requests", got, requests)
	}

	// The same curl on the host, straight to the server.
	direct := append([]string{"--connect-to", "api.allowed.test:443:" + n.API.Addr(), "--cacert", filepath.Join(s.Base, "trust", "bundle.pem")}, curl[1:]...)
	out := s.Host("curl", direct...)
	directTimes := curlTimes(t, out, requests)

	p99 := func(d []time.Duration) time.Duration { return d[len(d)*99/100] }
	t.Logf("%d intercepted requests over %d connections in %v: %.0f requests/s; p99 %v jailed, %v direct (+%v); peak RSS %d kB (VmHWM), %d kB sampled",
		requests, parallel, took.Round(time.Millisecond), float64(requests)/took.Seconds(),
		p99(jailed), p99(directTimes), p99(jailed)-p99(directTimes), mem[1], mem[0])
	if peak := max(mem[0], mem[1]); mem[1] == 0 || peak >= 64<<10 {
		t.Errorf("the jail's host process peaked at %d kB RSS, want under 64 MB", peak)
	}
}

// sampleRSS samples a process's VmRSS until it exits and returns the
// largest seen and its last VmHWM (the kernel's peak), in kB.
func sampleRSS(pid int) [2]int {
	var rss, hwm int
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil || strings.Contains(string(b), "State:\tZ") {
			return [2]int{rss, hwm}
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.Atoi(f[1])
			switch f[0] {
			case "VmRSS:":
				rss = max(rss, v)
			case "VmHWM:":
				hwm = v
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// curlTimes parses curl's "CODE SECONDS" lines, failing on any answer
// but 200, and returns the times sorted.
func curlTimes(t *testing.T, out string, want int) []time.Duration {
	var ds []time.Duration
	for _, l := range lines(out) {
		var code int
		var secs float64
		if _, err := fmt.Sscanf(l, "%d %f", &code, &secs); err != nil || code != 200 {
			t.Fatalf("curl printed %q, want 200 and a time", l)
		}
		ds = append(ds, time.Duration(secs*float64(time.Second)))
	}
	if len(ds) != want {
		t.Fatalf("curl reported %d transfers, want %d", len(ds), want)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}
