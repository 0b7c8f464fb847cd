package tests

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Clients the network tests run inside the jail. Each prints probe lines
// in the shape probeSh prints ("@@NAME\tEXIT\tSTATUS CONNECT\tBODY\tERR").

// netgetJS: Node's https module ignores the proxy variables, so a Node
// program that wants the network uses an agent that opens a CONNECT tunnel
// through HTTPS_PROXY and speaks TLS over it (trusting NODE_EXTRA_CA_CERTS),
// the way proxy agents such as https-proxy-agent do.
const netgetJS = `
const http = require('http'), https = require('https'), tls = require('tls');
const name = process.argv[2], target = new URL(process.argv[3]);
const proxy = new URL(process.env.HTTPS_PROXY || process.env.https_proxy);
const clean = s => String(s).replace(/[\t\r\n]/g, ' ').trim();
const out = (code, status, connect, body, err) => console.log(['@@' + name, code, status + ' ' + connect, clean(body), clean(err)].join('\t'));
let connect = '000';
class TunnelAgent extends https.Agent {
	createConnection(opts, cb) {
		const req = http.request({host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: opts.host + ':' + opts.port});
		req.on('connect', (res, socket) => {
			connect = res.statusCode;
			if (res.statusCode !== 200) {
				socket.destroy();
				return cb(Object.assign(new Error('CONNECT answered ' + res.statusCode), {code: 'CONNECT_' + res.statusCode}));
			}
			cb(null, tls.connect({socket, servername: opts.servername || opts.host}));
		});
		req.on('error', cb);
		req.end();
	}
}
https.get(target, {agent: new TunnelAgent({keepAlive: false})}, r => {
	let body = '';
	r.setEncoding('utf8');
	r.on('data', d => body += d);
	r.on('end', () => out(0, r.statusCode, connect, body, ''));
}).on('error', e => out(connect === '000' ? 7 : connect === 200 ? 35 : 56, '000', connect, '', e.code || e.message));
`

// netfetchJS: Node 20's fetch, which does not read the proxy variables.
const netfetchJS = `
const name = process.argv[2];
const clean = s => String(s).replace(/[\t\r\n]/g, ' ').trim();
const out = (code, status, body, err) => console.log(['@@' + name, code, status + ' 000', clean(body), clean(err)].join('\t'));
fetch(process.argv[3], {signal: AbortSignal.timeout(15000)})
	.then(r => r.text().then(b => out(0, r.status, b, '')))
	.catch(e => out(1, '000', '', (e.cause && (e.cause.code || e.cause.message)) || e.message));
`

// urlgetPy: python3 urllib, which reads HTTPS_PROXY and (through OpenSSL)
// SSL_CERT_FILE.
const urlgetPy = `
import sys, urllib.error, urllib.request
name, url = sys.argv[1], sys.argv[2]
def clean(s): return str(s).replace("\t", " ").replace("\r", " ").replace("\n", " ").strip()
def out(code, status, body, err): print("@@%s\t%d\t%s 000\t%s\t%s" % (name, code, status, clean(body), clean(err)))
try:
    r = urllib.request.urlopen(url, timeout=15)
    out(0, str(r.status), r.read().decode(), "")
except urllib.error.HTTPError as e:
    out(22, str(e.code), e.read().decode(errors="replace"), e)
except Exception as e:
    out(1, "000", "", repr(e))
`

// netprobePy makes one low-level attempt and prints "##NAME=RESULT":
//
//	tcp HOST PORT          connect; "connected" or the errno name
//	udp HOST PORT          sendto a DNS query for example.com and wait for an
//	                       answer; "answered:rcode=N" with the answer's rcode
//	dns NAME               getaddrinfo
//	socks CMD ATYP HOST PORT [PATH]
//	                       raw SOCKS5 to the bridge: CMD connect|bind|udp,
//	                       ATYP ipv4|domain; "rep=N" is the server's reply
//	                       code; after rep=0 with PATH, an HTTP GET is sent
//	                       through the tunnel and the body's first line added.
const netprobePy = `
import errno, socket, struct, sys

def err(e):
    if isinstance(e, socket.gaierror):
        return "gaierror:" + str(e.args[0])
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__ + ":" + str(e)

def tcp(host, port):
    s = socket.create_connection((host, int(port)), timeout=5)
    s.close()
    return "connected"

def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", (host, int(port)))
    d, _ = s.recvfrom(512)
    return "answered:rcode=%d" % (d[3] & 15) if len(d) >= 4 else "answered"

def dns(name):
    return "resolved:" + ",".join(sorted({a[4][0] for a in socket.getaddrinfo(name, 443)}))

def recvn(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            break
        b += d
    return b

def socks(cmd, atyp, host, port, path=None):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
    s.sendall(b"\x05\x01\x00")
    g = recvn(s, 2)
    if g != b"\x05\x00":
        return "greeting:" + g.hex()
    if atyp == "ipv4":
        addr = b"\x01" + socket.inet_aton(host)
    else:
        h = host.encode()
        addr = b"\x03" + bytes([len(h)]) + h
    code = {"connect": 1, "bind": 2, "udp": 3}[cmd]
    s.sendall(b"\x05" + bytes([code, 0]) + addr + struct.pack(">H", int(port)))
    rep = recvn(s, 4)
    if len(rep) < 2:
        return "closed:" + rep.hex()
    res = "rep=%d" % rep[1]
    if rep[1] == 0 and path:
        # the rest of the reply: the bound address
        if len(rep) == 4:
            recvn(s, {1: 6, 4: 18}.get(rep[3], 0) or (recvn(s, 1)[0] + 2))
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
        data = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
        body = data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip()
        res += " body=" + body.splitlines()[0] if body else " body="
    return res

name, kind, args = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    r = {"tcp": tcp, "udp": udp, "dns": dns, "socks": socks}[kind](*args)
except Exception as e:
    r = err(e)
print("##%s=%s" % (name, r))
`

// writeNetClients puts the client scripts in the project.
func writeNetClients(s *Sandbox) {
	s.WriteFile(s.Project+"/netget.js", netgetJS, 0o644)
	s.WriteFile(s.Project+"/netfetch.js", netfetchJS, 0o644)
	s.WriteFile(s.Project+"/urlget.py", urlgetPy, 0o644)
	s.WriteFile(s.Project+"/netprobe.py", netprobePy, 0o644)
}

// kvs parses the "##NAME=RESULT" lines of a run's stdout.
func kvs(r Result) map[string]string {
	out := map[string]string{}
	for _, l := range lines(r.Stdout) {
		if rest, ok := strings.CutPrefix(l, "##"); ok {
			k, v, _ := strings.Cut(rest, "=")
			out[k] = v
		}
	}
	return out
}

// wantKV checks one "##" result.
func wantKV(t *testing.T, r Result, name string, ok func(string) bool, want string) {
	t.Helper()
	got, present := kvs(r)[name]
	if !present {
		t.Errorf("%s printed nothing (want %s):\n%s", name, want, r)
		return
	}
	if !ok(got) {
		t.Errorf("%s: got %q, want %s", name, got, want)
	}
}

func is(v string) func(string) bool { return func(s string) bool { return s == v } }

