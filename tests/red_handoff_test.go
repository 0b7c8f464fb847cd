package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The capture socket hand-off attacked from inside the jail. Any jailed
// process can connect to the capture socket and send the proxy any
// descriptor it holds, with any destination line, and keep its own copy
// of what it sent. Whatever it sends, the host process must not hang,
// grow, or serve anything the jailed process could not have asked for.

// runJailFor runs jail with args in the project, killed after limit: it
// reports whether jail had to be killed (it hung).
func runJailFor(t *testing.T, s *Sandbox, limit time.Duration, args ...string) (Result, bool) {
	t.Helper()
	s.autoTrust(s.Project)
	cmd := exec.Command(jailBin, args...)
	cmd.Dir = s.Project
	s.as(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("running jail: %v", err)
	}
	var hung atomic.Bool
	timer := time.AfterFunc(limit, func() { hung.Store(true); cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	r := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	}
	return r, hung.Load()
}

// blockingPy hands the proxy TCP sockets connected to themselves (so that
// no peer ever closes them), waits until the proxy has made them
// non-blocking, makes them blocking again through its own copy of the
// same open file, and then puts one byte in each: a read by the proxy
// that would wait for more would wait in the kernel, where no deadline
// and no close reaches it. Each also asks for a linger without end and
// every other one for a receive low-water mark no read reaches. The
// sockets are left to the proxy when the command exits.
const blockingPy = `
import fcntl, os, socket, struct, time
socks = []
for i in range(N):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.connect(s.getsockname())
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect("/run/jail/net/capture.sock")
    socket.send_fds(u, [b"192.0.2.12:80\n"], [s.fileno()])
    socks.append((s, u))
time.sleep(0.1)
for i, (s, u) in enumerate(socks):
    fl = fcntl.fcntl(s.fileno(), fcntl.F_GETFL)
    fcntl.fcntl(s.fileno(), fcntl.F_SETFL, fl & ~os.O_NONBLOCK)
    # A linger without end for the proxy's last close, and on every
    # other socket a low-water mark no read reaches.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 100000))
    if i % 2:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1 << 30)
for s, u in socks:
    s.send(b"G")
time.sleep(0.5)
print("@@handed %d" % len(socks), flush=True)
`

// TestHandedSocketMadeBlockingCannotHangTheProxy: the jailed process
// shares the open file of every socket it hands over, and with it the
// file's flags. Made blocking again after the proxy took it, a socket
// whose reads the proxy left to the file's flags would hold a host thread
// in the kernel for good, and the proxy's shutdown (which closes every
// connection and waits for the reads on it) with it: jail would never
// exit. jail must exit with the command's status, promptly.
func TestHandedSocketMadeBlockingCannotHangTheProxy(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		s.WriteFile(s.Project+"/blocking.py", strings.Replace(blockingPy, "range(N)", "range(8)", 1), 0o644)
		r, hung := runJailFor(t, s, 40*time.Second, "--", "sh", "-c", "python3 blocking.py; exit 3")
		if hung {
			t.Fatalf("jail hung after the command exited: the proxy waits on a handed socket made blocking\n%s", r)
		}
		if r.Code != 3 || !strings.Contains(r.Stdout, "@@handed 8") {
			t.Fatalf("want the command's exit 3 after handing 8 sockets:\n%s", r)
		}
		if r.Took > 20*time.Second {
			t.Errorf("jail took %s to exit after the command: the proxy waited on the handed sockets", r.Took)
		}
	})
}

