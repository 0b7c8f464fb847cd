package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// asker is a Config.Ask that hands every question to the test and waits
// for the answer the test gives.
type asker struct {
	questions chan Question
	answers   chan Verdict
}

func newAsker() *asker {
	return &asker{questions: make(chan Question, 16), answers: make(chan Verdict, 16)}
}

func (a *asker) ask(ctx context.Context, q Question) Verdict {
	a.questions <- q
	select {
	case v := <-a.answers:
		return v
	case <-ctx.Done():
		return Verdict{Rule: "ask cancelled", Reason: ctx.Err().Error()}
	}
}

// question waits for the next question.
func (a *asker) question(t *testing.T) Question {
	t.Helper()
	select {
	case q := <-a.questions:
		return q
	case <-time.After(5 * time.Second):
		t.Fatal("no question was asked")
		return Question{}
	}
}

func TestDecideAsk(t *testing.T) {
	r := Rules{Allow: []string{"both.test", "*.wide.test", "allowed.test", "one.ask.test", "*.any.ask.test"}, Deny: []string{"bad.ask.test"},
		Ask: []string{"*.ask.test", "both.test", "10.1.2.3", "a.wide.test:8443"}}
	for _, tt := range []struct {
		host     string
		port     int
		ask, yes bool
		rule     string
	}{
		{"bad.ask.test", 443, false, false, "deny bad.ask.test"}, // deny beats ask
		{"x.ask.test", 443, true, false, "ask *.ask.test"},
		{"both.test", 443, true, false, "ask both.test"},         // ask beats allow
		{"one.ask.test", 443, false, true, "allow one.ask.test"}, // the host itself beats an asked wildcard
		{"b.any.ask.test", 443, true, false, "ask *.ask.test"},   // a wildcard does not
		{"a.wide.test", 8443, true, false, "ask a.wide.test:8443"},
		{"a.wide.test", 443, false, true, "allow *.wide.test"},
		{"allowed.test", 443, false, true, "allow allowed.test"},
		{"10.1.2.3", 443, true, false, "ask 10.1.2.3"}, // an ask entry naming the address
		{"other.test", 443, false, false, "unknown=deny"},
	} {
		d := r.Decide(tt.host, tt.port)
		if d.Ask != tt.ask || d.Allow != tt.yes || d.Rule != tt.rule {
			t.Errorf("Decide(%s:%d) = %+v, want ask=%v allow=%v rule %q", tt.host, tt.port, d, tt.ask, tt.yes, tt.rule)
		}
	}
	r.Unknown = "ask"
	if d := r.Decide("other.test", 443); !d.Ask || d.Rule != "unknown=ask" {
		t.Errorf("unknown ask: %+v", d)
	}
	for _, ip := range []string{"10.9.9.9", "127.1", "2130706433", "::1"} {
		if d := r.Decide(ip, 443); d.Ask || d.Allow {
			t.Errorf("an IP literal no entry names was asked or allowed by unknown=ask: %s %+v", ip, d)
		}
	}
	if d := r.decideName(host{name: "new.test"}); !d.Allow {
		t.Errorf("the resolver must give an asked name an address: %+v", d)
	}
	if err := (Rules{Ask: []string{"*"}}).Validate(); err == nil || !strings.Contains(err.Error(), "network.ask") {
		t.Errorf("Validate(ask *) = %v", err)
	}
	if err := (Rules{Unknown: "ask"}).Validate(); err != nil {
		t.Errorf("Validate(unknown ask) = %v", err)
	}
}

