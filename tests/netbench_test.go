package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchPKI is the network benchmark's CA and a leaf for its two names.
var benchPKI = &lazyPKI{what: "benchmark PKI", caName: "jail network benchmark CA", names: []string{"bench.test", "plain.bench.test"}}

// Sizes and counts of the network benchmark: enough pairs for a stable
// median in about a minute on a quiet two-core machine.
const (
	nbConnPairs    = 40
	nbKeepRounds   = 8
	nbKeepRequests = 60
	nbBulkPairs    = 10
	nbBulkSize     = 128 << 20
	nbStreams      = 64
	nbStreamSize   = 8 << 20
)

// Addresses the jailed clients dial: documentation addresses, captured
// like any other, decided by the name each client sends.
const (
	nbTLSAddr   = "192.0.2.20"
	nbPlainAddr = "192.0.2.21"
)

// TestNetBench measures HTTPS and HTTP through the jail (the capture and
// the bridge in the jail, the host proxy's interception) against the same
// curl run directly on the host, the two interleaved pair by pair in one
// run, and prints for each row both medians, their spread (p25–p75) and
// the added time or the ratio: a new HTTPS connection (captured, and
// through the proxy variables), a keep-alive request, bulk HTTPS
// downloads through interception (HTTP/1.1, and HTTP/2 to the proxy), a
// plain HTTP bulk download (the keep-alive and HTTP/1.1 bulk rows also
// through the proxy variables: the bridge's ports 3128 and 1080, whose
// sockets it hands over like the capture's), and the peak RSS of the host jail process
// (the proxy) while 64 bulk streams run at once. The direct curl trusts
// a file holding the test CA alone, so that a new connection's added time
// includes whatever the jail's trust costs a client. It is a benchmark:
// `make bench` runs it with JAIL_NET_BENCH=1, and plain test runs skip
// it.
func TestNetBench(t *testing.T) {
	if os.Getenv("JAIL_NET_BENCH") == "" {
		t.Skip("a benchmark: set JAIL_NET_BENCH=1 (make bench does)")
	}
	s := NewSandbox(t, runners(t)[0])
	pki := benchPKI.get(t)
	srv := newBenchServers(t, pki)
	trustCA(t, s, pki, "bundle.pem") // the proxy verifies the upstream with it
	caFile := filepath.Join(s.Base, "trust", "bench-ca.pem")
	s.WriteFile(caFile, string(pki.CAPEM), 0o644) // what the direct curl trusts: one certificate
	writeNetConfig(t, s, netConfig{
		Allow:   []string{"bench.test", "plain.bench.test"},
		Unknown: "deny",
		Hosts:   map[string]string{"bench.test": srv.tls.Addr().String(), "plain.bench.test": srv.plain.Addr().String()},
	})
	j := startBenchShell(t, s)
	tlsPort, plainPort := portOf(srv.tls.Addr()), portOf(srv.plain.Addr())
	direct := func(args ...string) []string {
		return s.curlLines(t, append([]string{"--cacert", caFile,
			"--resolve", "bench.test:" + tlsPort + ":127.0.0.1",
			"--resolve", "plain.bench.test:" + plainPort + ":127.0.0.1"}, args...)...)
	}
	jailed := func(args ...string) []string {
		return j.curl(t, append([]string{"--resolve", "bench.test:443:" + nbTLSAddr, "--resolve", "plain.bench.test:80:" + nbPlainAddr}, args...)...)
	}
	tlsDirect, tlsJail := "https://bench.test:"+tlsPort, "https://bench.test"
	plainDirect, plainJail := "http://plain.bench.test:"+plainPort, "http://plain.bench.test"

	// Warm the page cache, curl, the proxy's leaf certificate and pool.
	direct("-o", "/dev/null", "-w", "%{http_code}\\n", tlsDirect+"/warm")
	if got := jailed("-o", "/dev/null", "-w", "%{http_code}\\n", tlsJail+"/warm"); len(got) != 1 || got[0] != "200" {
		t.Fatalf("a captured HTTPS request through the jail did not get 200: %q\n%s", got, j.stderr())
	}
	if got := j.curlProxied(t, "-o", "/dev/null", "-w", "%{http_code}\\n", tlsJail+"/warm"); len(got) != 1 || got[0] != "200" {
		t.Fatalf("an HTTPS request through the proxy variables did not get 200: %q\n%s", got, j.stderr())
	}

	if j.init = childOf(childOf(j.pid)); j.init == 0 {
		t.Fatalf("the jail process %d has no init under its bwrap", j.pid)
	}
	proxied := func(args ...string) []string { return j.curlProxied(t, args...) }
	var rows []benchRow
	rows = append(rows, benchNewConn(t, direct, jailed, j, tlsDirect, tlsJail)...)
	rows = append(rows, benchKeepAlive(t, "keep-alive request (HTTP/1.1)", direct, jailed, tlsDirect, tlsJail))
	rows = append(rows, benchKeepAlive(t, "keep-alive (proxy variables)", direct, proxied, tlsDirect, tlsJail))
	rows = append(rows, benchBulk(t, "bulk HTTPS through interception", "--http1.1", j, direct, jailed, tlsDirect, tlsJail))
	rows = append(rows, benchBulk(t, "bulk HTTPS, HTTP/2 to the proxy", "--http2", j, direct, jailed, tlsDirect, tlsJail))
	rows = append(rows, benchBulk(t, "bulk HTTPS (proxy variables)", "--http1.1", j, direct, proxied, tlsDirect, tlsJail))
	rows = append(rows, benchBulk(t, "plain HTTP bulk", "--http1.1", j, direct, jailed, plainDirect, plainJail))
	rows = append(rows, benchBulk(t, "plain HTTP bulk (proxy variables)", "--http1.1", j, direct, proxied, plainDirect, plainJail))
	rows = append(rows, benchStreams(t, j, srv, tlsJail))
	t.Log("network through the jail (capture, bridge, host proxy) against the same curl direct on the host, interleaved pair by pair:")
	for _, r := range rows {
		t.Log(r.String())
	}
}

