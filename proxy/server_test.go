package proxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memCA is a CA that lives in memory only.
func memCA(t testing.TB) *CA {
	t.Helper()
	certPEM, keyPEM, err := newCA()
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: pair.Leaf, Key: pair.PrivateKey.(*ecdsa.PrivateKey)}
}

func pool(ca *CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// upstream is a test server on 127.0.0.1 that counts what reaches it.
type upstream struct {
	*httptest.Server
	hits  atomic.Int64
	conns atomic.Int64
	mu    sync.Mutex
	last  *http.Request
	body  string
}

func newUpstream(t testing.TB, ca *CA, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s %s", r.Host, r.URL.Path) }
	}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.last, u.body = r, string(b)
		u.mu.Unlock()
		h(w, r)
	}))
	u.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			u.conns.Add(1)
		}
	}
	if ca == nil {
		u.Start()
	} else {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		u.TLS = &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			name := hello.ServerName
			if name == "" {
				name = "127.0.0.1"
			}
			return ca.Leaf(name, key)
		}}
		u.StartTLS()
	}
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) addr() string { return u.Listener.Addr().String() }

// canary is a TCP listener on 127.0.0.1 that must never be reached.
func canary(t *testing.T) (port int, hits *atomic.Int64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hits = new(atomic.Int64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, hits
}

// env is a running proxy with its log.
type env struct {
	srv                 *Server
	httpAddr, socksAddr string
	logDir              string
	ca                  *CA
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	e := &env{logDir: t.TempDir()}
	if cfg.CA == nil {
		cfg.CA = memCA(t)
	}
	e.ca = cfg.CA
	if cfg.Log == nil {
		l, err := OpenLog(e.logDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		cfg.Log = l
	}
	if cfg.Session == "" {
		cfg.Session = "test-session"
	}
	if cfg.Resolver == nil {
		cfg.Resolver = func(ctx context.Context, host string) ([]net.IP, error) {
			return nil, fmt.Errorf("no such host %s (tests do not resolve)", host)
		}
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	for _, p := range []struct {
		addr  *string
		serve func(net.Listener) error
	}{{&e.httpAddr, srv.ServeHTTP}, {&e.socksAddr, srv.ServeSOCKS}} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		*p.addr = l.Addr().String()
		done := make(chan error, 1)
		go func() { done <- p.serve(l) }()
		t.Cleanup(func() {
			srv.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve returned %v after Close", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("serve did not return after Close")
			}
		})
	}
	return e
}

func (e *env) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.httpAddr}),
		TLSClientConfig: &tls.Config{RootCAs: pool(e.ca)},
	}}
}

// entry waits for a log entry that satisfies ok: entries are written when
// a response or tunnel is complete, which can be just after the client
// has seen it.
func (e *env) entry(t *testing.T, ok func(Entry) bool) Entry {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var found *Entry
		var all []Entry
		ReadLog(e.logDir, func(x Entry) bool {
			all = append(all, x)
			if ok(x) {
				found = &x
				return false
			}
			return true
		})
		if found != nil {
			return *found
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching log entry; the log has %+v", all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", u, err)
	}
	return resp, string(b)
}

// raw sends a hand-written request to the HTTP proxy and reads the answer.
func raw(t *testing.T, addr, request string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: strings.Fields(request)[0]})
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", request, err)
	}
	if resp.StatusCode == http.StatusOK && resp.Request.Method == http.MethodConnect {
		return resp, "", c, br
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), c, br
}

func TestHTTPAllowed(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}}})
	c := e.client()
	for i := range 3 {
		resp, body := get(t, c, "http://allowed.test/hello?q="+strconv.Itoa(i))
		if resp.StatusCode != 200 || body != "hello from allowed.test /hello" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	}
	if up.conns.Load() != 1 {
		t.Errorf("upstream saw %d connections for 3 requests, want 1 (keep-alive)", up.conns.Load())
	}
	got := e.entry(t, func(x Entry) bool { return x.Path == "/hello" })
	if got.Verdict != "allow" || got.Scheme != "http" || got.Method != "GET" || got.Host != "allowed.test" || got.Port != 80 ||
		got.Rule != "allow allowed.test" || got.Status != 200 || got.BytesDown != int64(len("hello from allowed.test /hello")) || got.Session != "test-session" {
		t.Errorf("log entry %+v", got)
	}
}

