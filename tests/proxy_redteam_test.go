package tests

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// redteamPy attacks the proxy from inside the jail through the bridge's
// HTTP port and prints "##NAME=RESULT" lines:
//
//	denied N   N requests to a denied host, each with a 30 KiB URL, each
//	           on its own connection (a refusal closes it)
//	flood N    hold N silent connections, past the session's cap, then
//	           let go and fetch through the proxy again
//	fronting   in CONNECT and SOCKS tunnels to plain.allowed.test, a
//	           request for Host: evil.test sent in pieces or dressed up
const redteamPy = `
import socket, sys, time

HTTP = ("127.0.0.1", 3128)

def out(name, res):
    print("##%s=%s" % (name, res), flush=True)

def status(s):
    b = b""
    while b"\r\n" not in b:
        d = s.recv(4096)
        if not d:
            break
        b += d
    return b.split(b"\r\n", 1)[0].decode(errors="replace")

def denied(n):
    long = "a" * (30 << 10)
    refused = 0
    for i in range(n):
        s = socket.create_connection(HTTP, timeout=10)
        s.sendall(("GET http://evil.test/%s/%d HTTP/1.1\r\nHost: evil.test\r\n\r\n" % (long, i)).encode())
        if " 403 " in status(s):
            refused += 1
        s.close()
    out("denied", refused)

def flood(n):
    held = []
    for i in range(n):
        try:
            held.append(socket.create_connection(HTTP, timeout=10))
        except OSError as e:
            out("flood-error", str(e))
            break
    time.sleep(2)
    for s in held:
        s.close()
    out("flood", len(held))

def tunnel(via, parts):
    if via == "connect":
        s = socket.create_connection(HTTP, timeout=10)
        s.sendall(b"CONNECT plain.allowed.test:80 HTTP/1.1\r\nHost: plain.allowed.test:80\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(1)
            if not d:
                return "closed"
            head += d
    else:
        s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
        s.sendall(b"\x05\x01\x00")
        s.recv(2)
        h = b"plain.allowed.test"
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + b"\x00\x50")
        s.recv(10)
    for p in parts:
        s.sendall(p.encode())
        time.sleep(0.05)
    s.settimeout(3)
    try:
        r = status(s)
    except OSError as e:
        r = type(e).__name__
    s.close()
    return r

def fronting():
    req = " /fronted HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
    cases = {"split": ["G", "ET" + req], "lower": ["get" + req], "dash": ["M-SEARCH" + req], "bytes": list("POST" + req)}
    for via in ("connect", "socks"):
        for name, parts in cases.items():
            out("%s-%s" % (via, name), tunnel(via, parts))

cmd = sys.argv[1]
if cmd == "fronting":
    fronting()
elif cmd == "denied":
    denied(int(sys.argv[2]))
elif cmd == "flood":
    flood(int(sys.argv[2]))
`

// procPeak is what a host process peaked at while it ran: VmRSS sampled
// and the kernel's VmHWM, in kB, and open descriptors.
type procPeak struct{ rss, hwm, fds int }

