package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail/control"
)

// fixture is a dashboard served on a real loopback listener.
type fixture struct {
	s    *Server
	base string // http://127.0.0.1:PORT
	dir  string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureIn(t, filepath.Join(t.TempDir(), "ctl"))
}

// newFixtureIn serves a dashboard over the control sockets in dir.
func newFixtureIn(t *testing.T, dir string) *fixture {
	t.Helper()
	ln, port, err := Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &fixture{s: s, base: "http://127.0.0.1:" + strconv.Itoa(port), dir: dir}
}

// noRedirect is a client that shows redirects instead of following them.
func noRedirect(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login trades the token for the cookie and returns a client holding it.
func (f *fixture) login(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	resp, err := c.Get(f.s.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `content="0;url=/"`) {
		t.Fatalf("token exchange: %d %q, want a page that moves on to /", resp.StatusCode, b)
	}
	return c
}

func get(t *testing.T, c *http.Client, u string, host string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestTokenCookie(t *testing.T) {
	f := newFixture(t)
	plain := noRedirect(nil)
	for _, u := range []string{"/", "/assets/app.js", "/events", "/?token=", "/?token=wrong"} {
		resp, _ := get(t, plain, f.base+u, "")
		if resp.StatusCode != 401 && resp.StatusCode != 403 {
			t.Errorf("GET %s without the cookie: %d, want 401 or 403", u, resp.StatusCode)
		}
	}
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	resp, _ := get(t, c, f.s.URL(), "")
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/" {
		t.Fatalf("cookie %+v: want one HttpOnly SameSite=Strict Path=/ cookie", ck)
	}
	if ck[0].Value == f.s.token || strings.Contains(ck[0].Value, f.s.token) {
		t.Fatal("the cookie holds the URL's token: a leaked URL would be a leaked session")
	}
	resp, body := get(t, c, f.base+"/", "")
	if resp.StatusCode != 200 || !strings.Contains(body, f.s.csrf) {
		t.Fatalf("GET / with the cookie: %d, CSRF value in page %v", resp.StatusCode, strings.Contains(body, f.s.csrf))
	}
	// a forged cookie of the right shape is refused
	forged := noRedirect(nil)
	req, _ := http.NewRequest("GET", f.base+"/", nil)
	req.AddCookie(&http.Cookie{Name: CookieName, Value: f.s.token})
	if resp, err := forged.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("the token used as the cookie: %v %v, want 401", resp, err)
	}
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t)
	c := f.login(t)
	resp, body := get(t, c, f.base+"/", "")
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("X-Frame-Options %q", resp.Header.Get("X-Frame-Options"))
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("a CORS header is set")
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "onclick=") || strings.Contains(body, "onload=") {
		t.Error("the page has inline script, which the CSP would block")
	}
	js, _ := os.ReadFile("assets/app.js")
	if strings.Contains(string(js), "innerHTML") || strings.Contains(string(js), "insertAdjacentHTML") {
		t.Error("app.js parses text as HTML")
	}
}

func TestHostRebinding(t *testing.T) {
	f := newFixture(t)
	c := f.login(t)
	port := f.base[strings.LastIndexByte(f.base, ':')+1:]
	for _, h := range []string{"attacker.example.test:" + port, "127.0.0.1", "localhost", "127.0.0.1:1", "127.0.0.1." + ":" + port, "[::1]:" + port} {
		resp, _ := get(t, c, f.base+"/", h)
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host %q: %d, want 421", h, resp.StatusCode)
		}
	}
	// the token exchange too: a rebound page must not get the cookie
	resp, _ := get(t, noRedirect(nil), f.s.URL(), "attacker.example.test:"+port)
	if resp.StatusCode != http.StatusMisdirectedRequest || len(resp.Cookies()) > 0 {
		t.Errorf("token exchange on a foreign Host: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	for _, h := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		req, _ := http.NewRequest("GET", f.base+"/", nil)
		req.Host = h
		req.AddCookie(&http.Cookie{Name: CookieName, Value: f.s.cookie})
		resp, err := noRedirect(nil).Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("Host %q: %v %v, want 200", h, resp, err)
		}
	}
}

