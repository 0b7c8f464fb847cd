package proxy

// The red-team tests attack the proxy as a jailed program would and
// measure what it costs the host process. The ones that measure the heap
// are not parallel, so that other tests do not add to what they see.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// heapInUse is the heap the process holds after a collection, in bytes.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// peakHeap samples the heap every 20 ms until stop is closed and returns
// the largest seen.
func peakHeap(stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, int64(m.HeapAlloc))
			select {
			case <-stop:
				out <- peak
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return out
}

// send writes request on a new connection to addr and returns the status
// line of the answer ("" when the connection closed without one).
func send(t *testing.T, addr, request string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, request)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(io.LimitReader(c, 4096))
	line, _, _ := strings.Cut(string(b), "\r\n")
	return line
}

// Denied requests are kept for the exit summary: each one's long path and
// host must not be, or a loop of refused requests with 30 KiB URLs holds
// hundreds of megabytes in the host process.
func TestRedteamDeniedKeepsLittle(t *testing.T) {
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"allowed.test"}}})
	before := heapInUse()
	long := strings.Repeat("a", 30<<10)
	const n = 1500
	for i := range n {
		var req string
		if i%2 == 0 {
			req = "GET http://evil.test/" + long + " HTTP/1.1\r\nHost: evil.test\r\n\r\n"
		} else {
			req = "CONNECT " + long + ":443 HTTP/1.1\r\n\r\n"
		}
		if line := send(t, e.httpAddr, req); !strings.Contains(line, " 403 ") && !strings.Contains(line, " 400 ") {
			t.Fatalf("request %d: %q, want a refusal", i, line)
		}
	}
	waitSlots(t, e.srv, 0)
	if got := len(e.srv.Denied()); got != n {
		t.Fatalf("Denied() has %d entries, want %d", got, n)
	}
	grew := heapInUse() - before
	t.Logf("%d denials of 30 KiB URLs: the heap grew %d KiB", n, grew>>10)
	if grew > 8<<20 {
		t.Errorf("%d denials with 30 KiB URLs grew the heap by %d MiB, want under 8 MiB", n, grew>>20)
	}
	if s := Summary(e.srv.Denied()); !strings.HasPrefix(s, fmt.Sprintf("%d requests denied (evil.test ×%d", n, n/2)) {
		t.Errorf("Summary = %.200q", s)
	}
}

// slowSink is a plain HTTP upstream that reads each request body to the
// end without keeping it and answers "ok" after delay.
func slowSink(t *testing.T, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// bodyFlood sends n requests at once, each with body, and returns the
// heap's peak growth meanwhile and the answers' status lines. The
// requests share body, so that what grows is the proxy's.
func bodyFlood(t *testing.T, e *env, n int, head string, body []byte) (int64, []string) {
	t.Helper()
	before := heapInUse()
	stop := make(chan struct{})
	peak := peakHeap(stop)
	var wg sync.WaitGroup
	lines := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", e.httpAddr)
			if err != nil {
				lines[i] = err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			io.WriteString(c, fmt.Sprintf("%sContent-Length: %d\r\n\r\n", head, len(body)))
			c.Write(body)
			b, _ := io.ReadAll(io.LimitReader(c, 4096))
			lines[i], _, _ = strings.Cut(string(b), "\r\n")
		}()
	}
	wg.Wait()
	close(stop)
	return <-peak - before, lines
}

