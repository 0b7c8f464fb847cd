package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ctlStatus is the part of a `jail ps --json` line these tests read.
type ctlStatus struct {
	ID      string   `json:"id"`
	Command []string `json:"command"`
	Project string   `json:"project"`
	PID     int      `json:"pid"`
	Added   []string `json:"added"`
	Counts  struct {
		Allowed, Denied int64
		Pending         int
	} `json:"counts"`
}

// ctlRuntime gives the sandbox a runtime directory of its own (TMPDIR, so
// that the control sockets are in TMPDIR/jail-UID/ctl): the sessions of
// the tests running beside it are not listed, and its modes can be
// changed. It returns the runtime directory.
func ctlRuntime(t *testing.T, s *Sandbox) string {
	t.Helper()
	tmp := filepath.Join(s.Base, "rt")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(tmp, s.R.UID, s.R.GID)
	s.Env = append(s.Env, "TMPDIR="+tmp)
	return filepath.Join(tmp, fmt.Sprintf("jail-%d", s.R.UID))
}

// ctlSession is a jail run in the background.
type ctlSession struct {
	ctlStatus
	Sock   string
	stderr *bytes.Buffer
	exited chan error
	cmd    *exec.Cmd
}

// ctlStart starts jail with args in the background and waits until
// `jail ps` lists it; it is stopped when the test ends.
func ctlStart(t *testing.T, s *Sandbox, runtime string, args ...string) *ctlSession {
	t.Helper()
	cs := &ctlSession{stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cs.cmd = s.JailCmd(args...)
	cs.cmd.Stderr = cs.stderr
	if err := cs.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cs.exited <- cs.cmd.Wait() }()
	t.Cleanup(cs.stop)
	ok := waitFor(20*time.Second, func() bool {
		for _, st := range ctlPS(t, s) {
			if st.Project == s.Project && st.PID == cs.cmd.Process.Pid {
				cs.ctlStatus = st
				return true
			}
		}
		select {
		case err := <-cs.exited:
			cs.exited <- err
			return true
		default:
		}
		return false
	})
	if !ok || cs.ID == "" {
		t.Fatalf("jail ps never listed the session of jail %q\njail stderr:\n%s", args, cs.stderr)
	}
	cs.Sock = filepath.Join(runtime, "ctl", cs.ID+".sock")
	return cs
}

// stop ends the session (SIGTERM, then SIGKILL) and waits for it.
func (cs *ctlSession) stop() {
	if cs.cmd.ProcessState != nil {
		return
	}
	cs.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-cs.exited:
		cs.exited <- err
	case <-time.After(10 * time.Second):
		cs.cmd.Process.Kill()
	}
}

// ctlPS is `jail ps --json` as the sandbox's runner.
func ctlPS(t *testing.T, s *Sandbox) []ctlStatus {
	t.Helper()
	r := s.Jail("ps", "--json")
	if r.Code != 0 {
		t.Fatalf("jail ps --json:\n%s", r)
	}
	var out []ctlStatus
	for _, l := range lines(r.Stdout) {
		var st ctlStatus
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			t.Fatalf("jail ps --json printed %q: %v", l, err)
		}
		out = append(out, st)
	}
	return out
}