// handAttackPy makes the attacks on the capture socket and prints
// "##NAME=RESULT". argv: the host's canary port. Between phases it waits
// for the host test, which counts the host process's descriptors:
// "phase-NAME" is created in the project, "go-NAME" is the answer.
const handAttackPy = `
import errno, os, resource, socket, sys, time
canary = int(sys.argv[1])
CAP = "/run/jail/net/capture.sock"

def out(name, res):
    print("##%s=%s" % (name, res), flush=True)

def phase(name):
    open("phase-" + name, "w").close()
    end = time.time() + 30
    while not os.path.exists("go-" + name) and time.time() < end:
        time.sleep(0.02)

def hand(line, fds):
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect(CAP)
    socket.send_fds(u, [line], fds)
    return u

def answer(u):
    # What the proxy sends back on the capture connection itself: with a
    # socket handed over, nothing (it serves the socket, or refuses).
    u.settimeout(5)
    try:
        return repr(u.recv(200))
    except Exception as e:
        return type(e).__name__

def selfconn():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.connect(s.getsockname())
    return s

def loopback(line, request, shut=None):
    # A client socket connected to the jail's own loopback service, which
    # plays the client's part: the proxy reads what the service writes.
    # shut: "service" half-closes after the request, "client" hands over
    # a socket already shut for writing.
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    c = socket.create_connection(l.getsockname())
    a, _ = l.accept()
    if shut == "client":
        c.shutdown(socket.SHUT_WR)
    u = hand(line, [c.fileno()])
    c.close()
    a.sendall(request)
    if shut == "service":
        a.shutdown(socket.SHUT_WR)
    a.settimeout(10)
    got = b""
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            got += d
    except Exception as e:
        got += type(e).__name__.encode()
    return got.split(b"\r\n")[0].decode(errors="replace") or "closed"

def req(path, host):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode()

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
phase("start")

out("loop-allowed", loopback(b"192.0.2.12:80\n", req("/loop-allowed", "plain.allowed.test")))
out("loop-denied", loopback(b"127.0.0.1:%d\n" % canary, req("/attack-loop-denied", "evil.test")))
out("loop-host", loopback(b"127.0.0.1:%d\n" % canary, req("/attack-loop-host", "127.0.0.1:%d" % canary)))
out("loop-silent", loopback(b"127.0.0.1:%d\n" % canary, b""))
out("loop-halfclosed", loopback(b"192.0.2.12:80\n", req("/loop-halfclosed", "plain.allowed.test"), "service"))
out("loop-client-shut", loopback(b"192.0.2.12:80\n", req("/loop-client-shut", "plain.allowed.test"), "client"))

def bad(name, make):
    try:
        fds = make()
    except OSError as e:
        out(name, "unavailable " + errno.errorcode.get(e.errno, str(e.errno)))
        return
    u = hand(b"192.0.2.12:80\n", fds)
    out(name, answer(u))
    u.close()

base = selfconn()
bad("many", lambda: [os.dup(base.fileno()) for _ in range(250)])
bad("two", lambda: [base.fileno(), base.fileno()])
bad("netlink", lambda: [socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).detach()])
bad("packet", lambda: [socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).detach()])
def listening():
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    return [l.detach()]
bad("listening", listening)
def udp():
    d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); d.connect(("127.0.0.1", canary))
    return [d.detach()]
bad("udp", udp)
def sctp():
    return [socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132).detach()]
bad("sctp", sctp)

# A flood: every capture connection hands a socket whose request head
# never ends, so that the proxy holds each until the jail lets go.
held = []
for i in range(300):
    s = selfconn()
    s.send(b"GET /attack-flood HTTP/1.1\r\nHost: plain.allowed.test\r\n")
    try:
        held.append((s, hand(b"192.0.2.12:80\n", [s.fileno()])))
    except OSError as e:
        out("flood-error", errno.errorcode.get(e.errno, str(e.errno)))
        break
out("flood", len(held))
time.sleep(1)
phase("held")
for s, u in held:
    s.shutdown(socket.SHUT_RDWR)
    s.close()
    u.close()
held = None
phase("released")
out("after", loopback(b"192.0.2.12:80\n", req("/after-flood", "plain.allowed.test")))
`

// fdCount is how many descriptors host process pid has open.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("counting the jail's descriptors: %v", err)
	}
	return len(ents)
}

// awaitPhase waits for the script's "phase-NAME" file, runs check, and
// answers "go-NAME".
func awaitPhase(t *testing.T, s *Sandbox, name string, check func()) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(s.Project + "/phase-" + name); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Errorf("the script never reached phase %s", name)
			return
		}
	}
	check()
	s.WriteFile(s.Project+"/go-"+name, "", 0o644)
}

