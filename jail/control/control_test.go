package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jailsh/jail/proxy"
)

// childEnv makes the test binary a raw client of the socket it names
// (see TestMain): it writes a status call and prints what came back.
const childEnv = "JAIL_CONTROL_TEST_DIAL"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(rawClient(path))
	}
	os.Exit(m.Run())
}

// rawClient connects to path without checking the server, sends a
// status call and prints "reply" with what it read, or "refused".
func rawClient(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial failed:", err)
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintln(c, `{"op":"status"}`)
	line, _ := bufio.NewReader(c).ReadString('\n')
	if line != "" {
		fmt.Println("reply", strings.TrimSpace(line))
		return 0
	}
	fmt.Println("refused")
	return 0
}

func newTestHub(t *testing.T, cfg HubConfig) (*Hub, *Client) {
	t.Helper()
	if cfg.Info.ID == "" {
		cfg.Info.ID = "abcdef0123456789"
	}
	if cfg.Info.Started.IsZero() {
		cfg.Info.Started = time.Now()
	}
	h := NewHub(cfg)
	dir := filepath.Join(t.TempDir(), "ctl")
	if err := h.Listen(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c, err := Dial(filepath.Join(dir, cfg.Info.ID+".sock"))
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitPending polls until the session holds n requests.
func waitPending(t *testing.T, c *Client, n int) []Request {
	t.Helper()
	for i := 0; i < 200; i++ {
		p, err := c.Pending(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == n {
			return p
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never %d pending", n)
	return nil
}

func TestListenModes(t *testing.T) {
	h, c := newTestHub(t, HubConfig{})
	fi, err := os.Lstat(c.Path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v: want a socket of mode 0600", fi.Mode(), err)
	}
	di, _ := os.Lstat(filepath.Dir(c.Path))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, want 0700", di.Mode())
	}
	h.Close()
	if _, err := os.Lstat(c.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
}

func TestListenRefusesUnsafeDir(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o755)
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o700)
	os.Chmod(shared, 0o777)
	for _, dir := range []string{open, link, filepath.Join(shared, "ctl")} {
		h := NewHub(HubConfig{Info: Info{ID: "s1"}})
		if err := h.Listen(dir); err == nil || !strings.Contains(err.Error(), "not a private directory") {
			t.Errorf("Listen(%s) = %v, want a refusal", dir, err)
		}
		h.Close()
	}
	if ents, _ := os.ReadDir(real); len(ents) != 0 {
		t.Errorf("a socket was made through the symlink: %v", ents)
	}
}

func TestStatusAndCounts(t *testing.T) {
	h, c := newTestHub(t, HubConfig{Info: Info{Command: []string{"sleep", "1"}, Project: "/p"}})
	h.Record(proxy.Entry{Verdict: "allow"})
	h.Record(proxy.Entry{Verdict: "allow"})
	h.Record(proxy.Entry{Verdict: "deny"})
	h.Record(proxy.Entry{Verdict: "held"})
	st, err := c.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts.Allowed != 2 || st.Counts.Denied != 1 || st.Project != "/p" || st.Command[0] != "sleep" {
		t.Fatalf("status %+v", st)
	}
}

func TestAskApproveOnce(t *testing.T) {
	h, c := newTestHub(t, HubConfig{})
	got := make(chan Answer, 1)
	go func() {
		got <- h.Ask(context.Background(), Request{Kind: KindNetwork, Host: "a.example.test", Port: 443, Scheme: "https", Rule: "unknown=ask"})
	}()
	p := waitPending(t, c, 1)
	if p[0].ID != "abcdef-1" || p[0].Waiting != 1 || p[0].Session != "abcdef0123456789" || !p[0].Deadline.After(p[0].Held) {
		t.Fatalf("pending %+v", p[0])
	}
	if err := c.Answer(ctx(t), "nope-1", Answer{Allow: true}); err == nil {
		t.Fatal("an unknown id was answered")
	}
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: true, Scope: ScopeOnce, By: "jail approve"}); err != nil {
		t.Fatal(err)
	}
	if a := <-got; !a.Allow || a.By != "jail approve" || a.Scope != ScopeOnce {
		t.Fatalf("answer %+v", a)
	}
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: true}); err == nil {
		t.Fatal("an answered request was answered again")
	}
	waitPending(t, c, 0)
}

func TestAskTimeout(t *testing.T) {
	h, _ := newTestHub(t, HubConfig{Timeout: 100 * time.Millisecond})
	start := time.Now()
	a := h.Ask(context.Background(), Request{Kind: KindCommand, Argv: []string{"git", "push"}, Cwd: "/p"})
	if a.Allow || a.By != "timeout" {
		t.Fatalf("answer %+v, want a timeout denial", a)
	}
	if d := time.Since(start); d < 90*time.Millisecond || d > 2*time.Second {
		t.Fatalf("held %v, want about the timeout", d)
	}
}