// summaryRE is jail's exit line when the session denied something.
var summaryRE = regexp.MustCompile(`^jail: \d+ requests? denied \(.+\); see jail log$`)

// 1. curl, python3 and node reach an allowed name that network.hosts maps
// to TLS and plain HTTP servers on the host's loopback; the server sees
// every request, the log shows each with its path, TLS is intercepted with
// the jail CA, and Node's fetch, which ignores the proxy, has no route.
func TestNetworkClientsReachAllowedHost(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		writeNetClients(s)
		s.WriteFile(s.Project+"/testca.pem", string(netPKI.get(t).CAPEM), 0o644)
		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			probe curl https://api.allowed.test/curl
			probe curl-plain http://plain.allowed.test/curl-plain
			python3 urlget.py python https://api.allowed.test/python
			python3 urlget.py python-plain http://plain.allowed.test/python-plain
			node netget.js node https://api.allowed.test/node
			node netfetch.js node-fetch https://api.allowed.test/node-fetch
			probe curl-testca --cacert testca.pem https://api.allowed.test/curl-testca
			echo ==env; env | sort
			echo ==resolv; cat /etc/resolv.conf
			echo ==bundle; grep -c 'BEGIN CERTIFICATE' /run/jail/ca.pem
			echo ==end`)
		ps := probes(t, r)
		for _, c := range []struct{ probe, path string }{
			{"curl", "/curl"}, {"curl-plain", "/curl-plain"}, {"python", "/python"},
			{"python-plain", "/python-plain"}, {"node", "/node"},
		} {
			wantOK(t, getProbe(t, ps, r, c.probe), c.path)
		}
		for _, p := range []string{"/curl", "/python", "/node"} {
			if !n.API.Saw(p) {
				t.Errorf("the TLS server did not see %s (saw %v)", p, n.API.Paths())
			}
		}
		for _, p := range []string{"/curl-plain", "/python-plain"} {
			if !n.Plain.Saw(p) {
				t.Errorf("the plain server did not see %s (saw %v)", p, n.Plain.Paths())
			}
		}

		// Interception: the certificate curl sees is the jail's, not the
		// upstream's, so trusting only the test CA fails verification.
		if p := getProbe(t, ps, r, "curl-testca"); p.Exit != 60 {
			t.Errorf("curl trusting only the upstream's CA: want exit 60 (the leaf is signed by the jail CA), got %s", p)
		}
		if n.API.Saw("/curl-testca") {
			t.Errorf("the request whose TLS verification failed reached the server")
		}

		// Node 20's fetch does not use HTTP(S)_PROXY: with no resolver and no
		// route it must fail. If it ever does use the proxy, the request must
		// then show up in the log like any other.
		fetchProbe := getProbe(t, ps, r, "node-fetch")

		env := between(r.Stdout, "==env\n", "==resolv")
		for k, v := range map[string]string{
			"HTTP_PROXY": "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3128",
			"http_proxy": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128",
			"ALL_PROXY": "socks5h://127.0.0.1:1080", "all_proxy": "socks5h://127.0.0.1:1080",
			"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
			"SSL_CERT_FILE": "/run/jail/ca.pem", "NODE_EXTRA_CA_CERTS": "/run/jail/ca.pem",
			"REQUESTS_CA_BUNDLE": "/run/jail/ca.pem", "CURL_CA_BUNDLE": "/run/jail/ca.pem",
			"GIT_SSL_CAINFO": "/run/jail/ca.pem", "PIP_CERT": "/run/jail/ca.pem", "DENO_CERT": "/run/jail/ca.pem",
		} {
			if !regexp.MustCompile(`(?m)^` + k + `=` + regexp.QuoteMeta(v) + `$`).MatchString(env) {
				t.Errorf("inside the jail %s should be %s; env:\n%s", k, v, env)
			}
		}
		resolv := between(r.Stdout, "==resolv\n", "==bundle")
		for _, l := range lines(resolv) {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "nameserver" && f[1] != "127.0.0.1" {
				t.Errorf("/etc/resolv.conf inside names a real resolver: %q", l)
			}
		}
		if !strings.Contains(resolv, "nameserver 127.0.0.1") {
			t.Errorf("/etc/resolv.conf inside does not point at 127.0.0.1:\n%s", resolv)
		}
		if c, _ := strconv.Atoi(strings.TrimSpace(between(r.Stdout, "==bundle\n", "==end"))); c != 1 {
			t.Errorf("/run/jail/ca.pem holds %d certificates; want the jail CA alone (no passthrough host: every TLS connection is intercepted)", c)
		}
		if strings.Contains(r.Stderr, "denied") {
			t.Errorf("nothing was denied, yet jail printed a denial summary:\n%s", r.Stderr)
		}

		// The log, read with `jail log --json` as the same user.
		session := sessionOf(t, r)
		ds := decisions(t, s, session)
		for _, c := range []struct{ host, path, scheme string }{
			{"api.allowed.test", "/curl", "https"}, {"api.allowed.test", "/python", "https"},
			{"api.allowed.test", "/node", "https"}, {"plain.allowed.test", "/curl-plain", "http"},
			{"plain.allowed.test", "/python-plain", "http"},
		} {
			d, ok := findDecision(ds, c.host, c.path)
			if !ok {
				t.Errorf("jail log has no entry for %s%s in session %s:\n%s", c.host, c.path, session, dumpDecisions(ds))
				continue
			}
			if d.Verdict != "allow" || d.Scheme != c.scheme || d.Method != "GET" || d.Rule == "" {
				t.Errorf("log entry for %s%s: want an allowed %s GET naming its rule, got %s", c.host, c.path, c.scheme, d)
			}
			for _, key := range []string{"time", "session", "method", "scheme", "host", "port", "path", "rule", "verdict", "bytesUp", "bytesDown"} {
				if _, ok := d.raw[key]; !ok {
					t.Errorf("log entry for %s%s has no %q field: %v", c.host, c.path, key, d.raw)
				}
			}
			if _, ok := d.raw["durationMs"]; !ok {
				if _, ok := d.raw["durationMS"]; !ok {
					t.Errorf("log entry for %s%s has no duration field: %v", c.host, c.path, d.raw)
				}
			}
			if d.BytesDown <= 0 {
				t.Errorf("log entry for %s%s counts %d bytes down; the response had a body", c.host, c.path, d.BytesDown)
			}
		}
		switch {
		case fetchProbe.Exit == 0:
			if _, ok := findDecision(ds, "api.allowed.test", "/node-fetch"); !ok {
				t.Errorf("node fetch succeeded without going through the proxy: %s", fetchProbe)
			}
			t.Logf("node fetch used the proxy: %s", fetchProbe)
		case n.API.Saw("/node-fetch"):
			t.Errorf("node fetch failed but its request reached the server: %s", fetchProbe)
		default:
			t.Logf("node fetch ignores the proxy and has no route, as it should: %s", fetchProbe)
		}

		// The human-readable table shows the same requests.
		table := s.Jail("log")
		if table.Code != 0 || !strings.Contains(table.Stdout, "api.allowed.test") || !strings.Contains(table.Stdout, "/curl") ||
			!strings.Contains(strings.ToUpper(table.Stdout), "ALLOW") {
			t.Errorf("jail log (table) does not show the allowed request to api.allowed.test/curl:\n%s", table)
		}

		// The jail CA's key (mode 0600) and the decision log exist on the
		// host and are invisible inside the jail.
		caDir := filepath.Join(s.Home, ".config/jail/ca")
		ents, err := os.ReadDir(caDir)
		if err != nil || len(ents) == 0 {
			t.Fatalf("no per-user CA in %s after a run: %v", caDir, err)
		}
		var hidden []string
		var keys int
		for _, e := range ents {
			p := filepath.Join(caDir, e.Name())
			hidden = append(hidden, p)
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte("PRIVATE KEY")) {
				keys++
				if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
					t.Errorf("CA key %s has mode %v, want 0600", p, fi.Mode().Perm())
				}
			}
		}
		if keys == 0 {
			t.Errorf("no private key file in %s: %v", caDir, hidden)
		}
		logFile := decisionLog(s)
		hostFile(t, logFile)
		hidden = append(hidden, logFile)
		script := "echo session=$JAIL_SESSION; cat /run/jail/ca.pem >/dev/null && echo bundle-readable\n"
		for _, p := range hidden {
			script += fmt.Sprintf("cat %s >/dev/null 2>&1 && echo 'readable: %s'\n", shq(p), p)
		}
		script += "ls -A " + shq(caDir) + " 2>/dev/null\ntrue\n"
		r2 := s.Sh(script)
		// Also where the home is visible: made readable, and through the
		// learning overlay.
		for _, flags := range [][]string{{"--allow-read", "~"}, {"--learning"}} {
			r := s.Jail(append(flags, "--", "sh", "-c", script)...)
			if r.Code != 0 || !strings.Contains(r.Stdout, "bundle-readable") {
				t.Errorf("control (%v): the CA bundle is not readable inside:\n%s", flags, r)
			}
			for _, l := range lines(r.Stdout) {
				if strings.HasPrefix(l, "readable: ") || (l != "bundle-readable" && !strings.HasPrefix(l, "session=")) {
					t.Errorf("jail's CA or log is visible inside the jail (%v): %q", flags, l)
				}
			}
		}
		if r2.Code != 0 || !strings.Contains(r2.Stdout, "bundle-readable") {
			t.Errorf("control: the CA bundle is not readable inside:\n%s", r2)
		}
		for _, l := range lines(r2.Stdout) {
			if strings.HasPrefix(l, "readable: ") || (l != "bundle-readable" && !strings.HasPrefix(l, "session=")) {
				t.Errorf("jail's CA or log is visible inside the jail: %q", l)
			}
		}
		// --session filters: the second run made no requests.
		if got := decisions(t, s, sessionOf(t, r2)); len(got) != 0 {
			t.Errorf("the second session made no request, yet the log has entries for it:\n%s", dumpDecisions(got))
		}
		fr := s.Jail("log", "--json", "--session", session)
		if c := len(lines(fr.Stdout)); fr.Code != 0 || c != len(ds) {
			t.Errorf("jail log --json --session %s: %d lines, want %d\n%s", session, c, len(ds), fr)
		}
	})
}

// shq quotes a word for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// The proxy checks the upstream with the host's trust: without the test CA
// in the jail process's SSL_CERT_FILE the interception cannot vouch for
// the server, and the request must not go through.
func TestNetworkUpstreamVerifiedWithHostTrust(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		var env []string
		for _, e := range s.Env {
			if !strings.HasPrefix(e, "SSL_CERT_FILE=") {
				env = append(env, e)
			}
		}
		s.Env = env
		r := s.Sh(probeSh + `
			probe untrusted https://api.allowed.test/untrusted-upstream
			probe plain http://plain.allowed.test/plain-control`)
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "plain"), "/plain-control")
		if p := getProbe(t, ps, r, "untrusted"); p.HTTP != "502" || !strings.HasPrefix(p.Body, "jail:") || !strings.Contains(p.Body, "certificate") {
			t.Errorf("an upstream the host does not trust: want 502 from the proxy with a `jail:` body naming the certificate; got %s", p)
		}
		if n.API.Saw("/untrusted-upstream") {
			t.Errorf("the request reached an upstream whose certificate the host does not trust")
		}
	})
}