// A textual request body up to 4 MiB is read whole to rewrite its
// placeholders before anything is sent: many at once must not hold their
// sum in memory, and every one is still sent.
func TestRedteamBufferedRequestBodies(t *testing.T) {
	e := newEnv(t, Config{
		Rules:   Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": slowSink(t, 200*time.Millisecond)}},
		Secrets: testSecrets(),
		Limits:  Limits{Buffered: 16 << 20},
	})
	const n = 64
	grew, lines := bodyFlood(t, e, n, "POST http://allowed.test/flood HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\nContent-Type: text/plain\r\n", bytes.Repeat([]byte("x"), 4<<20))
	t.Logf("%d textual 4 MiB bodies at once: the heap peaked %d MiB above its start", n, grew>>20)
	for i, l := range lines {
		if l != "HTTP/1.1 200 OK" {
			t.Errorf("request %d: %q, want 200 once there is room", i, l)
		}
	}
	// Go's collector lets garbage grow as large as what is live: twice
	// the budget and a margin, against 234 MiB without it.
	if grew > 96<<20 {
		t.Errorf("%d textual 4 MiB request bodies at once, 16 MiB allowed: the heap peaked %d MiB above its start, want under 96 MiB", n, grew>>20)
	}
}

// gzipBomb is a gzip stream of size zero bytes.
func gzipBomb(t *testing.T, size int64) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for n := int64(0); n < size; n += int64(len(zero)) {
		zw.Write(zero)
	}
	zw.Close()
	return b.Bytes()
}

// A gzip request body is inflated to be checked for secrets: a small one
// that inflates to a gigabyte must be refused once it passes the bound,
// not cost the host a second of CPU per request (a thousand times what
// the client spends sending it); a body that compresses as text does is
// sent.
func TestRedteamGzipRequestBomb(t *testing.T) {
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:   Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Secrets: testSecrets(),
	})
	post := func(path string, body []byte) string {
		return send(t, e.httpAddr, fmt.Sprintf("POST http://allowed.test%s HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body))
	}
	bomb := gzipBomb(t, 1<<30)
	start := time.Now()
	line := post("/bomb", bomb)
	took := time.Since(start)
	t.Logf("a %d KiB gzip body inflating to 1 GiB: %q after %v", len(bomb)>>10, line, took)
	if line != "HTTP/1.1 413 Request Entity Too Large" || took > 5*time.Second {
		t.Errorf("a gzip bomb: %q after %v, want 413 within seconds", line, took)
	}
	if got := e.entry(t, func(x Entry) bool { return x.Path == "/bomb" }); got.Verdict != "deny" || !strings.Contains(got.Reason, "inflates past 64 MiB") {
		t.Errorf("the bomb's log entry: %+v", got)
	}
	if up.hits.Load() != 0 {
		t.Errorf("the upstream received %d requests, want the bomb unsent", up.hits.Load())
	}
	var text bytes.Buffer
	for i := range 200000 {
		fmt.Fprintf(&text, `{"line":%d,"text":"an ordinary log line"}`+"\n", i)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(text.Bytes())
	zw.Close()
	if line := post("/text", gz.Bytes()); line != "HTTP/1.1 200 OK" || up.hits.Load() != 1 {
		t.Errorf("a gzip body of %d MiB of text: %q, want it sent", text.Len()>>20, line)
	}
}

// A body that waits for room longer than the read timeout is answered 503
// unsent, and the budget comes back when the body that held it ends.
func TestRedteamBufferedWaitsThenBusy(t *testing.T) {
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Secrets:  testSecrets(),
		Limits:   Limits{Buffered: 1 << 20},
		Timeouts: Timeouts{Read: 700 * time.Millisecond},
	})
	post := "POST http://allowed.test/%s HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
	// The holder announces 1 MiB and sends it a byte every 100 ms: it
	// keeps its room while it makes progress.
	holder := dial(t, e.httpAddr)
	fmt.Fprintf(holder, post, "holder", 1<<20, "")
	trickle(t, holder, strings.Repeat("x", 100), 100*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	// The waiter asks before sending its body: it must not be told to go
	// ahead while there is no room for it.
	start := time.Now()
	line := send(t, e.httpAddr, strings.Replace(fmt.Sprintf(post, "waiter", 2, ""), "\r\n\r\n", "\r\nExpect: 100-continue\r\n\r\n", 1))
	if took := time.Since(start); line != "HTTP/1.1 503 Service Unavailable" || took < 600*time.Millisecond {
		t.Errorf("a body while the budget is held: %q after %v, want 503 (and no 100 Continue) after the read timeout", line, took)
	}
	if got := e.entry(t, func(x Entry) bool { return x.Path == "/waiter" }); got.Verdict != "error" || !strings.Contains(got.Reason, "too many bodies held") {
		t.Errorf("the waiter's log entry: %+v", got)
	}
	holder.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		line = send(t, e.httpAddr, fmt.Sprintf(post, "after", 2, "{}"))
		if line == "HTTP/1.1 200 OK" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if line != "HTTP/1.1 200 OK" {
		t.Errorf("after the holder left: %q, want the budget back", line)
	}
	if up.hits.Load() != 1 {
		t.Errorf("the upstream received %d requests, want only the last", up.hits.Load())
	}
}

// A response up to 4 MiB is redacted whole when there is room: many at
// once, read slowly, must not hold their sum in memory, and the ones
// streamed instead are redacted all the same.
func TestRedteamBufferedResponses(t *testing.T) {
	page := bytes.Repeat([]byte("y"), 4<<20)
	copy(page[len(page)-100:], valKey)
	up := newUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(page)))
		w.Write(page)
	})
	e := newEnv(t, Config{
		Rules:   Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Secrets: testSecrets(),
		Limits:  Limits{Buffered: 16 << 20},
	})
	const n = 48
	before := heapInUse()
	stop := make(chan struct{})
	peak := peakHeap(stop)
	var wg sync.WaitGroup
	leaked := make([]bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", e.httpAddr)
			if err != nil {
				return
			}
			defer c.Close()
			io.WriteString(c, "GET http://allowed.test/page HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
			time.Sleep(300 * time.Millisecond)
			found, n := scan(c, valKey)
			leaked[i] = found || n < 4<<20
		}()
	}
	wg.Wait()
	close(stop)
	grew := <-peak - before
	t.Logf("%d responses of 4 MiB at once: the heap peaked %d MiB above its start", n, grew>>20)
	for i, bad := range leaked {
		if bad {
			t.Errorf("response %d: the value reached the client, or the body did not", i)
		}
	}
	// Twice the budget, garbage as large, and each stream's buffers,
	// against 500 MiB without the budget.
	if grew > 128<<20 {
		t.Errorf("%d responses of 4 MiB at once, 16 MiB allowed: the heap peaked %d MiB above its start, want under 128 MiB", n, grew>>20)
	}
}

