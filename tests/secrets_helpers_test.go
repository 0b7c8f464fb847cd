package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The names the secrets tests talk to. The network tests' leaf does not
// cover them, so these tests have their own CA and leaf, trusted by the
// host side of jail next to the system CAs.
const (
	boundHost     = "api.bound.test"     // bound to MY_API_KEY by secrets.env
	otherHost     = "other.allowed.test" // allowed by the network policy, bound to nothing
	anthropicHost = "api.anthropic.com"  // built-in binding of ANTHROPIC_API_KEY
)

var secretsHostNames = []string{boundHost, otherHost, anthropicHost}

// secretsPKI is a CA and a leaf for secretsHostNames signed by it.
var secretsPKI = &lazyPKI{what: "secrets test PKI", caName: "jail secrets tests CA", names: secretsHostNames}

// seen is one request an echo server received, as it arrived.
type seen struct {
	Method, Host, Path, Query string
	Header                    http.Header
	Body                      string
}

func (r seen) String() string {
	return fmt.Sprintf("%s %s%s?%s headers=%v body=%q", r.Method, r.Host, r.Path, r.Query, r.Header, r.Body)
}

// has reports whether s appears anywhere in the request: path, query,
// header names or values, body.
func (r seen) has(s string) bool {
	if strings.Contains(r.Path, s) || strings.Contains(r.Query, s) || strings.Contains(r.Body, s) {
		return true
	}
	for k, vs := range r.Header {
		if strings.Contains(k, s) {
			return true
		}
		for _, v := range vs {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}

// echoServer is a TLS server on the host's loopback for secretsHostNames
// that records every request it receives. handle answers a request and
// reports whether it did; otherwise the server answers "ok <path>".
type echoServer struct {
	srv    *httptest.Server
	handle func(w http.ResponseWriter, r *http.Request, body []byte) bool
	reqLog[seen]
}

func newEchoServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte) bool) *echoServer {
	t.Helper()
	e := &echoServer{handle: handle}
	e.srv = newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		e.add(seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		if e.handle != nil && e.handle(w, r, body) {
			return
		}
		fmt.Fprintf(w, "ok %s\n", r.URL.Path)
	}))
	startTestServer(t, e.srv, &secretsPKI.get(t).Leaf)
	return e
}

// Addr is the server's "127.0.0.1:PORT".
func (e *echoServer) Addr() string { return e.srv.Listener.Addr().String() }