func TestAskContextEnds(t *testing.T) {
	h, c := newTestHub(t, HubConfig{})
	cx, cancel := context.WithCancel(context.Background())
	got := make(chan Answer, 1)
	go func() { got <- h.Ask(cx, Request{Kind: KindNetwork, Host: "b.example.test", Port: 443}) }()
	waitPending(t, c, 1)
	cancel()
	if a := <-got; a.Allow || a.By != "ended" {
		t.Fatalf("answer %+v", a)
	}
	waitPending(t, c, 0) // its only waiter left: nothing is held
}

func TestAskCoalesces(t *testing.T) {
	h, c := newTestHub(t, HubConfig{})
	var wg sync.WaitGroup
	answers := make(chan Answer, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- h.Ask(context.Background(), Request{Kind: KindNetwork, Host: "c.example.test", Port: 443, Scheme: "https"})
		}()
	}
	var p []Request
	for i := 0; i < 200; i++ {
		p = waitPending(t, c, 1)
		if p[0].Waiting == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p[0].Waiting != 3 {
		t.Fatalf("waiting %d, want 3 on one request", p[0].Waiting)
	}
	// Another port is another question.
	go h.Ask(context.Background(), Request{Kind: KindNetwork, Host: "c.example.test", Port: 8443})
	waitPending(t, c, 2)
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: false, By: "jail reject"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.Allow || a.By != "jail reject" {
			t.Fatalf("answer %+v", a)
		}
	}
}