// benchRow is one line of the benchmark's table.
type benchRow struct {
	name         string
	unit         string
	direct, jail []float64 // samples; direct is empty for a row with no direct counterpart
	higherBetter bool      // a throughput, one sample a pair: the ratio is what counts
	note         string
}

func (r benchRow) String() string {
	if len(r.direct) == 0 {
		return fmt.Sprintf("  %-38s %.1f %s %s", r.name, quantile(r.jail, 0.5), r.unit, r.note)
	}
	dm, jm := quantile(r.direct, 0.5), quantile(r.jail, 0.5)
	cmp := fmt.Sprintf("added %+.3f %s (ratio %.2f)", jm-dm, r.unit, jm/dm)
	if r.higherBetter {
		// One sample a pair: the ratio is taken pair by pair, so that a
		// drift of the machine's speed falls on both sides of each.
		ratios := make([]float64, len(r.jail))
		for i := range r.jail {
			ratios[i] = r.jail[i] / r.direct[i]
		}
		cmp = fmt.Sprintf("ratio %.2f of direct [%.2f–%.2f], pair by pair", quantile(ratios, 0.5), quantile(ratios, 0.25), quantile(ratios, 0.75))
	}
	return fmt.Sprintf("  %-38s direct %s   jail %s   %s%s", r.name, spread(r.direct, r.unit), spread(r.jail, r.unit), cmp, r.note)
}

// spread is "median unit [p25–p75] (n)".
func spread(xs []float64, unit string) string {
	return fmt.Sprintf("%.3f %s [%.3f–%.3f] (n=%d)", quantile(xs, 0.5), unit, quantile(xs, 0.25), quantile(xs, 0.75), len(xs))
}