// scan reads r to its end, keeping little, and reports whether needle was
// in it and how many bytes there were.
func scan(r io.Reader, needle string) (found bool, n int64) {
	buf := make([]byte, 64<<10)
	var tail []byte
	for {
		k, err := r.Read(buf)
		n += int64(k)
		tail = append(tail, buf[:k]...)
		found = found || bytes.Contains(tail, []byte(needle))
		tail = tail[max(0, len(tail)-len(needle)):]
		if err != nil {
			return found, n
		}
	}
}

// cannedServer answers the first request of every connection with resp,
// after reading its head, and after hold with end.
func cannedServer(t *testing.T, resp []byte, hold time.Duration, end string) string {
	t.Helper()
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
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if len(bytes.TrimSpace(line)) == 0 {
						break
					}
				}
				c.Write(resp)
				time.Sleep(hold)
				io.WriteString(c, end)
			}()
		}
	}()
	return l.Addr().String()
}

// tinyFields is a response head of about size bytes of distinct tiny
// header fields, and the first chunk of its body.
func tinyFields(size int) []byte {
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	for i := 0; head.Len() < size; i++ {
		fmt.Fprintf(&head, "a%d:b\r\n", i)
	}
	head.WriteString("Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n")
	return head.Bytes()
}

// A response head of tiny fields costs the proxy about twenty times its
// size while it is relayed: one past the default cap is refused, and many
// just under it, held open at once, stay within a bound (four times as
// much under the cap this replaced).
func TestRedteamResponseHeaderFields(t *testing.T) {
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"huge.test", "large.test"}, Hosts: map[string]string{
		"huge.test":  cannedServer(t, tinyFields(250<<10), 0, "0\r\n\r\n"),
		"large.test": cannedServer(t, tinyFields(62<<10), time.Second, "0\r\n\r\n"),
	}}})
	if line := send(t, e.httpAddr, "GET http://huge.test/ HTTP/1.1\r\nHost: huge.test\r\nConnection: close\r\n\r\n"); line != "HTTP/1.1 502 Bad Gateway" {
		t.Errorf("a 250 KiB response head: %q, want 502", line)
	}
	before := heapInUse()
	stop := make(chan struct{})
	peak := peakHeap(stop)
	const n = 64
	var wg sync.WaitGroup
	lines := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines[i] = send(t, e.httpAddr, "GET http://large.test/ HTTP/1.1\r\nHost: large.test\r\nConnection: close\r\n\r\n")
		}()
	}
	wg.Wait()
	close(stop)
	grew := <-peak - before
	t.Logf("%d responses of 62 KiB of tiny header fields at once: the heap peaked %d MiB above its start", n, grew>>20)
	for i, l := range lines {
		if l != "HTTP/1.1 200 OK" {
			t.Errorf("response %d: %q", i, l)
		}
	}
	if grew > 160<<20 {
		t.Errorf("%d responses of 62 KiB heads at once: the heap peaked %d MiB above its start, want under 160 MiB", n, grew>>20)
	}
}

