package proxy

// The fault tests are not parallel: each counts the process's goroutines
// before it starts and checks that, once its Server and servers are
// closed, no more remain. Parallel tests start only after these.

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// goroutineBaseline returns a check that closes what the test opened (in
// order) and fails the test when more goroutines run than before it
// started.
func goroutineBaseline(t *testing.T) func(closers ...func()) {
	t.Helper()
	runtime.GC()
	base := runtime.NumGoroutine()
	return func(closers ...func()) {
		t.Helper()
		for _, c := range closers {
			c()
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("%d goroutines remain, %d before the test:\n%s", runtime.NumGoroutine(), base, buf)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// faultEnv is a proxy in front of one TLS upstream and one plain one, both
// running h, with the client side ready.
type faultEnv struct {
	e          *env
	tlsUp, up  *upstream
	httpClient *http.Client
}

func newFaultEnv(t *testing.T, h http.HandlerFunc, cfg Config) *faultEnv {
	t.Helper()
	upCA := memCA(t)
	f := &faultEnv{tlsUp: newUpstream(t, upCA, h), up: newUpstream(t, nil, h)}
	f.tlsUp.Config.ErrorLog = quietLog
	f.up.Config.ErrorLog = quietLog
	cfg.Rules = Rules{Allow: []string{"tls.test", "plain.test"}, Hosts: map[string]string{"tls.test": f.tlsUp.addr(), "plain.test": f.up.addr()}}
	cfg.Upstream = &tls.Config{RootCAs: pool(upCA)}
	f.e = newEnv(t, cfg)
	f.httpClient = f.e.client()
	return f
}

// close ends everything the environment opened, for the baseline check.
func (f *faultEnv) close() {
	f.httpClient.CloseIdleConnections()
	f.e.srv.Close()
	f.tlsUp.CloseClientConnections()
	f.up.CloseClientConnections()
	f.tlsUp.Close()
	f.up.Close()
}

// works checks that the proxy still serves both upstreams.
func (f *faultEnv) works(t *testing.T) {
	t.Helper()
	for _, u := range []string{"https://tls.test/ok", "http://plain.test/ok"} {
		resp, err := f.httpClient.Get(u)
		if err != nil {
			t.Fatalf("after the fault, GET %s: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("after the fault, GET %s: %d %q", u, resp.StatusCode, b)
		}
	}
}

func TestFaultUpstreamResetMidBody(t *testing.T) {
	check := goroutineBaseline(t)
	f := newFaultEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/reset" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "1048576")
		w.Write(make([]byte, 64<<10))
		w.(http.Flusher).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		c.(*net.TCPConn).SetLinger(0) // a reset, not a clean close
		c.Close()
	}, Config{})
	for _, u := range []string{"https://tls.test/reset", "http://plain.test/reset"} {
		resp, err := f.httpClient.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil || n >= 1<<20 {
			t.Errorf("%s: an upstream reset mid-body reached the client as %d bytes and no error", u, n)
		}
	}
	f.works(t)
	check(f.close)
}

func TestFaultSlowUpstream(t *testing.T) {
	check := goroutineBaseline(t)
	f := newFaultEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			io.WriteString(w, "ok")
			return
		}
		for range 5 {
			io.WriteString(w, strings.Repeat("s", 1000))
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}, Config{Timeouts: Timeouts{Upstream: 300 * time.Millisecond}})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := []string{"https://tls.test/slow", "http://plain.test/slow"}[i%2]
			resp, err := f.httpClient.Get(u)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 5000 {
				errs <- fmt.Errorf("%s: %d bytes, %v", u, len(b), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a slow upstream, 16 clients at once: %v", err)
	}
	f.works(t)
	check(f.close)
}

func TestFaultClientLeavesMidDownload(t *testing.T) {
	check := goroutineBaseline(t)
	ended := make(chan string, 4)
	f := newFaultEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/endless" {
			io.WriteString(w, "ok")
			return
		}
		chunk := make([]byte, 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				ended <- r.Host
				return
			}
		}
	}, Config{})
	for _, u := range []string{"https://tls.test/endless", "http://plain.test/endless"} {
		tr := &http.Transport{Proxy: f.httpClient.Transport.(*http.Transport).Proxy, TLSClientConfig: f.httpClient.Transport.(*http.Transport).TLSClientConfig}
		resp, err := (&http.Client{Transport: tr}).Get(u)
		if err != nil {
			t.Fatal(err)
		}
		io.CopyN(io.Discard, resp.Body, 256<<10)
		resp.Body.Close() // the client goes away mid-stream
		tr.CloseIdleConnections()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the upstream still streams 5 s after the client left", u)
		}
	}
	f.works(t)
	check(f.close)
}

