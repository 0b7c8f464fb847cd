package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lineServer is a TCP server for raw streams: it greets first when greet
// is set, answers each line it reads with "echo: LINE", and closes after
// "QUIT". It keeps every byte it received and counts its connections.
type lineServer struct {
	addr  string
	conns atomic.Int64
	mu    sync.Mutex
	got   strings.Builder
}

func newLineServer(t *testing.T, greet string) *lineServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := &lineServer{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go s.serve(c, greet)
		}
	}()
	return s
}

func (s *lineServer) serve(c net.Conn, greet string) {
	defer c.Close()
	io.WriteString(c, greet)
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		s.mu.Lock()
		s.got.WriteString(line)
		s.mu.Unlock()
		if err != nil {
			return
		}
		if strings.TrimSpace(line) == "QUIT" {
			io.WriteString(c, "221 bye\r\n")
			return
		}
		io.WriteString(c, "echo: "+line)
	}
}

func (s *lineServer) received() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

func (s *lineServer) port() string { _, p, _ := net.SplitHostPort(s.addr); return p }

// openRaw opens a tunnel to host:port by CONNECT or SOCKS5, which the
// proxy accepts before it knows the protocol, or sends the capture line
// for dst ("ip:port") on the capture socket.
func openRaw(t *testing.T, e *env, via, host, port, sock string) (net.Conn, *bufio.Reader) {
	t.Helper()
	switch via {
	case "CONNECT":
		resp, body, c, br := raw(t, e.httpAddr, "CONNECT "+net.JoinHostPort(host, port)+" HTTP/1.1\r\nHost: "+net.JoinHostPort(host, port)+"\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT %s:%s: %d %q", host, port, resp.StatusCode, body)
		}
		return c, br
	case "SOCKS5":
		p, _ := net.LookupPort("tcp", port)
		code, c := socks(t, e.socksAddr, socksConnect, socksDomain, host, p)
		if code != 0 {
			t.Fatalf("SOCKS %s:%s: reply %#x", host, port, code)
		}
		c.SetDeadline(time.Time{})
		return c, bufio.NewReader(c)
	default:
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, net.JoinHostPort(host, port)+"\n")
		return c, bufio.NewReader(c)
	}
}

