package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// captureEnv serves ServeCapture on a unix socket, as for a jail's bridge.
func captureEnv(t *testing.T, cfg Config) (*env, string) {
	t.Helper()
	e := newEnv(t, cfg)
	sock := filepath.Join(t.TempDir(), "capture.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.ServeCapture(l)
	t.Cleanup(func() { l.Close() })
	return e, sock
}

// captured is a client whose every connection goes through the capture
// socket as if redirected from dst.
func captured(sock, dst string, e *env) *http.Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			_, err = io.WriteString(c, dst+"\n")
		}
		return c, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: nil, DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool(e.ca)},
	}}
}

func TestCaptureDecidesByTheClientsName(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	plain := newUpstream(t, nil, nil)
	cport, hits := canary(t)
	e, sock := captureEnv(t, Config{
		Rules: Rules{Allow: []string{"allowed.test", "plain.test"}, Deny: []string{"evil.test"},
			Hosts: map[string]string{"allowed.test": up.addr(), "plain.test": plain.addr(), "evil.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	// TLS: the ClientHello's server name decides, whatever address was dialled.
	resp, body := get(t, captured(sock, "192.0.2.1:443", e), "https://allowed.test/tls")
	if resp.StatusCode != 200 || body != "hello from allowed.test /tls" {
		t.Fatalf("TLS: got %d %q", resp.StatusCode, body)
	}
	if en := e.entry(t, func(x Entry) bool { return x.Path == "/tls" }); en.Method != "GET" || en.Verdict != verdictAllow {
		t.Errorf("TLS: logged %+v", en)
	}
	// Plain HTTP: the Host header decides.
	resp, body = get(t, captured(sock, "192.0.2.2:80", e), "http://plain.test/plain")
	if resp.StatusCode != 200 || body != "hello from plain.test /plain" {
		t.Fatalf("plain: got %d %q", resp.StatusCode, body)
	}
	// Denied names, and IP literals no rule names, are refused and logged.
	for _, c := range []struct{ dst, url, host, reason string }{
		{"192.0.2.3:443", "https://evil.test/x", "evil.test", ""},
		{"192.0.2.4:443", "https://unknown.test/x", "unknown.test", "not in network.allow"},
		{"127.0.0.1:" + itoa(cport), "http://127.0.0.1:" + itoa(cport) + "/x", "127.0.0.1", "ip literal"},
		{"192.0.2.5:443", "https://192.0.2.5/x", "192.0.2.5", "ip literal"},
	} {
		if _, err := captured(sock, c.dst, e).Get(c.url); err == nil {
			t.Errorf("%s: a captured connection was served", c.url)
		}
		en := e.entry(t, func(x Entry) bool { return x.Host == c.host && x.Method == "CAPTURE" })
		if en.Verdict != verdictDeny || !strings.Contains(en.Reason, c.reason) {
			t.Errorf("%s: logged %+v", c.url, en)
		}
	}
	// A client that sends nothing is decided by the IP literal.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "127.0.0.1:"+itoa(cport)+"\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a silent captured client got an answer")
	}
	c.Close()
	if hits.Load() != 0 {
		t.Errorf("the canary on the loopback was reached %d times", hits.Load())
	}
}

func TestCaptureHeaderMalformed(t *testing.T) {
	t.Parallel()
	e, sock := captureEnv(t, Config{Rules: Rules{Unknown: "allow"}})
	for _, h := range []string{"no-port\n", "192.0.2.1:0\n", "[fe80::1%lo]:443\n", strings.Repeat("1", 100) + "\n", "allowed.test:443\n"} {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, h+"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, _ := c.Read(make([]byte, 1)); n != 0 {
			t.Errorf("header %q: the connection was served", h)
		}
		c.Close()
	}
	e.entry(t, func(x Entry) bool { return x.Method == "CAPTURE" && x.Reason == "invalid host" })
}

func itoa(n int) string { return strconv.Itoa(n) }
