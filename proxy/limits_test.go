package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// trickle writes data to c one byte every interval until it is all sent,
// the connection fails, or the test ends.
func trickle(t *testing.T, c net.Conn, data string, every time.Duration) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for i := range len(data) {
			if _, err := c.Write([]byte{data[i]}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
		}
	}()
}

// closedWithin waits for the proxy to close c (a read ends) and returns
// how long it took; it fails the test when that is not within d. What the
// proxy sent before closing is returned too.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	b, err := io.ReadAll(c)
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the proxy kept the connection open for %v (want closed within %v); it sent %q", took, d, b)
	}
	return took, string(b)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitSlots waits until the server holds n client connections.
func waitSlots(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.slots.n.Load() != int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy holds %d client connections, want %d", s.slots.n.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConnectionCap(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:  Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Limits: Limits{Conns: 4},
	})
	// Four connections that never finish a request, on both ports.
	var held []net.Conn
	for i := range 4 {
		addr := e.httpAddr
		if i%2 == 1 {
			addr = e.socksAddr
		}
		c := dial(t, addr)
		if i%2 == 0 {
			io.WriteString(c, "GET http://allowed.test/held HTTP/1.1\r\n")
		}
		held = append(held, c)
	}
	waitSlots(t, e.srv, 4)

	// The fifth is refused at once, in its protocol.
	resp, body, _, _ := raw(t, e.httpAddr, "GET http://allowed.test/over HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "connection limit") || strings.Count(body, "\n") != 1 {
		t.Errorf("past the cap: %d %q, want 503 and one line naming the connection limit", resp.StatusCode, body)
	}
	code, _ := socks(t, e.socksAddr, socksConnect, socksDomain, "allowed.test", 80)
	if code != socksGeneralFailure {
		t.Errorf("SOCKS past the cap: reply %#x, want general failure", code)
	}
	got := e.entry(t, func(x Entry) bool { return x.Verdict == verdictDeny && x.Scheme == "http" })
	if got.Reason != "connection limit reached: 4 connections of this session" || got.Rule != "limit connections" {
		t.Errorf("refusal logged as %+v", got)
	}
	e.entry(t, func(x Entry) bool {
		return x.Verdict == verdictDeny && x.Scheme == "socks5" && strings.Contains(x.Reason, "connection limit")
	})
	if up.hits.Load() != 0 {
		t.Errorf("upstream saw %d requests past the cap", up.hits.Load())
	}

	// A flood past the cap: every connection is closed at once, each
	// refusal logged.
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", e.httpAddr)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			io.Copy(io.Discard, c)
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var n int
		ReadLog(e.logDir, func(x Entry) bool {
			if x.Rule == "limit connections" {
				n++
			}
			return true
		})
		if n == 102 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d refusals logged for 102 connections past the cap", n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Once the flood is gone, the proxy serves again.
	for _, c := range held {
		c.Close()
	}
	waitSlots(t, e.srv, 0)
	if resp, body := get(t, e.client(), "http://allowed.test/after"); resp.StatusCode != 200 {
		t.Errorf("after the flood: %d %q", resp.StatusCode, body)
	}
}

func TestConnectionCapAcrossSessions(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	shared := &connCounter{}
	cfg := Config{
		Rules:  Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Limits: Limits{Conns: 10, TotalConns: 3},
		total:  shared,
	}
	a, b := newEnv(t, cfg), newEnv(t, cfg)
	dial(t, a.httpAddr)
	dial(t, a.httpAddr)
	dial(t, b.httpAddr)
	waitSlots(t, a.srv, 2)
	waitSlots(t, b.srv, 1)
	resp, body, _, _ := raw(t, b.httpAddr, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "3 connections of all sessions") {
		t.Errorf("past the process's cap: %d %q", resp.StatusCode, body)
	}
	if n := shared.n.Load(); n != 3 {
		t.Errorf("the process counts %d connections after a refusal, want 3", n)
	}
}

func TestSlowlorisHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Rules: Rules{Unknown: "allow"}, Timeouts: Timeouts{Header: time.Second, Idle: 10 * time.Second}})
	// A byte every 100 ms would keep a per-byte deadline alive forever;
	// the head's deadline counts from its first byte.
	c := dial(t, e.httpAddr)
	trickle(t, c, "GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\nX-Pad: "+strings.Repeat("a", 200), 100*time.Millisecond)
	if took, _ := closedWithin(t, c, 3*time.Second); took < 900*time.Millisecond {
		t.Errorf("closed after %v, before the header deadline", took)
	}
	// The SOCKS greeting and request have the same time.
	c = dial(t, e.socksAddr)
	trickle(t, c, "\x05\x01\x00\x05\x01\x00\x03\x06x.test\x00\x50", 100*time.Millisecond)
	if took, _ := closedWithin(t, c, 3*time.Second); took < 900*time.Millisecond {
		t.Errorf("SOCKS: closed after %v, before the header deadline", took)
	}
	waitSlots(t, e.srv, 0)
}

