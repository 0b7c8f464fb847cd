package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// h2Upstream is a TLS test server that speaks HTTP/2 and echoes what it
// received: the Authorization header in X-Seen-Auth, the body's length,
// and a trailer.
func h2Upstream(t *testing.T, ca *CA) (*httptest.Server, *[]string, *[]string) {
	t.Helper()
	var protos []string
	var auths []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos = append(protos, r.Proto)
		auths = append(auths, r.Header.Get("Authorization"))
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Seen-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Seen-Len", fmt.Sprint(n))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "ok")
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	}))
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return ca.Leaf(hello.ServerName, key)
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &protos, &auths
}

// h2Client is an HTTP/2 client whose every connection is a CONNECT
// tunnel through the proxy to host, the name also sent as SNI.
func h2Client(t *testing.T, e *env, host string) *http.Client {
	return &http.Client{Transport: &http2.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			_, _, c, _ := raw(t, e.httpAddr, "CONNECT "+host+":443 HTTP/1.1\r\nHost: "+host+":443\r\n\r\n")
			tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: pool(e.ca), NextProtos: []string{"h2"}})
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, err
			}
			if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
				t.Errorf("the proxy chose %q by ALPN, not h2", p)
			}
			return tc, nil
		},
	}}
}

// TestH2Intercepted sends HTTP/2 through an intercepted tunnel: a
// placeholder for the host is replaced, one for another host is refused on
// its stream only while the connection serves on, an :authority other
// than the tunnel's is refused, the upstream's trailers come back, and a
// large body streams through.
func TestH2Intercepted(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up, protos, auths := h2Upstream(t, upCA)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test", "evil.test"}, Hosts: map[string]string{"api.test": up.Listener.Addr().String(), "evil.test": up.Listener.Addr().String()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Secrets:  testSecrets(),
	})
	c := h2Client(t, e, "api.test")
	send := func(url, auth string, body io.Reader) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, body)
		req.Header.Set("Authorization", auth)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}

	resp := send("https://api.test/v1", "Bearer "+phKey, strings.NewReader("hi"))
	if resp.StatusCode != 200 || len(*auths) != 1 || (*auths)[0] != "Bearer "+valKey {
		t.Errorf("injection over HTTP/2: status %d, upstream saw %q", resp.StatusCode, *auths)
	}
	if got := resp.Header.Get("X-Seen-Auth"); got != "Bearer "+phKey {
		t.Errorf("the value echoed in a response header reached the client as %q, want the placeholder", got)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("the client spoke %s", resp.Proto)
	}
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Errorf("trailer Grpc-Status = %q, want 0 (trailers %v)", got, resp.Trailer)
	}

	resp = send("https://api.test/v1", "Bearer "+phTok, strings.NewReader("hi"))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a placeholder for another host: status %d, want 403", resp.StatusCode)
	}
	resp = send("https://evil.test/v1", "none", strings.NewReader("hi"))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf(":authority evil.test in a tunnel to api.test: status %d, want 403", resp.StatusCode)
	}

	big := bytes.Repeat([]byte("x"), 8<<20)
	resp = send("https://api.test/big", "none", bytes.NewReader(big))
	if resp.StatusCode != 200 || resp.Header.Get("X-Seen-Len") != fmt.Sprint(len(big)) {
		t.Errorf("large body: status %d, upstream read %s bytes", resp.StatusCode, resp.Header.Get("X-Seen-Len"))
	}
	for _, p := range *protos {
		if p != "HTTP/2.0" {
			t.Errorf("the proxy spoke %s to an HTTP/2 upstream", p)
		}
	}
	if len(*protos) != 2 {
		t.Errorf("the upstream got %d requests, want 2 (the refused ones must not reach it)", len(*protos))
	}
	e.entry(t, func(x Entry) bool { return x.Path == "/big" && x.Verdict == verdictAllow })
	e.entry(t, func(x Entry) bool {
		return x.Host == "evil.test" && x.Verdict == verdictDeny && x.Reason == "host header mismatch"
	})
	noValues(t, e)
}

