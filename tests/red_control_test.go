package tests

import (
	gocontext "context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The live control plane is attacked here: its sockets from inside a jail,
// the dashboard from inside a jail and from a hostile web page, the
// persisted answers from a cloned repository, and the sessions of one user
// from another.

// redCtlPy connects to every path it is given (a leading "@" names an
// abstract socket) and sends three calls, each on its own connection: a
// listing, an approval of the guessed id for the session and a live allow
// rule. It prints "@@ctl PATH OP OUTCOME" per call: "reply ..." when any
// byte came back.
const redCtlPy = `import socket, sys
ident = sys.argv[1]
calls = {
    "pending": '{"op":"pending"}',
    "answer": '{"op":"answer","id":"%s","answer":{"allow":true,"scope":"session","by":"jail approve"}}' % ident,
    "rule": '{"op":"rule","allow":true,"host":"unknown.test","scope":"session"}',
}
seen = set()
for p in sys.argv[2:]:
    if p in seen:
        continue
    seen.add(p)
    for op, line in calls.items():
        addr = "\0" + p[1:] if p.startswith("@") else p
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect(addr)
        except OSError as e:
            print("@@ctl\t%s\t%s\tconnect-error %s" % (p, op, e.__class__.__name__))
            continue
        try:
            s.sendall((line + "\n").encode())
            got = s.recv(4096)
            out = "reply %r" % got if got else "no-reply"
        except OSError as e:
            out = "no-reply %s" % e.__class__.__name__
        print("@@ctl\t%s\t%s\t%s" % (p, op, out))
        s.close()
`

// redInstall copies the jail binary and the socket prober into the
// project, where a jailed command can run them.
func redInstall(t *testing.T, s *Sandbox) {
	t.Helper()
	b, err := os.ReadFile(jailBin)
	if err != nil {
		t.Fatal(err)
	}
	s.WriteFile(s.Project+"/.red/jail", string(b), 0o755)
	s.WriteFile(s.Project+"/.red/ctl.py", redCtlPy, 0o644)
}

// redPrivateDir makes dir (and its parents up to the top one made here)
// 0700 and owned by the runner, as a user's runtime directory is.
func redPrivateDir(t *testing.T, s *Sandbox, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for p := dir; p != "/" && p != os.TempDir() && p != s.Base; p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			os.Lchown(p, s.R.UID, s.R.GID)
			os.Chmod(p, 0o700)
		}
	}
}

// redRuntimeDir gives the runner its own XDG_RUNTIME_DIR under the
// sandbox, so that its control sockets are this test's alone.
func redRuntimeDir(t *testing.T, s *Sandbox) string {
	t.Helper()
	dir := filepath.Join(s.Base, "run")
	redPrivateDir(t, s, dir)
	s.Env = append(s.Env, "XDG_RUNTIME_DIR="+dir)
	return dir
}

// redStatus is the part of `jail ps --json` the attacks check.
type redStatus struct {
	ID    string   `json:"id"`
	PID   int      `json:"pid"`
	Added []string `json:"added"`
}

// redPS is the runner's running sessions, from `jail ps --json` on the
// host.
func redPS(t *testing.T, s *Sandbox) []redStatus {
	t.Helper()
	r := s.Jail("ps", "--json")
	if r.Code != 0 {
		t.Fatalf("jail ps --json:\n%s", r)
	}
	var out []redStatus
	for _, l := range lines(r.Stdout) {
		var st redStatus
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			t.Fatalf("jail ps --json printed %q: %v", l, err)
		}
		out = append(out, st)
	}
	return out
}

// redNoAdded fails when the running session that holds the request id
// has a rule added live.
func redNoAdded(t *testing.T, s *Sandbox, id string) {
	t.Helper()
	prefix, _, _ := strings.Cut(id, "-")
	for _, st := range redPS(t, s) {
		if strings.HasPrefix(st.ID, prefix) && len(st.Added) > 0 {
			t.Errorf("session %s had rules added live: %v", st.ID, st.Added)
		}
	}
}

// redPendingIDs is the ids `jail pending --json` lists on the host.
func redPendingIDs(t *testing.T, s *Sandbox) []string {
	t.Helper()
	r := s.Jail("pending", "--json")
	if r.Code != 0 {
		t.Fatalf("jail pending --json:\n%s", r)
	}
	var out []string
	for _, l := range lines(r.Stdout) {
		var p struct{ ID string }
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("jail pending --json printed %q: %v", l, err)
		}
		out = append(out, p.ID)
	}
	return out
}

// redPendingOf waits for the held request for host of the session whose
// id the jailed script wrote into file: the temporary directory's control
// sockets may be other runs' too.
func redPendingOf(t *testing.T, s *Sandbox, file, host string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	session := strings.TrimSpace(string(b))
	if err != nil || len(session) < 6 {
		t.Fatalf("the jailed script wrote no session id into %s: %q %v", file, b, err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, l := range lines(s.Jail("pending", "--json").Stdout) {
			var p struct{ ID, Host, Session string }
			if json.Unmarshal([]byte(l), &p) == nil && p.Host == host && p.Session == session {
				return p.ID
			}
		}
	}
	t.Fatalf("session %s held no request for %s", session, host)
	return ""
}

// redStillPending fails unless id is still held.
func redStillPending(t *testing.T, s *Sandbox, id string) {
	t.Helper()
	for _, p := range redPendingIDs(t, s) {
		if p == id {
			return
		}
	}
	t.Errorf("the held request %s is no longer pending: something answered it", id)
}

// redWaitFile waits for a marker file a jailed script writes.
func redWaitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the jailed script did not write %s within %v", path, d)
}

