package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Programs that ignore the proxy variables are captured: every TCP
// connection the jail opens outside its own loopback reaches the proxy,
// which decides it by the name the client sends (TLS server name, Host
// header) or else by the IP literal it dialled.

// capfetchJS: Node's built-in fetch, with every name "resolved" to a
// documentation address, not one of the jail's resolver: the connection is
// captured, and the server name in the ClientHello decides.
const capfetchJS = `
const dns = require('dns');
dns.lookup = (host, opts, cb) => {
	if (typeof opts === 'function') cb = opts, opts = {};
	const a = '192.0.2.10';
	return opts && opts.all ? cb(null, [{address: a, family: 4}]) : cb(null, a, 4);
};
const name = process.argv[2];
const clean = s => String(s).replace(/[\t\r\n]/g, ' ').trim();
const out = (code, status, body, err) => console.log(['@@' + name, code, status + ' 000', clean(body), clean(err)].join('\t'));
fetch(process.argv[3], {signal: AbortSignal.timeout(15000)})
	.then(r => r.text().then(b => out(0, r.status, b, '')))
	.catch(e => out(1, '000', '', (e.cause && (e.cause.code || e.cause.message)) || e.message));
`

// capgetGo: a Go client with Proxy: nil that dials a documentation
// address for every name, trusting only SSL_CERT_FILE (the jail's bundle).
const capgetGo = `package main

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
	name, url := os.Args[1], os.Args[2]
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(os.Getenv("SSL_CERT_FILE"))
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("192.0.2.11", port))
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}
	c := &http.Client{Transport: tr, Timeout: 15 * time.Second}
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

// buildCapget builds capgetGo into the project, for the runner.
func buildCapget(t *testing.T, s *Sandbox) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(capgetGo), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module capget\n\ngo 1.21\n"), 0o644)
	out := filepath.Join(s.Project, "capget")
	build := exec.Command("go", "build", "-o", out, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the Go client: %v\n%s", err, msg)
	}
	s.chownUp(out)
}

// unsetProxy removes every proxy variable from the script's environment.
const unsetProxy = "\nunset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy NO_PROXY no_proxy\n"

func TestCaptureWithoutProxyVariables(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		writeNetClients(s)
		s.WriteFile(s.Project+"/capfetch.js", capfetchJS, 0o644)
		buildCapget(t, s)
		r := s.Sh(probeSh + unsetProxy + `
			echo session=$JAIL_SESSION
			node capfetch.js node-ok https://api.allowed.test/cap-node
			node capfetch.js node-evil https://evil.test/attack-node
			node capfetch.js node-unknown https://unknown.test/attack-node-unknown
			./capget go-ok https://api.allowed.test/cap-go
			./capget go-evil https://evil.test/attack-go
			probe curl-plain --resolve plain.allowed.test:80:192.0.2.12 http://plain.allowed.test/cap-plain
			probe curl-ip --connect-timeout 5 https://192.0.2.13/attack-ip
			probe curl-ip-plain --connect-timeout 5 http://192.0.2.14:8080/attack-ip-plain`)
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "node-ok"), "/cap-node")
		wantOK(t, getProbe(t, ps, r, "go-ok"), "/cap-go")
		wantOK(t, getProbe(t, ps, r, "curl-plain"), "/cap-plain")
		for _, name := range []string{"node-evil", "node-unknown", "go-evil", "curl-ip", "curl-ip-plain"} {
			wantNoRoute(t, getProbe(t, ps, r, name))
		}
		if got := n.Trap.Paths(); len(got) > 0 {
			t.Errorf("refused names reached the trap server: %v", got)
		}
		if got := n.API.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("refused connections reached the upstream server: %v", got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, want := range []struct{ host, path, verdict, reason string }{
			{"api.allowed.test", "/cap-node", "allow", ""},
			{"api.allowed.test", "/cap-go", "allow", ""},
			{"plain.allowed.test", "/cap-plain", "allow", ""},
			{"evil.test", "", "deny", ""},
			{"unknown.test", "", "deny", "not in network.allow"},
			{"192.0.2.13", "", "deny", "ip literal"},
			{"192.0.2.14", "", "deny", "ip literal"},
		} {
			d, ok := findDecision(ds, want.host, want.path)
			if !ok || d.Verdict != want.verdict || !strings.Contains(d.Reason, want.reason) {
				t.Errorf("decision log: want %s %s%s (%s); got %v, in:\n%s", want.verdict, want.host, want.path, want.reason, d, dumpDecisions(ds))
			}
		}
		for _, d := range ds {
			if strings.HasPrefix(d.Host, "192.0.2.1") && d.Method != "CAPTURE" {
				t.Errorf("an IP literal was decided other than as a captured connection: %v", d)
			}
		}
	})
}