func TestConnectIntercepted(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	c := e.client()
	var reused atomic.Int64
	for i := range 5 {
		req, _ := http.NewRequest("GET", "https://allowed.test/secure/"+strconv.Itoa(i), nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) {
				if ci.Reused {
					reused.Add(1)
				}
			},
		}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "hello from allowed.test /secure/"+strconv.Itoa(i) {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
		if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != "jail local CA" {
			t.Fatalf("certificate issued by %q, want the jail CA", issuer)
		}
	}
	if up.hits.Load() != 5 {
		t.Errorf("upstream saw %d requests, want 5", up.hits.Load())
	}
	if up.conns.Load() != 1 || reused.Load() != 4 {
		t.Errorf("upstream connections %d (want 1), client connections reused %d times (want 4)", up.conns.Load(), reused.Load())
	}
	up.mu.Lock()
	if up.last.TLS == nil || up.last.Host != "allowed.test" {
		t.Errorf("upstream saw TLS=%v Host=%q", up.last.TLS != nil, up.last.Host)
	}
	up.mu.Unlock()
	got := e.entry(t, func(x Entry) bool { return x.Path == "/secure/3" })
	if got.Verdict != "allow" || got.Scheme != "https" || got.Method != "GET" || got.Host != "allowed.test" || got.Port != 443 || got.Status != 200 || got.Rule != "allow allowed.test" {
		t.Errorf("log entry %+v", got)
	}
}

func TestInterceptedBodiesAndStreams(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	release := make(chan struct{})
	up := newUpstream(t, upCA, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "second\n")
		case "/head":
			w.Header().Set("Content-Length", "1234")
		case "/upgrade":
			if r.Header.Get("Upgrade") != "echo" {
				http.Error(w, "no upgrade", 400)
				return
			}
			c, brw, _ := http.NewResponseController(w).Hijack()
			defer c.Close()
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			io.Copy(c, brw)
		default:
			fmt.Fprintf(w, "got %d bytes", r.ContentLength)
		}
	})
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	c := e.client()

	t.Run("post with 100-continue", func(t *testing.T) {
		payload := strings.Repeat("p", 100000)
		req, _ := http.NewRequest("POST", "https://allowed.test/upload", strings.NewReader(payload))
		req.Header.Set("Expect", "100-continue")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "got 100000 bytes" {
			t.Fatalf("got %q", b)
		}
		up.mu.Lock()
		if up.body != payload {
			t.Errorf("upstream got %d bytes of body", len(up.body))
		}
		up.mu.Unlock()
		got := e.entry(t, func(x Entry) bool { return x.Path == "/upload" })
		if got.BytesUp != 100000 || got.Method != "POST" {
			t.Errorf("log entry %+v", got)
		}
	})
	t.Run("chunked upload", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() { pw.Write([]byte("abc")); pw.Close() }()
		resp, err := c.Post("https://allowed.test/chunked", "text/plain", pr)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		up.mu.Lock()
		if up.body != "abc" {
			t.Errorf("upstream got %q", up.body)
		}
		up.mu.Unlock()
	})
	t.Run("streamed response", func(t *testing.T) {
		resp, err := c.Get("https://allowed.test/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if err != nil || line != "first\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		close(release) // the first line arrived before the upstream finished
		rest, _ := io.ReadAll(br)
		if string(rest) != "second\n" {
			t.Fatalf("rest %q", rest)
		}
	})
	t.Run("head", func(t *testing.T) {
		resp, err := c.Head("https://allowed.test/head")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ContentLength != 1234 {
			t.Errorf("HEAD Content-Length %d, want 1234", resp.ContentLength)
		}
		// The connection is still usable after a HEAD.
		if _, body := get(t, c, "https://allowed.test/after-head"); body != "got 0 bytes" {
			t.Errorf("after HEAD: %q", body)
		}
	})
	t.Run("upgrade", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "https://allowed.test/upgrade", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d", resp.StatusCode)
		}
		rw := resp.Body.(io.ReadWriteCloser)
		defer rw.Close()
		io.WriteString(rw, "ping")
		b := make([]byte, 4)
		if _, err := io.ReadFull(rw, b); err != nil || string(b) != "ping" {
			t.Fatalf("echo %q, %v", b, err)
		}
	})
}