// redHash is a file's content hash, "missing" when it does not exist.
func redHash(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// redLongProbe is probeSh with a wait long enough for a request held
// while the attack runs.
var redLongProbe = strings.Replace(probeSh, "--max-time 15", "--max-time 120", 1)

// redSocketScript is what a jailed attacker runs against its own session's
// control socket, with a request of its own held meanwhile: look for the
// socket everywhere, connect to it and to everything found, and answer
// through the jail CLI.
func redSocketScript(runtime, tmpCtl string) string {
	return redLongProbe + fmt.Sprintf(`
echo session=$JAIL_SESSION
echo $JAIL_SESSION > .red/session
probe held https://unknown.test/held &
sleep 2
id=$(printf %%s "$JAIL_SESSION" | cut -c1-6)-1
R=%[1]s
T=%[2]s
echo "== listing"
ls -la "$R" "$R/jail" "$R/jail/ctl" "$T" "$T/ctl" 2>&1
ls -la /proc/[0-9]*/root$R/jail/ctl /proc/[0-9]*/cwd/ 2>&1 | head -40
grep -e jail- -e /ctl -e "$R" /proc/self/mountinfo
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \( -name '*.sock' -o -type s \) -print 2>/dev/null > /tmp/found
ls /proc/[0-9]*/root$R/jail/ctl/*.sock /proc/[0-9]*/root$T/ctl/*.sock 2>/dev/null >> /tmp/found
awk 'NR > 1 && $8 ~ /^@/ {print $8}' /proc/net/unix >> /tmp/found
echo "== found"; cat /tmp/found
python3 .red/ctl.py "$id" "$R/jail/ctl/$JAIL_SESSION.sock" "$T/ctl/$JAIL_SESSION.sock" $(cat /tmp/found)
echo "== cli"
for a in "pending --json" "ps --json" "approve $id" "approve $id --session" "approve $id --user" "allow unknown.test" "allow unknown.test --session $JAIL_SESSION"; do
	./.red/jail $a; echo "@@cli $a: exit $?"
done
touch .red/done
wait
`, runtime, tmpCtl)
}

// TestRedControlSocketFromInside attacks the control socket from inside
// the jail whose request is held: a jailed command looks for it in the
// runtime and temporary directories, other processes' roots, the mount
// table, the whole tree and the abstract namespace, also with those
// directories made readable, connects to the real path and to all it
// found, and runs jail pending, approve and allow. Nothing answers, and on
// the host the request is still pending and no rule was added.
func TestRedControlSocketFromInside(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		runtime := redRuntimeDir(t, s)
		withRuntime := slicesClone(s.Env)
		tmpCtl := filepath.Join(os.TempDir(), fmt.Sprintf("jail-%d", s.R.UID))
		redPrivateDir(t, s, filepath.Join(tmpCtl, "ctl"))
		up := newUpstream(t, true, "")
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		askConfig(s, up.Addr(), `"unknown": "ask",`, 60)
		redInstall(t, s)
		for _, v := range []struct {
			name    string
			runtime bool
			args    []string
		}{
			{"plain", true, nil},
			{"allow-read runtime dir", true, []string{"--allow-read", runtime}},
			{"temp dir", false, []string{"--allow-read", tmpCtl}},
			{"allow-read root", true, []string{"--allow-read", "/"}},
		} {
			t.Run(v.name, func(t *testing.T) {
				s.Env = withRuntime
				if !v.runtime {
					s.Env = nil
				}
				defer func() { s.Env = withRuntime }()
				if r := s.Jail(append(v.args, "--", "true")...); r.Code != 0 {
					if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
						t.Fatalf("jail %v refused without the one-line error:\n%s", v.args, r)
					}
					t.Logf("jail refuses %v: %s", v.args, r.Stderr)
					return
				}
				redSocketAttack(t, s, up, runtime, tmpCtl, v.args)
			})
		}
	})
}

// redSocketAttack runs redSocketScript with args and checks the host side.
func redSocketAttack(t *testing.T, s *Sandbox, up *upstream, runtime, tmpCtl string, args []string) {
	os.Remove(s.Project + "/.red/done")
	os.Remove(s.Project + "/.red/session")
	wait := startJail(t, s, append(args, "--", "sh", "-c", redSocketScript(runtime, tmpCtl))...)
	redWaitFile(t, s.Project+"/.red/session", 30*time.Second)
	id := redPendingOf(t, s, s.Project+"/.red/session", "unknown.test")
	redWaitFile(t, s.Project+"/.red/done", 90*time.Second)
	redStillPending(t, s, id)
	redNoAdded(t, s, id)
	if r := s.Jail("reject", id); r.Code != 0 {
		t.Fatalf("jail reject %s on the host:\n%s", id, r)
	}
	r := wait()
	wantRefusedConnect(t, getProbe(t, probes(t, r), r, "held"))
	if up.Saw("/held") {
		t.Error("the held request reached the upstream: the jail answered it itself")
	}
	if !strings.HasPrefix(id, sessionOf(t, r)[:6]+"-") {
		t.Logf("the jailed script guessed the id wrong (host says %s): its approve calls named another id", id)
	}
	tried := 0
	for _, l := range lines(r.Stdout) {
		f := strings.Split(l, "\t")
		if f[0] == "@@ctl" && len(f) == 4 {
			tried++
			if strings.Contains(f[1], "/ctl/") {
				t.Logf("%s %s: %s", f[1], f[2], f[3])
			}
			if strings.HasPrefix(f[3], "reply") {
				t.Errorf("a control socket answered the jailed command: %s", l)
			}
		}
		if strings.HasPrefix(l, "approved ") || strings.HasPrefix(l, "allow unknown.test in session") {
			t.Errorf("the jail CLI inside the jail changed a session: %q", l)
		}
	}
	if tried < 6 {
		t.Errorf("the prober ran %d calls, want at least the real path and the temp one:\n%s", tried, r)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// redDashScript probes the dashboard on the host's loopback port from
// inside: directly, through the proxy by every spelling of loopback, and
// through a name the project maps to it.
func redDashScript(port int) string {
	p := fmt.Sprint(port)
	h := "127.0.0.1:" + p
	return probeSh + `
probe direct --noproxy '*' http://` + h + `/
probe direct6 --noproxy '*' http://[::1]:` + p + `/
unset NO_PROXY no_proxy
probe proxied http://` + h + `/
probe tunnel -p http://` + h + `/
probe tls https://` + h + `/
probe localhost http://localhost:` + p + `/
probe localhostdot http://localhost.:` + p + `/
probe short http://127.1:` + p + `/
probe hex http://0x7f000001:` + p + `/
probe zero http://0.0.0.0:` + p + `/
probe v6mapped http://[::ffff:127.0.0.1]:` + p + `/
probe etchosts http://vm:` + p + `/
probe socks -x "$ALL_PROXY" http://` + h + `/
probe sockslocal -x "$ALL_PROXY" http://localhost:` + p + `/
probe mapped http://dash.test/
probe mappedport http://dash.test:` + p + `/
probe mappedhost -H 'Host: ` + h + `' http://dash.test/
probe mappedtoken -H 'Host: ` + h + `' 'http://dash.test/?token=guess'
probe mappedpost -X POST -H 'Host: ` + h + `' -H 'Origin: http://` + h + `' -H 'Content-Type: application/json' --data '{"session":"","allow":true,"host":"evil.test","scope":"user"}' http://dash.test/api/rule
probe mappedevents -H 'Host: ` + h + `' http://dash.test/events
probe mappedlocal http://localhost:` + p + `/
probe mappedlocaltoken 'http://localhost:` + p + `/?token=guess'
probe mappedlocalpost -X POST -H 'Origin: http://localhost:` + p + `' -H 'Content-Type: application/json' --data '{"session":"","allow":true,"host":"evil.test","scope":"user"}' http://localhost:` + p + `/api/rule
probe mappedlocalevents http://localhost:` + p + `/events
`
}

// TestRedControlDashboardLoopback attacks the dashboard on the host's
// loopback from inside a jail: no route of its own, the proxy refuses
// every spelling of loopback, a project that maps a name to the
// dashboard's port is a widening refused until trusted, and even trusted
// the dashboard refuses the Host and the missing token, so nothing is
// written to the configs.
func TestRedControlDashboardLoopback(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		redRuntimeDir(t, s)
		d := startDashboard(t, s)
		var port int
		fmt.Sscanf(d.Host[strings.LastIndexByte(d.Host, ':')+1:], "%d", &port)
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"hosts": map[string]string{"dash.test": d.Host, "localhost": d.Host}, "allow": []string{"dash.test", "localhost"}}})
		s.NoAutoTrust = true
		if r := s.Sh("echo ran"); r.Code != 125 || strings.Contains(r.Stdout, "ran") || !strings.Contains(r.Stderr, "trust") {
			t.Errorf("an untrusted jail.json mapping a name to the dashboard's port ran:\n%s", r)
		}
		s.NoAutoTrust = false
		userCfg := filepath.Join(s.Home, ".config/jail/config.json")
		before := redHash(userCfg) + redHash(s.Project+"/jail.json")
		r := s.Sh(redDashScript(port))
		ps := probes(t, r)
		for _, n := range []string{"direct", "direct6"} {
			wantNoRoute(t, getProbe(t, ps, r, n))
		}
		for _, n := range []string{"proxied", "tunnel", "tls", "short", "hex", "zero", "v6mapped", "etchosts", "socks"} {
			p := getProbe(t, ps, r, n)
			if p.HTTP == "200" || (p.Connect != "403" && p.HTTP != "403" && !strings.HasPrefix(p.Err, "curl: (97)")) {
				t.Errorf("%s: want the proxy's 403 for a loopback address; got %s", n, p)
			}
		}
		for _, n := range []string{"mapped", "mappedport", "mappedhost", "mappedtoken", "mappedpost", "mappedevents", "localhost", "localhostdot", "sockslocal", "mappedlocal", "mappedlocaltoken", "mappedlocalpost", "mappedlocalevents"} {
			p := getProbe(t, ps, r, n)
			if len(p.HTTP) == 3 && (p.HTTP[0] == '2' || p.HTTP[0] == '3') {
				t.Errorf("%s: the dashboard served a jailed request through a mapped name: %s", n, p)
			}
		}
		if after := redHash(userCfg) + redHash(s.Project+"/jail.json"); after != before {
			t.Errorf("a config changed while the jail attacked the dashboard")
		}
	})
}

