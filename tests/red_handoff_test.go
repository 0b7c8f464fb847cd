package tests

import (
	"bytes"
	"os"
	"os/exec"
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
// and no close reaches it. The sockets are left to the proxy when the
// command exits.
const blockingPy = `
import fcntl, os, socket, time
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
for s, u in socks:
    fl = fcntl.fcntl(s.fileno(), fcntl.F_GETFL)
    fcntl.fcntl(s.fileno(), fcntl.F_SETFL, fl & ~os.O_NONBLOCK)
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

// keep os imported for the host-side checks below.
var _ = os.Getpid
