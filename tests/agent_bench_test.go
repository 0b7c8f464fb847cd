package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// agentSession is one real agent session that runs the same way inside
// the jail and bare on the host, for the wall-time comparison: the agent
// CLI, non-interactive, against local TLS mocks of its provider.
type agentSession struct {
	Name string
	// Prepare sets up s (mocks, the agent's files, jail.json, s.Env) for
	// one run and returns it. It is called once per run, inside and
	// outside alike, so that no run inherits another's state.
	Prepare func(t *testing.T, s *Sandbox) sessionRun
}

// sessionRun is one prepared session.
type sessionRun struct {
	JailArgs []string // jail's own flags, before "--"
	Argv     []string // the agent and its flags, run in s.Project
	// Hosts maps each provider host the agent dials to its mock's
	// address: the outside run reaches them through a forwarding proxy.
	Hosts map[string]string
	// CA is the mocks' CA bundle: the outside run trusts it directly.
	CA string
	// Check reports what is wrong with a finished run's output (both
	// streams), nil when the session did its work.
	Check func(out string) error
}

// agentSessions are registered by the agents' session tests.
var agentSessions []agentSession

// sessionBenchRuns is how many times each session runs on each side.
const sessionBenchRuns = 3

// TestAgentSessionsWallTime times every registered agent session inside
// the jail against the same session bare on the host (median of 3 each,
// interleaved), as root. It is a benchmark: `make bench` runs it with
// JAIL_AGENT_BENCH=1, and plain test runs skip it.
func TestAgentSessionsWallTime(t *testing.T) {
	if os.Getenv("JAIL_AGENT_BENCH") == "" {
		t.Skip("a benchmark: set JAIL_AGENT_BENCH=1 (make bench does)")
	}
	if len(agentSessions) == 0 {
		t.Fatal("no agent session is registered")
	}
	r := runners(t)[0]
	for _, a := range agentSessions {
		t.Run(a.Name, func(t *testing.T) {
			var in, out []time.Duration
			for i := 0; i < sessionBenchRuns; i++ {
				in = append(in, timeSession(t, NewSandbox(t, r), a, true))
				out = append(out, timeSession(t, NewSandbox(t, r), a, false))
			}
			mi, mo := median(in), median(out)
			t.Logf("%-10s inside %7.2f s  outside %7.2f s  ratio %.2f  (inside %v, outside %v)",
				a.Name, mi.Seconds(), mo.Seconds(), float64(mi)/float64(mo), roundAll(in), roundAll(out))
		})
	}
}

// timeSession prepares and runs one session and returns its wall time.
func timeSession(t *testing.T, s *Sandbox, a agentSession, jailed bool) time.Duration {
	t.Helper()
	run := a.Prepare(t, s)
	var cmd *exec.Cmd
	if jailed {
		cmd = s.JailCmd(append(append(append([]string{}, run.JailArgs...), "--"), run.Argv...)...)
	} else {
		cmd = exec.Command(run.Argv[0], run.Argv[1:]...)
		cmd.Dir = s.Project
		s.as(cmd)
		proxy := forwardingProxy(t, run.Hosts)
		cmd.Env = append(cmd.Env, "HTTPS_PROXY=http://"+proxy, "https_proxy=http://"+proxy,
			"NODE_EXTRA_CA_CERTS="+run.CA, "SSL_CERT_FILE="+run.CA)
	}
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	err := runWithin(cmd, agentRunTimeout)
	took := time.Since(start)
	where := map[bool]string{true: "inside the jail", false: "outside"}[jailed]
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", a.Name, where, err, buf.String())
	}
	if err := run.Check(buf.String()); err != nil {
		t.Fatalf("%s %s: %v\n%s", a.Name, where, err, buf.String())
	}
	return took
}

// runWithin runs cmd and kills it after d.
func runWithin(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("timed out after %v", d)
	}
}

// forwardingProxy is an HTTP CONNECT proxy on the host's loopback that
// takes the outside run to the mocks: each host:443 in hosts goes to its
// mock, anything else is refused.
func forwardingProxy(t *testing.T, hosts map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forwardOne(c, hosts)
		}
	}()
	return ln.Addr().String()
}

func forwardOne(c net.Conn, hosts map[string]string) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	host, _, _ := net.SplitHostPort(req.Host)
	addr, ok := hosts[host]
	if !ok {
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", addr)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() { io.Copy(up, br); up.(*net.TCPConn).CloseWrite() }()
	io.Copy(c, up)
}

func roundAll(d []time.Duration) []string {
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var out []string
	for _, x := range s {
		out = append(out, fmt.Sprintf("%.2fs", x.Seconds()))
	}
	return out
}