// At returns the requests for path.
func (e *echoServer) At(path string) []seen {
	var out []seen
	for _, r := range e.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// Containing returns the requests in which s appears anywhere.
func (e *echoServer) Containing(s string) []seen {
	var out []seen
	for _, r := range e.Requests() {
		if r.has(s) {
			out = append(out, r)
		}
	}
	return out
}

func (e *echoServer) dump() string { return dumpRequests(e.Requests()) }

// placeholderPrefix is what every placeholder starts with.
const placeholderPrefix = "jail-secret-"

// placeholderRE matches the placeholder of the variable name: the generic
// jail-secret-NAME-<random>, or a value of a known format shaped as such
// (sk-ant-api03-jail<random>, ghp_jail<random>).
func placeholderRE(name string) *regexp.Regexp {
	return regexp.MustCompile(`^(` + regexp.QuoteMeta(placeholderPrefix+name+"-") + `[A-Za-z0-9]{8,}|[A-Za-z0-9._-]*(jail|JAIL)[A-Za-z0-9._-]{12,})$`)
}

// secretsRig is one sandbox's secrets setup: the real values handed to
// jail, and the servers the bound and the unbound names are mapped to.
type secretsRig struct {
	Real  map[string]string // NAME -> real value, as set in jail's environment
	Bound *echoServer       // api.bound.test
	Other *echoServer       // other.allowed.test
}

// reals lists the real values.
func (g *secretsRig) reals() []string {
	var out []string
	for _, v := range g.Real {
		out = append(out, v)
	}
	return out
}

// noReal fails the test if a real value appears in what.
func (g *secretsRig) noReal(t *testing.T, what, text string) {
	t.Helper()
	for name, v := range g.Real {
		if strings.Contains(text, v) {
			t.Errorf("the real value of %s appears in %s:\n%s", name, what, text)
		}
	}
}

// realValue is a distinct fake credential for name.
func realValue(name string) string {
	switch name {
	case "ANTHROPIC_API_KEY":
		return "sk-ant-api03-REAL" + uniq() + uniq() + "AA"
	default:
		return "REAL-" + strings.ToLower(strings.ReplaceAll(name, "_", "-")) + "-" + uniq() + uniq()
	}
}

// setupSecrets makes up real values for the secrets in env (set in jail's
// environment) and in files (for .env files the test writes), starts the
// echo servers answering with secretsAPI, trusts their CA on the host
// side, writes the client scripts and a jail.json that allows and maps
// both names and binds MY_API_KEY and BOUND_VALUE to api.bound.test.
// extra, when set, is called with the rig before jail.json is written;
// what it returns is merged into jail.json's top level ("network" and
// "secrets" key by key).
func setupSecrets(t *testing.T, s *Sandbox, env, files []string, extra func(g *secretsRig) map[string]any) *secretsRig {
	t.Helper()
	g := &secretsRig{Real: map[string]string{}}
	for _, name := range append(append([]string{}, env...), files...) {
		g.Real[name] = realValue(name)
	}
	for _, name := range env {
		s.Env = append(s.Env, name+"="+g.Real[name])
	}
	// The servers start once the real values are settled: their handlers
	// read g.Real.
	g.Bound = newEchoServer(t, secretsAPI(g))
	g.Other = newEchoServer(t, secretsAPI(g))
	trustCA(t, s, secretsPKI.get(t), "secrets-bundle.pem")
	network := map[string]any{
		"allow":   []string{boundHost, otherHost},
		"unknown": "deny",
		"hosts":   map[string]string{boundHost: g.Bound.Addr(), otherHost: g.Other.Addr()},
	}
	// MY_API_KEY may go anywhere in a request to its host (the tests send
	// it in headers, the query and bodies); BOUND_VALUE, a plain host
	// list, into header fields only.
	secrets := map[string]any{
		"env": map[string]any{
			"MY_API_KEY":  map[string][]string{"hosts": {boundHost}, "inject": {"header", "query", "body"}},
			"BOUND_VALUE": []string{boundHost},
		},
	}
	cfg := map[string]any{"network": network, "secrets": secrets}
	var more map[string]any
	if extra != nil {
		more = extra(g)
	}
	for k, v := range more {
		sub, ok := v.(map[string]any)
		if !ok {
			cfg[k] = v
			continue
		}
		dst, _ := cfg[k].(map[string]any)
		if dst == nil {
			dst = map[string]any{}
			cfg[k] = dst
		}
		for kk, vv := range sub {
			switch cur := dst[kk].(type) {
			case []string:
				dst[kk] = append(append([]string{}, cur...), vv.([]string)...)
			case map[string]string:
				for hk, hv := range vv.(map[string]string) {
					cur[hk] = hv
				}
			case map[string][]string:
				for hk, hv := range vv.(map[string][]string) {
					cur[hk] = hv
				}
			default:
				dst[kk] = vv
			}
		}
	}
	writeJailJSON(t, s, cfg)
	s.WriteFile(s.Project+"/secreq.py", secreqPy, 0o644)
	s.WriteFile(s.Project+"/secreq.js", secreqJS, 0o644)
	return g
}

// secreqPy sends one request with python3's urllib, taking the key from
// the environment variable VAR the way an application does, and prints a
// probe line ("@@NAME\tEXIT\tSTATUS 000\tBODY\tERR").
//
//	python3 secreq.py NAME MODE URL VAR
//
// MODE "all": GET with Authorization: Bearer KEY, x-api-key: KEY and
// ?key=KEY; "header": the Authorization header only; "query": ?key=KEY
// only; "body": POST of {"key": KEY} as JSON and nothing else.
const secreqPy = `
import json, os, sys, urllib.error, urllib.request
name, mode, url, var = sys.argv[1:5]
key = os.environ[var]
def clean(s): return str(s).replace("\t", " ").replace("\r", " ").replace("\n", " ").strip()
def out(code, status, body, err): print("@@%s\t%d\t%s 000\t%s\t%s" % (name, code, status, clean(body), clean(err)), flush=True)
headers, data, method = {"User-Agent": "secreq.py"}, None, "GET"
if mode in ("all", "header"):
    headers["Authorization"] = "Bearer " + key
if mode == "all":
    headers["x-api-key"] = key
if mode in ("all", "query"):
    url += ("&" if "?" in url else "?") + "key=" + key
if mode == "body":
    data, method = json.dumps({"key": key, "from": "python"}).encode(), "POST"
    headers["Content-Type"] = "application/json"
try:
    r = urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers, method=method), timeout=15)
    out(0, str(r.status), r.read().decode(errors="replace"), "")
except urllib.error.HTTPError as e:
    out(22, str(e.code), e.read().decode(errors="replace"), e)
except Exception as e:
    out(1, "000", "", repr(e))
`

// secreqJS is secreqPy for node: https.request through an agent that
// opens a CONNECT tunnel through HTTPS_PROXY (Node's https module and its
// fetch ignore the proxy variables), trusting NODE_EXTRA_CA_CERTS.
//
//	node secreq.js NAME MODE URL VAR
const secreqJS = `
const http = require('http'), https = require('https'), tls = require('tls');
const [name, mode, rawURL, v] = process.argv.slice(2);
const key = process.env[v];
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
const target = new URL(rawURL);
const headers = {'User-Agent': 'secreq.js'};
let body = null, method = 'GET';
if (mode === 'all' || mode === 'header') headers['Authorization'] = 'Bearer ' + key;
if (mode === 'all') headers['x-api-key'] = key;
if (mode === 'all' || mode === 'query') target.searchParams.append('key', key);
if (mode === 'body') {
	body = JSON.stringify({key, from: 'node'});
	method = 'POST';
	headers['Content-Type'] = 'application/json';
	headers['Content-Length'] = Buffer.byteLength(body);
}
const req = https.request(target, {method, headers, agent: new TunnelAgent({keepAlive: false})}, r => {
	let b = '';
	r.setEncoding('utf8');
	r.on('data', d => b += d);
	r.on('end', () => out(0, r.statusCode, connect, b, ''));
});
req.on('error', e => out(connect === '000' ? 7 : connect === 200 ? 35 : 56, '000', connect, '', e.code || e.message));
req.setTimeout(15000, () => req.destroy(new Error('timeout')));
if (body) req.write(body);
req.end();
`

// secretDecisions are the session's log entries for host whose path
// starts with prefix.
func secretDecisions(ds []decision, host, prefix string) []decision {
	var out []decision
	for _, d := range ds {
		if d.Host == host && strings.HasPrefix(d.Path, prefix) {
			out = append(out, d)
		}
	}
	return out
}

// hostLogHasNoReal checks that jail's decision log on the host holds no
// real value: the log records placeholders, never what they stand for.
func hostLogHasNoReal(t *testing.T, s *Sandbox, g *secretsRig) {
	t.Helper()
	p := decisionLog(s)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("reading the decision log %s: %v", p, err)
		return
	}
	for name, v := range g.Real {
		if strings.Contains(string(b), v) {
			t.Errorf("the decision log %s holds the real value of %s", p, name)
		}
	}
}