// redDashRequest is one forged request at the dashboard.
type redDashRequest struct {
	name, method, path, host, body string
	header                         map[string]string
	cookie                         string // "", "real" or a forged value
}

// redDashForgeries are the requests a hostile page (or a process that
// knows no secret) can make; the CSRF value is the page's real one where
// a request carries it, the strongest case.
func redDashForgeries(session, id, csrf, host string) []redDashRequest {
	answer := fmt.Sprintf(`{"session":%q,"id":%q,"allow":true,"scope":"user"}`, session, id)
	rule := fmt.Sprintf(`{"session":%q,"allow":true,"host":"evil.test","scope":"user"}`, session)
	form := "session=" + session + "&id=" + id + "&allow=true&scope=user"
	jsonH := map[string]string{"Content-Type": "application/json", "X-Jail-CSRF": csrf}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			if a != k {
				out[a] = b
			}
		}
		return out
	}
	var out []redDashRequest
	for _, c := range []string{"", "real", "forged-cookie-value"} {
		out = append(out,
			redDashRequest{"text/plain form " + c, "POST", "/api/answer", host, answer, map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.test"}, c},
			redDashRequest{"urlencoded form " + c, "POST", "/api/answer", host, form, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.test"}, c},
			redDashRequest{"text/plain rule " + c, "POST", "/api/rule", host, rule, map[string]string{"Content-Type": "text/plain"}, c},
		)
	}
	return append(out,
		redDashRequest{"no cookie, real CSRF", "POST", "/api/answer", host, answer, jsonH, ""},
		redDashRequest{"forged cookie, real CSRF", "POST", "/api/answer", host, answer, jsonH, "forged"},
		redDashRequest{"no token", "GET", "/", host, "", nil, ""},
		redDashRequest{"wrong token", "GET", "/?token=wrong", host, "", nil, ""},
		redDashRequest{"empty token", "GET", "/?token=", host, "", nil, ""},
		redDashRequest{"events without cookie", "GET", "/events", host, "", nil, ""},
		redDashRequest{"Origin null", "POST", "/api/answer", host, answer, with(jsonH, "Origin", "null"), "real"},
		redDashRequest{"foreign Origin", "POST", "/api/answer", host, answer, with(jsonH, "Origin", "http://evil.test"), "real"},
		redDashRequest{"rebinding Origin", "POST", "/api/rule", host, rule, with(jsonH, "Origin", "http://127.0.0.1.nip.io:"+strings.Split(host, ":")[1]), "real"},
		redDashRequest{"no CSRF", "POST", "/api/answer", host, answer, map[string]string{"Content-Type": "application/json"}, "real"},
		redDashRequest{"wrong CSRF", "POST", "/api/rule", host, rule, with(jsonH, "X-Jail-CSRF", "x"+csrf), "real"},
		redDashRequest{"GET answer", "GET", "/api/answer?session=" + session + "&id=" + id + "&allow=true&scope=user", host, "", nil, "real"},
		redDashRequest{"GET rule", "GET", "/api/rule?allow=true&host=evil.test&scope=user", host, "", nil, "real"},
		redDashRequest{"rebinding Host", "POST", "/api/answer", "evil.test:" + strings.Split(host, ":")[1], answer, jsonH, "real"},
		redDashRequest{"nip.io Host", "POST", "/api/rule", "127.0.0.1.nip.io:" + strings.Split(host, ":")[1], rule, jsonH, "real"},
		redDashRequest{"rebinding Host GET", "GET", "/", "evil.test:" + strings.Split(host, ":")[1], "", nil, "real"},
	)
}

// redDashDo sends one forged request and returns its status.
func redDashDo(t *testing.T, d *dashboard, cookie string, f redDashRequest) int {
	t.Helper()
	req, err := http.NewRequest(f.method, d.Base+f.path, strings.NewReader(f.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = f.host
	for k, v := range f.header {
		req.Header.Set(k, v)
	}
	switch f.cookie {
	case "":
	case "real":
		req.Header.Set("Cookie", "jail_dashboard="+cookie)
	default:
		req.Header.Set("Cookie", "jail_dashboard="+f.cookie)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", f.name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("%s: Content-Security-Policy %q, want default-src 'self' and frame-ancestors 'none'", f.name, csp)
	}
	return resp.StatusCode
}

// redDashCookie trades the printed token for the cookie and checks its
// flags.
func redDashCookie(t *testing.T, d *dashboard) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	raw := resp.Header.Get("Set-Cookie")
	var value string
	for _, ck := range resp.Cookies() {
		if ck.Name == "jail_dashboard" {
			value = ck.Value
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Domain != "" {
				t.Errorf("the session cookie %q is not HttpOnly, SameSite=Strict and host-only", raw)
			}
		}
	}
	if value == "" {
		t.Fatalf("the printed URL set no session cookie: %d %q", resp.StatusCode, raw)
	}
	return value
}

// TestRedControlDashboardForgery attacks the dashboard as another web page
// would, with a request of a running jail held: no, wrong or forged
// tokens and cookies, cross-origin form POSTs with and without the cookie,
// Origin null or foreign, state changes by GET, rebinding Host names. All
// are refused, and on the host the request is still pending and no rule
// was added or written.
func TestRedControlDashboardForgery(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		redRuntimeDir(t, s)
		up := newUpstream(t, true, "")
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		askConfig(s, up.Addr(), `"ask": ["ports.test"],`, 60)
		d := startDashboard(t, s)
		cookie := redDashCookie(t, d)
		csrf := d.csrf(t, d.client(t))
		wait := startJail(t, s, "--", "sh", "-c", askScript("ports.test", "forged"))
		id := pendingFor(t, s, "ports.test")
		session := redPS(t, s)[0].ID
		// The control: every secret right but the id: the dashboard knows
		// the session and passes the call on (502 from the session).
		ctl := redDashRequest{"control", "POST", "/api/answer", d.Host, fmt.Sprintf(`{"session":%q,"id":"nope-1","allow":true,"scope":"once"}`, session),
			map[string]string{"Content-Type": "application/json", "X-Jail-CSRF": csrf, "Origin": d.Base}, "real"}
		deadline := time.Now().Add(15 * time.Second)
		for code := 0; code != http.StatusBadGateway; code = redDashDo(t, d, cookie, ctl) {
			if time.Now().After(deadline) {
				t.Fatalf("the dashboard never passed a well-formed answer to session %s (last %d)", session, code)
			}
			time.Sleep(200 * time.Millisecond)
		}
		userCfg := filepath.Join(s.Home, ".config/jail/config.json")
		before := redHash(userCfg) + redHash(s.Project+"/jail.json")
		for _, f := range redDashForgeries(session, id, csrf, d.Host) {
			if code := redDashDo(t, d, cookie, f); code < 400 {
				t.Errorf("%s: %s %s (Host %s): %d, want it refused", f.name, f.method, f.path, f.host, code)
			}
		}
		redStillPending(t, s, id)
		redNoAdded(t, s, id)
		if after := redHash(userCfg) + redHash(s.Project+"/jail.json"); after != before {
			t.Error("a forged request changed a config file")
		}
		if r := s.Jail("reject", id); r.Code != 0 {
			t.Fatalf("jail reject %s:\n%s", id, r)
		}
		r := wait()
		wantRefusedConnect(t, getProbe(t, probes(t, r), r, "held"))
		if up.Saw("/forged") {
			t.Error("the held request reached the upstream")
		}
	})
}