// 2. git clone over HTTPS from a real smart-HTTP server (git http-backend
// behind the TLS server) through the proxy.
func TestNetworkGitClone(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		gitRoot := t.TempDir()
		commit := makeBareRepo(t, gitRoot)
		n := setupNet(t, s, gitRoot)
		r := s.Sh("echo session=$JAIL_SESSION; git clone -q https://api.allowed.test/repo.git clone && git -C clone rev-parse HEAD && cat clone/served.txt")
		if r.Code != 0 || !strings.Contains(r.Stdout, commit) || !strings.Contains(r.Stdout, "served by git http-backend") {
			t.Fatalf("git clone through the proxy: want commit %s and served.txt\n%s\nserver saw %v", commit, r, n.API.Paths())
		}
		if got := strings.TrimSpace(hostFile(t, s.Project+"/clone/served.txt")); got != "served by git http-backend" {
			t.Errorf("the clone on the host has served.txt = %q", got)
		}
		if !n.API.Saw("/repo.git/info/refs") || !n.API.Saw("/repo.git/git-upload-pack") {
			t.Errorf("the server did not see the smart-HTTP requests: %v", n.API.Paths())
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, p := range []string{"/repo.git/info/refs", "/repo.git/git-upload-pack"} {
			if d, ok := findDecision(ds, "api.allowed.test", p); !ok || d.Verdict != "allow" {
				t.Errorf("jail log has no allowed entry for %s:\n%s", p, dumpDecisions(ds))
			}
		}
	})
}