func TestIdleClient(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Timeouts: Timeouts{Idle: 500 * time.Millisecond},
	})
	// Silent from the start.
	closedWithin(t, dial(t, e.httpAddr), 2*time.Second)
	// Silent after a request, kept alive.
	_, _, c, br := raw(t, e.httpAddr, "GET http://allowed.test/one HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("an idle keep-alive connection: %q, %v (want closed)", rest, err)
	}
}

func TestSlowBody(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Timeouts: Timeouts{Read: 500 * time.Millisecond},
	})
	// A body that stops is cut after the read deadline.
	c := dial(t, e.httpAddr)
	io.WriteString(c, "POST http://allowed.test/stalled HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 100\r\n\r\n0123456789")
	closedWithin(t, c, 3*time.Second)
	// A body that trickles for longer than the deadline, with a byte well
	// within it each time, goes through: the deadline is reset on progress.
	c = dial(t, e.httpAddr)
	body := strings.Repeat("b", 15)
	io.WriteString(c, "POST http://allowed.test/trickled HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 15\r\nConnection: close\r\n\r\n")
	trickle(t, c, body, 100*time.Millisecond)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a body that trickles within the deadline: %v %v", resp, err)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.body != body {
		t.Errorf("upstream got %q, want %q", up.body, body)
	}
}

func TestSlowClientHello(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": "127.0.0.1:9"}},
		Timeouts: Timeouts{Handshake: time.Second},
	})
	_, _, c, _ := raw(t, e.httpAddr, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	hello := clientHello(t, "allowed.test")
	trickle(t, c, string(hello), 100*time.Millisecond)
	if took, _ := closedWithin(t, c, 3*time.Second); took < 900*time.Millisecond {
		t.Errorf("closed after %v, before the handshake deadline", took)
	}
	e.entry(t, func(x Entry) bool { return x.Verdict == verdictError && strings.Contains(x.Reason, "TLS handshake") })
}

func TestSilentUpstream(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	release := make(chan struct{})
	up := newUpstream(t, upCA, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/silent":
			<-release
		case "/slow": // slow, but sending
			for range 8 {
				io.WriteString(w, "tick\n")
				w.(http.Flusher).Flush()
				time.Sleep(150 * time.Millisecond)
			}
		case "/late": // answers later than the deadline would allow for silence at once
			time.Sleep(200 * time.Millisecond)
			io.WriteString(w, "late")
		}
	})
	t.Cleanup(func() { close(release) }) // before the upstream closes
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Timeouts: Timeouts{Upstream: 500 * time.Millisecond},
	})
	c := e.client()
	start := time.Now()
	resp, body := get(t, c, "https://allowed.test/silent")
	if resp.StatusCode != http.StatusBadGateway || time.Since(start) > 3*time.Second {
		t.Errorf("a silent upstream: %d %q after %v, want 502 after about 500ms", resp.StatusCode, body, time.Since(start))
	}
	if resp, body := get(t, c, "https://allowed.test/slow"); resp.StatusCode != 200 || body != strings.Repeat("tick\n", 8) {
		t.Errorf("a slow upstream that sends (1.2 s, a line every 150 ms): %d %q", resp.StatusCode, body)
	}
	if resp, body := get(t, c, "https://allowed.test/late"); resp.StatusCode != 200 || body != "late" {
		t.Errorf("a late answer within the deadline: %d %q", resp.StatusCode, body)
	}
}