// reverse returns s backwards: scripts carry real values reversed so that
// their own command lines inside the jail do not hold the value searched
// for.
func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// section returns the text between the line "==NAME" and the next line
// starting with "==".
func section(out, name string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "==") {
			if in {
				break
			}
			in = l == "=="+name
			continue
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// envMap parses NAME=VALUE lines.
func envMap(text string) map[string]string {
	m := map[string]string{}
	for _, l := range lines(text) {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// namesBinding reports whether text tells the user to bind name in
// secrets.env (spelled "secrets.env" or as the JSON to add).
func namesBinding(text, name string) bool {
	return strings.Contains(text, name) && (strings.Contains(text, "secrets.env") || strings.Contains(text, `"secrets"`))
}

var (
	claudeOnce sync.Once
	claudeArgv []string // how to run it: the native binary, or node and a script
	claudeVer  string
	claudeErr  error
)

// claudeCode returns the command that runs Claude Code from the agents'
// install (installedAgents: one npm install for every agent CLI the tests
// use) and that directory, which the jail must be allowed to read.
func claudeCode(t *testing.T) (argv []string, dir string) {
	t.Helper()
	dir = installedAgents(t)
	claudeOnce.Do(func() { claudeArgv, claudeVer, claudeErr = findClaudeCode(dir) })
	if claudeErr != nil {
		t.Fatalf("Claude Code in %s: %v", dir, claudeErr)
	}
	t.Logf("Claude Code %s: %v", claudeVer, claudeArgv)
	return claudeArgv, dir
}

// findClaudeCode returns the first way of running the install in dir that
// answers --version: the package's bin (the native binary its postinstall
// put there), cli.js (older, JavaScript releases), or the package's node
// launcher for when postinstall did not run.
func findClaudeCode(dir string) ([]string, string, error) {
	pkg := filepath.Join(dir, "node_modules/@anthropic-ai/claude-code")
	var tried []string
	for _, argv := range [][]string{
		{filepath.Join(dir, "node_modules/.bin/claude")},
		{filepath.Join(pkg, "bin/claude.exe")},
		{sandboxLookPath("node"), filepath.Join(pkg, "cli.js")},
		{sandboxLookPath("node"), filepath.Join(pkg, "cli-wrapper.cjs")},
	} {
		if _, err := os.Stat(argv[len(argv)-1]); err != nil {
			continue
		}
		out, err := exec.Command(argv[0], append(argv[1:], "--version")...).CombinedOutput()
		if err == nil && strings.Contains(string(out), "Claude Code") {
			return argv, strings.TrimSpace(string(out)), nil
		}
		tried = append(tried, fmt.Sprintf("%v: %v %q", argv, err, out))
	}
	return nil, "", fmt.Errorf("no working Claude Code in %s (tried %v)", dir, tried)
}

// jailTimeout runs cmd (from JailCmd) and stops it after d: SIGTERM, then
// SIGKILL.
func jailTimeout(t *testing.T, cmd *exec.Cmd, stdin string, d time.Duration) (Result, bool) {
	t.Helper()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timedOut := false
	var err error
	select {
	case err = <-done:
	case <-time.After(d):
		timedOut = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			err = <-done
		}
	}
	r := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	}
	return r, timedOut
}