// 3. Denied and unknown names, names that only look allowed, userinfo and
// absolute-form tricks: all 403, logged, summarised on exit, and the
// upstream (every such name is mapped to the trap server) sees nothing.
func TestNetworkDeniedNames(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			probe ok-api https://api.allowed.test/ok-api
			probe ok-sub https://sub.allowed.test/ok-sub
			probe ok-plain http://plain.allowed.test/ok-plain
			probe evil https://evil.test/attack-evil
			probe evil-http http://evil.test/attack-evil-http
			probe unknown https://unknown.test/attack-unknown
			probe apex https://allowed.test/attack-apex
			probe blocked https://blocked.allowed.test/attack-blocked
			probe prefix https://allowed.test.evil.test/attack-prefix
			probe suffix https://evilallowed.test/attack-suffix
			probe userinfo 'https://api.allowed.test@evil.test/attack-userinfo'
			probe absform-api -x http://127.0.0.1:3128 http://evil.test/attack-absform-api -H 'Host: api.allowed.test'
			probe absform-plain -x http://127.0.0.1:3128 http://evil.test/attack-absform-plain -H 'Host: plain.allowed.test'
			probe absform-rev -x http://127.0.0.1:3128 http://plain.allowed.test/attack-absform-rev -H 'Host: evil.test'`)
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "ok-api"), "/ok-api")
		wantOK(t, getProbe(t, ps, r, "ok-sub"), "/ok-sub") // *.allowed.test
		wantOK(t, getProbe(t, ps, r, "ok-plain"), "/ok-plain")
		for _, name := range []string{"evil", "unknown", "apex", "blocked", "prefix", "suffix", "userinfo"} {
			wantRefusedConnect(t, getProbe(t, ps, r, name))
		}
		for _, name := range []string{"evil-http", "absform-api", "absform-plain", "absform-rev"} {
			wantRefusedHTTP(t, getProbe(t, ps, r, name))
		}
		if c := n.Trap.Conns(); c != 0 {
			t.Errorf("the trap server (where every refused name is mapped) accepted %d connections; paths %v", c, n.Trap.Paths())
		}
		for _, u := range []*upstream{n.API, n.Plain} {
			if got := u.SawPrefix("/attack"); len(got) > 0 {
				t.Errorf("refused requests reached an allowed upstream: %v", got)
			}
		}

		ds := decisions(t, s, sessionOf(t, r))
		for _, host := range []string{"evil.test", "unknown.test", "allowed.test", "blocked.allowed.test", "allowed.test.evil.test", "evilallowed.test"} {
			d, ok := findDecision(ds, host, "")
			if !ok || d.Verdict != "deny" {
				t.Errorf("jail log has no deny entry for %s:\n%s", host, dumpDecisions(ds))
			}
		}
		for _, d := range ds {
			if d.Verdict == "allow" && strings.HasPrefix(d.Path, "/attack") {
				t.Errorf("log shows a refused request as allowed: %s", d)
			}
		}
		if d, ok := findDecision(ds, "evil.test", ""); ok && (d.Rule == "" || !strings.Contains(d.Rule, "evil.test")) {
			t.Errorf("the deny entry for evil.test does not name the rule that denied it: %s", d)
		}
		summary := jailLines(r.Stderr)
		if len(summary) != 1 || !summaryRE.MatchString(summary[0]) || !strings.Contains(summary[0], "evil.test") {
			t.Errorf("want one summary line `jail: N requests denied (evil.test …); see jail log` on stderr, got %q", r.Stderr)
		}

		// Flags: --allow-domain with a port allows that port only;
		// --deny-domain narrows what jail.json allows.
		r = s.Jail("--allow-domain", "ports.test:443", "--deny-domain", "sub.allowed.test", "--allow-domain", "unknown.test", "--", "sh", "-c", probeSh+`
			probe trap-control https://unknown.test/trap-control
			probe ports-ok https://ports.test/ports-ok
			probe ports-other https://ports.test:8443/attack-ports-other
			probe flag-deny https://sub.allowed.test/attack-flag-deny
			probe flag-control https://api.allowed.test/flag-control`)
		ps = probes(t, r)
		// Control for the trap: a name that is allowed does reach it, so
		// the trap's silence above means refusal.
		wantOK(t, getProbe(t, ps, r, "trap-control"), "/trap-control")
		if !n.Trap.Saw("/trap-control") {
			t.Errorf("control: the trap server did not see a request to an allowed name mapped to it")
		}
		wantOK(t, getProbe(t, ps, r, "ports-ok"), "/ports-ok")
		wantOK(t, getProbe(t, ps, r, "flag-control"), "/flag-control")
		wantRefusedConnect(t, getProbe(t, ps, r, "ports-other"))
		wantRefusedConnect(t, getProbe(t, ps, r, "flag-deny"))
		if got := n.API.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("requests refused by flags reached the server: %v", got)
		}
	})
}

// 4. Programs that ignore the proxy reach nothing on their own: the
// jail's resolver answers only allowed names (with addresses the capture
// hands to the proxy by name), the jail's 127.0.0.1 is its own, and a TCP
// connection to any other address is captured and handed to the proxy,
// which refuses an IP literal no rule names (and logs it); UDP reaches
// only the jail's resolver.
func TestNetworkBypassHasNoRoute(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		writeNetClients(s)
		// A server on every host interface, reachable from the host.
		wide := newUpstreamAt(t, "0.0.0.0:0", false, "")
		hostIP := hostIPv4()
		if hostIP == "" {
			t.Fatalf("this machine has no non-loopback IPv4 address to test against")
		}
		r := s.Sh(probeSh + fmt.Sprintf(`
			echo session=$JAIL_SESSION
			probe ok https://api.allowed.test/ok-bypass
			(unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy; probe no-env https://api.allowed.test/captured-no-env)
			probe noproxy --noproxy '*' https://api.allowed.test/captured-noproxy
			probe resolve --noproxy '*' --resolve api.allowed.test:%[1]d:127.0.0.1 https://api.allowed.test:%[1]d/attack-resolve
			probe host-ip --noproxy '*' --connect-timeout 3 http://%[2]s:%[3]d/attack-host-ip
			python3 netprobe.py tcp-1111 tcp 1.1.1.1 443
			python3 netprobe.py tcp-host-port tcp 127.0.0.1 %[1]d
			python3 netprobe.py tcp-canary tcp 127.0.0.1 %[4]d
			python3 netprobe.py tcp-host-ip tcp %[2]s %[3]d
			python3 netprobe.py udp-dns udp 8.8.8.8 53
			python3 netprobe.py udp-resolver udp 127.0.0.1 53
			python3 netprobe.py dns dns example.com
			getent hosts example.com; echo "##getent=$?"
			# control: the jailed command's own loopback server works
			python3 -m http.server 18080 --bind 127.0.0.1 >/dev/null 2>&1 &
			for i in $(seq 100); do python3 netprobe.py wait tcp 127.0.0.1 18080 | grep -q connected && break; sleep 0.1; done
			probe loopback --noproxy '*' http://127.0.0.1:18080/
			kill $!`, n.API.Port(), hostIP, wide.Port(), n.Canary.Port()))
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "ok"), "/ok-bypass")
		// Without the proxy variables an allowed name still resolves, and
		// the connection goes through the proxy all the same.
		wantOK(t, getProbe(t, ps, r, "no-env"), "/captured-no-env")
		wantOK(t, getProbe(t, ps, r, "noproxy"), "/captured-noproxy")
		for _, name := range []string{"resolve", "host-ip"} {
			wantNoRoute(t, getProbe(t, ps, r, name))
		}
		if p := getProbe(t, ps, r, "loopback"); p.Exit != 0 || p.HTTP != "200" {
			t.Errorf("control: a server the command starts on the jail's loopback is unreachable: %s", p)
		}
		// Connecting to 1.1.1.1 or the host's address succeeds as far as
		// the capture port; the proxy refuses it (the servers see nothing).
		ds := decisions(t, s, sessionOf(t, r))
		for _, ip := range []string{"1.1.1.1", hostIP} {
			if d, ok := findDecision(ds, ip, ""); !ok || d.Method != "CAPTURE" || d.Verdict != "deny" {
				t.Errorf("decision log: want the captured connection to %s denied; got %v, in:\n%s", ip, d, dumpDecisions(ds))
			}
		}
		wantKV(t, r, "tcp-host-port", is("ECONNREFUSED"), "ECONNREFUSED (the jail's own loopback, not the host's)")
		wantKV(t, r, "tcp-canary", is("ECONNREFUSED"), "ECONNREFUSED")
		// Port 53 of any address is the jail's resolver: example.com is not
		// allowed, so NXDOMAIN, and nothing is forwarded.
		wantKV(t, r, "udp-dns", is("answered:rcode=3"), "NXDOMAIN from the jail's resolver")
		wantKV(t, r, "udp-resolver", is("answered:rcode=3"), "NXDOMAIN from the jail's resolver")
		wantKV(t, r, "dns", func(s string) bool { return strings.HasPrefix(s, "gaierror") }, "a resolution error")
		wantKV(t, r, "getent", func(s string) bool { return s != "0" }, "a non-zero exit")
		if got := n.API.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("bypass attempts reached the host server: %v", got)
		}
		if c := n.Canary.Conns(); c != 0 {
			t.Errorf("the host canary on 127.0.0.1:%d accepted %d connections from inside the jail", n.Canary.Port(), c)
		}
		if c := wide.Conns(); c != 0 {
			t.Errorf("the host server on %s:%d accepted %d connections from inside the jail", hostIP, wide.Port(), c)
		}
		// Control: the host itself reaches both servers.
		for _, u := range []string{fmt.Sprintf("http://%s:%d/control", hostIP, wide.Port()), fmt.Sprintf("http://127.0.0.1:%d/control", n.Canary.Port())} {
			resp, err := http.Get(u)
			if err != nil {
				t.Errorf("control: the host cannot reach %s: %v", u, err)
				continue
			}
			resp.Body.Close()
		}
	})
}