func post(t *testing.T, c *http.Client, u string, hdr map[string]string, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestPostGuards(t *testing.T) {
	f := newFixture(t)
	c := f.login(t)
	good := func() map[string]string {
		return map[string]string{CSRFHeader: f.s.csrf, "Content-Type": "application/json", "Origin": f.base}
	}
	body := `{"session":"nosuch","allow":true,"host":"a.example.test","scope":"session"}`
	cases := map[string]func(map[string]string){
		"no CSRF":        func(h map[string]string) { delete(h, CSRFHeader) },
		"wrong CSRF":     func(h map[string]string) { h[CSRFHeader] = f.s.token },
		"foreign Origin": func(h map[string]string) { h["Origin"] = "http://attacker.example.test" },
		"null Origin":    func(h map[string]string) { h["Origin"] = "null" },
		"other port":     func(h map[string]string) { h["Origin"] = "http://127.0.0.1:1" },
		"form body":      func(h map[string]string) { h["Content-Type"] = "application/x-www-form-urlencoded" },
		"text body":      func(h map[string]string) { h["Content-Type"] = "text/plain" },
	}
	for name, mod := range cases {
		h := good()
		mod(h)
		for _, path := range []string{"/api/rule", "/api/answer"} {
			if code := post(t, c, f.base+path, h, body); code != 403 {
				t.Errorf("%s %s: %d, want 403", name, path, code)
			}
		}
	}
	// without the cookie, even with the CSRF value
	if code := post(t, noRedirect(nil), f.base+"/api/rule", good(), body); code != 401 {
		t.Errorf("no cookie: %d, want 401", code)
	}
	// every guard passed: the body is checked, and no session is 404
	if code := post(t, c, f.base+"/api/rule", good(), body); code != 404 {
		t.Errorf("all guards passed, no session: %d, want 404", code)
	}
	for _, bad := range []string{`{"session":"x","allow":true,"host":"a b","scope":"session"}`,
		`{"session":"x","allow":true,"host":"a.example.test","scope":"once"}`,
		`{"session":"x","allow":true,"host":"a.example.test","scope":"session","extra":1}`} {
		if code := post(t, c, f.base+"/api/rule", good(), bad); code != 400 {
			t.Errorf("bad rule %s: %d, want 400", bad, code)
		}
	}
	// no state change on GET
	if resp, _ := get(t, c, f.base+"/api/rule?session=x&allow=true&host=a&scope=session", ""); resp.StatusCode != 405 && resp.StatusCode != 404 {
		t.Errorf("GET /api/rule: %d, want 405", resp.StatusCode)
	}
}

// readEvents reads server-sent events from /events into a channel.
func readEvents(t *testing.T, c *http.Client, base string) <-chan control.Event {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/events", nil)
	cc := *c
	cc.Timeout = 0
	resp, err := cc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("/events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan control.Event, 64)
	go func() {
		buf := make([]byte, 64<<10)
		var rest string
		for {
			n, err := resp.Body.Read(buf)
			rest += string(buf[:n])
			for {
				i := strings.Index(rest, "\n\n")
				if i < 0 {
					break
				}
				chunk := rest[:i]
				rest = rest[i+2:]
				if d, ok := strings.CutPrefix(chunk, "data: "); ok {
					var e control.Event
					if json.Unmarshal([]byte(d), &e) == nil {
						ch <- e
					}
				}
			}
			if err != nil {
				close(ch)
				return
			}
		}
	}()
	return ch
}

func TestEventsStream(t *testing.T) {
	f := newFixture(t)
	c := f.login(t)
	ch := readEvents(t, c, f.base)
	time.Sleep(100 * time.Millisecond)
	f.s.publish(control.Event{Type: control.EventActivity, Session: "s1", Activity: &control.Activity{Kind: "exec", Path: "<img src=x onerror=alert(1)>"}})
	select {
	case e := <-ch:
		if e.Type != control.EventActivity || e.Activity.Path != "<img src=x onerror=alert(1)>" {
			t.Fatalf("event %+v", e)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no event on /events")
	}
}

// TestHub runs the dashboard against a real Hub on a control socket: the
// session shows up, a held request is streamed, an answer posted to the
// dashboard reaches the Hub, and so does a rule for every session.
func TestHub(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctl") // made private by the Hub
	live := make(chan string, 4)
	hub := control.NewHub(control.HubConfig{Info: control.Info{ID: "abcdef123456", Command: []string{"sh"}}, Timeout: 10 * time.Second,
		Rules: control.Rules{Live: func(allow bool, host string) error { live <- fmt.Sprint(allow, " ", host); return nil }}})
	if err := hub.Listen(dir); err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	f := newFixtureIn(t, dir)
	c := f.login(t)
	ch := readEvents(t, c, f.base)
	got := make(chan control.Answer, 1)
	go func() {
		got <- hub.Ask(context.Background(), control.Request{Session: "abcdef123456", Kind: control.KindNetwork, Host: "held.example.test", Port: 443, Rule: "unknown=ask"})
	}()
	var id string
	deadline := time.After(10 * time.Second)
	for id == "" {
		select {
		case e := <-ch:
			if e.Type == control.EventHeld && e.Request != nil && e.Request.Host == "held.example.test" {
				id = e.Request.ID
			}
		case <-deadline:
			t.Fatal("the held request never reached /events")
		}
	}
	b, _ := json.Marshal(answerBody{Session: "abcdef123456", ID: id, Allow: true, Scope: control.ScopeOnce})
	h := map[string]string{CSRFHeader: f.s.csrf, "Content-Type": "application/json"}
	if code := post(t, c, f.base+"/api/answer", h, string(b)); code != 200 {
		t.Fatalf("POST /api/answer: %d", code)
	}
	select {
	case a := <-got:
		if !a.Allow || a.By != "dashboard" {
			t.Fatalf("answer %+v, want allow by dashboard", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Hub never got the answer")
	}
	rb, _ := json.Marshal(ruleBody{Allow: true, Host: "later.example.test", Scope: control.ScopeSession})
	if code := post(t, c, f.base+"/api/rule", h, string(rb)); code != 200 {
		t.Fatalf("POST /api/rule: %d", code)
	}
	if got := <-live; got != "true later.example.test" {
		t.Fatalf("the Hub's live rule: %q", got)
	}
	// the same rule without the CSRF value never reaches the Hub
	delete(h, CSRFHeader)
	if code := post(t, c, f.base+"/api/rule", h, string(rb)); code != 403 {
		t.Fatalf("POST /api/rule without CSRF: %d, want 403", code)
	}
	select {
	case got := <-live:
		t.Fatalf("a rule without the CSRF value reached the Hub: %q", got)
	case <-time.After(200 * time.Millisecond):
	}
}