// redFloodPy opens N connections to the proxy at once, each a CONNECT to
// its own asked host, and sorts the answers: "403" denied at once, "held"
// when nothing came within 8 s. It keeps them open until .red/release
// appears.
const redFloodPy = `import os, socket, sys, threading, time
n = int(sys.argv[1])
addr = os.environ["HTTPS_PROXY"].split("//")[1].rstrip("/")
host, port = addr.rsplit(":", 1)
res, socks, lock = {}, [], threading.Lock()
def one(i):
    name = "f%d.flood.test" % i
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
    except OSError as e:
        res[i] = "connect-" + e.__class__.__name__
        return
    with lock:
        socks.append(s)
    try:
        s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (name, name)).encode())
        s.settimeout(8)
        got = s.recv(200)
        res[i] = got.split(b" ")[1].decode() if got else "eof"
    except socket.timeout:
        res[i] = "held"
    except OSError as e:
        res[i] = "err-" + e.__class__.__name__
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
count = {}
for v in res.values():
    count[v] = count.get(v, 0) + 1
print("@@flood\t%d\t%d\t%r" % (count.get("held", 0), count.get("403", 0), count))
sys.stdout.flush()
open(".red/flooded", "w").close()
for _ in range(600):
    if os.path.exists(".red/release"):
        break
    time.sleep(0.1)
for s in socks:
    s.close()
`

// redRSS is the resident set of pid in KiB.
func redRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the jail process's status: %v", err)
	}
	for _, l := range lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// TestRedControlFlood floods the ask with 500 distinct hosts from inside