func TestDenied(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"allowed.test"}, Deny: []string{"*.evil.test"},
		Hosts: map[string]string{"evil.test": up.addr(), "x.evil.test": up.addr()}}})
	c := e.client()

	resp, body := get(t, c, "http://evil.test/steal")
	if resp.StatusCode != 403 || body != "jail: evil.test: not in network.allow; allow it in jail.json \"network.allow\"\n" {
		t.Errorf("HTTP: %d %q", resp.StatusCode, body)
	}
	resp, body, _, _ = raw(t, e.httpAddr, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n")
	if resp.StatusCode != 403 || !strings.HasPrefix(body, "jail: evil.test: not in network.allow; allow it") {
		t.Errorf("CONNECT: %d %q", resp.StatusCode, body)
	}
	resp, body, _, _ = raw(t, e.httpAddr, "CONNECT x.evil.test:443 HTTP/1.1\r\nHost: x.evil.test:443\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, `"*.evil.test"`) {
		t.Errorf("CONNECT to a denied name: %d %q", resp.StatusCode, body)
	}
	if _, err := c.Get("https://evil.test/"); err == nil {
		t.Error("HTTPS to a denied name succeeded")
	}
	if up.hits.Load() != 0 || up.conns.Load() != 0 {
		t.Errorf("upstream saw %d requests on %d connections", up.hits.Load(), up.conns.Load())
	}
	got := e.entry(t, func(x Entry) bool { return x.Path == "/steal" })
	if got.Verdict != "deny" || got.Rule != "unknown=deny" || got.Host != "evil.test" || got.Reason != "not in network.allow" {
		t.Errorf("log entry %+v", got)
	}
	e.entry(t, func(x Entry) bool {
		return x.Method == "CONNECT" && x.Host == "x.evil.test" && x.Rule == "deny *.evil.test"
	})
	denied := e.srv.Denied()
	if len(denied) != 4 {
		t.Fatalf("Denied() = %+v, want 4 entries", denied)
	}
	if s := Summary(denied); s != "4 requests denied (evil.test ×3, x.evil.test); see jail log" {
		t.Errorf("Summary = %q", s)
	}
}

func TestUnknownAllow(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Unknown: "allow", Hosts: map[string]string{"other.test": up.addr()}}})
	resp, body := get(t, e.client(), "http://other.test/x")
	if resp.StatusCode != 200 || body != "hello from other.test /x" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if got := e.entry(t, func(x Entry) bool { return x.Path == "/x" }); got.Rule != "unknown=allow" {
		t.Errorf("log entry %+v", got)
	}
}