// rawUpstream is a plain HTTP server that keeps every byte it receives,
// per connection, to be parsed afterwards as a strict upstream would.
type rawUpstream struct {
	addr  string
	mu    sync.Mutex
	conns []*bytes.Buffer
}

type teeConn struct {
	net.Conn
	mu  *sync.Mutex
	got *bytes.Buffer
}

func (c teeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.got.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

type teeListener struct {
	net.Listener
	u *rawUpstream
}

func (l teeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.u.mu.Lock()
	defer l.u.mu.Unlock()
	got := new(bytes.Buffer)
	l.u.conns = append(l.u.conns, got)
	return teeConn{c, &l.u.mu, got}, nil
}

func newRawUpstream(t *testing.T) *rawUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{addr: l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})}
	go srv.Serve(teeListener{l, u})
	t.Cleanup(func() { srv.Close() })
	return u
}

// requests parses what u received on each connection as requests; it
// fails the test on a head that is not canonical: a bare CR or LF, a
// folded line, both Content-Length and Transfer-Encoding, two lengths,
// or a coding other than chunked. A request cut short (the proxy gave
// up on its body) ends its connection's stream.
func (u *rawUpstream) requests(t *testing.T) []*http.Request {
	t.Helper()
	u.mu.Lock()
	var streams []string
	for _, b := range u.conns {
		streams = append(streams, b.String())
	}
	u.mu.Unlock()
	var out []*http.Request
	for _, raw := range streams {
		br := bufio.NewReader(strings.NewReader(raw))
		for {
			if _, err := br.Peek(1); err != nil {
				break
			}
			head, _ := peekHead(br)
			canonicalHead(t, string(head))
			req, err := http.ReadRequest(br)
			if err != nil {
				t.Fatalf("the upstream received what does not parse: %v\n%q", err, raw)
			}
			out = append(out, req)
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				break
			}
		}
	}
	return out
}

func canonicalHead(t *testing.T, head string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(head, "\r\n\r\n"), "\r\n")
	var cl, te int
	for _, l := range lines {
		if strings.ContainsAny(l, "\r\n") || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
			t.Errorf("a head line with a bare CR or LF, or folded: %q in %q", l, head)
		}
		name, value, _ := strings.Cut(l, ":")
		switch strings.ToLower(name) {
		case "content-length":
			cl++
		case "trailer":
			if strings.Contains(strings.ToLower(value), "host") {
				t.Errorf("a Host trailer announced upstream: %q", head)
			}
		case "transfer-encoding":
			te++
			if strings.TrimSpace(value) != "chunked" {
				t.Errorf("Transfer-Encoding %q sent upstream", value)
			}
		}
	}
	if cl > 1 || te > 1 || cl+te > 1 {
		t.Errorf("the upstream received a head with %d Content-Length and %d Transfer-Encoding fields: %q", cl, te, head)
	}
}