// while a real request is held: past the cap the rest are denied at once
// (and logged), the jail process's memory stays bounded, and the real
// request is still answered and goes through.
func TestRedControlFlood(t *testing.T) {
	const n, maxHeld = 500, 64
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		redRuntimeDir(t, s)
		up := newUpstream(t, true, "")
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		hosts := map[string]string{"unknown.test": up.Addr()}
		for i := 0; i < n; i++ {
			hosts[fmt.Sprintf("f%d.flood.test", i)] = up.Addr()
		}
		writeJailJSON(t, s, map[string]any{"network": map[string]any{"unknown": "ask", "hosts": hosts}, "askTimeout": 120})
		s.WriteFile(s.Project+"/.red/flood.py", redFloodPy, 0o644)
		wait := startJail(t, s, "--", "sh", "-c", redLongProbe+`echo session=$JAIL_SESSION
probe real https://unknown.test/real &
until [ -e .red/go ]; do sleep 0.1; done
python3 .red/flood.py `+fmt.Sprint(n)+`
wait`)
		id := pendingFor(t, s, "unknown.test")
		ps := redPS(t, s)
		if len(ps) != 1 {
			t.Fatalf("want one running session, got %v", ps)
		}
		before := redRSS(t, ps[0].PID)
		s.WriteFile(s.Project+"/.red/go", "", 0o644)
		redWaitFile(t, s.Project+"/.red/flooded", 90*time.Second)
		held := len(redPendingIDs(t, s))
		after := redRSS(t, ps[0].PID)
		t.Logf("%d held; the jail process's RSS %d KiB before the flood, %d KiB during it", held, before, after)
		if held > maxHeld || held < 2 {
			t.Errorf("%d requests held during the flood, want the real one and at most %d in all", held, maxHeld)
		}
		if after-before > 64<<10 {
			t.Errorf("the jail process grew from %d KiB to %d KiB under the flood", before, after)
		}
		if r := s.Jail("approve", id); r.Code != 0 {
			t.Errorf("jail approve %s under the flood:\n%s", id, r)
		}
		s.WriteFile(s.Project+"/.red/release", "", 0o644)
		r := wait()
		wantOK(t, getProbe(t, probes(t, r), r, "real"), "/real")
		capped := redFloodCounts(t, r, n, maxHeld)
		limited := 0
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Verdict == "deny" && d.Rule == "ask limit" && strings.HasSuffix(d.Host, ".flood.test") {
				limited++
			}
		}
		if limited < capped {
			t.Errorf("the log has %d denials for the cap, want one for each of the %d refused", limited, capped)
		}
	})
}

// redFloodCounts checks the flood's own view: few held, the rest refused
// at once, by the cap of held requests (403) or the proxy's own
// connection limit (503); it returns the count refused by the cap.
func redFloodCounts(t *testing.T, r Result, n, maxHeld int) int {
	t.Helper()
	for _, l := range lines(r.Stdout) {
		f := strings.Split(l, "\t")
		if f[0] != "@@flood" || len(f) != 4 {
			continue
		}
		var held, denied, busy int
		fmt.Sscan(f[1], &held)
		fmt.Sscan(f[2], &denied)
		if _, v, ok := strings.Cut(f[3], "'503': "); ok {
			fmt.Sscanf(v, "%d", &busy)
		}
		if held > maxHeld || denied+busy < n-maxHeld-1 || denied < n/2 {
			t.Errorf("the flood saw %d held, %d denied and %d refused busy at once (%s), want at most %d held and the cap denying most", held, denied, busy, f[3], maxHeld)
		}
		return denied
	}
	t.Fatalf("the flood printed no counts:\n%s", r)
	return 0
}

// redHeldRun starts a run of the sandbox's project whose unknown.test
// request is held, and returns its id and the func that waits for it.
func redHeldRun(t *testing.T, s *Sandbox, path string) (string, func() Result) {
	t.Helper()
	wait := startJail(t, s, "--", "sh", "-c", redLongProbe+"echo session=$JAIL_SESSION; probe held https://unknown.test/"+path)
	return pendingFor(t, s, "unknown.test"), wait
}

// TestRedControlPersist attacks the answers that are written down: one
// for the project after jail.json gained a widening on disk (a pull of a
// hostile commit, say) is refused and leaves the file as it was, with its
// widening still untrusted; a jail.json that is a symlink to a file
// outside the project is never written through; an answer for the user
// writes only the user's config.
func TestRedControlPersist(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		redRuntimeDir(t, s)
		up := newUpstream(t, true, "")
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		t.Run("changed after trust", func(t *testing.T) {
			askConfig(s, up.Addr(), `"unknown": "ask",`, 60)
			id, wait := redHeldRun(t, s, "changed")
			s.WriteFile(s.Project+"/jail.json", askConfigText(up.Addr(), `"unknown": "ask", "allow": ["evil.test"],`, 60), 0o644)
			before := redHash(s.Project + "/jail.json")
			s.NoAutoTrust = true // the harness would trust the change itself
			if r := s.Jail("approve", id, "--project"); r.Code == 0 {
				t.Errorf("jail approve --project wrote into a jail.json changed since it was trusted:\n%s", r)
			}
			if redHash(s.Project+"/jail.json") != before {
				t.Error("the refused answer changed jail.json")
			}
			if r := s.Sh("true"); r.Code != 125 {
				t.Errorf("the widening added on disk became trusted through the answer:\n%s", r)
			}
			redEnd(t, s, id, wait)
			s.NoAutoTrust = false
		})
		t.Run("symlink out of the project", func(t *testing.T) {
			outside := s.Base + "/outside.json"
			s.WriteFile(outside, askConfigText(up.Addr(), `"unknown": "ask",`, 60), 0o644)
			os.Remove(s.Project + "/jail.json")
			if err := os.Symlink(outside, s.Project+"/jail.json"); err != nil {
				t.Fatal(err)
			}
			os.Lchown(s.Project+"/jail.json", s.R.UID, s.R.GID)
			defer os.Remove(s.Project + "/jail.json")
			before := redHash(outside)
			if r := s.Sh("true"); r.Code == 0 {
				t.Errorf("a run with jail.json a symlink out of the project was not refused:\n%s", r)
			}
			// Swapped for the symlink while a request is held, as a
			// checkout could.
			os.Remove(s.Project + "/jail.json")
			askConfig(s, up.Addr(), `"unknown": "ask",`, 60)
			id, wait := redHeldRun(t, s, "symlink")
			os.Remove(s.Project + "/jail.json")
			if err := os.Symlink(outside, s.Project+"/jail.json"); err != nil {
				t.Fatal(err)
			}
			os.Lchown(s.Project+"/jail.json", s.R.UID, s.R.GID)
			s.NoAutoTrust = true
			defer func() { s.NoAutoTrust = false }()
			if r := s.Jail("approve", id, "--project"); r.Code == 0 {
				t.Errorf("jail approve --project wrote through a jail.json symlink:\n%s", r)
			}
			if redHash(outside) != before {
				t.Errorf("the file outside the project the symlink names was changed")
			}
			redEnd(t, s, id, wait)
		})
		t.Run("user scope", func(t *testing.T) {
			askConfig(s, up.Addr(), `"unknown": "ask",`, 60)
			id, wait := redHeldRun(t, s, "user")
			userCfg := filepath.Join(s.Home, ".config/jail/config.json")
			before := redHash(s.Project + "/jail.json")
			if r := s.Jail("approve", id, "--user"); r.Code != 0 {
				t.Fatalf("jail approve %s --user:\n%s", id, r)
			}
			r := wait()
			wantOK(t, getProbe(t, probes(t, r), r, "held"), "/user")
			if redHash(s.Project+"/jail.json") != before {
				t.Error("an answer for the user changed the project's jail.json")
			}
			if b, _ := os.ReadFile(userCfg); !strings.Contains(string(b), "unknown.test") {
				t.Errorf("the user's config.json lacks the answer:\n%s", b)
			}
		})
	})
}