// TestH2StreamsAndResets: a response the upstream streams reaches the
// HTTP/2 client part by part, and a stream the client resets ends the
// upstream request it was waiting on instead of holding it open.
func TestH2StreamsAndResets(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	ended := make(chan struct{})
	proceed := make(chan struct{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			<-proceed
			io.WriteString(w, "second\n")
		case "/hang":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(ended)
		}
	}))
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	up.EnableHTTP2 = true
	up.TLS = &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return upCA.Leaf(hello.ServerName, key)
	}}
	up.StartTLS()
	t.Cleanup(up.Close)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test"}, Hosts: map[string]string{"api.test": up.Listener.Addr().String()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	c := h2Client(t, e, "api.test")

	resp, err := c.Get("https://api.test/stream")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	got := make(chan error, 1)
	go func() { _, err := io.ReadFull(resp.Body, buf); got <- err }()
	select {
	case err := <-got:
		if err != nil || string(buf) != "first\n" {
			t.Errorf("first part: %q, %v", buf, err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the first part of a streamed response was held back until the stream ended")
	}
	close(proceed)
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(rest) != "second\n" {
		t.Errorf("rest of the stream: %q", rest)
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test/hang", nil)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("a stream reset by the client left its upstream request open")
	}
}

// TestH2CutAnswer: an upstream that dies in the middle of its body must
// not look to the HTTP/2 client like a whole, shorter answer: the stream
// is reset.
func TestH2CutAnswer(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "only the start")
		w.(http.Flusher).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test"}, Hosts: map[string]string{"api.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	resp, err := h2Client(t, e, "api.test").Get("https://api.test/cut")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("a cut answer reached the HTTP/2 client as whole: %q", b)
	}
}

// lockedWrites records the writes made to it.
type lockedWrites struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	calls int
}

func (w *lockedWrites) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	return w.buf.Write(p)
}

// TestH2CoalescerKeepsOrder writes many frames of many sizes through the
// coalescer an HTTP/2 connection's frames go through: every byte arrives
// once, in order, in no more writes than were made, and a write after the
// close fails instead of vanishing.
func TestH2CoalescerKeepsOrder(t *testing.T) {
	out := &lockedWrites{}
	co := &coalescer{w: out, done: make(chan struct{})}
	co.cond = sync.NewCond(&co.mu)
	go co.run()
	var want bytes.Buffer
	const writes = 3000
	for i := range writes {
		p := bytes.Repeat([]byte{byte(i)}, 1+(i*7919)%(40<<10))
		want.Write(p)
		if n, err := co.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d of %d bytes: %v", i, n, len(p), err)
		}
	}
	co.close()
	<-co.done
	if !bytes.Equal(out.buf.Bytes(), want.Bytes()) {
		t.Fatalf("the writes arrived as %d bytes, want the %d written, in order", out.buf.Len(), want.Len())
	}
	if out.calls > writes {
		t.Fatalf("%d writes went out for the %d made", out.calls, writes)
	}
	if _, err := co.Write([]byte("late")); err == nil {
		t.Fatal("a write after the close was accepted")
	}
}

// TestH2CloseCutsStalledClient closes an intercepted HTTP/2 connection
// whose client stopped reading while the proxy had megabytes queued for
// it: the close must not wait on the client, which would hold the
// connection's goroutines for as long as the client likes.
func TestH2CloseCutsStalledClient(t *testing.T) {
	ca := memCA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := tls.Client(c, &tls.Config{RootCAs: pool(ca), ServerName: "stall.test"})
		tc.Handshake()
		time.Sleep(10 * time.Second) // reads nothing more
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf, err := ca.Leaf("stall.test", key)
	if err != nil {
		t.Fatal(err)
	}
	cc := &batchConn{Conn: raw, r: bufio.NewReader(raw)}
	tc := tls.Server(cc, &tls.Config{Certificates: []tls.Certificate{*leaf}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	cc.startBatching()
	conn := newCoalescedTLS(tc, cc)
	frame := make([]byte, 16<<10+9)
	go func() {
		for {
			if _, err := conn.Write(frame); err != nil {
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond) // the socket's buffers and the queue fill up
	closed := make(chan struct{})
	go func() { conn.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(coalesceDrain + 3*time.Second):
		t.Fatal("closing the connection waits on a client that reads nothing")
	}
}

// TestH2StreamsFromHTTP1Upstream: an HTTP/1.1 upstream (whose body the
// proxy gathers in batches for the stream) streams a large part and then
// waits for the client to have read all of it before it sends the rest:
// no byte of a part may be held back in a batch until the next part.
func TestH2StreamsFromHTTP1Upstream(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	part := bytes.Repeat([]byte("0123456789abcdef"), (300<<10)/16) // more than two batches
	proceed := make(chan struct{})
	up := newUpstream(t, upCA, func(w http.ResponseWriter, r *http.Request) {
		w.Write(part)
		w.(http.Flusher).Flush()
		<-proceed
		io.WriteString(w, "end\n")
	})
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test"}, Hosts: map[string]string{"api.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	resp, err := h2Client(t, e, "api.test").Get("https://api.test/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len(part))
	got := make(chan error, 1)
	go func() { _, err := io.ReadFull(resp.Body, buf); got <- err }()
	select {
	case err := <-got:
		if err != nil || !bytes.Equal(buf, part) {
			t.Errorf("first part: %d bytes, %v", len(buf), err)
		}
	case <-time.After(5 * time.Second):
		t.Error("part of a streamed response was held back until the upstream sent more")
	}
	close(proceed)
	rest, err := io.ReadAll(resp.Body)
	if string(rest) != "end\n" || err != nil {
		t.Errorf("rest of the stream: %q, %v", rest, err)
	}
}