func TestTunnelIdle(t *testing.T) {
	t.Parallel()
	sink := sinkServer(t)
	e := newEnv(t, Config{
		Rules: Rules{Allow: []string{"echo.test:7", "sink.test:7"}, Hosts: map[string]string{"echo.test": echoServer(t, ""), "sink.test": sink}},
		// Far above the upload's 100 ms gaps, which a busy machine stretches.
		Timeouts: Timeouts{Tunnel: 1500 * time.Millisecond},
	})
	_, _, c, br := raw(t, e.httpAddr, "CONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\n\r\n")
	io.WriteString(c, "ping\n")
	if line, err := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	if took, _ := closedWithin(t, c, 5*time.Second); took < 1400*time.Millisecond {
		t.Errorf("an idle tunnel closed after %v, before its deadline", took)
	}
	e.entry(t, func(x Entry) bool {
		return x.Host == "echo.test" && strings.Contains(x.Reason, "without a byte either way")
	})

	// Bytes one way only keep a tunnel open: an upload with no answer.
	_, _, c, _ = raw(t, e.httpAddr, "CONNECT sink.test:7 HTTP/1.1\r\nHost: sink.test:7\r\n\r\n")
	for range 25 {
		if _, err := io.WriteString(c, "upload\n"); err != nil {
			t.Fatalf("an upload with bytes every 100 ms was cut: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("an upload with bytes every 100 ms: the tunnel ended (%v)", err)
	}
}

// sinkServer reads and discards everything, answering nothing.
func sinkServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return l.Addr().String()
}

func TestHeadBounds(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big-header" {
			w.Header().Set("X-Big", strings.Repeat("h", 16<<10))
		}
		io.WriteString(w, "ok")
	})
	e := newEnv(t, Config{
		Rules:  Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Limits: Limits{ResponseHeaderBytes: 8 << 10},
	})
	many := "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"
	for i := range maxHeaderFields + 1 {
		many += "X-" + strconv.Itoa(i) + ": v\r\n"
	}
	for name, tt := range map[string]struct {
		req    string
		status int
	}{
		"too many fields":         {many + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
		"a large head":            {"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX: " + strings.Repeat("a", readBufSize) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		"a large response header": {"GET http://allowed.test/big-header HTTP/1.1\r\nHost: allowed.test\r\n\r\n", http.StatusBadGateway},
		"a long chunk extension": {"POST http://allowed.test/chunked HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n5;" +
			strings.Repeat("e", 8<<10) + "\r\nhello\r\n0\r\n\r\n", http.StatusBadGateway},
	} {
		resp, body, _, _ := raw(t, e.httpAddr, tt.req)
		if resp.StatusCode != tt.status {
			t.Errorf("%s: %d %q, want %d", name, resp.StatusCode, body, tt.status)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.body == "hello" {
		t.Error("a body with a chunk extension past the line limit reached upstream")
	}
	if fields := maxHeaderFields; fields < 64 {
		t.Errorf("maxHeaderFields %d is too few for real clients", fields)
	}
}

func TestLeafCacheBounded(t *testing.T) {
	t.Parallel()
	const bound = 64
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"*.allowed.test"}}, Limits: Limits{Leaves: bound}})
	// 5,000 names under the wildcard, each asked for as a tunnel would.
	for i := range 5000 {
		if _, err := e.srv.leaf(fmt.Sprintf("n%d.allowed.test", i)); err != nil {
			t.Fatal(err)
		}
		if n := e.srv.leaves.len(); n > bound {
			t.Fatalf("the leaf cache holds %d certificates after %d names, bound %d", n, i+1, bound)
		}
	}
	if n := e.srv.leaves.len(); n != bound {
		t.Errorf("the cache holds %d certificates, want its bound %d", n, bound)
	}
	// The most recent names are the ones kept.
	c1, _ := e.srv.leaf("n4999.allowed.test")
	c2, _ := e.srv.leaf("n4999.allowed.test")
	if c1 != c2 {
		t.Error("the most recent name was signed again")
	}
}

func TestLeafSignedOnce(t *testing.T) {
	t.Parallel()
	lc := newLeafCache(8)
	var signs atomic.Int64
	release := make(chan struct{})
	ca := memCA(t)
	key := mustKey(t)
	var wg sync.WaitGroup
	certs := make([]*tls.Certificate, 50)
	for i := range certs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			certs[i], _ = lc.get("same.test", func() (*tls.Certificate, error) {
				signs.Add(1)
				<-release
				return ca.Leaf("same.test", key)
			})
		}()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	if signs.Load() != 1 {
		t.Errorf("50 concurrent misses signed %d times, want 1", signs.Load())
	}
	for _, c := range certs {
		if c == nil || c != certs[0] {
			t.Fatal("the waiters did not all get the one certificate")
		}
	}
}

func TestSlowClientIntercepted(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	// A busy client sends its ClientHello well after the sniffing time:
	// still intercepted, not tunnelled raw to a server it cannot verify.
	_, _, c, _ := raw(t, e.httpAddr, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	time.Sleep(3 * sniffTimeout)
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: pool(e.ca)})
	io.WriteString(tc, "GET /late-hello HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("a ClientHello after the sniffing time: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hello from allowed.test /late-hello" {
		t.Errorf("got %d %q", resp.StatusCode, b)
	}
}

func TestUpgradedIdle(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		io.Copy(c, brw)
	})
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Timeouts: Timeouts{Tunnel: 600 * time.Millisecond},
	})
	req, _ := http.NewRequest("GET", "https://allowed.test/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := e.client().Do(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	rw := resp.Body.(io.ReadWriteCloser)
	defer rw.Close()
	// Echoes keep it open past the idle time; silence then ends it. The
	// last ping sent is the earliest the idle time can run from, however
	// late this goroutine gets scheduled after it.
	var last time.Time
	for range 10 {
		last = time.Now()
		io.WriteString(rw, "ping")
		b := make([]byte, 4)
		if _, err := io.ReadFull(rw, b); err != nil || string(b) != "ping" {
			t.Fatalf("an upgraded connection in use was cut: %q, %v", b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(rw); done <- err }()
	select {
	case <-done:
		if took := time.Since(last); took < 550*time.Millisecond {
			t.Errorf("an idle upgraded connection closed after %v, before its deadline", took)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("an idle upgraded connection stayed open 3 s past a 600 ms idle deadline")
	}
}