func TestRefusedAddresses(t *testing.T) {
	t.Parallel()
	port, hits := canary(t)
	resolved := map[string][]net.IP{
		"rebind.test":   {net.ParseIP("127.0.0.1")},
		"metadata.test": {net.ParseIP("169.254.169.254")},
		"mixed.test":    {net.ParseIP("93.184.215.14"), net.ParseIP("10.0.0.1")},
		"cgnat.test":    {net.ParseIP("100.100.100.100")},
		"zero.test":     {net.ParseIP("0.0.0.0")},
		"mapped.test":   {net.ParseIP("::ffff:127.0.0.1")},
	}
	for _, unknown := range []string{"deny", "allow"} {
		e := newEnv(t, Config{
			Rules: Rules{Unknown: unknown, Allow: []string{"rebind.test", "metadata.test", "mixed.test", "cgnat.test", "zero.test", "mapped.test"}},
			Resolver: func(ctx context.Context, host string) ([]net.IP, error) {
				if ips, ok := resolved[host]; ok {
					return ips, nil
				}
				return nil, fmt.Errorf("no such host")
			},
		})
		p := strconv.Itoa(port)
		tests := []struct{ target, reason string }{
			{"127.0.0.1:" + p, "ip literal"},
			{"[::1]:" + p, "ip literal"},
			{"169.254.169.254:80", "ip literal"},
			{"1.1.1.1:443", "ip literal"},
			{"localhost:" + p, ""},
			{"rebind.test:" + p, "loopback address 127.0.0.1 after resolving rebind.test"},
			{"metadata.test:80", "link-local address 169.254.169.254 after resolving metadata.test"},
			{"mixed.test:" + p, "private address 10.0.0.1 after resolving mixed.test"},
			{"cgnat.test:443", "CGNAT address"},
			{"zero.test:" + p, "unspecified address"},
			{"mapped.test:" + p, "loopback address 127.0.0.1"},
		}
		for _, tt := range tests {
			resp, body, _, _ := raw(t, e.httpAddr, "CONNECT "+tt.target+" HTTP/1.1\r\nHost: "+tt.target+"\r\n\r\n")
			if resp.StatusCode != 403 && !(tt.reason == "" && resp.StatusCode == 502 && unknown == "allow") {
				t.Errorf("unknown=%s: CONNECT %s: %d %q", unknown, tt.target, resp.StatusCode, body)
			}
			if !strings.Contains(body, tt.reason) {
				t.Errorf("unknown=%s: CONNECT %s: body %q lacks %q", unknown, tt.target, body, tt.reason)
			}
		}
		// The same checks guard plain HTTP.
		for _, u := range []string{"http://127.0.0.1:" + p + "/", "http://rebind.test:" + p + "/", "http://[::1]:" + p + "/"} {
			resp, body := get(t, e.client(), u)
			if resp.StatusCode != 403 {
				t.Errorf("unknown=%s: GET %s: %d %q", unknown, u, resp.StatusCode, body)
			}
		}
		got := e.entry(t, func(x Entry) bool { return x.Host == "rebind.test" && x.Method == "CONNECT" })
		if got.Verdict != "deny" || got.Rule != "allow rebind.test" {
			t.Errorf("log entry %+v", got)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the canary on 127.0.0.1 was reached %d times", hits.Load())
	}
}

// TestNoDNSRebinding checks that a name is resolved once per connection,
// by the decision, and that the address checked is the address dialled: a
// resolver that answers a public address first and loopback afterwards
// cannot move a plain request or a CONNECT tunnel to the canary.
func TestNoDNSRebinding(t *testing.T) {
	t.Parallel()
	port, hits := canary(t)
	var mu sync.Mutex
	calls := map[string]int{}
	e := newEnv(t, Config{
		Rules: Rules{Allow: []string{"plain.test", "tunnel.test"}},
		Resolver: func(ctx context.Context, host string) ([]net.IP, error) {
			mu.Lock()
			defer mu.Unlock()
			calls[host]++
			if calls[host] == 1 {
				return []net.IP{net.ParseIP("192.0.2.1")}, nil // TEST-NET-1: public to the checks
			}
			return []net.IP{net.ParseIP("127.0.0.1")}, nil
		},
	})
	c := e.client()
	// Dialling 192.0.2.1 fails at once or hangs, depending on the
	// network: the answer does not matter, only where the proxy dialled.
	// A second resolution would come right after the first, before any
	// dial.
	c.Timeout = 2 * time.Second
	p := strconv.Itoa(port)
	for _, u := range []string{"http://plain.test:" + p + "/rebind", "https://tunnel.test:" + p + "/rebind"} {
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Logf("GET %s: %d", u, resp.StatusCode)
		} else {
			t.Logf("GET %s: %v", u, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"plain.test", "tunnel.test"} {
		if calls[name] != 1 {
			t.Errorf("%s was resolved %d times, want 1", name, calls[name])
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the canary on 127.0.0.1 was reached %d times", hits.Load())
	}
}

func TestIPRuleAllowsLoopback(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	_, port, _ := net.SplitHostPort(up.addr())
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"127.0.0.1:" + port}}})
	resp, body := get(t, e.client(), "http://127.0.0.1:"+port+"/ip")
	if resp.StatusCode != 200 || !strings.HasSuffix(body, "/ip") {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
}