// 5. CONNECT, absolute-form HTTP and SOCKS to IP literals, the host's
// loopback and the metadata address are refused; a canary on the host's
// loopback sees nothing; SOCKS UDP ASSOCIATE is refused with 0x07.
func TestNetworkRefusedDestinations(t *testing.T) {
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
		c := n.Canary.Port()
		r := s.Sh(probeSh + fmt.Sprintf(`
			echo session=$JAIL_SESSION
			unset NO_PROXY no_proxy
			P='-x http://127.0.0.1:3128'
			S='--socks5-hostname 127.0.0.1:1080'
			probe ok-connect -p $P https://api.allowed.test/ok-connect
			probe ok-socks $S http://plain.allowed.test/ok-socks
			probe ok-socks-tls $S https://api.allowed.test/ok-socks-tls
			probe connect-1111 -p $P https://1.1.1.1/
			probe connect-canary -p $P http://127.0.0.1:%[1]d/attack-connect-canary
			probe connect-localhost -p $P http://localhost:%[1]d/attack-connect-localhost
			probe connect-meta -p $P http://169.254.169.254/latest/meta-data/
			probe connect-host-ip -p $P http://%[2]s:%[3]d/attack-connect-host-ip
			probe http-canary $P http://127.0.0.1:%[1]d/attack-http-canary
			probe http-meta $P http://169.254.169.254/latest/meta-data/
			probe socks-1111 $S https://1.1.1.1/
			probe socks-canary $S http://127.0.0.1:%[1]d/attack-socks-canary
			probe socks-localhost $S http://localhost:%[1]d/attack-socks-localhost
			probe socks-meta $S http://169.254.169.254/latest/meta-data/
			probe socks-ip --socks5 127.0.0.1:1080 http://127.0.0.1:%[1]d/attack-socks-ip
			python3 netprobe.py raw-ok socks connect domain plain.allowed.test 80 /raw-socks-ok
			python3 netprobe.py raw-1111 socks connect ipv4 1.1.1.1 443
			python3 netprobe.py raw-canary socks connect ipv4 127.0.0.1 %[1]d /attack-raw-canary
			python3 netprobe.py raw-canary-name socks connect domain 127.0.0.1 %[1]d /attack-raw-canary-name
			python3 netprobe.py raw-meta socks connect ipv4 169.254.169.254 80
			python3 netprobe.py raw-evil socks connect domain evil.test 443
			python3 netprobe.py raw-udp socks udp ipv4 0.0.0.0 0
			python3 netprobe.py raw-bind socks bind ipv4 0.0.0.0 0`, c, hostIP, wide.Port()))
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "ok-connect"), "/ok-connect")
		wantOK(t, getProbe(t, ps, r, "ok-socks"), "/ok-socks")
		if p := getProbe(t, ps, r, "ok-socks-tls"); p.Exit != 0 || p.Body != "upstream says /ok-socks-tls" {
			t.Errorf("control: HTTPS over SOCKS to an allowed name fails (exit 60 means the proxy tunnelled TLS without intercepting it, so the jail cannot verify the upstream): %s", p)
		}
		for _, name := range []string{"connect-1111", "connect-canary", "connect-localhost", "connect-meta", "connect-host-ip"} {
			wantRefusedConnect(t, getProbe(t, ps, r, name))
		}
		for _, name := range []string{"http-canary", "http-meta"} {
			wantRefusedHTTP(t, getProbe(t, ps, r, name))
		}
		for _, name := range []string{"socks-1111", "socks-canary", "socks-localhost", "socks-meta", "socks-ip"} {
			if p := getProbe(t, ps, r, name); p.Exit == 0 || p.HTTP == "200" {
				t.Errorf("%s: want the SOCKS request refused; got %s", name, p)
			}
		}
		wantKV(t, r, "raw-ok", is("rep=0 body=upstream says /raw-socks-ok"), "rep=0 and the upstream's answer (control)")
		for _, name := range []string{"raw-1111", "raw-canary", "raw-canary-name", "raw-meta", "raw-evil"} {
			wantKV(t, r, name, is("rep=2"), "rep=2 (connection not allowed by ruleset)")
		}
		wantKV(t, r, "raw-udp", is("rep=7"), "rep=7 (command not supported)")
		wantKV(t, r, "raw-bind", func(s string) bool { return s != "rep=0" }, "a refusal (SOCKS BIND would open a listener outside the jail)")
		if got := n.Canary.Conns(); got != 0 {
			t.Errorf("the canary on the host's 127.0.0.1:%d accepted %d connections (paths %v)", c, got, n.Canary.Paths())
		}
		if got := wide.Conns(); got != 0 {
			t.Errorf("the server on the host's %s:%d accepted %d connections", hostIP, wide.Port(), got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, host := range []string{"1.1.1.1", "127.0.0.1", "169.254.169.254", "localhost"} {
			if d, ok := findDecision(ds, host, ""); !ok || d.Verdict != "deny" {
				t.Errorf("jail log has no deny entry for %s:\n%s", host, dumpDecisions(ds))
			}
		}
		if d, ok := findDecision(ds, "0.0.0.0", ""); ok && d.Verdict != "deny" {
			t.Errorf("SOCKS UDP ASSOCIATE logged as %s", d)
		}

		// Even with unknown names allowed, what a name resolves to is
		// checked: loopback in any spelling, the metadata address and IP
		// literals stay refused.
		writeNetConfig(t, s, netConfig{Unknown: "allow", Hosts: map[string]string{"api.allowed.test": n.API.Addr()}})
		r = s.Sh(probeSh + fmt.Sprintf(`
			unset NO_PROXY no_proxy
			P='-x http://127.0.0.1:3128'
			probe ok -p $P https://api.allowed.test/ok-unknown-allow
			probe connect-localhost -p $P http://localhost:%[1]d/attack-ua-localhost
			probe connect-canary -p $P http://127.0.0.1:%[1]d/attack-ua-canary
			probe connect-meta -p $P http://169.254.169.254/latest/meta-data/
			probe connect-1111 -p $P https://1.1.1.1/
			probe http-localhost $P http://localhost:%[1]d/attack-ua-http-localhost
			for h in localhost localhost. LOCALHOST 127.1 2130706433 0x7f000001 0177.0.0.1 ::1 [::1] 0.0.0.0 ip6-localhost; do
				python3 netprobe.py "raw-$h" socks connect domain "$h" %[1]d /attack-ua-raw
			done`, c))
		ps = probes(t, r)
		wantOK(t, getProbe(t, ps, r, "ok"), "/ok-unknown-allow")
		for _, name := range []string{"connect-localhost", "connect-canary", "connect-meta", "connect-1111"} {
			wantRefusedConnect(t, getProbe(t, ps, r, name))
		}
		wantRefusedHTTP(t, getProbe(t, ps, r, "http-localhost"))
		for _, h := range []string{"localhost", "localhost.", "LOCALHOST", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "::1", "[::1]", "0.0.0.0", "ip6-localhost"} {
			wantKV(t, r, "raw-"+h, func(s string) bool { return strings.HasPrefix(s, "rep=") && s != "rep=0" }, "a SOCKS refusal")
		}
		if got := n.Canary.Conns(); got != 0 {
			t.Errorf("with unknown=allow, the canary on the host's loopback accepted %d connections (paths %v)", got, n.Canary.Paths())
		}

		// Control: a rule that names the canary's address lets the same
		// request through, so the canary's silence above means refusal.
		r = s.Jail("--allow-domain", fmt.Sprintf("127.0.0.1:%d", c), "--", "sh", "-c", probeSh+fmt.Sprintf(`
			unset NO_PROXY no_proxy
			probe canary-named -p -x http://127.0.0.1:3128 http://127.0.0.1:%d/canary-control`, c))
		wantOK(t, getProbe(t, probes(t, r), r, "canary-named"), "/canary-control")
		if !n.Canary.Saw("/canary-control") {
			t.Errorf("control: an explicitly allowed request did not reach the canary")
		}
	})
}