// A raw stream, whether the client or the server speaks first, reaches
// only a host:port that an Allow entry names with its port, by CONNECT,
// SOCKS5 and capture alike. An entry without a port is refused with the
// entry to add, and the server never sees a byte of the client's.
func TestRawNeedsAnEntryWithThePort(t *testing.T) {
	t.Parallel()
	refusedSrv := newLineServer(t, "")             // the client speaks first (SSH, a database)
	refusedGreet := newLineServer(t, "220 hi\r\n") // the server speaks first (SMTP)
	db := newLineServer(t, "")
	smtp := newLineServer(t, "220 hi\r\n")
	e, sock := captureEnv(t, Config{Rules: Rules{
		Allow: []string{"any.test", "greet.test", "db.test:" + db.port(), "smtp.test:" + smtp.port(),
			"*.wild.test:" + db.port(), "127.0.0.1", "127.0.0.1:" + db.port(), "127.0.0.1:" + smtp.port()},
		Hosts: map[string]string{"any.test": refusedSrv.addr, "greet.test": refusedGreet.addr,
			"db.test": db.addr, "smtp.test": smtp.addr, "a.wild.test": db.addr},
	}})
	refused := func(t *testing.T, what string, c net.Conn, br *bufio.Reader, want string) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := br.ReadString('\n')
		rest, err := io.ReadAll(br)
		if !strings.HasPrefix(line, "jail: ") || !strings.Contains(line, want) || len(rest) != 0 || err != nil {
			t.Errorf("%s: got %q then %q (%v); want one line naming %s, then the end", what, line, rest, err, want)
		}
	}
	for _, via := range []string{"CONNECT", "SOCKS5", "capture"} {
		t.Run(via, func(t *testing.T) {
			name := func(n string) string {
				if via == "capture" {
					return "127.0.0.1" // without a resolver inside, a captured stream has only its address
				}
				return n
			}
			method := map[string]string{"CONNECT": "CONNECT", "SOCKS5": "CONNECT", "capture": "CAPTURE"}[via]
			scheme := map[string]string{"CONNECT": "tcp", "SOCKS5": "socks5", "capture": "tcp"}[via]
			// The client speaks first, to a host allowed without the port.
			host := name("any.test")
			c, br := openRaw(t, e, via, host, refusedSrv.port(), sock)
			io.WriteString(c, "SSH-2.0-OpenSSH_9.2p1 "+via+"\r\n")
			want := `"` + net.JoinHostPort(host, refusedSrv.port()) + `"`
			refused(t, "client first", c, br, want)
			en := e.entry(t, func(x Entry) bool {
				return x.Method == method && x.Scheme == scheme && x.Host == host && x.Port == portOf(refusedSrv.port()) && x.Verdict == verdictDeny
			})
			if !strings.Contains(en.Reason, want) || !strings.Contains(en.Reason, "network.allow") {
				t.Errorf("client first: logged %+v", en)
			}
			// The server speaks first, to a host allowed without the port:
			// its greeting does not reach the client either.
			host = name("greet.test")
			c, br = openRaw(t, e, via, host, refusedGreet.port(), sock)
			refused(t, "server first", c, br, `"`+net.JoinHostPort(host, refusedGreet.port())+`"`)
			e.entry(t, func(x Entry) bool {
				return x.Host == host && x.Port == portOf(refusedGreet.port()) && x.Verdict == verdictDeny && x.Method == method && x.Scheme == scheme
			})

			// Named with the port: relayed both ways, logged once at the end.
			host = name("db.test")
			c, br = openRaw(t, e, via, host, db.port(), sock)
			hello := "SSH-2.0-OpenSSH_9.2p1 " + via + "\r\n"
			io.WriteString(c, hello)
			if line, err := br.ReadString('\n'); err != nil || line != "echo: "+hello {
				t.Fatalf("allowed with the port: %q, %v", line, err)
			}
			closeWrite(c)
			if rest, _ := io.ReadAll(br); len(rest) != 0 {
				t.Errorf("after the client's half-close: %q", rest)
			}
			en = e.entry(t, func(x Entry) bool {
				return x.Method == method && x.Scheme == scheme && x.Host == host && x.Verdict == verdictAllow && x.BytesUp == int64(len(hello))
			})
			if en.BytesDown != int64(len("echo: "+hello)) || en.Port != portOf(db.port()) {
				t.Errorf("client closed first: logged %+v", en)
			}

			// The server speaks first and closes first.
			host = name("smtp.test")
			c, br = openRaw(t, e, via, host, smtp.port(), sock)
			if line, err := br.ReadString('\n'); err != nil || line != "220 hi\r\n" {
				t.Fatalf("server first, allowed with the port: %q, %v", line, err)
			}
			io.WriteString(c, "QUIT\r\n")
			if rest, _ := io.ReadAll(br); string(rest) != "221 bye\r\n" {
				t.Errorf("server first: %q", rest)
			}
			c.Close()
			en = e.entry(t, func(x Entry) bool {
				return x.Method == method && x.Scheme == scheme && x.Host == host && x.Port == portOf(smtp.port()) && x.Verdict == verdictAllow
			})
			if en.BytesUp != 6 || en.BytesDown != int64(len("220 hi\r\n221 bye\r\n")) {
				t.Errorf("server closed first: logged %+v", en)
			}
			var n int
			ReadLog(e.logDir, func(x Entry) bool {
				if x.Method == method && x.Scheme == scheme && x.Host == host && x.Port == portOf(smtp.port()) {
					n++
				}
				return true
			})
			if n != 1 {
				t.Errorf("server closed first: %d log entries for the stream, want 1", n)
			}
		})
	}
	// A wildcard with the port is consent too.
	c, br := openRaw(t, e, "CONNECT", "a.wild.test", db.port(), "")
	io.WriteString(c, "\x00\x00\x00\x08\x04\xd2\x16\x2f\n") // a binary first message
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "echo: ") {
		t.Errorf("*.wild.test with the port: %q, %v", line, err)
	}
	if got := refusedSrv.received(); got != "" || refusedSrv.conns.Load() != 0 {
		t.Errorf("the server behind refused client-first streams was dialled %d times and received %q", refusedSrv.conns.Load(), got)
	}
	if got := refusedGreet.received(); got != "" {
		t.Errorf("the server behind refused server-first streams received %q", got)
	}
}