// redEnd rejects the held request id and checks that the run was refused.
func redEnd(t *testing.T, s *Sandbox, id string, wait func() Result) {
	t.Helper()
	if r := s.Jail("reject", id); r.Code != 0 {
		t.Errorf("jail reject %s:\n%s", id, r)
	}
	r := wait()
	wantRefusedConnect(t, getProbe(t, probes(t, r), r, "held"))
}

// redCtlOutcomes runs the socket prober as s's runner on the host against
// paths and fails on any reply.
func redCtlOutcomes(t *testing.T, s *Sandbox, who, id string, paths ...string) {
	t.Helper()
	out := s.Host("/usr/bin/python3", append([]string{s.Project + "/.red/ctl.py", id}, paths...)...)
	n := 0
	for _, l := range lines(out) {
		if f := strings.Split(l, "\t"); f[0] == "@@ctl" && len(f) == 4 {
			n++
			t.Logf("as %s: %s %s: %s", who, f[1], f[2], f[3])
			if strings.HasPrefix(f[3], "reply") {
				t.Errorf("%s got a reply from another user's control socket: %s", who, l)
			}
		}
	}
	if n == 0 {
		t.Errorf("the prober ran no call as %s:\n%s", who, out)
	}
}

// TestRedControlOtherUser attacks one user's sessions as another: the
// unprivileged user's jail ps, pending and approve never see root's
// session, even pointing XDG_RUNTIME_DIR at root's; its connections to
// root's socket get nothing; and root's own client, which the file
// permissions would let through, is refused by the user's session, which
// compares uids. Both held requests are still pending afterwards.
func TestRedControlOtherUser(t *testing.T) {
	rs := runners(t)
	if len(rs) < 2 {
		t.Skip("the tests run unprivileged: there is no second user to attack with (run them as root, as make test does)")
	}
	up := newUpstream(t, true, "")
	var sb [2]*Sandbox
	var ids [2]string
	var socks [2]string
	for i, r := range rs {
		s := NewSandbox(t, r)
		runtime := redRuntimeDir(t, s)
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		askConfig(s, up.Addr(), `"unknown": "ask",`, 60)
		redInstall(t, s)
		var wait func() Result
		ids[i], wait = redHeldRun(t, s, "other-"+r.Name)
		defer func(s *Sandbox, id string, wait func() Result) { redEnd(t, s, id, wait) }(s, ids[i], wait)
		ps := redPS(t, s)
		if len(ps) != 1 {
			t.Fatalf("%s: want one running session, got %v", r.Name, ps)
		}
		sb[i], socks[i] = s, filepath.Join(runtime, "jail", "ctl", ps[0].ID+".sock")
		if _, err := os.Stat(socks[i]); err != nil {
			t.Fatalf("%s's control socket is not at %s: %v", r.Name, socks[i], err)
		}
	}
	root, user := sb[0], sb[1]
	rootRuntime := filepath.Dir(filepath.Dir(filepath.Dir(socks[0])))
	for _, env := range [][]string{user.Env, {"XDG_RUNTIME_DIR=" + rootRuntime}, nil} {
		u := *user
		u.Env = env
		for _, args := range [][]string{{"ps", "--json"}, {"pending", "--json"}} {
			if r := u.Jail(args...); strings.Contains(r.Stdout, ids[0][:6]) {
				t.Errorf("jail %v as %s (env %v) shows root's session:\n%s", args, testUser, env, r)
			}
		}
		if r := u.Jail("approve", ids[0]); r.Code == 0 || strings.Contains(r.Stdout, "approved") {
			t.Errorf("jail approve of root's request as %s (env %v):\n%s", testUser, env, r)
		}
	}
	redCtlOutcomes(t, user, testUser, ids[0], socks[0])
	// Root may open the user's socket; the session must still refuse it.
	redCtlOutcomes(t, root, "root", ids[1], socks[1])
	if r := root.Jail("approve", ids[1]); r.Code == 0 {
		t.Errorf("jail approve of %s's request as root:\n%s", testUser, r)
	}
	redStillPending(t, root, ids[0])
	redStillPending(t, user, ids[1])
	redNoAdded(t, root, ids[0])
	redNoAdded(t, user, ids[1])
}

// redFakeHubPy serves a fake session on a unix socket: it writes every
// line it is sent to a log and answers with a status and a held request,
// as a planted socket would to lure the user's CLI.
const redFakeHubPy = `import json, os, socket, sys
path, log = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(16)
open(log, "a").close()
status = {"id": "fake00aa11bb22cc", "command": ["sh"], "project": "/", "started": "2026-01-01T00:00:00Z", "pid": 1, "policy": {"unknown": "ask", "masked": 0, "askTimeoutSeconds": 60}, "counts": {"allowed": 0, "denied": 0, "pending": 1}}
req = {"id": "fake00-1", "session": status["id"], "kind": "network", "rule": "unknown=ask", "host": "evil.test", "port": 443, "scheme": "https", "waiting": 1, "held": "2026-01-01T00:00:00Z", "deadline": "2036-01-01T00:00:00Z"}
while True:
    c, _ = s.accept()
    line = c.makefile().readline()
    with open(log, "a") as f:
        f.write(line)
    c.sendall((json.dumps({"status": status, "pending": [req]}) + "\n").encode())
    c.close()
`