// Request smuggling: framing that a proxy and an upstream could read
// differently, sent to an allowed host with a request to a denied one
// hidden in it. The upstream must only ever see canonical requests for
// the allowed host, whatever the proxy made of the bytes.
func TestRedteamSmuggling(t *testing.T) {
	up := newRawUpstream(t)
	trap := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr, "evil.test": trap.addr()}}})
	hidden := "GET http://evil.test/smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	chunkedHidden := "0\r\n\r\n" + hidden
	post := "POST http://allowed.test/a HTTP/1.1\r\nHost: allowed.test\r\n"
	cases := map[string]string{
		"CL then TE":           post + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(chunkedHidden)) + chunkedHidden,
		"TE then CL":           post + fmt.Sprintf("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n", len(chunkedHidden)) + chunkedHidden,
		"two lengths":          post + fmt.Sprintf("Content-Length: 0\r\nContent-Length: %d\r\n\r\n", len(hidden)) + hidden,
		"length list":          post + fmt.Sprintf("Content-Length: 0, %d\r\n\r\n", len(hidden)) + hidden,
		"TE chunked, identity": post + "Transfer-Encoding: chunked, identity\r\n\r\n" + chunkedHidden,
		"TE xchunked":          post + "Transfer-Encoding: xchunked\r\n\r\n" + chunkedHidden,
		"TE space colon":       post + "Transfer-Encoding : chunked\r\n\r\n" + chunkedHidden,
		"TE tab":               post + "Transfer-Encoding:\tchunked\r\n\r\n" + chunkedHidden,
		"TE twice":             post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedHidden,
		"TE folded":            post + "X-A: b\r\n Transfer-Encoding: chunked\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(chunkedHidden)) + chunkedHidden,
		"bare LF":              "POST http://allowed.test/a HTTP/1.1\nHost: allowed.test\nContent-Length: 0\n\n" + hidden,
		"bare CR":              post + "X-A: b\rTransfer-Encoding: chunked\r\n\r\n" + chunkedHidden,
		"chunk size overflow":  post + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\n" + hidden,
		"chunk extension LF":   post + "Transfer-Encoding: chunked\r\n\r\n2;\nxx\r\n" + chunkedHidden,
		"pipelined":            post + "Content-Length: 0\r\n\r\n" + hidden,
		"absolute vs Host":     "GET http://allowed.test/smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"Host port":            "GET http://allowed.test/smuggled HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n",
		"userinfo":             "GET http://allowed.test@evil.test/smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"two Hosts":            "GET http://allowed.test/smuggled HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n",
		"Host trailer":         post + "Trailer: Host\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nHost: evil.test\r\n\r\n",
	}
	for name, req := range cases {
		c := dial(t, e.httpAddr)
		io.WriteString(c, req)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		t.Logf("%s: %q", name, firstLines(string(b)))
	}
	for _, r := range up.requests(t) {
		if r.Host != "allowed.test" || strings.Contains(r.URL.Path, "smuggled") {
			t.Errorf("the upstream received %s %s for Host %q", r.Method, r.URL.Path, r.Host)
		}
		if h := r.Trailer.Get("Host"); h != "" && h != "allowed.test" {
			t.Errorf("the upstream received a Host trailer %q", h)
		}
	}
	if trap.hits.Load() != 0 || trap.conns.Load() != 0 {
		t.Errorf("the denied host's server saw %d requests", trap.hits.Load())
	}
}

// firstLines is the status lines in an answer.
func firstLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\r\n") {
		if strings.HasPrefix(l, "HTTP/1.1 ") {
			out = append(out, l)
		}
	}
	return out
}

