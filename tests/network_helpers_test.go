package tests

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Every name a network test uses. Each is in the test leaf certificate, so
// that a name the proxy wrongly let through would complete its TLS
// handshake and show up at the upstream server instead of failing early.
var testNames = []string{
	"api.allowed.test", "sub.allowed.test", "allowed.test", "blocked.allowed.test", "plain.allowed.test",
	"ports.test", "evil.test", "evilallowed.test", "allowed.test.evil.test", "unknown.test",
}

// netPKI is the network tests' CA and a leaf for testNames.
var netPKI = &lazyPKI{what: "test PKI", caName: "jail network tests CA", names: testNames}

// hit is one request an upstream server received.
type hit struct {
	Method, Host, Path string
}

// upstream is a server on the host's loopback that records what reaches
// it: every accepted connection (whatever protocol it then speaks) and
// every HTTP request.
type upstream struct {
	srv   *httptest.Server
	conns atomic.Int64
	hits  reqLog[hit]
}

// newUpstream starts a server on 127.0.0.1: TLS with the test leaf, or
// plain HTTP. Every path answers "upstream says <path>"; when gitRoot is
// set, paths under /repo.git/ are served by `git http-backend`.
func newUpstream(t *testing.T, useTLS bool, gitRoot string) *upstream {
	t.Helper()
	return newUpstreamAt(t, "127.0.0.1:0", useTLS, gitRoot)
}

// newUpstreamAt is newUpstream listening on addr.
func newUpstreamAt(t *testing.T, addr string, useTLS bool, gitRoot string) *upstream {
	t.Helper()
	u := &upstream{}
	var git http.Handler
	if gitRoot != "" {
		git = gitBackend(t, gitRoot)
	}
	u.srv = newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.add(hit{r.Method, r.Host, r.URL.Path})
		if git != nil && strings.HasPrefix(r.URL.Path, "/repo.git/") {
			git.ServeHTTP(w, r)
			return
		}
		fmt.Fprintf(w, "upstream says %s\n", r.URL.Path)
	}))
	if addr != "127.0.0.1:0" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listening on %s: %v", addr, err)
		}
		u.srv.Listener.Close()
		u.srv.Listener = l
	}
	u.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			u.conns.Add(1)
		}
	}
	var leaf *tls.Certificate
	if useTLS {
		leaf = &netPKI.get(t).Leaf
	}
	startTestServer(t, u.srv, leaf)
	return u
}

// Addr is the server's "127.0.0.1:PORT".
func (u *upstream) Addr() string { return u.srv.Listener.Addr().String() }

// Port is the server's port on the host's loopback.
func (u *upstream) Port() int { return u.srv.Listener.Addr().(*net.TCPAddr).Port }

// Paths lists the request paths the server saw, in order.
func (u *upstream) Paths() []string {
	var out []string
	for _, h := range u.hits.Requests() {
		out = append(out, h.Path)
	}
	return out
}

// Saw reports whether the server received a request for path.
func (u *upstream) Saw(path string) bool {
	for _, p := range u.Paths() {
		if p == path {
			return true
		}
	}
	return false
}