func TestAskCap(t *testing.T) {
	h, c := newTestHub(t, HubConfig{MaxPending: 2})
	for _, host := range []string{"d1.example.test", "d2.example.test"} {
		go h.Ask(context.Background(), Request{Kind: KindNetwork, Host: host, Port: 443})
	}
	waitPending(t, c, 2)
	start := time.Now()
	a := h.Ask(context.Background(), Request{Kind: KindNetwork, Host: "d3.example.test", Port: 443})
	if a.Allow || a.By != "limit" || time.Since(start) > time.Second {
		t.Fatalf("answer %+v after %v, want a denial at once", a, time.Since(start))
	}
	// The same question as a held one still waits on it.
	go h.Ask(context.Background(), Request{Kind: KindNetwork, Host: "d1.example.test", Port: 443})
	for i := 0; i < 200; i++ {
		if p := waitPending(t, c, 2); p[0].Waiting+p[1].Waiting == 3 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("a request like a held one was not coalesced at the cap")
}

func TestAnswerScopes(t *testing.T) {
	var mu sync.Mutex
	var live, persisted []string
	persistErr := error(nil)
	released := make(chan struct{}, 8)
	rules := Rules{
		Live: func(allow bool, host string) error {
			mu.Lock()
			defer mu.Unlock()
			select {
			case <-released:
				t.Error("a waiter went on before the live rule")
			default:
			}
			live = append(live, fmt.Sprint(allow, " ", host))
			return nil
		},
		Persist: func(scope string, allow bool, host string) error {
			mu.Lock()
			defer mu.Unlock()
			if persistErr != nil {
				return persistErr
			}
			persisted = append(persisted, fmt.Sprint(scope, " ", allow, " ", host))
			return nil
		},
	}
	h, c := newTestHub(t, HubConfig{Rules: rules})
	ask := func(r Request) chan Answer {
		ch := make(chan Answer, 1)
		go func() { a := h.Ask(context.Background(), r); released <- struct{}{}; ch <- a }()
		return ch
	}
	// A session answer: the live rule only.
	ch := ask(Request{Kind: KindNetwork, Host: "e.example.test", Port: 443, Scheme: "https"})
	p := waitPending(t, c, 1)
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: true, Scope: ScopeSession}); err != nil {
		t.Fatal(err)
	}
	<-ch
	<-released
	// A project answer for a raw stream: written with its port.
	ch = ask(Request{Kind: KindNetwork, Host: "f.example.test", Port: 5432, Scheme: "tcp"})
	p = waitPending(t, c, 1)
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: true, Scope: ScopeProject}); err != nil {
		t.Fatal(err)
	}
	<-ch
	<-released
	// A write that fails is the client's error, and the request stays
	// held.
	mu.Lock()
	persistErr = errors.New("jail.json has changes you have not trusted")
	mu.Unlock()
	ch = ask(Request{Kind: KindNetwork, Host: "g.example.test", Port: 443, Scheme: "https"})
	p = waitPending(t, c, 1)
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: true, Scope: ScopeUser}); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("answer error %v, want the write's", err)
	}
	waitPending(t, c, 1)
	// A command for the project is refused; for the session it is
	// remembered.
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: false, Scope: ScopeOnce}); err != nil {
		t.Fatal(err)
	}
	<-ch
	<-released
	cmd := Request{Kind: KindCommand, Argv: []string{"git", "push"}, Cwd: "/p"}
	ch = ask(cmd)
	p = waitPending(t, c, 1)
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: true, Scope: ScopeProject}); err == nil {
		t.Fatal("a command answer was written for the project")
	}
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: true, Scope: ScopeSession, By: "jail approve"}); err != nil {
		t.Fatal(err)
	}
	<-ch
	<-released
	if a := h.Ask(context.Background(), cmd); !a.Allow || a.Scope != ScopeSession {
		t.Fatalf("the session's answer was not remembered: %+v", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(live, ",") != "true e.example.test,true f.example.test:5432" {
		t.Errorf("live rules %q", live)
	}
	if strings.Join(persisted, ",") != "project true f.example.test:5432" {
		t.Errorf("persisted %q", persisted)
	}
	if st := h.Status(); strings.Join(st.Added, ",") != "allow e.example.test,allow f.example.test:5432" {
		t.Errorf("added %q", st.Added)
	}
}

func TestRuleCall(t *testing.T) {
	var live []string
	h, c := newTestHub(t, HubConfig{Rules: Rules{Live: func(allow bool, host string) error {
		live = append(live, fmt.Sprint(allow, " ", host))
		return nil
	}}})
	if err := c.Rule(ctx(t), false, "h.example.test", ScopeSession); err != nil {
		t.Fatal(err)
	}
	if err := c.Rule(ctx(t), true, "h.example.test", ScopeUser); err == nil {
		t.Fatal("a user rule was taken without a way to write it")
	}
	if err := c.Rule(ctx(t), true, "bad host/x", ScopeSession); err == nil {
		t.Fatal("an invalid host was taken")
	}
	if len(live) != 1 || live[0] != "false h.example.test" {
		t.Fatalf("live %q", live)
	}
	if st := h.Status(); len(st.Added) != 1 || st.Added[0] != "deny h.example.test" {
		t.Fatalf("added %q", st.Added)
	}
}

func TestWatch(t *testing.T) {
	h, c := newTestHub(t, HubConfig{})
	events := make(chan Event, 64)
	done := make(chan error, 1)
	go func() { done <- c.Watch(context.Background(), func(e Event) { events <- e }) }()
	if e := <-events; e.Type != EventHello || e.Status == nil || e.Session != "abcdef0123456789" {
		t.Fatalf("first event %+v", e)
	}
	h.Record(proxy.Entry{Host: "i.example.test", Verdict: "deny"})
	h.Activity(Activity{Kind: "open", Path: "/etc/passwd"})
	go h.Ask(context.Background(), Request{Kind: KindNetwork, Host: "j.example.test", Port: 443})
	want := []string{EventDecision, EventActivity, EventHeld}
	for _, w := range want {
		if e := <-events; e.Type != w {
			t.Fatalf("event %+v, want %s", e, w)
		}
	}
	h.Close()
	var types []string
	for e := range eventsUntilEnd(events) {
		types = append(types, e.Type)
	}
	if strings.Join(types, ",") != "answered,ended" {
		t.Fatalf("events at the end %q", types)
	}
	if err := <-done; err != nil {
		t.Fatalf("Watch = %v, want nil at the session's end", err)
	}
}

func eventsUntilEnd(ch chan Event) chan Event {
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		for {
			select {
			case e := <-ch:
				out <- e
				if e.Type == EventEnded {
					return
				}
			case <-time.After(5 * time.Second):
				return
			}
		}
	}()
	return out
}

// Record is on every proxied request's path: nothing allocated while no
// one watches, and a watcher that never reads costs the caller nothing.
func TestRecordCost(t *testing.T) {
	h, c := newTestHub(t, HubConfig{})
	e := proxy.Entry{Host: "k.example.test", Verdict: "allow"}
	if n := testing.AllocsPerRun(1000, func() { h.Record(e) }); n != 0 {
		t.Fatalf("Record allocates %v times with no watcher", n)
	}
	conn, err := c.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintln(conn, `{"op":"watch"}`) // and never read
	for i := 0; i < 200 && h.watchers.Load() == nil; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	for i := 0; i < 100000; i++ {
		h.Record(e)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("100000 Records took %v beside a stuck watcher", d)
	}
}