// A CONNECT tunnel in which the client speaks plain HTTP is served as
// requests, so that a Host header cannot reach another site on the
// tunnel's address. However the client splits or dresses its first
// request, the upstream must never see a request for a host that was not
// decided; other protocols still pass raw.
func TestRedteamTunnelSniffing(t *testing.T) {
	up := newRawUpstream(t)
	echo := newRecorder(t)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"allowed.test", "raw.test", "raw.test:80"}, Hosts: map[string]string{"allowed.test": up.addr, "raw.test": echo.addr}}})
	fronted := " /fronted HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
	// tunnel sends parts in a tunnel to host and returns what came back:
	// echo bytes, or everything until the proxy closes.
	tunnel := func(host string, parts []string, echo int) string {
		c := dial(t, e.httpAddr)
		defer c.Close()
		io.WriteString(c, "CONNECT "+host+":80 HTTP/1.1\r\nHost: "+host+":80\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT %s: %v %v", host, resp, err)
		}
		for _, p := range parts {
			io.WriteString(c, p)
			time.Sleep(20 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		if echo > 0 {
			b := make([]byte, echo)
			n, _ := io.ReadFull(br, b)
			return string(b[:n])
		}
		b, _ := io.ReadAll(br)
		return string(b)
	}
	for name, parts := range map[string][]string{
		"one byte first":     {"G", "ET" + fronted},
		"method split":       {"GE", "T" + fronted},
		"leading CRLF":       {"\r\nGET" + fronted},
		"lower-case method":  {"get" + fronted},
		"method with a dash": {"M-SEARCH" + fronted},
		"long method":        {"VERSION-CONTROL" + fronted},
		"tab separated":      {"GET\t/fronted\tHTTP/1.1\r\nHost: evil.test\r\n\r\n"},
		"HTTP/0.9":           {"GET /fronted\r\n"},
		"one byte at a time": strings.Split("POST"+fronted, ""),
	} {
		// A request the proxy cannot read (HTTP/0.9) may go unanswered.
		got := tunnel("allowed.test", parts, 0)
		if l := firstLines(got); len(l) > 1 || len(l) == 1 && l[0] != "HTTP/1.1 403 Forbidden" && l[0] != "HTTP/1.1 400 Bad Request" {
			t.Errorf("%s: the proxy answered %q, want the request refused", name, got)
		}
	}
	for _, c := range up.conns {
		if got := c.String(); strings.Contains(got, "fronted") {
			t.Errorf("the upstream of a tunnel to allowed.test received %q", got)
		}
	}
	for name, first := range map[string]string{
		"an SSH banner":     "SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n",
		"a Redis command":   "*1\r\n$4\r\nPING\r\n",
		"a git request":     "0033git-upload-pack /project.git\x00host=raw.test\x00",
		"a binary protocol": "\x00\x00\x00\x08\x04\xd2\x16\x2f",
	} {
		for _, parts := range [][]string{{first}, strings.Split(first, "")} {
			if got := tunnel("raw.test", parts, len(first)); got != first {
				t.Errorf("%s in a tunnel, in %d writes: echoed %q, want it relayed raw", name, len(parts), got)
			}
		}
	}
}