// TestHandedDescriptorsServeNothingMore attacks the capture socket with
// what a jailed process can hand it: a client socket of its own loopback
// service (served as what the service asks for, an allowed name, and
// never as the host's loopback the line names), descriptors the proxy
// must refuse (250 in one message, two, netlink, packet, listening, UDP
// and SCTP sockets), and 300 capture connections at once, each with a
// socket whose request never ends. The host's canary server sees
// nothing, the host process's descriptors stay within the session's
// connection cap and come back once the jail lets go, and the capture
// serves again after.
func TestHandedDescriptorsServeNothingMore(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/handattack.py", handAttackPy, 0o644)
		cmd := s.JailCmd("--", "sh", "-c", unsetProxy+"echo session=$JAIL_SESSION\npython3 handattack.py "+strconv.Itoa(n.Canary.Port()))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		var base int
		awaitPhase(t, s, "start", func() { base = fdCount(t, pid) })
		awaitPhase(t, s, "held", func() {
			// 256 connections of the session's cap, one descriptor each,
			// and what the proxy holds anyway.
			got := fdCount(t, pid)
			t.Logf("the host process holds %d descriptors with the flood held, %d before", got, base)
			if got > base+256+40 {
				t.Errorf("the host process holds %d descriptors with 300 handed sockets held (%d before): past the connection cap", got, base)
			} else if got < base+100 {
				t.Errorf("control: the host process holds %d descriptors with 300 handed sockets held (%d before): the flood was not held", got, base)
			}
		})
		awaitPhase(t, s, "released", func() {
			got := 0
			for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if got = fdCount(t, pid); got <= base+10 {
					return
				}
			}
			t.Errorf("the host process still holds %d descriptors (%d before the flood) after the jail let every handed socket go", got, base)
		})
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("jail: %v", err)
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("jail did not exit")
		}
		r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
		t.Logf("results: %v", kvs(r))
		wantKV(t, r, "loop-allowed", is("HTTP/1.1 200 OK"), "200: a loopback service's own request for an allowed name is served, as any client's")
		wantKV(t, r, "loop-halfclosed", is("HTTP/1.1 200 OK"), "200: a request followed by a half-close is answered")
		wantKV(t, r, "loop-client-shut", is("closed"), "closed: no answer can be written to a socket shut for writing")
		for _, k := range []string{"loop-denied", "loop-host", "loop-silent"} {
			wantKV(t, r, k, func(v string) bool { return !strings.HasPrefix(v, "HTTP/1.1 2") }, "no answer from a server")
		}
		for _, k := range []string{"many", "two", "netlink", "listening", "udp"} {
			wantKV(t, r, k, is("b''"), "the capture connection closed without a byte")
		}
		handed := 5
		for _, k := range []string{"packet", "sctp"} {
			wantKV(t, r, k, func(v string) bool { return v == "b''" || strings.HasPrefix(v, "unavailable") }, "refused, or no such socket in the jail")
			if kvs(r)[k] == "b''" {
				handed++
			}
		}
		wantKV(t, r, "flood", is("300"), "300 capture connections made")
		wantKV(t, r, "after", is("HTTP/1.1 200 OK"), "200: the capture serves after the flood")
		if n.Canary.Conns() > 0 {
			t.Errorf("the host's canary server, named by no rule, got %d connections: %v", n.Canary.Conns(), n.Canary.Paths())
		}
		if got := append(n.Plain.SawPrefix("/attack"), n.Trap.SawPrefix("/attack")...); len(got) > 0 {
			t.Errorf("a refused or unfinished handed request reached a server: %v", got)
		}
		if !n.Plain.Saw("/loop-allowed") || !n.Plain.Saw("/after-flood") {
			t.Errorf("control: the plain server did not see the allowed requests: %v", n.Plain.Paths())
		}
		var refused []decision
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Method == "CAPTURE" && d.Verdict == "deny" && strings.HasPrefix(d.Reason, "invalid capture: ") {
				refused = append(refused, d)
			}
		}
		// 250 and two descriptors; netlink, UDP (and packet, SCTP when
		// the jail had them); the listening socket, and any flood socket
		// the proxy reached only once the jail had closed it.
		why := map[string]int{}
		for _, d := range refused {
			why[strings.TrimPrefix(d.Reason, "invalid capture: the socket handed over: ")]++
		}
		if why["more than one descriptor"] != 2 || why["not a TCP socket"] != handed-3 || why["not connected: transport endpoint is not connected"] < 1 {
			t.Errorf("want the %d refused descriptors logged with their reasons; got:\n%s", handed, dumpDecisions(refused))
		}
	})
}