func TestFaultClientLeavesMidUpload(t *testing.T) {
	check := goroutineBaseline(t)
	ended := make(chan struct{}, 4)
	f := newFaultEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/upload" {
			io.WriteString(w, "ok")
			return
		}
		ended <- struct{}{} // the upstream has read what it got of the body
	}, Config{})
	for _, target := range []string{"tls.test", "plain.test"} {
		c, err := net.Dial("tcp", f.e.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		var w io.Writer = c
		if target == "tls.test" {
			io.WriteString(c, "CONNECT tls.test:443 HTTP/1.1\r\nHost: tls.test:443\r\n\r\n")
			br := bufio.NewReader(c)
			if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %v %v", resp, err)
			}
			tc := tls.Client(c, &tls.Config{ServerName: "tls.test", RootCAs: pool(f.e.ca)})
			w = tc
			fmt.Fprintf(w, "POST /upload HTTP/1.1\r\nHost: tls.test\r\nContent-Length: 10485760\r\n\r\n")
		} else {
			fmt.Fprintf(w, "POST http://plain.test/upload HTTP/1.1\r\nHost: plain.test\r\nContent-Length: 10485760\r\n\r\n")
		}
		w.Write(make([]byte, 256<<10))
		c.Close() // the client goes away mid-body
		select {
		case <-ended:
			u := map[string]*upstream{"tls.test": f.tlsUp, "plain.test": f.up}[target]
			u.mu.Lock()
			if n := len(u.body); n >= 10<<20 {
				t.Errorf("%s: the upstream read a whole body (%d bytes) the client never sent", target, n)
			}
			u.mu.Unlock()
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the upstream still waits for the body 5 s after the client left", target)
		}
	}
	f.works(t)
	check(f.close)
}

func TestFaultWildcardNameFlood(t *testing.T) {
	check := goroutineBaseline(t)
	const bound, names = 32, 1000
	e := newEnv(t, Config{
		Rules:  Rules{Allow: []string{"*.allowed.test"}},
		Limits: Limits{Leaves: bound},
		// TEST-NET-1: an address that is not refused and is never dialled,
		// since the flood only shakes hands with the proxy.
		Resolver: func(context.Context, string) ([]net.IP, error) { return []net.IP{net.ParseIP("192.0.2.1")}, nil },
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range names {
		name := fmt.Sprintf("n%d.allowed.test", i)
		_, _, c, _ := raw(t, e.httpAddr, "CONNECT "+name+":443 HTTP/1.1\r\nHost: "+name+":443\r\n\r\n")
		tc := tls.Client(c, &tls.Config{ServerName: name, RootCAs: pool(e.ca)})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake %d for %s: %v", i, name, err)
		}
		if got := tc.ConnectionState().PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != name {
			t.Fatalf("certificate for %v, want %s", got, name)
		}
		c.Close()
		if n := e.srv.leaves.len(); n > bound {
			t.Fatalf("after %d names the cache holds %d certificates, bound %d", i+1, n, bound)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d names, leaf cache %d, heap in use grew %d KiB", names, e.srv.leaves.len(), grew>>10)
	if grew > 8<<20 {
		t.Errorf("the heap grew %d KiB over %d names; the cache holds %d", grew>>10, names, e.srv.leaves.len())
	}
	check(func() { e.srv.Close() })
}

// quietLog keeps the upstream servers' complaints about the faults out of
// the test output.
var quietLog = log.New(io.Discard, "", 0)