func TestHostHeaderMismatch(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, nil, nil)
	tlsUp := newUpstream(t, upCA, nil)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test", "tls.test"}, Hosts: map[string]string{"allowed.test": up.addr(), "evil.test": up.addr(), "tls.test": tlsUp.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	for _, req := range []string{
		"GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.1\r\nhost: allowed.test:8080\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.1\r\nHOST: evil.test\r\n\r\n",
	} {
		resp, body, _, _ := raw(t, e.httpAddr, req)
		if resp.StatusCode != 403 || !strings.Contains(body, "host header mismatch") {
			t.Errorf("%q: %d %q", req, resp.StatusCode, body)
		}
	}
	// Matching forms are fine.
	for _, req := range []string{
		"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.1\r\nHost: ALLOWED.test:80\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.0\r\n\r\n",
	} {
		if resp, body, _, _ := raw(t, e.httpAddr, req); resp.StatusCode != 200 {
			t.Errorf("%q: %d %q", req, resp.StatusCode, body)
		}
	}
	// Inside an intercepted tunnel, the Host must be the CONNECT host.
	_, _, c, _ := raw(t, e.httpAddr, "CONNECT tls.test:443 HTTP/1.1\r\nHost: tls.test:443\r\n\r\n")
	tc := tls.Client(c, &tls.Config{ServerName: "tls.test", RootCAs: pool(e.ca)})
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "host header mismatch") {
		t.Errorf("in the tunnel: %d %q", resp.StatusCode, b)
	}
	// Plain HTTP after CONNECT is held to the CONNECT host as well.
	for host, status := range map[string]int{"evil.test": 403, "allowed.test": 200} {
		_, _, c, br := raw(t, e.httpAddr, "CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n")
		io.WriteString(c, "GET /in-connect HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status {
			t.Errorf("plain HTTP after CONNECT with Host %s: %d, want %d", host, resp.StatusCode, status)
		}
	}
	if up.hits.Load() != 4 || tlsUp.hits.Load() != 0 {
		t.Errorf("upstream hits: plain %d (want 4), tls %d (want 0)", up.hits.Load(), tlsUp.hits.Load())
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Rules: Rules{Unknown: "allow"}})
	for req, status := range map[string]int{
		"GET / HTTP/1.1\r\nHost: x.test\r\n\r\n":                     400,
		"GET ftp://x.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n":         400,
		"CONNECT x.test HTTP/1.1\r\nHost: x.test\r\n\r\n":            400,
		"CONNECT a.test@b.test:443 HTTP/1.1\r\nHost: b.test\r\n\r\n": 403,
		"NONSENSE\r\n\r\n": 400,
		"GET http://x.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", 40000) + "\r\n\r\n": 431,
	} {
		resp, body, _, _ := raw(t, e.httpAddr, req)
		if resp.StatusCode != status {
			t.Errorf("%.60q: %d %q, want %d", req, resp.StatusCode, body, status)
		}
	}
}

// socks runs a SOCKS5 CONNECT (or cmd) to host:port with the given
// address type and returns the reply code and the connection.
func socks(t *testing.T, addr string, cmd, atyp byte, host string, port int) (byte, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{5, 1, 0})
	var b [10]byte
	if _, err := io.ReadFull(c, b[:2]); err != nil || b[0] != 5 || b[1] != 0 {
		t.Fatalf("method selection %v, %v", b[:2], err)
	}
	req := []byte{5, cmd, 0, atyp}
	switch atyp {
	case socksDomain:
		req = append(append(req, byte(len(host))), host...)
	case socksIPv4:
		req = append(req, net.ParseIP(host).To4()...)
	case socksIPv6:
		req = append(req, net.ParseIP(host).To16()...)
	}
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	c.Write(req)
	if _, err := io.ReadFull(c, b[:10]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	c.SetDeadline(time.Time{})
	return b[1], c
}

