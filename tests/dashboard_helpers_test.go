package tests

import (
	"bufio"
	gocontext "context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is the headless browser the dashboard tests drive.
const chromium = "/usr/bin/chromium"

// dashboard is a running `jail dashboard`.
type dashboard struct {
	URL  string // as printed, with the token
	Base string // http://127.0.0.1:PORT
	Host string // 127.0.0.1:PORT
}

// startDashboard runs `jail dashboard` as the sandbox's runner (so that it
// sees that user's control sockets) and reads the one URL it prints.
func startDashboard(t testing.TB, s *Sandbox) *dashboard {
	t.Helper()
	cmd := exec.Command(jailBin, "dashboard", "--port", "0")
	cmd.Dir = s.Project
	s.as(cmd)
	return runDashboard(t, cmd)
}

// runDashboard starts cmd and reads its URL; the test's end stops it.
func runDashboard(t testing.TB, cmd *exec.Cmd) *dashboard {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(l)
		io.Copy(io.Discard, out)
	}()
	var u string
	select {
	case u = <-line:
	case <-time.After(15 * time.Second):
		t.Fatalf("jail dashboard printed no URL in 15s; stderr:\n%s", stderr.String())
	}
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" || !strings.HasPrefix(p.Host, "127.0.0.1:") || p.Query().Get("token") == "" {
		t.Fatalf("jail dashboard printed %q, want http://127.0.0.1:PORT/?token=TOKEN; stderr:\n%s", u, stderr.String())
	}
	return &dashboard{URL: u, Base: "http://" + p.Host, Host: p.Host}
}

// client returns an HTTP client that holds the dashboard's cookie.
func (d *dashboard) client(t testing.TB) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := c.Get(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(jar.Cookies(resp.Request.URL)) == 0 {
		t.Fatalf("the printed URL: %d, cookies %v", resp.StatusCode, jar.Cookies(resp.Request.URL))
	}
	return c
}

// csrf reads the page's CSRF value.
func (d *dashboard) csrf(t testing.TB, c *http.Client) string {
	t.Helper()
	resp, err := c.Get(d.Base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_, rest, ok := strings.Cut(string(b), `name="jail-csrf" content="`)
	v, _, _ := strings.Cut(rest, `"`)
	if !ok || v == "" {
		t.Fatalf("no CSRF value in the page:\n%s", b)
	}
	return v
}

// browser starts a headless Chromium; the test's end closes it.
func browser(t testing.TB) gocontext.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing; tests/deps.sh --test installs it: %v", chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("no-proxy-server", true),
		chromedp.WindowSize(1280, 900),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run its sandbox as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelA := chromedp.NewExecAllocator(gocontext.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// within runs chromedp steps in order, with a deadline.
func within(ctx gocontext.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	c, cancel := gocontext.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Do(c, steps...)
}

// value runs one chromedp action that returns a value, with a deadline.
func value[T any](ctx gocontext.Context, d time.Duration, a chromedp.Action[T]) (T, error) {
	c, cancel := gocontext.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Run(c, a)
}

// artifacts is where tests leave screenshots.
func artifacts(t testing.TB) string {
	dir := os.Getenv("JAIL_TEST_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	dir, _ = filepath.Abs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
