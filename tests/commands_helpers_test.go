package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The names the command-rule tests talk to. Neither the network tests'
// leaf nor the secrets tests' covers them, so these tests have their own
// CA and leaf, trusted by the host side of jail next to the system CAs.
const (
	gitHost      = "git.allowed.test"  // a git smart-HTTP server (git http-backend)
	registryHost = "registry.npm.test" // an npm registry that accepts publishes
	sshHost      = "ssh.git.test"      // a TCP server that greets like sshd
)

// commandsPKI is a CA and a leaf for gitHost and registryHost.
var commandsPKI = &lazyPKI{what: "command-rule test PKI", caName: "jail command-rule tests CA", names: []string{gitHost, registryHost}}

// gitIdentity is the committer every git in these tests uses, through the
// environment (jail passes it through) so that no config file is needed.
var gitIdentity = []string{
	"GIT_AUTHOR_NAME=jail test", "GIT_AUTHOR_EMAIL=t@example.test",
	"GIT_COMMITTER_NAME=jail test", "GIT_COMMITTER_EMAIL=t@example.test",
}

// pushRig is a real bare remote with a commit and a project that is one
// commit ahead of it, its upstream set, so that a plain `git push` inside
// the jail moves the remote's main from Base to Local. The remote lives in
// the project (.remote.git), the one place the jail may write, so that a
// push the rules fail to stop really lands.
type pushRig struct {
	s      *Sandbox
	Remote string // the bare repository on the host
	Base   string // the remote's main before any push
	Local  string // the project's main, one commit ahead
}

func setupPushRig(t *testing.T, s *Sandbox) *pushRig {
	t.Helper()
	g := &pushRig{s: s, Remote: s.Project + "/.remote.git"}
	s.Env = append(s.Env, gitIdentity...)
	s.Host("git", "init", "-q", "--bare", "-b", "main", g.Remote)
	s.Host("git", "-C", s.Project, "remote", "add", "origin", g.Remote)
	s.Host("git", "-C", s.Project, "push", "-q", "-u", "origin", "main")
	g.Base = g.Head()
	// A second branch on the remote gives `git fetch` inside something to
	// fetch.
	s.Host("git", "-C", g.Remote, "update-ref", "refs/heads/feature", g.Base)
	// The remote and the files the attacks leave are not the project's.
	s.WriteFile(s.Project+"/.git/info/exclude", ".remote.git/\n/g\n/ls\n/hl-git\n/push.sh\n", 0o644)
	s.WriteFile(s.Project+"/local.txt", "a commit the remote does not have\n", 0o644)
	s.Host("git", "-C", s.Project, "add", "local.txt")
	s.Host("git", "-C", s.Project, "commit", "-qm", "local commit, not pushed")
	g.Local = g.LocalHead()
	if g.Local == g.Base {
		t.Fatalf("rig: the local commit %s is the remote's", g.Local)
	}
	return g
}

// Head is the remote's main, read on the host.
func (g *pushRig) Head() string {
	return strings.TrimSpace(g.s.Host("git", "-C", g.Remote, "rev-parse", "main"))
}

// LocalHead is the project's HEAD, read on the host.
func (g *pushRig) LocalHead() string {
	return strings.TrimSpace(g.s.Host("git", "-C", g.s.Project, "rev-parse", "HEAD"))
}

// Reset puts the remote's main back to Base after a push landed.
func (g *pushRig) Reset() {
	g.s.Host("git", "-C", g.Remote, "update-ref", "refs/heads/main", g.Base)
}

// commandRules is jail.json with a command section.
func commandRules(deny, allow []string) map[string]any {
	c := map[string]any{"deny": deny}
	if allow != nil {
		c["allow"] = allow
	}
	return map[string]any{"command": c}
}

// hostRules is jail.json that allows host (and allow), maps host to addr
// by network.hosts and, when deny is set, denies those commands.
func hostRules(host, addr string, deny []string, allow ...string) map[string]any {
	c := map[string]any{"network": map[string]any{
		"allow": append([]string{host}, allow...),
		"hosts": map[string]string{host: addr},
	}}
	if deny != nil {
		c["command"] = map[string]any{"deny": deny}
	}
	return c
}

// execDenials are the log entries of exec-time denials.
func execDenials(ds []decision) []decision {
	var out []decision
	for _, d := range ds {
		if d.Method == "EXEC" && d.Verdict == "deny" {
			out = append(out, d)
		}
	}
	return out
}