// jail ps lists a running session, with its command, project and counts;
// once the session ends it is gone and so is its socket. The other
// subcommands say when nothing matched (1) or the command line is wrong
// (125), in one line.
func TestControlPS(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		rt := ctlRuntime(t, s)
		cs := ctlStart(t, s, rt, "--", "sleep", "30")
		if strings.Join(cs.Command, " ") != "sleep 30" || cs.Project != s.Project {
			t.Fatalf("jail ps --json: %+v", cs.ctlStatus)
		}
		fi, err := os.Lstat(cs.Sock)
		if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("control socket %s: %v %v, want a socket of mode 0600", cs.Sock, fi, err)
		}
		if fi.Sys().(*syscall.Stat_t).Uid != uint32(s.R.UID) {
			t.Fatalf("control socket owned by %d, want %d", fi.Sys().(*syscall.Stat_t).Uid, s.R.UID)
		}
		di, _ := os.Lstat(filepath.Dir(cs.Sock))
		if di.Mode().Perm() != 0o700 {
			t.Fatalf("control directory mode %v, want 0700", di.Mode())
		}
		// The session's proxy directory, which the jail sees, holds the
		// proxy's sockets only.
		ents, err := os.ReadDir(filepath.Join(rt, cs.ID))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if n := e.Name(); strings.HasSuffix(n, ".sock") && !strings.Contains(" http.sock socks.sock capture.sock dns.sock ", " "+n+" ") {
				t.Errorf("the session's proxy directory holds %s", n)
			}
		}
		r := s.Jail("ps")
		if r.Code != 0 || !strings.Contains(r.Stdout, cs.ID) || !strings.Contains(r.Stdout, "sleep 30") || !strings.HasPrefix(r.Stdout, "ID ") {
			t.Fatalf("jail ps does not list the session:\n%s", r)
		}
		for _, h := range []string{"COMMAND", "PROJECT", "STARTED", "ALLOWED", "DENIED", "PENDING"} {
			if !strings.Contains(lines(r.Stdout)[0], h) {
				t.Errorf("jail ps has no %s column:\n%s", h, r.Stdout)
			}
		}
		if r := s.Jail("pending", "--json"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "" {
			t.Errorf("jail pending --json with nothing held:\n%s", r)
		}
		for _, c := range []struct {
			args []string
			code int
		}{
			{[]string{"approve", cs.ID[:6] + "-99"}, 1},
			{[]string{"reject", "nosuch-1"}, 1},
			{[]string{"deny", "--session", "0000000000000000", "example.test"}, 1},
			{[]string{"approve"}, 125},
			{[]string{"approve", "x-1", "--project", "--user"}, 125},
			{[]string{"allow", "--project", "--user", "example.test"}, 125},
			{[]string{"allow", "bad host/x"}, 125},
			{[]string{"ps", "extra"}, 125},
		} {
			r := s.Jail(c.args...)
			if r.Code != c.code || len(lines(r.Stderr)) != 1 || !strings.HasPrefix(r.Stderr, "jail: ") {
				t.Errorf("jail %q: want exit %d and one line on stderr:\n%s", c.args, c.code, r)
			}
		}
		cs.stop()
		if !waitFor(5*time.Second, func() bool { return len(ctlPS(t, s)) == 0 }) {
			t.Fatalf("jail ps still lists a session after it ended: %+v", ctlPS(t, s))
		}
		if _, err := os.Lstat(cs.Sock); !os.IsNotExist(err) {
			t.Fatalf("the control socket outlived its session: %v", err)
		}
		if r := s.Jail("deny", "example.test"); r.Code != 1 || !strings.Contains(r.Stderr, "no running session") {
			t.Errorf("jail deny with no session:\n%s", r)
		}
	})
}

// ctlLiveLoop is a jailed loop that fetches https://unknown.test/ and
// https://ports.test/ forever, one line "HOST CODE" each into the file
// given.
const ctlLiveLoop = `i=0; while :; do i=$((i+1)); for h in unknown.test ports.test; do
	c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "https://$h/live-$h-$i"); echo "$h $c" >> "$1"
done; sleep 0.2; done`

// jail allow and jail deny change a running session: a host denied by
// the config is let through after `jail allow`, an allowed one refused
// after `jail deny`, and the upstream sees it only then.
func TestControlLiveRules(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		rt := ctlRuntime(t, s)
		api := newUpstream(t, true, "")
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		writeNetConfig(t, s, netConfig{Allow: []string{"ports.test"}, Unknown: "deny",
			Hosts: map[string]string{"unknown.test": api.Addr(), "ports.test": api.Addr()}})
		out := filepath.Join(s.Project, "live.log")
		cs := ctlStart(t, s, rt, "--", "sh", "-c", ctlLiveLoop, "sh", out)
		read := func() []string { b, _ := os.ReadFile(out); return lines(string(b)) }
		seen := func(from int, want ...string) bool {
			got := read()
			if from > len(got) {
				return false
			}
			for _, w := range want {
				found := false
				for _, l := range got[from:] {
					found = found || l == w
				}
				if !found {
					return false
				}
			}
			return true
		}
		if !waitFor(20*time.Second, func() bool { return seen(0, "unknown.test 000", "ports.test 200") }) {
			t.Fatalf("the loop never showed the config's decisions: %q\n%s", read(), cs.stderr)
		}
		if got := api.SawPrefix("/live-unknown.test"); len(got) > 0 {
			t.Fatalf("a host the config denies reached the server: %q", got)
		}
		r := s.Jail("allow", "unknown.test")
		if r.Code != 0 || !strings.Contains(r.Stdout, cs.ID) {
			t.Fatalf("jail allow unknown.test:\n%s", r)
		}
		if r := s.Jail("deny", "ports.test", "--session", cs.ID); r.Code != 0 {
			t.Fatalf("jail deny ports.test --session %s:\n%s", cs.ID, r)
		}
		from := len(read())
		if !waitFor(20*time.Second, func() bool { return seen(from, "unknown.test 200", "ports.test 000") }) {
			t.Fatalf("the rules added live did not change the session: %q", read()[from:])
		}
		if len(api.SawPrefix("/live-unknown.test")) == 0 {
			t.Fatalf("the server never saw the host allowed live")
		}
		var st ctlStatus
		for _, x := range ctlPS(t, s) {
			if x.ID == cs.ID {
				st = x
			}
		}
		if strings.Join(st.Added, ",") != "allow unknown.test,deny ports.test" || st.Counts.Allowed == 0 || st.Counts.Denied == 0 {
			t.Fatalf("jail ps --json after the live rules: %+v", st)
		}
	})
}