// quantile is the q-quantile of xs, interpolated between neighbours.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(pos)
	if lo+1 >= len(s) {
		return s[lo]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

// benchNewConn times one new HTTPS connection per curl process (its
// time_total: resolving, connecting, the CA file, the handshake and one
// small request), captured and through the proxy variables.
func benchNewConn(t *testing.T, direct, jailed func(...string) []string, j *benchShell, dURL, jURL string) []benchRow {
	capRow := benchRow{name: "new HTTPS connection (capture)", unit: "ms"}
	varRow := benchRow{name: "new HTTPS connection (proxy variables)", unit: "ms"}
	w := []string{"-o", "/dev/null", "-w", "%{time_total}\\n"}
	for i := 0; i < nbConnPairs; i++ {
		capRow.direct = append(capRow.direct, msOf(t, direct(append(w, dURL+"/new")...))...)
		capRow.jail = append(capRow.jail, msOf(t, jailed(append(w, jURL+"/new")...))...)
		varRow.direct = append(varRow.direct, msOf(t, direct(append(w, dURL+"/new")...))...)
		varRow.jail = append(varRow.jail, msOf(t, j.curlProxied(t, append(w, jURL+"/new")...))...)
	}
	return []benchRow{capRow, varRow}
}

// benchKeepAlive times the requests after the first on one connection
// (curl reuses it for every URL on its command line).
func benchKeepAlive(t *testing.T, name string, direct, jailed func(...string) []string, dURL, jURL string) benchRow {
	r := benchRow{name: name, unit: "ms"}
	args := func(base string) []string {
		a := []string{"--http1.1", "-w", "%{time_total} %{num_connects}\\n"}
		for i := 0; i < nbKeepRequests; i++ {
			a = append(a, "-o", "/dev/null", base+"/keep?n="+strconv.Itoa(i))
		}
		return a
	}
	reused := func(lines []string) []float64 {
		var out []float64
		for i, l := range lines {
			f := strings.Fields(l)
			if len(f) != 2 {
				t.Fatalf("curl printed %q, want time and connects", l)
			}
			if i > 0 && f[1] != "0" {
				t.Fatalf("request %d on a keep-alive connection opened a new one: %q", i, lines)
			}
			if i > 0 {
				out = append(out, msOf(t, f[:1])...)
			}
		}
		return out
	}
	for i := 0; i < nbKeepRounds; i++ {
		r.direct = append(r.direct, reused(direct(args(dURL)...))...)
		r.jail = append(r.jail, reused(jailed(args(jURL)...))...)
	}
	return r
}

// benchBulk downloads nbBulkSize bytes per pair with curl's option proto
// and reports MB/s, and the CPU time the host proxy and the jail's init
// (the bridge) spent on the jailed downloads per 100 MB: on a busy
// machine the rates move with the load, the CPU per byte much less. The
// HTTP versions each side spoke are checked: the upstream server speaks
// HTTP/1.1 only, so that with --http2 the jailed curl speaks HTTP/2 to
// the proxy and the direct one HTTP/1.1 to the server.
func benchBulk(t *testing.T, name, proto string, j *benchShell, direct, jailed func(...string) []string, dURL, jURL string) benchRow {
	r := benchRow{name: name, unit: "MB/s", higherBetter: true}
	url := "/bulk?size=" + strconv.Itoa(nbBulkSize)
	w := []string{proto, "-o", "/dev/null", "-w", "%{size_download} %{speed_download} %{http_version}\\n"}
	rate := func(lines []string, version string) []float64 {
		if len(lines) != 1 {
			t.Fatalf("curl printed %q, want one size, speed and version", lines)
		}
		f := strings.Fields(lines[0])
		if len(f) != 3 || f[0] != strconv.Itoa(nbBulkSize) || f[2] != version {
			t.Fatalf("bulk download: got %q, want %d bytes over HTTP/%s", lines[0], nbBulkSize, version)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("curl speed %q: %v", f[1], err)
		}
		return []float64{v / 1e6}
	}
	jailVersion := map[string]string{"--http1.1": "1.1", "--http2": "2"}[proto]
	var proxyCPU, bridgeCPU time.Duration
	for i := 0; i < nbBulkPairs; i++ {
		r.direct = append(r.direct, rate(direct(append(w, dURL+url)...), "1.1")...)
		p0, b0 := cpuTime(t, j.pid), cpuTime(t, j.init)
		r.jail = append(r.jail, rate(jailed(append(w, jURL+url)...), jailVersion)...)
		proxyCPU += cpuTime(t, j.pid) - p0
		bridgeCPU += cpuTime(t, j.init) - b0
	}
	per100MB := func(d time.Duration) float64 { return float64(d.Milliseconds()) / (nbBulkPairs * nbBulkSize / 100e6) }
	r.note = fmt.Sprintf("; CPU per 100 MB: proxy %.0f ms, bridge %.0f ms", per100MB(proxyCPU), per100MB(bridgeCPU))
	return r
}

// cpuTime is the user and system time pid has used (/proc/PID/stat, in
// clock ticks of 10 ms).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("reading the CPU time of %d: %v", pid, err)
	}
	// Fields after the command name, which may hold spaces: state is
	// the first, utime the 12th, stime the 13th.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: no utime and stime: %q", pid, b)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// childOf is the first child of pid, 0 when it has none.