// logSince returns the decision log entries appended after the first n.
func logSince(t *testing.T, s *Sandbox, n int) []decision {
	t.Helper()
	ds := decisions(t, s, "")
	if len(ds) < n {
		t.Fatalf("the decision log shrank from %d to %d entries", n, len(ds))
	}
	return ds[n:]
}

// wantExecDenial checks that ds holds an EXEC deny entry whose argv (the
// log's path) contains argvPart and whose rule names rule.
func wantExecDenial(t *testing.T, ds []decision, argvPart, rule string) {
	t.Helper()
	for _, d := range execDenials(ds) {
		if strings.Contains(d.Path, argvPart) && strings.Contains(d.Rule, rule) {
			if !strings.HasPrefix(d.Rule, "command.deny") {
				t.Errorf("the EXEC denial names its rule %q; want \"command.deny %s\"", d.Rule, rule)
			}
			return
		}
	}
	t.Errorf("the decision log has no EXEC deny entry with %q in its argv (path) and rule %q; entries of this run:\n%s", argvPart, "command.deny "+rule, dumpExec(ds))
}

// dumpExec prints entries with the fields an exec decision uses.
func dumpExec(ds []decision) string {
	if len(ds) == 0 {
		return "  (none)\n"
	}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %s %s host=%q path=%q rule=%q reason=%q\n", d.Verdict, d.Method, d.Host, d.Path, d.Rule, d.Reason)
	}
	return b.String()
}

// recorded is one request a recording server received, with the status it
// answered.
type recorded struct {
	Method, Path, Query string
	Status              int
}

func (r recorded) String() string {
	return fmt.Sprintf("%s %s?%s -> %d", r.Method, r.Path, r.Query, r.Status)
}

// recordingServer is a TLS server on the host's loopback with the
// command-rule tests' leaf that records every request and the status it
// answered.
type recordingServer struct {
	srv *httptest.Server
	reqLog[recorded]
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(c int) {
	if w.code == 0 {
		w.code = c
	}
	w.ResponseWriter.WriteHeader(c)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func newRecordingServer(t *testing.T, h http.Handler) *recordingServer {
	t.Helper()
	rs := &recordingServer{}
	rs.srv = newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		rs.add(recorded{r.Method, r.URL.Path, r.URL.RawQuery, sw.code})
	}))
	startTestServer(t, rs.srv, &commandsPKI.get(t).Leaf)
	return rs
}

func (rs *recordingServer) Addr() string { return rs.srv.Listener.Addr().String() }

// Since returns what the server received after the first n requests.
func (rs *recordingServer) Since(n int) []recorded {
	all := rs.Requests()
	if n > len(all) {
		return nil
	}
	return all[n:]
}