func TestSOCKS(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	upCA := memCA(t)
	tlsUp := newUpstream(t, upCA, nil)
	port, hits := canary(t)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"allowed.test", "tls.test"}, Hosts: map[string]string{"allowed.test": up.addr(), "evil.test": up.addr(), "tls.test": tlsUp.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})

	code, c := socks(t, e.socksAddr, socksConnect, socksDomain, "allowed.test", 80)
	if code != 0 {
		t.Fatalf("CONNECT allowed.test: reply %#x", code)
	}
	io.WriteString(c, "GET /socks HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hello from allowed.test /socks" {
		t.Fatalf("through SOCKS: %q", b)
	}
	c.Close()
	// Plain HTTP in the tunnel is served request by request.
	got := e.entry(t, func(x Entry) bool { return x.Path == "/socks" })
	if got.Verdict != "allow" || got.Scheme != "http" || got.Host != "allowed.test" || got.Port != 80 || got.BytesDown == 0 || got.Method != "GET" {
		t.Errorf("log entry %+v", got)
	}
	// so a Host header cannot name another site on the same address.
	_, c = socks(t, e.socksAddr, socksConnect, socksDomain, "allowed.test", 80)
	io.WriteString(c, "GET /fronted HTTP/1.1\r\nHost: evil.test\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "host header mismatch") {
		t.Errorf("a mismatching Host inside a SOCKS tunnel: %d %q", resp.StatusCode, b)
	}

	// TLS over SOCKS is intercepted like TLS after CONNECT.
	code, c = socks(t, e.socksAddr, socksConnect, socksDomain, "tls.test", 443)
	if code != 0 {
		t.Fatalf("CONNECT tls.test: reply %#x", code)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "tls.test", RootCAs: pool(e.ca)})
	io.WriteString(tc, "GET /socks-tls HTTP/1.1\r\nHost: tls.test\r\nConnection: close\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if string(b) != "hello from tls.test /socks-tls" || tc.ConnectionState().PeerCertificates[0].Issuer.CommonName != "jail local CA" {
		t.Fatalf("TLS through SOCKS: %q", b)
	}
	got = e.entry(t, func(x Entry) bool { return x.Path == "/socks-tls" })
	if got.Verdict != "allow" || got.Scheme != "https" || got.Host != "tls.test" || got.Status != 200 {
		t.Errorf("log entry %+v", got)
	}

	for _, tt := range []struct {
		cmd, atyp byte
		host      string
		port      int
		code      byte
		reason    string
	}{
		{socksConnect, socksDomain, "evil.test", 80, socksNotAllowed, "not in network.allow"},
		{socksConnect, socksIPv4, "127.0.0.1", port, socksNotAllowed, "ip literal"},
		{socksConnect, socksIPv6, "::1", port, socksNotAllowed, "ip literal"},
		{socksConnect, socksDomain, "127.0.0.1", port, socksNotAllowed, "ip literal"},
		{socksUDPAssociate, socksIPv4, "0.0.0.0", 0, socksCmdUnsupport, "command not supported"},
		{socksBind, socksDomain, "allowed.test", 80, socksCmdUnsupport, "command not supported"},
	} {
		code, _ := socks(t, e.socksAddr, tt.cmd, tt.atyp, tt.host, tt.port)
		if code != tt.code {
			t.Errorf("%s %s:%d: reply %#x, want %#x", socksCommands[tt.cmd], tt.host, tt.port, code, tt.code)
		}
		e.entry(t, func(x Entry) bool {
			return x.Verdict == "deny" && x.Method == socksCommands[tt.cmd] && x.Host == tt.host && strings.Contains(x.Reason, tt.reason)
		})
	}
	if hits.Load() != 0 || up.hits.Load() != 1 {
		t.Errorf("canary hits %d, upstream hits %d (want 0 and 1)", hits.Load(), up.hits.Load())
	}
}