// TestRedControlPlantedDir attacks the control directory under a shared
// temporary directory, where another user can make a directory first: the
// unprivileged user makes root's jail-0/ctl and serves a fake session in
// it. Root's jail ps, pending, approve and allow send it nothing, and a
// root run does not put its socket there.
func TestRedControlPlantedDir(t *testing.T) {
	rs := runners(t)
	if len(rs) < 2 {
		t.Skip("the tests run unprivileged: there is no second user to plant the directory (run them as root, as make test does)")
	}
	root, user := NewSandbox(t, rs[0]), NewSandbox(t, rs[1])
	shared := filepath.Join(root.Base, "tmp")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o1777) // like /tmp
	user.WriteFile(user.Project+"/.red/fakehub.py", redFakeHubPy, 0o644)
	fake := filepath.Join(shared, "jail-0", "ctl", "fake00aa11bb22cc.sock")
	calls := filepath.Join(user.Project, ".red", "calls.log")
	cmd := exec.Command("/usr/bin/python3", user.Project+"/.red/fakehub.py", fake, calls)
	user.as(cmd)
	var fakeErr strings.Builder
	cmd.Stderr = &fakeErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 100 && !fileThere(calls); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if !fileThere(calls) {
		t.Fatalf("the fake session did not start: %s", fakeErr.String())
	}
	root.Env = []string{"TMPDIR=" + shared}
	for _, args := range [][]string{{"ps", "--json"}, {"pending", "--json"}, {"approve", "fake00-1"}, {"allow", "evil.test"}} {
		r := root.Jail(args...)
		if strings.Contains(r.Stdout, "fake00") || strings.Contains(r.Stdout, "evil.test") {
			t.Errorf("root's jail %v believed the planted session:\n%s", args, r)
		}
	}
	if b, _ := os.ReadFile(calls); len(b) > 0 {
		t.Errorf("root's CLI sent calls to the planted socket:\n%s", b)
	}
	r := root.Jail("--", "sh", "-c", "echo ran")
	if ents, _ := os.ReadDir(filepath.Dir(fake)); len(ents) != 1 {
		t.Errorf("root's run put a socket in the directory another user made: %v\n%s", ents, r)
	}
	if r.Code != 0 && (r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || strings.Contains(r.Stdout, "ran")) {
		t.Errorf("root's run beside a planted control directory neither ran nor failed closed with one line:\n%s", r)
	}
	t.Logf("root's run beside a planted control directory: %s", r)
}

func fileThere(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// redHostileArgs are arguments a held git push carries to mislead the
// person asked: a terminal title escape, HTML, and a line that fakes the
// directory the command runs in.
var redHostileArgs = []string{"\x1b]0;x\x07\u202egnp.exe", "<img src=x onerror=\"document.title='pwned'\">", "main\n  in /srv/elsewhere"}

// TestRedControlMisleadingCommand holds a git push whose argv holds
// terminal escapes, HTML and a fake directory line: jail pending prints it
// escaped (no raw control byte on stdout, each argument told apart), and
// the dashboard in a real browser renders it as text, without an img
// element and with the real directory the only one shown.
func TestRedControlMisleadingCommand(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		redRuntimeDir(t, s)
		setupPushRig(t, s)
		d := startDashboard(t, s)
		ctx := browser(t)
		if err := within(ctx, 20*time.Second, chromedp.Navigate(d.URL), chromedp.WaitVisible(chromedp.CSS("#conn.live"))); err != nil {
			t.Fatalf("the dashboard never went live: %v", err)
		}
		script := `echo session=$JAIL_SESSION; git push "$(printf '\033]0;x\007\342\200\256gnp.exe')" '` + strings.ReplaceAll(redHostileArgs[1], "'", `'\''`) + `' 'main
  in /srv/elsewhere'; echo "##push=$?"`
		r := startAsked(t, s, commandAskConfig(60), script)
		p := waitPending(t, s, r, "push")
		if want := append([]string{"git", "push"}, redHostileArgs...); !slices.Equal(p.Argv, want) {
			t.Errorf("held %q, want %q", p.Argv, want)
		}
		out := s.Jail("pending")
		if strings.ContainsAny(out.Stdout, "\x1b\x07\u202e") {
			t.Errorf("jail pending printed a raw control byte:\n%q", out.Stdout)
		}
		if strings.Contains(out.Stdout, "\n  in /srv/elsewhere") {
			t.Errorf("jail pending printed the argument's fake directory line as a line of its own:\n%s", out.Stdout)
		}
		redDashRendersText(t, ctx, p.ID, s.Project)
		if res := s.Jail("reject", p.ID); res.Code != 0 {
			t.Fatalf("jail reject %s:\n%s", p.ID, res)
		}
		r.wait(t, 20*time.Second)
	})
}