// SawPrefix lists the paths the server saw that start with prefix.
func (u *upstream) SawPrefix(prefix string) []string {
	var out []string
	for _, p := range u.Paths() {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// Conns is the number of TCP connections the server accepted.
func (u *upstream) Conns() int64 { return u.conns.Load() }

// netServers are the servers one sandbox's network tests talk to.
type netServers struct {
	API    *upstream // TLS: api.allowed.test, sub.allowed.test, ports.test
	Plain  *upstream // plain HTTP: plain.allowed.test
	Trap   *upstream // TLS: every name that must be refused is mapped here
	Canary *upstream // plain HTTP on the host's loopback, named by no rule
}

// netConfig is the project's jail.json network section.
type netConfig struct {
	Allow   []string          `json:"allow,omitempty"`
	Deny    []string          `json:"deny,omitempty"`
	Unknown string            `json:"unknown,omitempty"`
	Hosts   map[string]string `json:"hosts,omitempty"`
}

// setupNet starts the servers, trusts the test CA on the host side and
// writes the project's jail.json: api/sub/plain names and *.allowed.test
// allowed, evil.test and blocked.allowed.test denied, unknown names denied,
// and every refused name mapped (by network.hosts) to the trap server so
// that a wrong "allow" would be seen there.
func setupNet(t *testing.T, s *Sandbox, gitRoot string) *netServers {
	t.Helper()
	n := &netServers{
		API:    newUpstream(t, true, gitRoot),
		Plain:  newUpstream(t, false, ""),
		Trap:   newUpstream(t, true, ""),
		Canary: newUpstream(t, false, ""),
	}
	trustCA(t, s, netPKI.get(t), "bundle.pem")
	hosts := map[string]string{
		"api.allowed.test":   n.API.Addr(),
		"sub.allowed.test":   n.API.Addr(),
		"ports.test":         n.API.Addr(),
		"plain.allowed.test": n.Plain.Addr(),
	}
	for _, name := range []string{"allowed.test", "blocked.allowed.test", "evil.test", "evilallowed.test", "allowed.test.evil.test", "unknown.test"} {
		hosts[name] = n.Trap.Addr()
	}
	writeNetConfig(t, s, netConfig{
		Allow:   []string{"api.allowed.test", "plain.allowed.test", "*.allowed.test"},
		Deny:    []string{"evil.test", "blocked.allowed.test"},
		Unknown: "deny",
		Hosts:   hosts,
	})
	return n
}

func writeNetConfig(t *testing.T, s *Sandbox, c netConfig) {
	t.Helper()
	writeJailJSON(t, s, map[string]any{"network": c})
}

// probeSh defines `probe NAME CURL-ARGS...` for scripts run in the jail:
// one line per probe, "@@NAME\tEXIT\tHTTP_CODE HTTP_CONNECT\tBODY\tSTDERR".
// Other helpers print the same shape so that probes parse alike.
const probeSh = `
probe() {
	n=$1; shift
	rm -f /tmp/probe.body /tmp/probe.err
	w=$(curl -sS --max-time 15 -o /tmp/probe.body -w '%{http_code} %{http_connect}' "$@" 2>/tmp/probe.err); c=$?
	printf '@@%s\t%s\t%s\t%s\t%s\n' "$n" "$c" "$w" "$(head -c 300 /tmp/probe.body 2>/dev/null | tr '\t\n\r' '   ')" "$(head -c 300 /tmp/probe.err | tr '\t\n\r' '   ')"
}
`

// probe is one parsed probe line.
type probe struct {
	Name    string
	Exit    int
	HTTP    string // curl's %{http_code}, or the client's status
	Connect string // curl's %{http_connect}: the proxy's answer to CONNECT
	Body    string
	Err     string
}

func (p probe) String() string {
	return fmt.Sprintf("%s: exit %d, http %q, connect %q, body %q, stderr %q", p.Name, p.Exit, p.HTTP, p.Connect, p.Body, p.Err)
}

// probes parses the "@@" lines of a run's stdout.
func probes(t *testing.T, r Result) map[string]probe {
	t.Helper()
	out := map[string]probe{}
	for _, l := range lines(r.Stdout) {
		if !strings.HasPrefix(l, "@@") {
			continue
		}
		f := strings.Split(l[2:], "\t")
		for len(f) < 5 {
			f = append(f, "")
		}
		p := probe{Name: f[0], Body: strings.TrimSpace(f[3]), Err: strings.TrimSpace(f[4])}
		p.Exit, _ = strconv.Atoi(f[1])
		codes := strings.Fields(f[2])
		if len(codes) > 0 {
			p.HTTP = codes[0]
		}
		if len(codes) > 1 {
			p.Connect = codes[1]
		}
		out[p.Name] = p
	}
	return out
}

// get returns the named probe, failing the test if the script did not
// print it.
func getProbe(t *testing.T, ps map[string]probe, r Result, name string) probe {
	t.Helper()
	p, ok := ps[name]
	if !ok {
		t.Fatalf("probe %q printed nothing:\n%s", name, r)
	}
	return p
}

// wantOK checks that a probe got the upstream's answer for path.
func wantOK(t *testing.T, p probe, path string) {
	t.Helper()
	if p.Exit != 0 || p.HTTP != "200" || p.Body != "upstream says "+path {
		t.Errorf("control %s: want 200 %q from the upstream server; got %s", p.Name, "upstream says "+path, p)
	}
}

// wantRefusedConnect checks that the proxy answered a CONNECT with 403.
func wantRefusedConnect(t *testing.T, p probe) {
	t.Helper()
	if p.Exit != 56 || p.Connect != "403" {
		t.Errorf("%s: want CONNECT refused with 403 (curl exit 56); got %s", p.Name, p)
	}
}

// wantRefusedHTTP checks that the proxy answered a plain HTTP request with
// 403 and a one-line body starting "jail:".
func wantRefusedHTTP(t *testing.T, p probe) {
	t.Helper()
	if p.Exit != 0 || p.HTTP != "403" || !strings.HasPrefix(p.Body, "jail:") {
		t.Errorf("%s: want 403 from the proxy with a body starting \"jail:\"; got %s", p.Name, p)
	}
}

// wantNoRoute checks that a probe failed without reaching anything.
func wantNoRoute(t *testing.T, p probe) {
	t.Helper()
	if p.Exit == 0 || p.HTTP == "200" || strings.HasPrefix(p.Body, "upstream says") {
		t.Errorf("%s: want no route (a connection or resolution failure); got %s", p.Name, p)
	}
}

// decision is one line of the decision log as `jail log --json` prints it.
type decision struct {
	Time      time.Time `json:"time"`
	Session   string    `json:"session"`
	Method    string    `json:"method"`
	Scheme    string    `json:"scheme"`
	Host      string    `json:"host"`
	Port      int       `json:"port"`
	Path      string    `json:"path"`
	Rule      string    `json:"rule"`
	Verdict   string    `json:"verdict"`
	Reason    string    `json:"reason"`
	BytesUp   int64     `json:"bytesUp"`
	BytesDown int64     `json:"bytesDown"`

	raw map[string]any
}

func (d decision) String() string {
	return fmt.Sprintf("%s %s %s://%s:%d%s rule=%q reason=%q session=%s", d.Verdict, d.Method, d.Scheme, d.Host, d.Port, d.Path, d.Rule, d.Reason, d.Session)
}

// decisions runs `jail log --json` as the runner (same HOME) and returns
// the entries of one session ("" for all).
func decisions(t *testing.T, s *Sandbox, session string) []decision {
	t.Helper()
	r := s.Jail("log", "--json")
	if r.Code != 0 {
		t.Fatalf("jail log --json failed:\n%s", r)
	}
	var out []decision
	for _, l := range lines(r.Stdout) {
		var d decision
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("jail log --json printed a line that is not JSON: %q: %v", l, err)
		}
		json.Unmarshal([]byte(l), &d.raw)
		if session == "" || d.Session == session {
			out = append(out, d)
		}
	}
	return out
}

// findDecision returns the first entry matching host and, when path is
// set, path.
func findDecision(ds []decision, host, path string) (decision, bool) {
	for _, d := range ds {
		if d.Host == host && (path == "" || d.Path == path) {
			return d, true
		}
	}
	return decision{}, false
}

func dumpDecisions(ds []decision) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

// sessionOf returns the "session=ID" a script printed from $JAIL_SESSION.
func sessionOf(t *testing.T, r Result) string {
	t.Helper()
	for _, l := range lines(r.Stdout) {
		if id, ok := strings.CutPrefix(l, "session="); ok && id != "" {
			return id
		}
	}
	t.Fatalf("the script did not print session=$JAIL_SESSION:\n%s", r)
	return ""
}

// freePort returns a port that was free on the host's loopback a moment
// ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// hostIPv4 is a non-loopback IPv4 address of this machine, or "".
func hostIPv4() string {
	addrs, _ := net.InterfaceAddrs()
	var ips []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ips = append(ips, n.IP.String())
		}
	}
	sort.Strings(ips)
	if len(ips) == 0 {
		return ""
	}
	return ips[0]
}

// gitBackend serves the repositories under root by `git http-backend`
// (smart HTTP).
func gitBackend(t *testing.T, root string) http.Handler {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	return &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root},
	}
}

// makeBareRepo creates dir/repo.git with one commit and returns its hash.
func makeBareRepo(t *testing.T, dir string) string {
	t.Helper()
	work := filepath.Join(dir, "work")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "served.txt"), []byte("served by git http-backend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-C", work, "add", "-A")
	run("-C", work, "commit", "-qm", "commit served over smart HTTP")
	run("clone", "-q", "--bare", work, filepath.Join(dir, "repo.git"))
	return run("-C", work, "rev-parse", "HEAD")
}