func childOf(pid int) int {
	ts, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range ts {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			n, _ := strconv.Atoi(fs[0])
			return n
		}
	}
	return 0
}

// benchStreams runs nbStreams bulk HTTPS downloads at once through the
// jail and reports the host jail process's peak RSS (VmHWM, reset just
// before), checking that the streams did overlap.
func benchStreams(t *testing.T, j *benchShell, srv *benchServers, jURL string) benchRow {
	before := vmHWM(t, j.pid)
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", j.pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS of the jail process: %v", err)
	}
	srv.peak.Store(0)
	args := []string{"--http1.1", "--parallel", "--parallel-immediate", "--parallel-max", strconv.Itoa(nbStreams), "-w", "%{http_code} %{size_download}\\n"}
	for i := 0; i < nbStreams; i++ {
		args = append(args, "-o", "/dev/null", jURL+"/bulk?stream="+strconv.Itoa(i)+"&size="+strconv.Itoa(nbStreamSize))
	}
	start := time.Now()
	lines := j.curl(t, append([]string{"--resolve", "bench.test:443:" + nbTLSAddr}, args...)...)
	took := time.Since(start)
	want := "200 " + strconv.Itoa(nbStreamSize)
	if len(lines) != nbStreams {
		t.Fatalf("%d parallel streams printed %d lines: %q\n%s", nbStreams, len(lines), lines, j.stderr())
	}
	for _, l := range lines {
		if l != want {
			t.Fatalf("a parallel stream ended %q, want %q\n%s", l, want, j.stderr())
		}
	}
	if got := srv.peak.Load(); got < nbStreams {
		t.Errorf("only %d of %d streams were in flight at once: the RSS figure does not measure them all", got, nbStreams)
	}
	peak := vmHWM(t, j.pid)
	return benchRow{name: fmt.Sprintf("host jail RSS, %d bulk streams", nbStreams), unit: "MB", jail: []float64{peak},
		note: fmt.Sprintf("(peak before the streams %.1f MB; %d streams at once at the server; %.0f MB/s overall)",
			before, srv.peak.Load(), float64(nbStreams*nbStreamSize)/took.Seconds()/1e6)}
}

// vmHWM is the peak RSS of pid in MB.
func vmHWM(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the jail process's status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmHWM in the jail process's status")
	return 0
}

// msOf parses curl's seconds into milliseconds.
func msOf(t *testing.T, lines []string) []float64 {
	t.Helper()
	var out []float64
	for _, l := range lines {
		v, err := strconv.ParseFloat(strings.TrimSpace(l), 64)
		if err != nil {
			t.Fatalf("curl printed %q, want seconds", l)
		}
		out = append(out, v*1000)
	}
	return out
}

func portOf(a net.Addr) string { return strconv.Itoa(a.(*net.TCPAddr).Port) }

// curlLines runs curl on the host as the runner and returns its output
// lines.
func (s *Sandbox) curlLines(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("curl", append([]string{"-sS"}, args...)...)
	s.as(cmd)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("curl %v on the host: %v\n%s", args, err, stderr)
	}
	return lines(string(out))
}