// ctlRawCall connects to the socket at path as the test process (root),
// writes a status call and returns what came back within 3 s.
func ctlRawCall(t *testing.T, path string) (string, error) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintln(c, `{"op":"status"}`)
	var buf bytes.Buffer
	buf.ReadFrom(c)
	return buf.String(), nil
}

// ctlPyCall is a host python3 client of the socket in argv[1]: it prints
// "connected" once connected, then what the server sent.
const ctlPyCall = `import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(3)
s.connect(sys.argv[1])
print("connected", flush=True)
data = b""
try:
    s.sendall(b'{"op":"status"}\n')
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
except (socket.timeout, BrokenPipeError, ConnectionResetError):
    pass
print("reply", repr(data))
`

// Another uid is refused by the server even where it can reach the
// socket: root against the test user's session (root's uid is not the
// session's), the test user against root's, whose directory and socket
// are opened up for the attack so that only the server's check stands.
func TestControlOtherUIDRefused(t *testing.T) {
	t.Parallel()
	rs := runners(t)
	if len(rs) < 2 {
		t.Skip("two users are needed: the tests run as root, which runs them as root and as " + testUser)
	}
	root, user := NewSandbox(t, rs[0]), NewSandbox(t, rs[1])
	rootRT, userRT := ctlRuntime(t, root), ctlRuntime(t, user)
	rootSess := ctlStart(t, root, rootRT, "--", "sleep", "30")
	userSess := ctlStart(t, user, userRT, "--", "sleep", "30")

	// Root against the test user's session: the connection is made
	// (root passes every permission), and closed without a word.
	got, err := ctlRawCall(t, userSess.Sock)
	if err != nil {
		t.Fatalf("root could not even connect to %s: %v", userSess.Sock, err)
	}
	if got != "" {
		t.Fatalf("root's client got an answer from the test user's session: %q", got)
	}
	// The test user against root's session.
	for _, d := range []string{filepath.Dir(rootRT), rootRT, filepath.Dir(rootSess.Sock)} {
		os.Chmod(d, 0o711)
	}
	os.Chmod(rootSess.Sock, 0o777)
	py := exec.Command("/usr/bin/python3", "-c", ctlPyCall, rootSess.Sock)
	user.as(py)
	b, err := py.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "connected") {
		t.Fatalf("the test user could not connect to the opened socket (the attack did not reach the server): %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "reply b''") {
		t.Fatalf("the test user's client got an answer from root's session:\n%s", b)
	}
	// Each owner is still answered (its directory private again).
	for _, d := range []string{filepath.Dir(rootRT), rootRT, filepath.Dir(rootSess.Sock)} {
		os.Chmod(d, 0o700)
	}
	for _, s := range []*Sandbox{root, user} {
		if len(ctlPS(t, s)) != 1 {
			t.Errorf("%s: jail ps does not list its own session", s.R.Name)
		}
	}
}