func portOf(p string) int {
	n, err := net.LookupPort("tcp", p)
	if err != nil {
		panic(err)
	}
	return n
}

// closeWrite half-closes a client connection (TCP or unix).
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// "unknown": "allow" opens every name on every port, raw streams
// included, but not IP literals: a raw stream to one still needs an entry
// with the port. A deny entry beats an allow entry with the port.
func TestRawUnknownAllowAndDeny(t *testing.T) {
	t.Parallel()
	srv := newLineServer(t, "")
	other := newLineServer(t, "")
	e, sock := captureEnv(t, Config{Rules: Rules{
		Unknown: "allow",
		Allow:   []string{"named.test", "bad.test:" + srv.port(), "127.0.0.1", "127.0.0.1:" + srv.port()},
		Deny:    []string{"bad.test"},
		Hosts:   map[string]string{"any.test": srv.addr, "named.test": srv.addr, "bad.test": srv.addr},
	}})
	echo := func(t *testing.T, what string, c net.Conn, br *bufio.Reader) string {
		t.Helper()
		io.WriteString(c, "hello\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := br.ReadString('\n')
		return line
	}
	for _, host := range []string{"any.test", "named.test"} {
		c, br := openRaw(t, e, "CONNECT", host, srv.port(), "")
		if line := echo(t, host, c, br); line != "echo: hello\n" {
			t.Errorf("unknown=allow, raw to %s: %q", host, line)
		}
	}
	// An IP literal, by CONNECT and by capture: only with the port.
	for _, via := range []string{"CONNECT", "capture"} {
		c, br := openRaw(t, e, via, "127.0.0.1", other.port(), sock)
		if line := echo(t, via, c, br); !strings.Contains(line, `add "127.0.0.1:`+other.port()+`"`) {
			t.Errorf("unknown=allow, raw to 127.0.0.1 by %s without an entry with the port: %q", via, line)
		}
		c, br = openRaw(t, e, via, "127.0.0.1", srv.port(), sock)
		if line := echo(t, via, c, br); line != "echo: hello\n" {
			t.Errorf("unknown=allow, raw to 127.0.0.1 by %s with an entry with the port: %q", via, line)
		}
	}
	en := e.entry(t, func(x Entry) bool {
		return x.Host == "127.0.0.1" && x.Port == portOf(other.port()) && x.Method == "CAPTURE"
	})
	if en.Verdict != verdictDeny || en.Rule != "allow 127.0.0.1" {
		t.Errorf("unknown=allow, captured raw to an IP literal: logged %+v", en)
	}
	resp, body, _, _ := raw(t, e.httpAddr, "CONNECT bad.test:"+srv.port()+" HTTP/1.1\r\nHost: bad.test\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, "network.deny") {
		t.Errorf("denied, allowed with the port: %d %q", resp.StatusCode, body)
	}
	if n := other.conns.Load(); n != 0 {
		t.Errorf("the server behind refused streams saw %d connections", n)
	}
	if n := srv.conns.Load(); n != 4 {
		t.Errorf("the server saw %d connections, want 4 (the allowed ones)", n)
	}
}

// A passthrough host allowed without a port still gets its TLS tunnelled,
// through capture as through CONNECT: only streams that are not TLS need
// the port.
func TestRawPassthroughUnaffected(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	e, sock := captureEnv(t, Config{Rules: Rules{Allow: []string{"pass.test"}, Passthrough: []string{"pass.test"},
		Hosts: map[string]string{"pass.test": up.addr()}}})
	cl := captured(sock, "192.0.2.7:443", e)
	cl.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool(upCA)}
	resp, body := get(t, cl, "https://pass.test/through")
	if resp.StatusCode != 200 || body != "hello from pass.test /through" {
		t.Fatalf("passthrough by capture: %d %q", resp.StatusCode, body)
	}
	cl.CloseIdleConnections()
	e.entry(t, func(x Entry) bool {
		return x.Host == "pass.test" && x.Method == "CAPTURE" && x.Verdict == verdictAllow && x.BytesDown > 0
	})

	// What is not TLS gets nothing from passthrough: a raw stream to the
	// same host still needs the port.
	c, br := openRaw(t, e, "CONNECT", "pass.test", "443", "")
	io.WriteString(c, "SSH-2.0-OpenSSH_9.2p1\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, _ := br.ReadString('\n'); !strings.Contains(line, `add "pass.test:443"`) {
		t.Errorf("a raw stream to a passthrough host: %q", line)
	}
	en := e.entry(t, func(x Entry) bool { return x.Host == "pass.test" && x.Method == "CONNECT" })
	if en.Verdict != verdictDeny || en.BytesUp != 0 {
		t.Errorf("a raw stream to a passthrough host: logged %+v", en)
	}
}