// 6. A relay the jailed command starts itself (socat) in front of the
// bridge changes nothing: the same verdicts, HTTP and SOCKS.
func TestNetworkRelayInsideJail(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("socat"); err != nil {
		t.Fatalf("socat is not installed (apt-get install socat; tests/deps.sh --test installs it): %v", err)
	}
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		writeNetClients(s)
		r := s.Sh(probeSh + fmt.Sprintf(`
			echo session=$JAIL_SESSION
			socat TCP-LISTEN:9999,bind=127.0.0.1,fork,reuseaddr TCP:127.0.0.1:3128 & http=$!
			socat TCP-LISTEN:9998,bind=127.0.0.1,fork,reuseaddr TCP:127.0.0.1:1080 & socks=$!
			for p in 9999 9998; do
				for i in $(seq 100); do python3 netprobe.py wait tcp 127.0.0.1 $p | grep -q connected && break; sleep 0.1; done
			done
			unset NO_PROXY no_proxy
			R='-x http://127.0.0.1:9999'
			probe direct-ok https://api.allowed.test/direct-ok
			probe relay-ok $R https://api.allowed.test/relay-ok
			probe relay-plain-ok $R http://plain.allowed.test/relay-plain-ok
			probe direct-evil https://evil.test/attack-direct-evil
			probe relay-evil $R https://evil.test/attack-relay-evil
			probe relay-evil-http $R http://evil.test/attack-relay-evil-http
			probe relay-suffix $R https://evilallowed.test/attack-relay-suffix
			probe relay-canary -p $R http://127.0.0.1:%[1]d/attack-relay-canary
			probe relay-absform $R http://evil.test/attack-relay-absform -H 'Host: plain.allowed.test'
			probe socks-relay-ok --socks5-hostname 127.0.0.1:9998 http://plain.allowed.test/socks-relay-ok
			probe socks-relay-evil --socks5-hostname 127.0.0.1:9998 http://evil.test/attack-socks-relay-evil
			probe socks-relay-canary --socks5-hostname 127.0.0.1:9998 http://127.0.0.1:%[1]d/attack-socks-relay-canary
			kill $http $socks`, n.Canary.Port()))
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "direct-ok"), "/direct-ok")
		wantOK(t, getProbe(t, ps, r, "relay-ok"), "/relay-ok")
		wantOK(t, getProbe(t, ps, r, "relay-plain-ok"), "/relay-plain-ok")
		wantOK(t, getProbe(t, ps, r, "socks-relay-ok"), "/socks-relay-ok")
		direct := getProbe(t, ps, r, "direct-evil")
		wantRefusedConnect(t, direct)
		for _, name := range []string{"relay-evil", "relay-suffix", "relay-canary"} {
			p := getProbe(t, ps, r, name)
			wantRefusedConnect(t, p)
			if p.Exit != direct.Exit || p.Connect != direct.Connect {
				t.Errorf("%s through the relay: %s; directly: %s", name, p, direct)
			}
		}
		wantRefusedHTTP(t, getProbe(t, ps, r, "relay-evil-http"))
		wantRefusedHTTP(t, getProbe(t, ps, r, "relay-absform"))
		for _, name := range []string{"socks-relay-evil", "socks-relay-canary"} {
			if p := getProbe(t, ps, r, name); p.Exit == 0 || p.HTTP == "200" {
				t.Errorf("%s: want the SOCKS request refused; got %s", name, p)
			}
		}
		if c := n.Trap.Conns(); c != 0 {
			t.Errorf("the trap server accepted %d connections through the relay", c)
		}
		if c := n.Canary.Conns(); c != 0 {
			t.Errorf("the host canary accepted %d connections through the relay", c)
		}
		for _, u := range []*upstream{n.API, n.Plain} {
			if got := u.SawPrefix("/attack"); len(got) > 0 {
				t.Errorf("refused requests reached an allowed upstream through the relay: %v", got)
			}
		}
		ds := decisions(t, s, sessionOf(t, r))
		if d, ok := findDecision(ds, "api.allowed.test", "/relay-ok"); !ok || d.Verdict != "allow" {
			t.Errorf("the relayed request is not logged as allowed:\n%s", dumpDecisions(ds))
		}
	})
}

// 7. --no-network: no proxy behind the bridge ports, no proxy variables,
// no way to the allowed name.
func TestNetworkNoNetwork(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		writeNetClients(s)
		script := probeSh + `
			probe api https://api.allowed.test/nonet-api
			probe via-port -p -x http://127.0.0.1:3128 https://api.allowed.test/nonet-via-port
			python3 netprobe.py http-port tcp 127.0.0.1 3128
			python3 netprobe.py socks-port tcp 127.0.0.1 1080
			echo "##proxyvars=$(env | grep -ci '_proxy=')"`
		// Control: the same script with the network on.
		r := s.Sh(script)
		wantOK(t, getProbe(t, probes(t, r), r, "api"), "/nonet-api")

		r = s.Jail("--no-network", "--", "sh", "-c", strings.ReplaceAll(script, "/nonet-", "/attack-nonet-"))
		ps := probes(t, r)
		wantNoRoute(t, getProbe(t, ps, r, "api"))
		if p := getProbe(t, ps, r, "via-port"); p.Exit != 7 {
			t.Errorf("--no-network: the proxy port must refuse connections (curl exit 7); got %s", p)
		}
		wantKV(t, r, "http-port", is("ECONNREFUSED"), "ECONNREFUSED")
		wantKV(t, r, "socks-port", is("ECONNREFUSED"), "ECONNREFUSED")
		wantKV(t, r, "proxyvars", is("0"), "no proxy variables")
		if got := n.API.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("--no-network: requests reached the server: %v", got)
		}
	})
}

