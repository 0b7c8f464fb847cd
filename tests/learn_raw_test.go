package tests

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineProto is a server-first line protocol on the host's loopback: it
// greets, answers one "PING X" line with "PONG X" and closes. It counts
// the pings it answered.
type lineProto struct {
	l     net.Listener
	mu    sync.Mutex
	pings []string
}

func newLineProto(t *testing.T) *lineProto {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lineProto{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *lineProto) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprint(c, "HELLO line-proto\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	word, ok := strings.CutPrefix(strings.TrimSpace(line), "PING ")
	if !ok {
		return
	}
	p.mu.Lock()
	p.pings = append(p.pings, word)
	p.mu.Unlock()
	fmt.Fprintf(c, "PONG %s\r\n", word)
}

// Pings are the words the server answered, in order.
func (p *lineProto) Pings() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.pings...)
}

// rawLineClient waits for the server's greeting on NAME:PORT, pings it
// with WORD and prints "##greeting=…" and "##reply=…" (or "##error=…").
const rawLineClient = `#!/usr/bin/env python3
import socket, sys
name, port, word = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    s = socket.create_connection((name, port), timeout=10)
    f = s.makefile("rwb")
    print("##greeting=" + f.readline().decode(errors="replace").strip(), flush=True)
    f.write(b"PING " + word.encode() + b"\r\n")
    f.flush()
    print("##reply=" + f.readline().decode(errors="replace").strip(), flush=True)
except Exception as e:
    print("##error=" + type(e).__name__, flush=True)
`

// A raw stream on port 443 (neither TLS nor HTTP: here a line protocol
// in which the server speaks first, as SSH does) works in a learning run,
// where every name is open; the learned profile must name the host with
// the port, since the strict run's proxy refuses a raw stream to a host
// allowed without it. Applied in a strict run (unknown names denied), the
// profile reaches the server, and opens no other port of the name.
func TestLearnRawStreamOn443(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		srv := newLineProto(t)
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"unknown": "deny",
			"hosts":   map[string]string{"line.learn.test": srv.l.Addr().String()},
		}})
		s.WriteFile(s.Project+"/rawline", rawLineClient, 0o755)
		s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "add", "rawline")
		s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "commit", "-qm", "rawline")

		// Before learning, the strict run gets nothing from the server.
		r := s.Jail("--", "./rawline", "line.learn.test", "443", "before")
		noGreeting(t, r, "before learning")

		r = s.Jail("--learning", "--", "./rawline", "line.learn.test", "443", "learning")
		if r.Code != 0 {
			t.Fatalf("jail --learning -- ./rawline: want exit 0:\n%s", r)
		}
		wantKV(t, r, "reply", is("PONG learning"), "the server's answer in the learning run")
		l := readLearned(t, learnedPath(s, "rawline"), r)
		if !contains(l.Network.Allow, "line.learn.test:443") {
			t.Fatalf("the learned network.allow %v lacks \"line.learn.test:443\", which a raw stream on 443 needs:\n%s", l.Network.Allow, l.raw)
		}
		for _, a := range l.Network.Allow {
			if a != "line.learn.test:443" && strings.Contains(a, "line.learn.test") {
				t.Errorf("the learned network.allow proposes %q besides line.learn.test:443:\n%s", a, l.raw)
			}
		}

		r = s.Jail("--", "./rawline", "line.learn.test", "443", "strict")
		wantKV(t, r, "greeting", is("HELLO line-proto"), "the server's greeting through the learned line.learn.test:443")
		wantKV(t, r, "reply", is("PONG strict"), "the server's answer through the learned line.learn.test:443")

		// The learned entry is for port 443 only.
		r = s.Jail("--", "./rawline", "line.learn.test", "8443", "otherport")
		noGreeting(t, r, "on a port the learning run never used")

		got := strings.Join(srv.Pings(), ",")
		if got != "learning,strict" {
			t.Errorf("the server answered pings %q, want \"learning,strict\" (the learning run and the strict run under its profile, nothing else)", got)
		}
	})
}

// noGreeting fails the test when the client got the server's greeting.
func noGreeting(t *testing.T, r Result, when string) {
	t.Helper()
	if g := kvs(r)["greeting"]; g == "HELLO line-proto" {
		t.Errorf("%s: the client got the server's greeting:\n%s", when, r)
	}
}