// With git push denied, SSH through capture is refused on port 22 before
// any dial, and on another port as soon as the client's identification
// shows, unless an entry names the address with that port.
func TestRawSSHWhileGitPushDeniedByCapture(t *testing.T) {
	t.Parallel()
	srv := newLineServer(t, "")
	e, sock := captureEnv(t, Config{
		Rules:        Rules{Allow: []string{"127.0.0.1"}},
		DenyCommands: []string{"git push"},
	})
	c, br := openRaw(t, e, "capture", "127.0.0.1", "22", sock)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, _ := io.ReadAll(br); len(b) != 0 {
		t.Errorf("port 22: got %q", b)
	}
	en := e.entry(t, func(x Entry) bool { return x.Port == 22 && x.Method == "CAPTURE" })
	if en.Verdict != verdictDeny || en.Rule != "command.deny git push" || en.Reason != "ssh to port 22 while git push is denied" {
		t.Errorf("port 22: logged %+v", en)
	}
	c, br = openRaw(t, e, "capture", "127.0.0.1", srv.port(), sock)
	io.WriteString(c, "SSH-2.0-OpenSSH_9.2p1\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, _ := br.ReadString('\n'); !strings.Contains(line, "ssh while git push is denied") {
		t.Errorf("port %s: %q", srv.port(), line)
	}
	en = e.entry(t, func(x Entry) bool { return x.Port == portOf(srv.port()) && x.Method == "CAPTURE" })
	if en.Verdict != verdictDeny || en.Rule != "command.deny git push" {
		t.Errorf("port %s: logged %+v", srv.port(), en)
	}
	if srv.conns.Load() != 0 {
		t.Errorf("the server saw %d refused SSH streams", srv.conns.Load())
	}

	// Named with the port, SSH goes through despite the rule.
	e2, sock2 := captureEnv(t, Config{
		Rules:        Rules{Allow: []string{"127.0.0.1:" + srv.port()}},
		DenyCommands: []string{"git push"},
	})
	c, br = openRaw(t, e2, "capture", "127.0.0.1", srv.port(), sock2)
	io.WriteString(c, "SSH-2.0-OpenSSH_9.2p1\r\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo: SSH-2.0-OpenSSH_9.2p1\r\n" {
		t.Errorf("allowed with the port: %q, %v", line, err)
	}
}

// "unknown": "allow" lets raw streams to any name through, but with git
// push denied SSH still needs an entry with its port: on port 22 before
// any dial, on another port as soon as the client speaks SSH, before or
// after the server's banner; other raw streams pass.
func TestRawUnknownAllowWhileGitPushDenied(t *testing.T) {
	t.Parallel()
	banner := "SSH-2.0-OpenSSH_9.2p1\r\n"
	sshSrv := newLineServer(t, banner)
	plain := newLineServer(t, "")
	e := newEnv(t, Config{
		Rules:        Rules{Unknown: "allow", Hosts: map[string]string{"ssh.test": sshSrv.addr, "db.test": plain.addr}},
		DenyCommands: []string{"git push"},
	})
	resp, body, _, _ := raw(t, e.httpAddr, "CONNECT ssh.test:22 HTTP/1.1\r\nHost: ssh.test:22\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, `"ssh.test:22"`) {
		t.Errorf("port 22: %d %q", resp.StatusCode, body)
	}
	// The client speaks first.
	c, br := openRaw(t, e, "SOCKS5", "ssh.test", sshSrv.port(), "")
	io.WriteString(c, "SSH-2.0-client\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, _ := io.ReadAll(br); !strings.Contains(string(rest), "ssh while git push is denied") || strings.Contains(string(rest), banner) {
		t.Errorf("client first: %q", rest)
	}
	// The client waits for the server's banner.
	c, br = openRaw(t, e, "CONNECT", "ssh.test", sshSrv.port(), "")
	if line, err := br.ReadString('\n'); err != nil || line != banner {
		t.Fatalf("server first: banner %q, %v", line, err)
	}
	io.WriteString(c, "SSH-2.0-client\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, _ := io.ReadAll(br); !strings.Contains(string(rest), "ssh while git push is denied") {
		t.Errorf("server first: %q", rest)
	}
	en := e.entry(t, func(x Entry) bool {
		return x.Host == "ssh.test" && x.Scheme == "tcp" && x.Port == portOf(sshSrv.port())
	})
	if en.Verdict != verdictDeny || en.Rule != "command.deny git push" || en.BytesDown != int64(len(banner)) || en.BytesUp != 0 {
		t.Errorf("server first: logged %+v", en)
	}
	if got := sshSrv.received(); got != "" {
		t.Errorf("the SSH server received a refused client's bytes: %q", got)
	}
	// Another raw protocol passes.
	c, br = openRaw(t, e, "CONNECT", "db.test", plain.port(), "")
	io.WriteString(c, "\x00\x00\x00\x08\x04\xd2\x16\x2f\n")
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "echo: ") {
		t.Errorf("a raw stream that is not SSH: %q, %v", line, err)
	}
}