// 8. -p publishes a port the jailed command listens on to the host's
// loopback; -f forwards one host loopback port into the jail. Both logged.
func TestNetworkPublishAndForward(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		writeNetClients(s)

		port := freePort(t)
		ps := strconv.Itoa(port)
		cmd := s.JailCmd("-p", ps, "--", "python3", "-m", "http.server", ps, "--bind", "127.0.0.1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Errorf("jail -p did not exit within 5 s of SIGTERM")
			}
		}
		var listing string
		client := &http.Client{Timeout: 2 * time.Second}
		ok := waitFor(15*time.Second, func() bool {
			resp, err := client.Get("http://127.0.0.1:" + ps + "/")
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			listing = string(b)
			return resp.StatusCode == 200
		})
		if !ok {
			stop()
			t.Fatalf("GET http://127.0.0.1:%d/ from the host never answered through -p %d\njail stderr:\n%s", port, port, stderr.String())
		}
		if !strings.Contains(listing, "README.md") || !strings.Contains(listing, "netget.js") {
			t.Errorf("the published server's listing is not the project's:\n%s", listing)
		}
		// The published port is on the host's loopback only.
		if ip := hostIPv4(); ip != "" {
			if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, ps), time.Second); err == nil {
				c.Close()
				t.Errorf("the published port %d is reachable on the host's %s, not only on loopback", port, ip)
			}
		}
		stop()

		// -f: the jailed command reaches the host's port FPORT on its own
		// 127.0.0.1, and no other host port.
		fwd := newUpstream(t, false, "")
		fp := fwd.Port()
		r := s.Jail("-f", strconv.Itoa(fp), "--", "sh", "-c", probeSh+fmt.Sprintf(`
			probe fwd --noproxy '*' http://127.0.0.1:%[1]d/fwd-ok
			probe fwd-other --noproxy '*' http://127.0.0.1:%[2]d/attack-fwd-other`, fp, n.Canary.Port()))
		pr := probes(t, r)
		wantOK(t, getProbe(t, pr, r, "fwd"), "/fwd-ok")
		if p := getProbe(t, pr, r, "fwd-other"); p.Exit != 7 {
			t.Errorf("-f %d must not open other host ports; got %s", fp, p)
		}
		// Without -f the same port is the jail's own, closed loopback.
		r = s.Sh(probeSh + fmt.Sprintf(`probe nofwd --noproxy '*' http://127.0.0.1:%d/attack-nofwd`, fp))
		if p := getProbe(t, probes(t, r), r, "nofwd"); p.Exit != 7 {
			t.Errorf("without -f, 127.0.0.1:%d inside must refuse; got %s", fp, p)
		}
		if got := fwd.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("the forwarded server saw requests it should not have: %v", got)
		}
		if c := n.Canary.Conns(); c != 0 {
			t.Errorf("the canary accepted %d connections while only another port was forwarded", c)
		}

		ds := decisions(t, s, "")
		var pub, fw bool
		for _, d := range ds {
			pub = pub || (d.Method == "PUBLISH" && d.Port == port && d.Verdict == "allow")
			fw = fw || (d.Method == "FORWARD" && d.Port == fp && d.Verdict == "allow")
		}
		if !pub || !fw {
			t.Errorf("jail log: want a PUBLISH entry for %d (%v) and a FORWARD entry for %d (%v):\n%s", port, pub, fp, fw, dumpDecisions(ds))
		}
	})
}

// 9a. The proxy failing to start stops jail before the command runs.
func TestNetworkProxyFailureIsFatal(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		base := s.Env
		mkdir := func(p string, mode os.FileMode) {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, mode)
			s.chownUp(p)
		}
		// Control: a private XDG_RUNTIME_DIR is used and the command runs.
		good := s.Base + "/xdg-good"
		mkdir(good, 0o700)
		s.Env = append(base, "XDG_RUNTIME_DIR="+good)
		if r := s.Jail("--", "sh", "-c", "touch ran-control"); r.Code != 0 {
			t.Fatalf("control: jail with a private XDG_RUNTIME_DIR failed:\n%s", r)
		}
		hostFile(t, s.Project+"/ran-control")

		cases := map[string]func() []string{
			// $XDG_RUNTIME_DIR/jail open to other users: they could plant sockets.
			"runtime-dir-0777": func() []string {
				d := s.Base + "/xdg-open"
				mkdir(d, 0o700)
				mkdir(d+"/jail", 0o777)
				return []string{"XDG_RUNTIME_DIR=" + d}
			},
			// $XDG_RUNTIME_DIR/jail is a file: no session directory.
			"runtime-dir-file": func() []string {
				d := s.Base + "/xdg-file"
				mkdir(d, 0o700)
				s.WriteFile(d+"/jail", "not a directory\n", 0o600)
				return []string{"XDG_RUNTIME_DIR=" + d}
			},
			// A decision log that cannot be opened is not among these: it is
			// a record, not the boundary, and is warned about instead
			// (TestFailClosedDecisionLogUnwritable).
		}
		for name, setup := range cases {
			t.Run(name, func(t *testing.T) {
				s.Env = append(append([]string{}, base...), setup()...)
				marker := "ran-" + name
				r := s.Jail("--", "sh", "-c", "touch "+marker)
				if r.Code != 125 {
					t.Errorf("want exit 125 when the proxy cannot start, got:\n%s", r)
				}
				if l := lines(r.Stderr); len(l) != 1 || !strings.HasPrefix(l[0], "jail: ") {
					t.Errorf("want exactly one `jail: …` line on stderr, got %q", r.Stderr)
				}
				hostAbsent(t, s.Project+"/"+marker)
			})
		}
		s.Env = base
	})
}

// 9b. SIGKILL to the host-side jail process (the proxy with it) while the
// command loops on curl: every jailed process goes, nothing keeps a route.
func TestNetworkKillProxyMidSession(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		// SIGKILL leaves the session's socket directory behind: keep it in
		// the sandbox, which the test removes.
		run := s.Base + "/run"
		os.MkdirAll(run, 0o700)
		s.chownUp(run)
		s.Env = append(s.Env, "XDG_RUNTIME_DIR="+run)
		token := "netloop-" + uniq()
		cmd := s.JailCmd("--", "sh", "-c", fmt.Sprintf(
			`while :; do if curl -sS --max-time 2 -o /dev/null https://api.allowed.test/%[1]s; then echo ok >> loop.log; else echo fail >> loop.log; fi; sleep 0.1; done # %[1]s`, token))
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		logPath := s.Project + "/loop.log"
		okLines := func() int {
			b, _ := os.ReadFile(logPath)
			return strings.Count(string(b), "ok\n")
		}
		if !waitFor(15*time.Second, func() bool { return okLines() >= 2 }) {
			cmd.Process.Kill()
			b, _ := os.ReadFile(logPath)
			t.Fatalf("control: the loop never reached the server through the proxy; loop.log: %q", b)
		}
		withToken := func() []string {
			var pids []string
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				if e.Name()[0] < '0' || e.Name()[0] > '9' {
					continue
				}
				b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				if err == nil && bytes.Contains(b, []byte(token)) {
					pids = append(pids, e.Name())
				}
			}
			return pids
		}
		if len(withToken()) == 0 {
			t.Fatalf("control: no process carries the loop's token while it runs")
		}
		cmd.Process.Kill()
		<-exited
		if !waitFor(5*time.Second, func() bool { return len(withToken()) == 0 }) {
			pids := withToken()
			t.Errorf("jailed processes survive SIGKILL of jail: host PIDs %v", pids)
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		// Nothing is left to make requests or record them.
		before, hits := hostFile(t, logPath), len(n.API.SawPrefix("/"+token))
		time.Sleep(time.Second)
		if after := hostFile(t, logPath); after != before {
			t.Errorf("loop.log still grows after jail was killed: %q -> %q", before, after)
		}
		if h := len(n.API.SawPrefix("/" + token)); h != hits {
			t.Errorf("the server still gets requests after jail was killed (%d -> %d)", hits, h)
		}
	})
}

