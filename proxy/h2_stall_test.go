package proxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// An HTTP/2 stream whose client stops sending its body in the middle is
// cut after the read timeout, as an HTTP/1.1 request is, and logged: a
// stalled upload must not hold its request's memory until the connection
// goes idle, which a client that keeps it alive puts off forever. A body that trickles, a byte well within the timeout each time,
// goes through whole.
func TestH2StalledBodyCut(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up, _, _ := h2Upstream(t, upCA)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test"}, Hosts: map[string]string{"api.test": up.Listener.Addr().String()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Timeouts: Timeouts{Read: 500 * time.Millisecond, Idle: time.Minute},
	})
	cl := h2Client(t, e, "api.test")

	pr, pw := io.Pipe()
	defer pw.Close() // never more than the first bytes: the body stalls
	go io.WriteString(pw, "0123456789")
	req, _ := http.NewRequest(http.MethodPost, "https://api.test/stalled", pr)
	req.ContentLength = 100
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		resp, err := cl.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("answered %d", resp.StatusCode)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a stalled body was answered 200, as if it had arrived whole")
		}
		if took := time.Since(start); took < 400*time.Millisecond {
			t.Errorf("the stalled stream ended after %v, before the read timeout", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream whose body stalled is still open after 10 s (read timeout 500 ms)")
	}
	en := e.entry(t, func(x Entry) bool { return x.Path == "/stalled" })
	if en.Verdict != verdictError || !strings.Contains(en.Reason, "the client sent no byte of its body for 500ms") {
		t.Errorf("the stalled stream: logged %+v, want an error naming the client's stalled body", en)
	}

	pr, pw = io.Pipe()
	body := strings.Repeat("b", 15)
	go func() {
		for _, c := range body {
			time.Sleep(100 * time.Millisecond)
			io.WriteString(pw, string(c))
		}
		pw.Close()
	}()
	req, _ = http.NewRequest(http.MethodPost, "https://api.test/trickled", pr)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("a body that trickles within the read timeout: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Seen-Len") != "15" {
		t.Errorf("a body that trickles within the read timeout: %d, upstream saw %q bytes, want 200 and 15", resp.StatusCode, resp.Header.Get("X-Seen-Len"))
	}
}

// An HTTP/2 connection that closes without a stream is logged once, as an
// HTTP/1.1 tunnel without a request is: the record shows every tunnel the
// jail opened, even one that carried nothing.
func TestH2ConnectionWithoutStreamLogged(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up, _, _ := h2Upstream(t, upCA)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test"}, Hosts: map[string]string{"api.test": up.Listener.Addr().String()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	_, _, c, _ := raw(t, e.httpAddr, "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
	tc := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: pool(e.ca), NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("handshake: %v, protocol %q", err, tc.ConnectionState().NegotiatedProtocol)
	}
	cc, err := (&http2.Transport{}).NewClientConn(tc)
	if err != nil {
		t.Fatal(err)
	}
	cc.Close()
	en := e.entry(t, func(x Entry) bool { return x.Host == "api.test" })
	if en.Reason != "no HTTP/2 stream inside the tunnel" || en.Scheme != "https" || en.Method != http.MethodConnect || en.Port != 443 {
		t.Errorf("an HTTP/2 connection without a stream: logged %+v", en)
	}
	time.Sleep(200 * time.Millisecond)
	var n int
	ReadLog(e.logDir, func(x Entry) bool {
		if x.Host == "api.test" {
			n++
		}
		return true
	})
	if n != 1 {
		t.Errorf("%d entries for one HTTP/2 connection without a stream, want 1", n)
	}
}

// The stall timeout counts only while a read waits for the client: time
// the proxy spends between reads (an upstream slow to take what was read)
// does not cut a body whose next bytes are there already.
func TestStallWatchCountsPendingReadsOnly(t *testing.T) {
	t.Parallel()
	body := io.NopCloser(strings.NewReader("ab"))
	cuts := make(chan struct{}, 1)
	w := watchStall(body, 100*time.Millisecond, func() { cuts <- struct{}{} })
	defer w.stop()
	var b [1]byte
	for i := 0; i < 2; i++ {
		if n, err := w.Read(b[:]); n != 1 || err != nil {
			t.Fatalf("read %d: %d, %v", i, n, err)
		}
		time.Sleep(300 * time.Millisecond) // no read pending
	}
	select {
	case <-cuts:
		t.Fatal("a body with no read pending was cut")
	default:
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	w2 := watchStall(pr, 100*time.Millisecond, func() { pr.CloseWithError(io.ErrClosedPipe) })
	defer w2.stop()
	start := time.Now()
	_, err := w2.Read(b[:])
	if err == nil || !strings.Contains(err.Error(), "the client sent no byte of its body for 100ms") {
		t.Errorf("a read that waited past the timeout: %v", err)
	}
	if took := time.Since(start); took < 90*time.Millisecond || took > 2*time.Second {
		t.Errorf("a read that waited past the timeout ended after %v", took)
	}
}