// A relay still open when the proxy closes (the jail's command exited)
// is logged before Close returns, with what it carried, so that closing
// the log next loses nothing.
func TestRawRelayLoggedByClose(t *testing.T) {
	t.Parallel()
	srv := newLineServer(t, "")
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"db.test:" + srv.port()}, Hosts: map[string]string{"db.test": srv.addr}}})
	c, br := openRaw(t, e, "CONNECT", "db.test", srv.port(), "")
	io.WriteString(c, "held\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo: held\n" {
		t.Fatalf("relay: %q, %v", line, err)
	}
	e.srv.Close()
	var got []Entry
	ReadLog(e.logDir, func(x Entry) bool {
		if x.Host == "db.test" {
			got = append(got, x)
		}
		return true
	})
	if len(got) != 1 || got[0].BytesUp != 5 || got[0].BytesDown != 11 {
		t.Errorf("after Close the log holds %+v, want the relay once with 5 bytes up and 11 down", got)
	}
}

func TestRawAllowed(t *testing.T) {
	t.Parallel()
	allow := []string{"git.test:22", "web.test", "*.wild.test:5432", "10.1.2.3:22", "10.9.9.9", "[::1]:2222", "Mixed.Test:22"}
	for _, tt := range []struct {
		unknown string
		host    string
		port    int
		want    bool
	}{
		{"", "git.test", 22, true},
		{"", "GIT.test.", 22, true},
		{"", "git.test", 2222, false},
		{"", "web.test", 22, false},
		{"", "web.test", 443, false},
		{"", "a.wild.test", 5432, true},
		{"", "wild.test", 5432, false},
		{"", "a.wild.test", 22, false},
		{"", "10.1.2.3", 22, true},
		{"", "10.9.9.9", 22, false},
		{"", "::1", 2222, true},
		{"", "mixed.test", 22, true},
		{"", "other.test", 22, false},
		{"allow", "other.test", 22, true},
		{"allow", "web.test", 5432, true},
		{"allow", "10.9.9.9", 22, false},
		{"allow", "127.1", 22, false},
		{"allow", "10.1.2.3", 22, true},
		{"deny", "other.test", 22, false},
	} {
		h, ok := normalizeHost(tt.host)
		if !ok {
			t.Fatalf("%q: not a host", tt.host)
		}
		if got := (Rules{Allow: allow, Unknown: tt.unknown}).rawAllowed(h, tt.port); got != tt.want {
			t.Errorf("unknown=%q, %s:%d: rawAllowed %v, want %v", tt.unknown, tt.host, tt.port, got, tt.want)
		}
	}
}