// What capture must not open: raw sockets, UDP to public addresses, IPv6,
// the host's own loopback and interfaces, and the capture socket dialled
// directly with a forged destination.
func TestCaptureStaysClosed(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		writeNetClients(s)
		wide := newUpstreamAt(t, "0.0.0.0:0", false, "")
		hostIP := hostIPv4()
		if hostIP == "" {
			t.Fatalf("this machine has no non-loopback IPv4 address to test against")
		}
		s.WriteFile(s.Project+"/raw.py", `
import socket, sys
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("##raw=opened")
except OSError as e:
    print("##raw=" + type(e).__name__)
`, 0o644)
		s.WriteFile(s.Project+"/forge.py", `
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect("/run/jail/net/capture.sock")
s.sendall(("%s\n" % sys.argv[1]).encode() + b"GET /attack-forged HTTP/1.1\r\nHost: " + sys.argv[1].encode() + b"\r\nConnection: close\r\n\r\n")
s.settimeout(10)
d = b""
try:
    while True:
        b = s.recv(4096)
        if not b: break
        d += b
except Exception as e:
    pass
print("##forge=" + (d.split(b"\r\n")[0].decode(errors="replace") or "closed"))
`, 0o644)
		r := s.Sh(fmt.Sprintf(unsetProxy+`
			echo session=$JAIL_SESSION
			python3 raw.py
			python3 netprobe.py udp-dns udp 8.8.8.8 53
			python3 netprobe.py udp-host udp %[1]s 53
			python3 netprobe.py udp-quic udp 8.8.8.8 443
			python3 netprobe.py udp-host-port udp %[1]s %[4]d
			python3 netprobe.py tcp6 tcp 2001:db8::1 443
			python3 netprobe.py tcp6-host tcp ::1 %[2]d
			python3 netprobe.py tcp-canary tcp 127.0.0.1 %[3]d
			curl -sS -m 5 http://%[1]s:%[4]d/attack-host-ip; echo "##curl-host-ip=$?"
			python3 forge.py 127.0.0.1:%[3]d
			python3 forge.py %[1]s:%[4]d`, hostIP, n.API.Port(), n.Canary.Port(), wide.Port()))
		wantKV(t, r, "raw", is("PermissionError"), "PermissionError (no CAP_NET_RAW)")
		// Port 53 of any address is the jail's resolver, which forwards
		// nothing (example.com is not allowed); other UDP fails at once.
		wantKV(t, r, "udp-dns", is("answered:rcode=3"), "NXDOMAIN from the jail's resolver")
		wantKV(t, r, "udp-host", is("answered:rcode=3"), "NXDOMAIN from the jail's resolver")
		wantKV(t, r, "udp-quic", is("EPERM"), "EPERM (refused at once)")
		wantKV(t, r, "udp-host-port", is("EPERM"), "EPERM (refused at once)")
		wantKV(t, r, "tcp6", is("ENETUNREACH"), "ENETUNREACH (IPv6 has no route)")
		wantKV(t, r, "tcp6-host", func(s string) bool { return s != "connected" }, "no connection (the jail's ::1 is its own)")
		wantKV(t, r, "tcp-canary", is("ECONNREFUSED"), "ECONNREFUSED (the jail's own loopback)")
		wantKV(t, r, "curl-host-ip", func(s string) bool { return s != "0" }, "a failure")
		wantKV(t, r, "forge", func(s string) bool { return !strings.Contains(s, " 200") }, "no answer from a host server")
		if c := n.Canary.Conns(); c != 0 {
			t.Errorf("the host canary on 127.0.0.1:%d accepted %d connections from inside the jail", n.Canary.Port(), c)
		}
		if c := wide.Conns(); c != 0 {
			t.Errorf("the host server on %s:%d accepted %d connections from inside the jail", hostIP, wide.Port(), c)
		}
		ds := decisions(t, s, sessionOf(t, r))
		if d, ok := findDecision(ds, hostIP, ""); !ok || d.Verdict != "deny" || d.Method != "CAPTURE" {
			t.Errorf("decision log: want the captured connection to %s denied; got %v, in:\n%s", hostIP, d, dumpDecisions(ds))
		}
	})
}

// The command cannot change the capture: no capability over the jail's
// network (route, link, netfilter) and no user namespace of its own in
// which to get one. `jail check` reports the capture working here.
func TestCaptureCannotBeChanged(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		r := s.Sh(`
			ip route del default 2>/dev/null; echo "##route-del=$?"
			ip route add 10.0.0.0/8 dev lo 2>/dev/null; echo "##route-add=$?"
			ip link set lo down 2>/dev/null; echo "##link-down=$?"
			unshare -rn true 2>/dev/null; echo "##unshare=$?"
			python3 -c '
import socket
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    print("##nfnetlink=opened")
except OSError as e:
    print("##nfnetlink=" + type(e).__name__)
'
			ip route show default`)
		for _, k := range []string{"route-del", "route-add", "link-down", "unshare"} {
			wantKV(t, r, k, func(s string) bool { return s != "0" }, "a failure")
		}
		wantKV(t, r, "nfnetlink", func(s string) bool { return s != "opened" }, "refused")
		if !strings.Contains(r.Stdout, "default dev lo") {
			t.Errorf("the capture's default route is gone:\n%s", r)
		}
		if c := s.Jail("check"); !strings.Contains(c.Stdout, "ok    capture") {
			t.Errorf("jail check does not report the capture working:\n%s", c)
		}
	})
}