// redDashRendersText checks the held command's row in the page: text, no
// img, no title change, and the real directory the only "in" line.
func redDashRendersText(t *testing.T, ctx gocontext.Context, id, cwd string) {
	t.Helper()
	row := `#pending tr.pending[data-id="` + id + `"]`
	if err := within(ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("the held command never appeared in the page: %v", err)
	}
	what, err := value(ctx, 10*time.Second, chromedp.Evaluate[string](`document.querySelector('`+row+` td.what').innerText`))
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := value(ctx, 10*time.Second, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
	if err != nil {
		t.Fatal(err)
	}
	title, err := value(ctx, 10*time.Second, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if imgs != 0 || title == "pwned" || !strings.Contains(what, "<img src=x") {
		t.Errorf("the held argv was rendered as HTML: %d img, title %q, text %q", imgs, title, what)
	}
	if strings.ContainsAny(what, "\x1b\x07\u202e") {
		t.Errorf("the page shows the argv's control characters raw, unseen: %q", what)
	}
	if strings.Contains(what, "in /srv/elsewhere") && !strings.Contains(what, `\n  in /srv/elsewhere`) {
		t.Errorf("the page shows the argument's fake directory line as the command's directory (the real one is %s):\n%s", cwd, what)
	}
}

// redFlipPy forks rounds of a git push whose argv buffers a second thread
// keeps flipping between "-q origin main" and "-q origin HEAD:x" while
// the exec is held and after it is let go, so that what was shown and
// checked may not be what the kernel reads.
const redFlipPy = `import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
for i in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        bufs = [ctypes.create_string_buffer(8) for _ in range(3)]
        for b, v in zip(bufs, [b"-q", b"origin", b"main"]):
            ctypes.memmove(b, v + b"\0", len(v) + 1)
        git, push = ctypes.create_string_buffer(b"git"), ctypes.create_string_buffer(b"push")
        argv = (ctypes.c_char_p * 6)(ctypes.addressof(git), ctypes.addressof(push), *[ctypes.addressof(b) for b in bufs], None)
        a2, mm = ctypes.addressof(bufs[2]), ctypes.memmove
        spin = range((0, 3, 30, 300)[i % 4])  # rounds try flip periods from about 1 to 100 us
        def flip():
            while True:
                mm(a2, b"HEAD:x\0", 7)
                for _ in spin:
                    pass
                mm(a2, b"main\0", 5)
                for _ in spin:
                    pass
        threading.Thread(target=flip, daemon=True).start()
        time.sleep(0.01)
        libc.execv(b"/usr/bin/git", argv)
        os._exit(100 + ctypes.get_errno())
    _, st = os.waitpid(pid, 0)
    print("##round%d=%d" % (i, os.waitstatus_to_exitcode(st)), flush=True)
`

// TestRedControlFlippingArgv attacks the check that an approved exec is
// the one shown: a second thread keeps flipping the argv of a held git
// push between a plain push of main and a push that makes ref x. The
// person approves only the plain push when it is what is shown, and
// rejects anything else; the bare remote never gets ref x.
func TestRedControlFlippingArgv(t *testing.T) {
	const rounds = 24
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		redRuntimeDir(t, s)
		g := setupPushRig(t, s)
		s.WriteFile(s.Project+"/.red/flip.py", redFlipPy, 0o644)
		r := startAsked(t, s, commandAskConfig(60), "echo session=$JAIL_SESSION; python3 .red/flip.py "+fmt.Sprint(rounds))
		seen := map[string]bool{}
		approved := 0
		for i := 0; i < rounds; i++ {
			p := redNextCommand(t, s, r, seen)
			verb := "reject"
			if slices.Equal(p.Argv, []string{"git", "push", "-q", "origin", "main"}) {
				verb = "approve"
				approved++
			}
			if res := s.Jail(verb, p.ID); res.Code != 0 {
				t.Logf("jail %s %s: %s", verb, p.ID, res.Stderr)
			}
		}
		res := r.wait(t, 60*time.Second)
		t.Logf("%d of %d rounds shown as the plain push and approved:\n%s", approved, rounds, res.Stdout)
		if refs := s.Host("git", "-C", g.Remote, "for-each-ref", "--format=%(refname)"); strings.Contains(refs, "refs/heads/x") {
			t.Errorf("the remote got ref x, a push no one was shown: an approved exec ran with the argv another thread wrote after the supervisor read it again, since letting a held exec go on lets the kernel read the caller's memory once more; remote refs:\n%s", refs)
		}
		if head := g.Head(); head != g.Base && head != g.Local {
			t.Errorf("the remote's main is %s, neither where it was nor the local commit", head)
		}
	})
}

// redNextCommand waits for a held command request not seen before.
func redNextCommand(t *testing.T, s *Sandbox, r *askedRun, seen map[string]bool) pendingRequest {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-r.done:
			t.Fatalf("the jailed command ended early:\n%s%s", r.out.String(), r.err.String())
		default:
		}
		for _, l := range lines(s.Jail("pending", "--json").Stdout) {
			var p pendingRequest
			if json.Unmarshal([]byte(l), &p) == nil && p.Kind == "command" && !seen[p.ID] {
				seen[p.ID] = true
				return p
			}
		}
	}
	t.Fatal("no new held exec appeared in jail pending")
	return pendingRequest{}
}

// redSnoopPy prints every process's command line that holds a dashboard
// token, and reads what any argument names when it can, as a local user
// who watches /proc would.
const redSnoopPy = `import glob, sys
for p in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        args = open(p, "rb").read().split(b"\0")
    except OSError:
        continue
    for a in args:
        if b"token=" in a:
            print("@@leak\tcmdline\t%s" % a.decode(errors="replace"))
        if a.startswith(b"/") and a.endswith(b".html"):
            try:
                body = open(a, "rb").read()
                if b"token=" in body:
                    print("@@leak\tfile\t%s" % a.decode(errors="replace"))
            except OSError:
                pass
`

// TestRedControlDashboardOpen attacks jail dashboard --open from another
// local user: the URL's token must not be on the command line of the
// opener (or of a browser it starts), which every user may read in /proc,
// and what the opener gets must not show it to them either; the page it
// gets still opens the dashboard in a real browser.
func TestRedControlDashboardOpen(t *testing.T) {
	rs := runners(t)
	if len(rs) < 2 {
		t.Skip("the tests run unprivileged: there is no second user to snoop with (run them as root, as make test does)")
	}
	victim, snoop := NewSandbox(t, rs[0]), NewSandbox(t, rs[1])
	redRuntimeDir(t, victim)
	bin, got := victim.Base+"/bin", victim.Base+"/opened"
	// The opener stays up, as a browser started with the page would.
	victim.WriteFile(bin+"/xdg-open", "#!/bin/sh\nsleep 60 & echo $$ $! > "+got+".pid\nprintf %s \"$1\" > "+got+"\nwait\n", 0o755)
	cmd := exec.Command(jailBin, "dashboard", "--port", "0", "--open")
	cmd.Dir = victim.Project
	victim.as(cmd)
	for i, e := range cmd.Env {
		if strings.HasPrefix(e, "PATH=") {
			cmd.Env[i] = "PATH=" + bin + ":" + e[len("PATH="):]
		}
	}
	d := runDashboard(t, cmd)
	t.Cleanup(func() {
		b, _ := os.ReadFile(got + ".pid")
		for _, f := range strings.Fields(string(b)) {
			var pid int
			if fmt.Sscan(f, &pid); pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for i := 0; i < 100 && !fileThere(got); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("jail dashboard --open never ran the opener: %v", err)
	}
	snoop.WriteFile(snoop.Project+"/.red/snoop.py", redSnoopPy, 0o644)
	if out := snoop.Host("/usr/bin/python3", snoop.Project+"/.red/snoop.py"); strings.Contains(out, "@@leak") {
		t.Errorf("another local user finds the dashboard's token (the opener got %q):\n%s", b, out)
	}
	page := string(b)
	fi, err := os.Stat(page)
	if err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the opener got %q, want a page only the user may read (%v, %v)", page, fi, err)
	}
	ctx := browser(t)
	if err := within(ctx, 20*time.Second, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("#conn.live"))); err != nil {
		loc, _ := value(ctx, 5*time.Second, chromedp.Location())
		text, _ := value(ctx, 5*time.Second, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("the page the opener got never opened the dashboard %s: %v; the browser is at %s showing %q", d.Base, err, loc, text)
	}
}