// benchServers are the benchmark's upstream servers on the host's
// loopback: TLS and plain HTTP, both answering /bulk?size=N with N bytes
// and anything else with a short body.
type benchServers struct {
	tls, plain net.Listener
	inFlight   atomic.Int64
	peak       atomic.Int64  // the most bulk answers in flight at once
	all        chan struct{} // closed when nbStreams streams are in flight
	once       sync.Once
}

// wait holds a stream's answer until nbStreams of them are in flight (or
// a few seconds passed), so that the streams run at once.
func (b *benchServers) wait(inFlight int64) {
	if inFlight >= nbStreams {
		b.once.Do(func() { close(b.all) })
	}
	select {
	case <-b.all:
	case <-time.After(10 * time.Second):
	}
}

func newBenchServers(t *testing.T, pki *testPKI) *benchServers {
	b := &benchServers{all: make(chan struct{})}
	chunk := make([]byte, 256<<10)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bulk" {
			io.WriteString(w, "ok\n")
			return
		}
		n := b.inFlight.Add(1)
		defer b.inFlight.Add(-1)
		for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
		}
		if r.URL.Query().Has("stream") {
			b.wait(n)
		}
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for size > 0 {
			m, err := w.Write(chunk[:min(size, len(chunk))])
			if err != nil {
				return
			}
			size -= m
		}
	})
	tlsSrv, plainSrv := newTestServer(h), newTestServer(h)
	startTestServer(t, tlsSrv, &pki.Leaf)
	startTestServer(t, plainSrv, nil)
	b.tls, b.plain = tlsSrv.Listener, plainSrv.Listener
	return b
}

// benchShell is one jailed shell that runs the benchmark's commands, one
// line each, so that the jail starts once and every measurement goes
// through the same session's bridge and proxy.
type benchShell struct {
	pid  int // the host jail process, which runs the proxy
	init int // the jail's init, which runs the bridge (bwrap's child)
	in   io.WriteCloser
	out  *bufio.Scanner
	mu   sync.Mutex
	err  strings.Builder
}

// benchShellScript reads a command a line, runs it and marks its end. It
// keeps the proxy's address for the proxy-variable rows and unsets the
// variables, so that every other request is captured.
const benchShellScript = `P=$HTTPS_PROXY
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy NO_PROXY no_proxy
while IFS= read -r line; do eval "$line" </dev/null; echo @@done; done`

func startBenchShell(t *testing.T, s *Sandbox) *benchShell {
	t.Helper()
	b := &benchShell{}
	cmd := s.JailCmd("--", "sh", "-c", benchShellScript)
	var err error
	if b.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.err.Len() < 64<<10 {
			b.err.Write(p)
		}
		return len(p), nil
	})
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the jailed shell: %v", err)
	}
	b.pid = cmd.Process.Pid
	b.out = bufio.NewScanner(stdout)
	t.Cleanup(func() {
		b.in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return b
}

// run runs one shell command line in the jail and returns its output
// lines.
func (b *benchShell) run(t *testing.T, line string) []string {
	t.Helper()
	if _, err := io.WriteString(b.in, line+"\n"); err != nil {
		t.Fatalf("the jailed shell is gone: %v\n%s", err, b.stderr())
	}
	var out []string
	for b.out.Scan() {
		if b.out.Text() == "@@done" {
			return out
		}
		out = append(out, b.out.Text())
	}
	t.Fatalf("the jailed shell ended during %q: %v\n%s", line, b.out.Err(), b.stderr())
	return nil
}

// curl runs curl in the jail without proxy variables (captured).
func (b *benchShell) curl(t *testing.T, args ...string) []string {
	t.Helper()
	return b.run(t, "curl -sS "+shellWords(args))
}

// curlProxied runs curl in the jail through the proxy variables' proxy.
func (b *benchShell) curlProxied(t *testing.T, args ...string) []string {
	t.Helper()
	return b.run(t, `curl -sS -x "$P" `+shellWords(args))
}

func (b *benchShell) stderr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err.String()
}

// shellWords quotes each argument for sh.
func shellWords(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