// From inside a jail, no control socket can be found or dialled, even
// when the runtime directory, or the directory above it, is shown with
// --allow-read: it is masked by an empty directory. Another session's
// socket, known to the attacker by its path, stays out of reach, and no
// descriptor the jailed process holds is one.
func TestControlHiddenInside(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		rt := ctlRuntime(t, s)
		other := ctlStart(t, s, rt, "--", "sleep", "30")
		script := `
			[ -e "$1" ] && echo "ctl-dir-visible"
			[ -e "$2" ] && echo "socket-visible"
			ls -A "$3" 2>/dev/null | sed 's/^/runtime-entry /'
			find / -name '*.sock' 2>/dev/null | grep -v '^/run/jail/net/' | sed 's/^/found /'
			python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
    print("dialled")
except OSError as e:
    print("refused", type(e).__name__)
' "$2"
			python3 -c '
import os, socket
for fd in os.listdir("/proc/self/fd"):
    try:
        s = socket.socket(fileno=os.dup(int(fd)))
    except OSError:
        continue
    names = []
    for f in (s.getsockname, s.getpeername):
        try:
            names.append(str(f()))
        except OSError:
            pass
    if any("/ctl/" in n or (n.endswith(".sock") and not n.startswith("/run/jail/net/")) for n in names):
        print("fd-socket", names)
'
			echo done`
		ctlDir := filepath.Dir(other.Sock)
		for _, extra := range [][]string{nil, {"--allow-read", filepath.Dir(rt)}, {"--allow-read", rt}} {
			args := append(append([]string{}, extra...), "--", "sh", "-c", script, "sh", ctlDir, other.Sock, rt)
			r := s.Jail(args...)
			if r.Code != 0 || !strings.Contains(r.Stdout, "done") {
				t.Fatalf("jail %q:\n%s", extra, r)
			}
			for _, bad := range []string{"ctl-dir-visible", "socket-visible", "runtime-entry", "found ", "dialled", "fd-socket"} {
				if strings.Contains(r.Stdout, bad) {
					t.Errorf("jail %q: %s inside the jail:\n%s", extra, bad, r.Stdout)
				}
			}
			if !strings.Contains(r.Stdout, "refused FileNotFoundError") {
				t.Errorf("jail %q: dialling the control socket did not fail for want of it:\n%s", extra, r.Stdout)
			}
		}
		// The masks hid the directory; they removed nothing from it.
		if _, err := os.Lstat(other.Sock); err != nil {
			t.Fatalf("the other session's socket is gone after the jails ran: %v", err)
		}
		if len(ctlPS(t, s)) != 1 {
			t.Fatalf("the other session is no longer listed")
		}
	})
}

// A refused exec counts as a denial of its session: jail ps sees the
// supervisor's decisions as well as the proxy's.
func TestControlCountsExecDenials(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		rt := ctlRuntime(t, s)
		writeJailJSON(t, s, map[string]any{"command": map[string]any{"deny": []string{"git push"}}})
		cs := ctlStart(t, s, rt, "--", "sh", "-c", `git push origin main 2>/dev/null; git push 2>/dev/null; echo tried > tried.txt; sleep 30`)
		var st ctlStatus
		if !waitFor(15*time.Second, func() bool {
			for _, x := range ctlPS(t, s) {
				if x.ID == cs.ID {
					st = x
				}
			}
			return st.Counts.Denied >= 2
		}) {
			t.Fatalf("jail ps does not count the refused execs: %+v\n%s", st, cs.stderr)
		}
		hostFile(t, s.Project+"/tried.txt")
	})
}

// With no session running, --project and --user still write the rule:
// into the project's jail.json by an edit that keeps its comment (and
// trusts the result, so that the next run takes it), and into the user's
// config.json.
func TestControlPersistWithoutSession(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		ctlRuntime(t, s)
		s.WriteFile(s.Project+"/jail.json", "{\n  // the team's network\n  \"network\": {\"allow\": [\"first.test\"]}\n}\n", 0o644)
		s.Jail("trust")
		r := s.Jail("allow", "--project", "persist.test")
		if r.Code != 0 {
			t.Fatalf("jail allow --project with no session:\n%s", r)
		}
		b, _ := os.ReadFile(s.Project + "/jail.json")
		if !strings.Contains(string(b), "persist.test") || !strings.Contains(string(b), "// the team's network") || !strings.Contains(string(b), "first.test") {
			t.Fatalf("jail.json after jail allow --project:\n%s", b)
		}
		s.NoAutoTrust = true // the answer's own trust, not the harness's
		if r := s.Jail("plan", "--", "true"); r.Code != 0 || !strings.Contains(r.Stdout, "persist.test") {
			t.Fatalf("the next run does not take the written rule:\n%s", r)
		}
		if r := s.Jail("deny", "--user", "bad.test"); r.Code != 0 {
			t.Fatalf("jail deny --user with no session:\n%s", r)
		}
		u, _ := os.ReadFile(filepath.Join(s.Home, ".config/jail/config.json"))
		if !strings.Contains(string(u), "bad.test") {
			t.Fatalf("config.json after jail deny --user: %q", u)
		}
	})
}