// withPath filters requests by method and path suffix.
func withPath(rs []recorded, method, suffix string) []recorded {
	var out []recorded
	for _, r := range rs {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// gitServer serves root/repo.git by `git http-backend` (smart HTTP, pushes
// enabled) as gitHost.
type gitServer struct {
	*recordingServer
	Repo string // the served bare repository on the host
	Base string // its main when the server started
}

func newGitServer(t *testing.T) *gitServer {
	t.Helper()
	root := t.TempDir()
	base := makeBareRepo(t, root)
	repo := filepath.Join(root, "repo.git")
	hostGit(t, "-C", repo, "config", "http.receivepack", "true")
	return &gitServer{recordingServer: newRecordingServer(t, gitBackend(t, root)), Repo: repo, Base: base}
}

// Head is the served repository's main, read on the host.
func (g *gitServer) Head(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(hostGit(t, "-C", g.Repo, "rev-parse", "main"))
}

// Reset puts the served main back to Base after a push landed.
func (g *gitServer) Reset(t *testing.T) {
	t.Helper()
	hostGit(t, "-C", g.Repo, "update-ref", "refs/heads/main", g.Base)
}

// hostGit runs git on the host as the test process.
func hostGit(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// registryServer is a minimal npm registry as registryHost: it accepts
// every publish (PUT /NAME) and knows no package.
func newRegistryServer(t *testing.T) *recordingServer {
	t.Helper()
	return newRecordingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPut {
			fmt.Fprintln(w, `{"ok":true,"success":true}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, `{"error":"not found"}`)
	}))
}

// bannerServer is a plain TCP server that greets every connection like
// sshd, counts connections and records the first line each client sends.
type bannerServer struct {
	l       net.Listener
	conns   atomic.Int64
	mu      sync.Mutex
	clients []string
}

func newBannerServer(t *testing.T) *bannerServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &bannerServer{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.conns.Add(1)
			go func() {
				defer c.Close()
				fmt.Fprint(c, "SSH-2.0-jailtest_sshd\r\n")
				line, _ := bufio.NewReader(c).ReadString('\n')
				if line != "" {
					b.mu.Lock()
					b.clients = append(b.clients, strings.TrimSpace(line))
					b.mu.Unlock()
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return b
}

func (b *bannerServer) Addr() string { return b.l.Addr().String() }
func (b *bannerServer) Conns() int64 { return b.conns.Load() }

// ClientLines are the first lines clients sent, in order of arrival.
func (b *bannerServer) ClientLines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.clients...)
}

// wirePushPy pushes a commit to a smart-HTTP server without git push: it
// packs the objects with git pack-objects (not a push) and POSTs a
// receive-pack request itself, the way a library (dulwich, libgit2) does.
//
//	wirepush.py NAME post URL OLD NEW   POST URL/git-receive-pack through
//	                                    HTTPS_PROXY; "##NAME=STATUS BODY"
//	wirepush.py NAME body FILE OLD NEW  write the request body to FILE
const wirePushPy = `
import subprocess, sys, urllib.error, urllib.request
name, mode, target, old, new = sys.argv[1:6]
def clean(b): return b.decode(errors="replace").replace("\n", " ").replace("\r", " ").replace("\t", " ").strip()[:300]
pack = subprocess.run(["git", "pack-objects", "--stdout", "--revs", "-q"],
                      input=("%s\n^%s\n" % (new, old)).encode(), stdout=subprocess.PIPE, check=True).stdout
cmd = ("%s %s refs/heads/main\0report-status agent=jail-test\n" % (old, new)).encode()
body = b"%04x" % (len(cmd) + 4) + cmd + b"0000" + pack
if mode == "body":
    open(target, "wb").write(body)
    sys.exit(0)
req = urllib.request.Request(target + "/git-receive-pack", data=body, method="POST", headers={
    "Content-Type": "application/x-git-receive-pack-request",
    "Accept": "application/x-git-receive-pack-result",
    "User-Agent": "jail-test-wirepush/1.0",
})
try:
    r = urllib.request.urlopen(req, timeout=30)
    print("##%s=%d %s" % (name, r.status, clean(r.read())))
except urllib.error.HTTPError as e:
    print("##%s=%d %s" % (name, e.code, clean(e.read())))
except Exception as e:
    print("##%s=error %r" % (name, e))
`

// socksBannerPy opens a SOCKS5 CONNECT to HOST:PORT through the jail's
// bridge and reads the first line the far end sends:
// "##NAME=rep=0 banner=LINE", "##NAME=rep=N" or the error. MODE "first"
// sends an SSH client's identification string as soon as the tunnel is up
// (as OpenSSH does), "after" sends it once the server's has arrived.
const socksBannerPy = `
import socket, struct, sys, time
name, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
mode = sys.argv[4] if len(sys.argv) > 4 else ""
hello = b"SSH-2.0-OpenSSH_9.2p1 jailtest-client\r\n"
def recvn(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            break
        b += d
    return b
def readline(s):
    line = b""
    while not line.endswith(b"\n"):
        d = s.recv(1)
        if not d:
            break
        line += d
    return line.decode(errors="replace").strip()
try:
    s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
    s.sendall(b"\x05\x01\x00")
    g = recvn(s, 2)
    if g != b"\x05\x00":
        print("##%s=greeting:%s" % (name, g.hex()))
        sys.exit(0)
    h = host.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
    rep = recvn(s, 4)
    if len(rep) < 2:
        print("##%s=closed:%s" % (name, rep.hex()))
    elif rep[1] != 0:
        print("##%s=rep=%d" % (name, rep[1]))
    else:
        recvn(s, {1: 6, 4: 18}.get(rep[3], 0) or (recvn(s, 1)[0] + 2))
        if mode == "first":
            s.sendall(hello)
        res = "rep=0 banner=" + readline(s)
        if mode == "after":
            try:
                s.sendall(hello)
            except OSError as e:
                res += " send-failed:" + str(e.errno)
        if mode:
            time.sleep(0.5)
        print("##%s=%s" % (name, res))
except Exception as e:
    print("##%s=error:%r" % (name, e))
`