func TestSessionsOrderAndStale(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctl")
	now := time.Now()
	for i, id := range []string{"bbbb", "aaaa", "cccc"} {
		h := NewHub(HubConfig{Info: Info{ID: id, Started: now.Add(time.Duration([]int{2, 1, 3}[i]) * time.Second)}})
		if err := h.Listen(dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
	}
	// A socket whose server is gone.
	stale := filepath.Join(dir, "dead.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	cs, err := Sessions(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, filepath.Base(c.Path))
	}
	if strings.Join(names, ",") != "aaaa.sock,bbbb.sock,cccc.sock" {
		t.Fatalf("sessions %q", names)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale socket kept: %v", err)
	}
}

func TestDir(t *testing.T) {
	x := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", x)
	if d := Dir(); d != filepath.Join(x, "jail", "ctl") {
		t.Fatalf("Dir() = %s", d)
	}
	t.Setenv("XDG_RUNTIME_DIR", "relative")
	if d := Dir(); d != filepath.Join(os.TempDir(), fmt.Sprintf("jail-%d", os.Getuid()), "ctl") {
		t.Fatalf("Dir() = %s", d)
	}
}

// runChild runs the test binary as a raw client of path with attr.
func runChild(t *testing.T, path string, attr *syscall.SysProcAttr) string {
	t.Helper()
	exe := publicCopy(t)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// publicCopy is a copy of the test binary that another uid may run.
func publicCopy(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		os.Chmod(d, 0o755)
	}
	p := filepath.Join(dir, "control.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A process of another uid gets no reply, even where it can reach the
// socket.
func TestPeerOfAnotherUIDRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching to another uid needs root")
	}
	dir := filepath.Join(t.TempDir(), "ctl")
	os.Chmod(filepath.Dir(dir), 0o755)
	h := NewHub(HubConfig{Info: Info{ID: "s2"}})
	if err := h.Listen(dir); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	path := filepath.Join(dir, "s2.sock")
	// Opened to everyone, so that only the peer check stands.
	os.Chmod(dir, 0o777)
	os.Chmod(path, 0o777)
	out := runChild(t, path, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	if out != "refused" {
		t.Fatalf("a client of another uid got %q", out)
	}
}

// BenchmarkRecord is the control plane's cost on every proxied request
// while no one watches.
func BenchmarkRecord(b *testing.B) {
	h := NewHub(HubConfig{Info: Info{ID: "bench"}})
	e := proxy.Entry{Host: "bench.example.test", Verdict: "allow"}
	b.ReportAllocs()
	for b.Loop() {
		h.Record(e)
	}
}

// Two people answering one request at once: one answer wins, and only
// its rule is added.
func TestAnswerOnceAtATime(t *testing.T) {
	var mu sync.Mutex
	var live []string
	release := make(chan struct{})
	h, c := newTestHub(t, HubConfig{Rules: Rules{Live: func(allow bool, host string) error {
		<-release // the first answer's rule is slow to take
		mu.Lock()
		live = append(live, fmt.Sprint(allow))
		mu.Unlock()
		return nil
	}}})
	got := make(chan Answer, 1)
	go func() {
		got <- h.Ask(context.Background(), Request{Kind: KindNetwork, Host: "m.example.test", Port: 443, Scheme: "https"})
	}()
	p := waitPending(t, c, 1)
	first := make(chan error, 1)
	go func() { first <- c.Answer(ctx(t), p[0].ID, Answer{Allow: true, Scope: ScopeSession}) }()
	time.Sleep(100 * time.Millisecond)
	if err := c.Answer(ctx(t), p[0].ID, Answer{Allow: false, Scope: ScopeSession}); err == nil || !strings.Contains(err.Error(), "being answered") {
		t.Fatalf("a second answer meanwhile = %v, want a refusal", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if a := <-got; !a.Allow {
		t.Fatalf("answer %+v", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(live, ",") != "true" {
		t.Fatalf("live rules %q, want the first answer's only", live)
	}
}

// A session is never seen half-made: listing the sessions while others
// start removes none of theirs, and every one starts.
func TestListenWhileListing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctl")
	os.MkdirAll(dir, 0o700)
	stop := make(chan struct{})
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		for {
			select {
			case <-stop:
				return
			default:
				Sessions(dir)
			}
		}
	}()
	var hubs []*Hub
	for i := 0; i < 40; i++ {
		h := NewHub(HubConfig{Info: Info{ID: fmt.Sprintf("s%02d", i)}})
		if err := h.Listen(dir); err != nil {
			t.Fatalf("Listen while listing: %v", err)
		}
		hubs = append(hubs, h)
	}
	close(stop)
	<-listed
	for _, h := range hubs {
		if _, err := os.Lstat(h.sock); err != nil {
			t.Errorf("a live session's socket was removed: %v", err)
		}
		h.Close()
	}
}