// An Upgrade to cleartext HTTP/2 is not passed on: once switched, the
// client's HTTP/2 requests would name any :authority on a connection
// decided for one host, and a lenient server upgrades even when the
// Connection field does not name HTTP2-Settings.
func TestRedteamH2CUpgrade(t *testing.T) {
	up := newRawUpstream(t)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr}}})
	for _, h := range []string{
		"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
		"Connection: Upgrade\r\nUpgrade: websocket, H2C\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
	} {
		resp, body, _, _ := raw(t, e.httpAddr, "GET http://allowed.test/up HTTP/1.1\r\nHost: allowed.test\r\n"+h+"\r\n")
		if resp.StatusCode != 200 || body != "ok" {
			t.Errorf("an h2c upgrade: %d %q, want the request served as HTTP/1.1", resp.StatusCode, body)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, c := range up.conns {
		if got := strings.ToLower(c.String()); strings.Contains(got, "h2c") || strings.Contains(got, "http2-settings") {
			t.Errorf("the upstream received an h2c upgrade: %q", c.String())
		}
	}
}

// A value may be much longer than its placeholder (a PEM key): a 4 MiB
// textual body of placeholders to their bound host must not be rewritten
// to gigabytes in memory. Past twice the largest body it is refused
// unsent; a body with a few of them is rewritten as before.
func TestRedteamPlaceholderExpansion(t *testing.T) {
	val := strings.Repeat("v", 3000)
	ph := "jail-secret-BIG_KEY-k9"
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:   Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Secrets: []Secret{{Name: "BIG_KEY", Placeholder: ph, Value: val, Hosts: []string{"allowed.test"}, Inject: []string{"body"}}},
	})
	post := func(path, body string) string {
		return send(t, e.httpAddr, fmt.Sprintf("POST http://allowed.test%s HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body))
	}
	before := heapInUse()
	stop := make(chan struct{})
	peak := peakHeap(stop)
	line := post("/expand", strings.Repeat(ph+" ", (4<<20)/(len(ph)+1)))
	close(stop)
	grew := <-peak - before
	t.Logf("a 4 MiB body of placeholders for a 3000-byte value: %q, the heap peaked %d MiB above its start", line, grew>>20)
	if line != "HTTP/1.1 413 Request Entity Too Large" || grew > 64<<20 {
		t.Errorf("a 4 MiB body of placeholders: %q with the heap %d MiB up, want 413 within 64 MiB", line, grew>>20)
	}
	if got := e.entry(t, func(x Entry) bool { return x.Path == "/expand" }); got.Verdict != "deny" || !strings.Contains(got.Reason, "expand past 8 MiB") {
		t.Errorf("the log entry: %+v", got)
	}
	if up.hits.Load() != 0 {
		t.Fatalf("the upstream received %d requests, want none", up.hits.Load())
	}
	if line := post("/few", "key="+ph+"&again="+ph); line != "HTTP/1.1 200 OK" || !strings.HasSuffix(up.seen(), "\nkey="+val+"&again="+val) {
		t.Errorf("a body with two placeholders: %q, the upstream got %.200q", line, up.seen())
	}
}

// A flood of connections past the cap, left open and silent, costs a
// goroutine each for a quarter second at most and 64 at once; the rest
// are closed in the accept loop: the process's goroutines stay bounded
// however fast they come (each refusal once took a goroutine of its own
// to log it, and under load they piled up), and the session serves again
// once its own connections end.
func TestRedteamRefusedFlood(t *testing.T) {
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:  Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Limits: Limits{Conns: 2},
	})
	held := []net.Conn{dial(t, e.httpAddr), dial(t, e.httpAddr)}
	waitSlots(t, e.srv, 2)
	base := runtime.NumGoroutine()
	var peak int
	var open []net.Conn
	start := time.Now()
	for i := range 2000 {
		c, err := net.Dial("tcp", e.httpAddr)
		if err != nil {
			continue // the backlog is full: the kernel refuses, not the proxy
		}
		open = append(open, c)
		if i%20 == 0 {
			peak = max(peak, runtime.NumGoroutine()-base)
		}
	}
	t.Logf("2000 connections past the cap in %v: at most %d more goroutines", time.Since(start), peak)
	if peak > maxAnswering+16 {
		t.Errorf("a flood of refused connections ran %d more goroutines, want about %d at most", peak, maxAnswering)
	}
	for _, c := range open {
		c.Close()
	}
	for _, c := range held {
		c.Close()
	}
	waitSlots(t, e.srv, 0)
	if resp, body := get(t, e.client(), "http://allowed.test/after"); resp.StatusCode != 200 {
		t.Errorf("after the flood: %d %q", resp.StatusCode, body)
	}
	if n := len(e.srv.Denied()); n > maxDenied {
		t.Errorf("%d denials kept, want at most %d", n, maxDenied)
	}
}
