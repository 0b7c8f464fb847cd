package tests

import (
	gocontext "context"

	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// hostile is a command text that would run script if the page rendered it
// as HTML: it rides in the session's argv.
const hostile = `<img src=x onerror="document.title='pwned'">`

// TestDashboard drives `jail dashboard` in a real headless Chromium: the
// page opens only with the printed token, refuses other Hosts and forged
// POSTs, shows a jailed request live, lets a denial be allowed for the
// running session with one click, and answers a held request.
func TestDashboard(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		u := newUpstream(t, false, "")
		dashConfig(t, s, u)
		d := startDashboard(t, s)
		t.Run("http guards", func(t *testing.T) { dashGuards(t, d) })
		ctx := browser(t)
		t.Run("token", func(t *testing.T) { dashToken(t, ctx, d) })
		t.Run("live", func(t *testing.T) { dashLive(t, ctx, s, d, u) })
		t.Run("ask", func(t *testing.T) { dashAsk(t, ctx, s, u) })
	})
}

// screenshot saves the page as dashboard.png among the test artifacts.
func screenshot(t *testing.T, ctx gocontext.Context) {
	t.Helper()
	png, err := value(ctx, 10*time.Second, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(artifacts(t), "dashboard.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dashConfig maps the test names to u, denies unknown hosts and asks for
// held.dash.test.
func dashConfig(t *testing.T, s *Sandbox, u *upstream) {
	t.Helper()
	writeJailJSON(t, s, map[string]any{"network": map[string]any{
		"unknown": "deny",
		"hosts":   map[string]string{"denied.dash.test": u.Addr(), "held.dash.test": u.Addr()},
		"ask":     []string{"held.dash.test"},
	}})
}

// dashGuards attacks the HTTP layer of the real binary with a Go client.
func dashGuards(t *testing.T, d *dashboard) {
	plain := &http.Client{Timeout: 10 * time.Second}
	for path, want := range map[string]int{"/": 401, "/events": 401, "/assets/app.js": 401, "/?token=wrong": 403} {
		resp, err := plain.Get(d.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without the cookie: %d, want %d", path, resp.StatusCode, want)
		}
	}
	c := d.client(t)
	for _, host := range []string{"rebound.example.test:" + strings.Split(d.Host, ":")[1], "127.0.0.1", "localhost:1"} {
		req, _ := http.NewRequest("GET", d.Base+"/", nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 421 && resp.StatusCode != 403 {
			t.Errorf("Host %q with the cookie: %d, want 421 or 403", host, resp.StatusCode)
		}
	}
	csrf := d.csrf(t, c)
	body := `{"session":"","allow":true,"host":"denied.dash.test","scope":"session"}`
	for name, h := range map[string]map[string]string{
		"no CSRF":        {"Content-Type": "application/json"},
		"foreign Origin": {"Content-Type": "application/json", "X-Jail-CSRF": csrf, "Origin": "http://rebound.example.test"},
		"form":           {"Content-Type": "application/x-www-form-urlencoded", "X-Jail-CSRF": csrf},
	} {
		req, _ := http.NewRequest("POST", d.Base+"/api/rule", strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("POST /api/rule, %s: %d, want 403", name, resp.StatusCode)
		}
	}
}

// dashToken: the page is refused without the token and opens with it, the
// token then gone from the address bar.
func dashToken(t *testing.T, ctx gocontext.Context, d *dashboard) {
	if err := within(ctx, 20*time.Second, chromedp.Navigate(d.Base+"/")); err != nil {
		t.Fatal(err)
	}
	text, err := value(ctx, 10*time.Second, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "open the URL") {
		t.Fatalf("the page without the token shows %q", text)
	}
	if err := within(ctx, 20*time.Second, chromedp.Navigate(d.URL), chromedp.WaitVisible(chromedp.CSS("#conn.live"))); err != nil {
		t.Fatalf("the page with the token never went live: %v", err)
	}
	href, err := value(ctx, 10*time.Second, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if href != d.Base+"/" {
		t.Errorf("after the token exchange the address is %q, want %q", href, d.Base+"/")
	}
}

// dashLive: a denial made in a running jail shows up; its "allow this"
// lets the same jail's next request through.
func dashLive(t *testing.T, ctx gocontext.Context, s *Sandbox, d *dashboard, u *upstream) {
	os.Remove(s.Project + "/go1")
	os.Remove(s.Project + "/go2")
	script := `# ` + hostile + `
i=0; until [ -e go1 ] || [ $i -gt 600 ]; do sleep 0.1; i=$((i+1)); done
curl -s -o /dev/null -w 'one=%{http_code}\n' --max-time 10 http://denied.dash.test/one
i=0; until [ -e go2 ] || [ $i -gt 600 ]; do sleep 0.1; i=$((i+1)); done
curl -s -o /dev/null -w 'two=%{http_code}\n' --max-time 10 http://denied.dash.test/two`
	cmd := s.JailCmd("--", "sh", "-c", script)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { s.WriteFile(s.Project+"/go1", "", 0o644); s.WriteFile(s.Project+"/go2", "", 0o644); cmd.Wait() }()
	// The page streams the decisions made once it watches the session
	// (within a second of its start): the jail waits for that.
	seen := `Array.from(document.querySelectorAll("#sessions tr.session")).some(tr => tr.textContent.includes("until [ -e go1 ]"))`
	if err := within(ctx, 30*time.Second, chromedp.Poll[chromedp.Void](seen, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the running session never appeared in the page: %v\njail:\n%s", err, out.String())
	}
	s.WriteFile(s.Project+"/go1", "", 0o644)
	row := `#decisions tr.decision[data-host="denied.dash.test"][data-verdict="deny"]`
	if err := within(ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("the denial never appeared in the page: %v\njail:\n%s", err, out.String())
	}
	if u.Saw("/one") {
		t.Fatal("the denied request reached the upstream")
	}
	title, err := value(ctx, 10*time.Second, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := value(ctx, 10*time.Second, chromedp.TextContent(chromedp.CSS("#sessions")))
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := value(ctx, 10*time.Second, chromedp.Evaluate[int](`document.querySelectorAll("#sessions img").length`))
	if err != nil {
		t.Fatal(err)
	}
	if title == "pwned" || imgs != 0 || !strings.Contains(sessions, "<img src=x") {
		t.Errorf("the session's argv was rendered as HTML: title %q, %d img, text %q", title, imgs, sessions)
	}
	if err := within(ctx, 15*time.Second, chromedp.Click(chromedp.CSS(row+` button.allow-this[data-scope="session"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#sessions").textContent.includes("allow denied.dash.test")`,
			chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("allow this: the rule never showed on the session: %v", err)
	}
	screenshot(t, ctx) // the running session, its denial and the rule added
	s.WriteFile(s.Project+"/go2", "", 0o644)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the jail failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "one=403") && !strings.Contains(out.String(), "one=000") {
		t.Errorf("the first request was not refused:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "two=200") || !u.Saw("/two") {
		t.Errorf("after allow this, the jail's next request did not pass:\n%s", out.String())
	}
}

// dashAsk: a held request waits until Allow once is clicked, then passes.
func dashAsk(t *testing.T, ctx gocontext.Context, s *Sandbox, u *upstream) {
	cmd := s.JailCmd("--", "curl", "-s", "-o", "/dev/null", "-w", "held=%{http_code}\n", "--max-time", "30", "http://held.dash.test/held")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	row := `#pending tr.pending[data-host="held.dash.test"]`
	if err := within(ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("the held request never appeared in the page: %v\n%s", err, out.String())
	}
	if u.Saw("/held") {
		t.Fatal("the held request reached the upstream before an answer")
	}
	if err := within(ctx, 10*time.Second, chromedp.Click(chromedp.CSS(row+` button.allow[data-scope="once"]`))); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "held=200") || !u.Saw("/held") {
		t.Fatalf("the request allowed from the page did not complete: %v\n%s", err, out.String())
	}
	if err := within(ctx, 10*time.Second, chromedp.WaitNotPresent(chromedp.CSS(row))); err != nil {
		t.Errorf("the answered request stayed in the pending table: %v", err)
	}
}