// TestAskConnect: an asked CONNECT waits for the answer, completes after
// an allow and is refused after a deny; the held and the answer entries
// are both logged, the answer's with the answer's rule.
func TestAskConnect(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	a := newAsker()
	var seen []Entry
	var mu sync.Mutex
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"asked.test"}, Ask: []string{"asked.test"}, Hosts: map[string]string{"asked.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Ask:      a.ask,
		OnRecord: func(x Entry) { mu.Lock(); seen = append(seen, x); mu.Unlock() },
	})
	type result struct {
		status int
		body   string
		err    error
	}
	fetch := func(path string) chan result {
		ch := make(chan result, 1)
		go func() {
			resp, err := e.client().Get("https://asked.test" + path)
			if err != nil {
				ch <- result{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ch <- result{status: resp.StatusCode, body: string(b)}
		}()
		return ch
	}

	done := fetch("/one")
	q := a.question(t)
	if q.Host != "asked.test" || q.Port != 443 || q.Method != "CONNECT" || q.Rule != "ask asked.test" {
		t.Errorf("question %+v", q)
	}
	held := e.entry(t, func(x Entry) bool { return x.Verdict == "held" })
	if held.Host != "asked.test" || held.Rule != "ask asked.test" || held.Method != "CONNECT" {
		t.Errorf("held entry %+v", held)
	}
	select {
	case r := <-done:
		t.Fatalf("the request completed before the answer: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	a.answers <- Verdict{Allow: true, Rule: "ask once", Reason: "jail approve"}
	if r := <-done; r.err != nil || r.status != 200 || r.body != "hello from allowed.test /one" && !strings.HasSuffix(r.body, "/one") {
		t.Fatalf("after allow: %+v", r)
	}
	if got := e.entry(t, func(x Entry) bool { return x.Verdict == "allow" && x.Path == "/one" }); got.Rule != "ask once" {
		t.Errorf("answer entry %+v, want rule ask once", got)
	}

	done = fetch("/two")
	a.question(t)
	a.answers <- Verdict{Rule: "ask once", Reason: "jail reject"}
	if r := <-done; r.err == nil {
		t.Fatalf("after deny the request went through: %+v", r)
	}
	got := e.entry(t, func(x Entry) bool { return x.Verdict == "deny" && x.Method == "CONNECT" })
	if got.Rule != "ask once" || got.Reason != "jail reject" {
		t.Errorf("deny entry %+v", got)
	}
	if up.hits.Load() != 1 {
		t.Errorf("upstream saw %d requests, want 1 (the allowed one)", up.hits.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	verdicts := ""
	for _, x := range seen {
		verdicts += x.Verdict + " "
	}
	if verdicts != "held allow held deny " {
		t.Errorf("OnRecord saw verdicts %q, want held allow held deny", verdicts)
	}
}

// TestAskWithoutAsker: without an Ask func an asked connection is denied.
func TestAskWithoutAsker(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Unknown: "ask", Hosts: map[string]string{"x.test": up.addr()}}})
	resp, body, _, _ := raw(t, e.httpAddr, "GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, "no one to ask") {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if up.hits.Load() != 0 {
		t.Error("the upstream was reached")
	}
	e.entry(t, func(x Entry) bool { return x.Verdict == "held" && x.Rule == "unknown=ask" })
	e.entry(t, func(x Entry) bool { return x.Verdict == "deny" && x.Reason == "no one to ask" })
}

// TestAskHangUp: a client that hangs up while held, over CONNECT, plain
// HTTP or SOCKS, cancels the question's context, and nothing is dialled.
func TestAskHangUp(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	cancelled := make(chan struct{}, 4)
	asked := make(chan struct{}, 4)
	e := newEnv(t, Config{
		Rules: Rules{Ask: []string{"x.test"}, Hosts: map[string]string{"x.test": up.addr()}},
		Ask: func(ctx context.Context, q Question) Verdict {
			asked <- struct{}{}
			select {
			case <-ctx.Done():
				cancelled <- struct{}{}
			case <-time.After(10 * time.Second):
			}
			return Verdict{Allow: true, Rule: "ask once"}
		},
	})
	socksReq := string([]byte{5, 1, 0, 5, 1, 0, socksDomain, 6}) + "x.test\x00\x50"
	for _, c := range []struct{ name, addr, req string }{
		{"connect", e.httpAddr, "CONNECT x.test:80 HTTP/1.1\r\nHost: x.test:80\r\n\r\n"},
		{"plain", e.httpAddr, "GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n"},
		{"socks", e.socksAddr, socksReq},
	} {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, c.req)
		select {
		case <-asked:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not asked", c.name)
		}
		conn.Close()
		select {
		case <-cancelled:
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: hanging up did not cancel the question", c.name)
		}
	}
	if up.conns.Load() != 0 {
		t.Error("the upstream was dialled for a client that hung up")
	}
}

// TestAskEveryPath: plain HTTP, CONNECT, SOCKS and a captured connection
// are all held for the answer.
func TestAskEveryPath(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	a := newAsker()
	e, sock := captureEnv(t, Config{Rules: Rules{Unknown: "ask", Hosts: map[string]string{"x.test": up.addr()}}, Ask: a.ask})
	answer := func(name string, allow bool) {
		q := a.question(t)
		if q.Host != "x.test" || q.Rule != "unknown=ask" {
			t.Errorf("%s: question %+v", name, q)
		}
		a.answers <- Verdict{Allow: allow, Rule: "ask once", Reason: "test"}
	}

	go answer("plain", true)
	if resp, body := get(t, e.client(), "http://x.test/plain"); resp.StatusCode != 200 || !strings.HasSuffix(body, "/plain") {
		t.Errorf("plain: %d %q", resp.StatusCode, body)
	}
	go answer("plain denied", false)
	if resp, _ := get(t, e.client(), "http://x.test/plain"); resp.StatusCode != 403 {
		t.Errorf("plain denied: %d", resp.StatusCode)
	}

	go answer("socks", true)
	code, c := socks(t, e.socksAddr, socksConnect, socksDomain, "x.test", 80)
	if code != 0 {
		t.Fatalf("socks: reply %#x", code)
	}
	io.WriteString(c, "GET /socks HTTP/1.1\r\nHost: x.test\r\nConnection: close\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("socks: %v %v", resp, err)
	}
	go answer("socks denied", false)
	if code, _ := socks(t, e.socksAddr, socksConnect, socksDomain, "x.test", 80); code != socksNotAllowed {
		t.Errorf("socks denied: reply %#x", code)
	}

	go answer("capture", true)
	if resp, body := get(t, captured(sock, "192.0.2.7:80", e), "http://x.test/captured"); resp.StatusCode != 200 || !strings.HasSuffix(body, "/captured") {
		t.Errorf("capture: %d %q", resp.StatusCode, body)
	}
	go answer("capture denied", false)
	if _, err := captured(sock, "192.0.2.7:80", e).Get("http://x.test/captured"); err == nil {
		t.Error("capture denied: the request went through")
	}
	if n := up.hits.Load(); n != 3 {
		t.Errorf("upstream saw %d requests, want the 3 allowed", n)
	}
}

// TestAddRule: a live allow takes effect for the next connection, even
// over an ask entry, a live deny beats it, and a malformed entry is
// refused.
func TestAddRule(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Ask: []string{"asked.test"}, Hosts: map[string]string{"x.test": up.addr(), "asked.test": up.addr()}}})
	status := func(host string) int {
		resp, _ := get(t, e.client(), "http://"+host+"/")
		return resp.StatusCode
	}
	if s := status("x.test"); s != 403 {
		t.Fatalf("before AddRule: %d", s)
	}
	if err := e.srv.AddRule(true, "x.test"); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.AddRule(true, "asked.test"); err != nil {
		t.Fatal(err)
	}
	if s := status("x.test"); s != 200 {
		t.Errorf("after AddRule allow: %d", s)
	}
	if s := status("asked.test"); s != 200 {
		t.Errorf("a live allow over an ask entry: %d", s)
	}
	if err := e.srv.AddRule(false, "x.test"); err != nil {
		t.Fatal(err)
	}
	if s := status("x.test"); s != 403 {
		t.Errorf("after AddRule deny: %d", s)
	}
	for _, bad := range []string{"", "*", "a b", "x.test:0", "*.", "http://x.test"} {
		if err := e.srv.AddRule(true, bad); err == nil {
			t.Errorf("AddRule(%q) accepted", bad)
		}
	}
}