// echoServer answers every connection with banner (if any) and then
// echoes.
func echoServer(t *testing.T, banner string) string {
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
				io.WriteString(c, banner)
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func TestConnectRawTunnel(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	tlsUp := newUpstream(t, upCA, nil)
	e := newEnv(t, Config{
		Rules: Rules{
			Allow:       []string{"git.test:22", "banner.test:2222", "pass.test"},
			Hosts:       map[string]string{"git.test": echoServer(t, ""), "banner.test": echoServer(t, "SSH-2.0-server\r\n"), "pass.test": tlsUp.addr()},
			Passthrough: []string{"pass.test"},
		},
	})

	// The client speaks first, and not TLS: SSH over CONNECT.
	_, _, c, br := raw(t, e.httpAddr, "CONNECT git.test:22 HTTP/1.1\r\nHost: git.test:22\r\n\r\n")
	io.WriteString(c, "SSH-2.0-client\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "SSH-2.0-client\r\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
	c.(*net.TCPConn).CloseWrite()
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("after half-close: %q", rest)
	}
	got := e.entry(t, func(x Entry) bool { return x.Host == "git.test" })
	if got.Verdict != "allow" || got.Method != "CONNECT" || got.Scheme != "tcp" || got.Path != "" || got.BytesUp != 16 || got.BytesDown != 16 || got.Rule != "allow git.test:22" {
		t.Errorf("log entry %+v", got)
	}

	// The server speaks first.
	bresp, bbody, _, br := raw(t, e.httpAddr, "CONNECT banner.test:2222 HTTP/1.1\r\nHost: banner.test:2222\r\n\r\n")
	if bresp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT banner.test: %s %q", bresp.Status, bbody)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "SSH-2.0-server\r\n" {
		t.Fatalf("banner %q, %v; log: %+v", line, err, e.entry(t, func(x Entry) bool { return x.Host == "banner.test" }))
	}

	// Passthrough: the client talks TLS to the real server.
	c2 := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.httpAddr}),
		TLSClientConfig: &tls.Config{RootCAs: pool(upCA)},
	}}
	resp, body := get(t, c2, "https://pass.test/through")
	if resp.StatusCode != 200 || body != "hello from pass.test /through" {
		t.Fatalf("passthrough: %d %q", resp.StatusCode, body)
	}
	if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != upCA.Cert.Subject.CommonName || resp.TLS.PeerCertificates[0].Issuer.String() != upCA.Cert.Subject.String() {
		t.Errorf("passthrough certificate issued by %q", issuer)
	}
	c2.CloseIdleConnections()
	e.entry(t, func(x Entry) bool { return x.Host == "pass.test" && x.Scheme == "tcp" && x.BytesDown > 0 })
}

func TestUnixSocket(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	ca := memCA(t)
	srv, err := New(Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		CA:       ca,
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "http.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeHTTP(l) }()
	c := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: "jail-proxy:1"}),
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return net.Dial("unix", sock) },
		TLSClientConfig: &tls.Config{RootCAs: pool(ca)},
	}}
	resp, body := get(t, c, "https://allowed.test/unix")
	if resp.StatusCode != 200 || body != "hello from allowed.test /unix" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	// Closing the listener ends ServeHTTP; closing the Server ends the
	// connections.
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeHTTP after the listener closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeHTTP did not return after its listener closed")
	}
	srv.Close()
	if _, err := c.Get("https://allowed.test/after"); err == nil {
		t.Error("a request succeeded after Close")
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "CA") {
		t.Errorf("New without a CA: %v", err)
	}
	if _, err := New(Config{CA: memCA(t), Rules: Rules{Allow: []string{"*"}}}); err == nil {
		t.Error("New with a bad rule succeeded")
	}
}