// sampleProc samples pid every 50 ms until it exits.
func sampleProc(pid int) procPeak {
	var p procPeak
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil || strings.Contains(string(b), "State:\tZ") {
			return p
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.Atoi(f[1])
			switch f[0] {
			case "VmRSS:":
				p.rss = max(p.rss, v)
			case "VmHWM:":
				p.hwm = v
			}
		}
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			p.fds = max(p.fds, len(fds))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gzipZeros is a gzip stream of n zero bytes.
func gzipZeros(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	for i := 0; i < n; i += len(zero) {
		zw.Write(zero)
	}
	zw.Close()
	return b.Bytes()
}

// TestProxyRedteam attacks the host side of the jail from inside, with a
// secret in force so that the proxy inspects bodies: denials with 30 KiB
// URLs kept for the summary, 48 textual 4 MiB bodies at once (read whole
// to rewrite placeholders), a gzip bomb (inflated to be checked), and a
// flood of connections past the cap. The jail's host process must stay
// within bounds of memory and descriptors, refuse the bomb at once, send
// every honest body, and serve again after the flood.
func TestProxyRedteam(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		g := setupSecrets(t, s, []string{"MY_API_KEY"}, nil, nil)
		s.WriteFile(s.Project+"/redteam.py", redteamPy, 0o644)
		s.WriteFile(s.Project+"/bomb.gz", string(gzipZeros(t, 1<<30)), 0o644)
		s.WriteFile(s.Project+"/big.txt", strings.Repeat("x", 4<<20), 0o644)
		var cfg strings.Builder
		cfg.WriteString("request = \"POST\"\ndata-binary = \"@big.txt\"\nheader = \"Content-Type: text/plain\"\nwrite-out = \"##body=%{http_code}\\n\"\n")
		for i := range 48 {
			fmt.Fprintf(&cfg, "url = \"https://%s/body/%d\"\noutput = \"/dev/null\"\n", otherHost, i)
		}
		s.WriteFile(s.Project+"/bodies.cfg", cfg.String(), 0o644)
		script := `python3 redteam.py denied 1500
curl -sS --parallel --parallel-max 48 -K bodies.cfg
curl -sS -o /dev/null -w '##bomb=%{http_code} %{time_total}\n' -H 'Content-Encoding: gzip' --data-binary @bomb.gz https://` + otherHost + `/bomb
python3 redteam.py flood 600
curl -sS -o /dev/null -w '##after=%{http_code}\n' https://` + otherHost + `/after
`
		cmd := s.JailCmd("--", "sh", "-c", script)
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
			t.Fatalf("the attack run failed: %v\n%s", err, r)
		}
		got := abuseResults(r)
		t.Logf("the jail's host process peaked at %d kB RSS sampled, %d kB VmHWM, %d descriptors", peak.rss, peak.hwm, peak.fds)

		if got["denied"] != "1500" {
			t.Errorf("of 1500 requests to a denied host, %s were refused with 403\n%s", got["denied"], r)
		}
		if n := strings.Count(r.Stdout, "##body=200"); n != 48 {
			t.Errorf("%d of 48 textual 4 MiB bodies were sent, want all\n%s", n, r)
		}
		var code int
		var secs float64
		if _, err := fmt.Sscanf(got["bomb"], "%d %f", &code, &secs); err != nil || code != 413 || secs > 5 {
			t.Errorf("a gzip bomb: %q, want 413 within seconds\n%s", got["bomb"], r)
		}
		if len(g.Other.At("/bomb")) != 0 {
			t.Error("the gzip bomb reached the upstream")
		}
		if got["flood"] != "600" || got["after"] != "200" {
			t.Errorf("the flood held %q connections; after it: %q, want 600 and 200\n%s", got["flood"], got["after"], r)
		}
		// The proxy holds 32 MiB of bodies at once and 256 connections
		// per session; without those bounds this run peaked far higher.
		if hwm := max(peak.rss, peak.hwm); peak.hwm == 0 || hwm > 160<<10 {
			t.Errorf("the jail's host process peaked at %d kB RSS, want under 160 MB", hwm)
		}
		if peak.fds == 0 || peak.fds > 700 {
			t.Errorf("the jail's host process peaked at %d descriptors, want under 700", peak.fds)
		}
		if !strings.Contains(r.Stderr, "requests denied (evil.test ×1500") {
			t.Errorf("the exit summary does not count the denials:\n%s", r.Stderr)
		}
	})
}

// TestProxyRedteamTunnelFronting sends, inside CONNECT and SOCKS tunnels
// to an allowed plain-HTTP host, a request for a denied host that the
// proxy might not recognise as HTTP: its first byte alone, a lower-case
// or dashed method, a byte at a time. Relayed raw, the allowed host's
// server would answer for the denied one.
func TestProxyRedteamTunnelFronting(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/redteam.py", redteamPy, 0o644)
		r := s.Jail("--", "python3", "redteam.py", "fronting")
		got := abuseResults(r)
		for _, via := range []string{"connect", "socks"} {
			for _, c := range []string{"split", "lower", "dash", "bytes"} {
				if v := got[via+"-"+c]; v != "HTTP/1.1 403 Forbidden" {
					t.Errorf("%s, %s: %q, want the proxy's 403 for the Host it names\n%s", via, c, v, r)
				}
			}
		}
		for _, h := range n.Plain.hits.Requests() {
			if h.Host == "evil.test" || h.Path == "/fronted" {
				t.Errorf("the allowed host's server received %s %s for Host %q", h.Method, h.Path, h.Host)
			}
		}
	})
}