// TestAddRuleConcurrent: rules added while requests are decided (run
// with -race).
func TestAddRuleConcurrent(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"x.test"}, Hosts: map[string]string{"x.test": up.addr()}}})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 25 {
				if err := e.srv.AddRule(j%2 == 0, fmt.Sprintf("h%d-%d.test", i, j)); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			c := e.client()
			for range 10 {
				resp, err := c.Get("http://x.test/")
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	if d := e.srv.rules.Load().Decide("h0-0.test", 443); !d.Allow {
		t.Errorf("a live allow was lost: %+v", d)
	}
	if d := e.srv.rules.Load().Decide("h3-1.test", 443); d.Allow {
		t.Errorf("a live deny was lost: %+v", d)
	}
}

// TestAskRawStream: a raw stream (neither TLS nor HTTP) to a host and
// port a person allowed when asked is relayed, as with an Allow entry
// naming that port; refused when they deny, and SSH to port 22 while git
// push is denied is refused before anyone is asked.
func TestAskRawStream(t *testing.T) {
	t.Parallel()
	a := newAsker()
	e := newEnv(t, Config{
		Rules:        Rules{Unknown: "ask", Hosts: map[string]string{"db.test": echoServer(t, ""), "git.test": echoServer(t, "")}},
		Ask:          a.ask,
		DenyCommands: []string{"git push"},
	})
	go func() {
		a.question(t)
		a.answers <- Verdict{Allow: true, Rule: "ask once"}
	}()
	_, _, c, br := raw(t, e.httpAddr, "CONNECT db.test:5432 HTTP/1.1\r\nHost: db.test:5432\r\n\r\n")
	io.WriteString(c, "\x00\x00\x00\x08raw-bytes\n")
	if line, err := br.ReadString('\n'); err != nil || !strings.HasSuffix(line, "raw-bytes\n") {
		t.Fatalf("raw echo %q, %v", line, err)
	}
	resp, body, _, _ := raw(t, e.httpAddr, "CONNECT git.test:22 HTTP/1.1\r\nHost: git.test:22\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Errorf("SSH to port 22 while git push is denied: %d %q", resp.StatusCode, body)
	}
	select {
	case q := <-a.questions:
		t.Errorf("asked about %+v, which the command rules refuse", q)
	default:
	}
}

// TestAskResolvesAfterAnswer: an asked name is resolved on the host only
// once a person allowed it. A jailed command that asks for
// "<secret>.attacker.example" must not get the lookup, which carries the
// name to the attacker's DNS server, for free: a denied one is never
// resolved.
func TestAskResolvesAfterAnswer(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil, nil)
	a := newAsker()
	var mu sync.Mutex
	var looked []string
	upIP, upPort, _ := net.SplitHostPort(up.addr())
	e := newEnv(t, Config{
		Rules: Rules{Unknown: "ask"},
		Ask:   a.ask,
		Resolver: func(ctx context.Context, host string) ([]net.IP, error) {
			mu.Lock()
			looked = append(looked, host)
			mu.Unlock()
			return []net.IP{net.ParseIP(upIP)}, nil
		},
	})
	lookups := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), looked...) }
	req := func(name string) chan int {
		ch := make(chan int, 1)
		go func() {
			resp, _, _, _ := raw(t, e.httpAddr, "GET http://"+name+":"+upPort+"/ HTTP/1.1\r\nHost: "+name+":"+upPort+"\r\n\r\n")
			ch <- resp.StatusCode
		}()
		return ch
	}
	denied := req("s3cr3t.attacker.test")
	a.question(t)
	time.Sleep(50 * time.Millisecond)
	if got := lookups(); len(got) != 0 {
		t.Fatalf("resolved %q while the question was open", got)
	}
	a.answers <- Verdict{Rule: "ask once", Reason: "jail reject"}
	if code := <-denied; code != 403 {
		t.Errorf("denied name: status %d, want 403", code)
	}
	if got := lookups(); len(got) != 0 {
		t.Fatalf("a name nobody allowed was resolved: %q", got)
	}
	allowed := req("fine.attacker.test")
	a.question(t)
	a.answers <- Verdict{Allow: true, Rule: "ask once", Reason: "jail approve"}
	<-allowed
	if got := lookups(); len(got) != 1 || got[0] != "fine.attacker.test" {
		t.Errorf("lookups after an allow: %q, want the allowed name once", got)
	}
}