// 10. Real npm and Go clients against the real registries this machine
// reaches, allowed only because the toolchains' own configuration names
// them; nothing else is allowed.
func TestNetworkPackageRegistries(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		writeNetClients(s)
		t.Cleanup(func() { makeWritable(s.Base) }) // the Go module cache is read-only

		// The hosts the toolchains are configured with, asked the way jail
		// asks: no registry name is written in this test.
		regOut, code := s.HostOut(s.Project, "npm", "config", "get", "registry")
		if code != 0 {
			t.Fatalf("npm config get registry: %s", regOut)
		}
		npmHost := hostOfURL(t, strings.TrimSpace(lastLine(regOut)))
		proxyOut, code := s.HostOut(s.Project, "go", "env", "GOPROXY")
		if code != 0 {
			t.Fatalf("go env GOPROXY: %s", proxyOut)
		}
		var goHost string
		for _, p := range strings.FieldsFunc(strings.TrimSpace(proxyOut), func(r rune) bool { return r == ',' || r == '|' }) {
			if p != "direct" && p != "off" {
				goHost = hostOfURL(t, p)
				break
			}
		}
		if goHost == "" {
			t.Fatalf("GOPROXY %q names no module proxy; this test needs one", proxyOut)
		}

		s.Env = append(s.Env, "npm_config_cache="+s.Project+"/.npm-cache", "npm_config_update_notifier=false")
		r := s.Jail("--", "npm", "install", "is-number@7.0.0", "--no-audit", "--no-fund")
		if r.Code != 0 {
			t.Errorf("jail -- npm install is-number@7.0.0 failed:\n%s\nlog:\n%s", r, dumpDecisions(decisions(t, s, "")))
		} else if pkg := hostFile(t, s.Project+"/node_modules/is-number/package.json"); !strings.Contains(pkg, `"version": "7.0.0"`) {
			t.Errorf("node_modules/is-number/package.json on the host is not version 7.0.0:\n%s", pkg)
		}
		// Through node, the registry is reachable and nothing else is.
		r = s.Jail("--", "node", "netget.js", "node-registry", "https://"+npmHost+"/is-number")
		if p := getProbe(t, probes(t, r), r, "node-registry"); p.HTTP != "200" {
			t.Errorf("control: node through the proxy to the npm registry: %s", p)
		}
		r = s.Jail("--", "node", "netget.js", "node-evil", "https://evil.test/")
		if p := getProbe(t, probes(t, r), r, "node-evil"); p.Connect != "403" {
			t.Errorf("jail -- node reached a host its toolchain does not name: %s", p)
		}
		// The registry is allowed for the toolchain's commands, not for any
		// command.
		r = s.Sh(probeSh + "probe curl-registry https://" + npmHost + "/is-number")
		wantRefusedConnect(t, getProbe(t, probes(t, r), r, "curl-registry"))

		mod := s.Project + "/gomod"
		s.WriteFile(mod+"/go.mod", "module example.test/m\n\ngo 1.21\n", 0o644)
		s.Env = append(s.Env, "GOMODCACHE="+mod+"/modcache", "GOCACHE="+mod+"/cache", "GOPATH="+mod+"/gopath",
			"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
		before := len(decisions(t, s, ""))
		r = s.JailIn(mod, "", "--", "go", "mod", "download", "github.com/google/uuid@v1.6.0")
		if r.Code != 0 {
			t.Errorf("jail -- go mod download github.com/google/uuid@v1.6.0 failed:\n%s", r)
		} else if m, _ := filepath.Glob(s.Home + "/.cache/jail/*/go-mod/github.com/google/uuid@v1.6.0/uuid.go"); len(m) != 1 {
			t.Errorf("the module is not in the project's own jail module cache on the host (the go profile's GOMODCACHE): %v", m)
		}
		goDs := decisions(t, s, "")[before:]
		if d, ok := findDecision(goDs, goHost, ""); !ok || d.Verdict != "allow" {
			t.Errorf("the Go module proxy %s is not logged as allowed:\n%s", goHost, dumpDecisions(goDs))
		}
		for _, d := range goDs {
			if d.Verdict != "allow" {
				t.Errorf("go mod download of a module the proxy serves needed something not allowed: %s", d)
			}
		}
		// A private module makes go fetch its origin directly: that name is
		// not one the toolchain's registry configuration names, so it is
		// refused.
		before = len(decisions(t, s, ""))
		env := s.Env
		s.Env = append(append([]string{}, env...), "GOPRIVATE=evil.test")
		r = s.JailIn(mod, "", "--", "go", "mod", "download", "evil.test/x@v1.0.0")
		s.Env = env
		if r.Code == 0 {
			t.Errorf("go mod download evil.test/x succeeded:\n%s", r)
		}
		if d, ok := findDecision(decisions(t, s, "")[before:], "evil.test", ""); !ok || d.Verdict != "deny" {
			t.Errorf("go's direct fetch of evil.test is not logged as denied:\n%s\n%s", r, dumpDecisions(decisions(t, s, "")[before:]))
		}
		npmDs := decisions(t, s, "")
		if d, ok := findDecision(npmDs, npmHost, ""); !ok || d.Verdict != "allow" {
			t.Errorf("the npm registry %s is not logged as allowed:\n%s", npmHost, dumpDecisions(npmDs))
		}
	})
}

func lastLine(s string) string {
	l := lines(s)
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// hostOfURL is the host (with a port when one is given) of a registry URL.
func hostOfURL(t *testing.T, u string) string {
	t.Helper()
	if !strings.Contains(u, "://") {
		u = "https://" + u
	}
	rest := u[strings.Index(u, "://")+3:]
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		t.Fatalf("no host in %q", u)
	}
	if h, p, err := net.SplitHostPort(rest); err == nil && (p == "443" || p == "") {
		return h
	}
	return rest
}

// makeWritable gives the owner write permission on everything under dir,
// so that the sandbox's cleanup can remove a Go module cache.
func makeWritable(dir string) {
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			os.Chmod(p, fi.Mode().Perm()|0o700)
		}
		return nil
	})
}
