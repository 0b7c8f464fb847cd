package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// Question is a connection held for a person's answer: Rules.Decide said
// "ask" for it (an entry of Rules.Ask, or Unknown "ask").
type Question struct {
	Host   string // normalized
	Port   int
	Scheme string // "http", "https", "tcp", "socks5"
	Method string
	Client string
	Rule   string // "ask *.example.org", "unknown=ask"
}

// Verdict is the answer to a Question.
type Verdict struct {
	Allow bool
	// Rule is what the log records as the deciding rule: "ask once",
	// "ask session", "ask timeout", ...
	Rule   string
	Reason string
}

// verdictHeld is the verdict of the entry logged when a connection is
// held for an answer; the answer is logged as its own entry.
const verdictHeld = "held"

// heldBy is the client whose connection a decision may hold: its
// connection, the reader its bytes are buffered in, and the entry being
// built for it.
type heldBy struct {
	c  net.Conn
	br *bufio.Reader
	e  Entry
}

// hold logs that a connection to h:port, which rule asks for, is held,
// and waits for Config.Ask's answer: the answer's rule when it allows, a
// refusal otherwise. Nothing is resolved before the answer. Without an Ask func the connection is denied. The wait ends
// early when the client hangs up or the Server closes.
func (s *Server) hold(from heldBy, h host, port int, rule string) (string, *refusal) {
	e := from.e
	e.Host, e.Port, e.Rule, e.Verdict, e.Reason = h.name, port, rule, verdictHeld, "waiting for an answer"
	s.record(e)
	if s.ask == nil {
		return "", &refusal{verdict: verdictDeny, rule: rule, reason: "no one to ask",
			hint: `allow it in jail.json "network.allow"`}
	}
	ctx, stop := s.holdContext(from.c, from.br)
	v := s.ask(ctx, Question{Host: h.name, Port: port, Scheme: e.Scheme, Method: e.Method, Client: e.Client, Rule: rule})
	gone := ctx.Err() != nil // the client hung up or the Server closed: whatever the answer, nothing to serve
	stop()
	if v.Rule == "" {
		v.Rule = "ask"
	}
	if gone {
		return "", &refusal{verdict: verdictDeny, rule: v.Rule, reason: "the client hung up while held"}
	}
	if !v.Allow {
		if v.Reason == "" {
			v.Reason = "not allowed when asked"
		}
		return "", &refusal{verdict: verdictDeny, rule: v.Rule, reason: v.Reason}
	}
	return v.Rule, nil
}

// holdContext is the context an answer is waited for with: done when the
// Server closes, when the returned stop is called, or when the client c
// hangs up, which a read ahead into br (kept there for later) sees. stop
// ends the read ahead before it returns: br is the caller's again.
func (s *Server) holdContext(c net.Conn, br *bufio.Reader) (context.Context, func()) {
	ctx, cancel := context.WithCancel(s.ctx)
	if c == nil || br == nil {
		return ctx, cancel
	}
	raw := c
	if w, ok := c.(*watchedConn); ok {
		raw = w.Conn // its deadlines, without ending the watch's renewal
	}
	raw.SetReadDeadline(time.Time{}) // a head's deadline must not pass for a hang-up
	var stopping atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stopping.Load() {
			n := br.Buffered() + 1
			if n > br.Size() {
				return // a full buffer shows no hang-up; the answer's timeout bounds the wait
			}
			if _, err := br.Peek(n); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				cancel()
				return
			}
		}
	}()
	return ctx, func() {
		stopping.Store(true)
		for waiting := true; waiting; {
			raw.SetReadDeadline(time.Unix(1, 0)) // again: a renewing read may have moved it
			select {
			case <-done:
				waiting = false
			case <-time.After(5 * time.Millisecond):
			}
		}
		raw.SetReadDeadline(time.Time{})
		cancel()
	}
}

// AddRule adds an Allow (allow) or Deny entry to the running Server's
// rules, validated like the configured ones; the connections decided
// after it see it. An entry allowed here is a person's answer: it beats
// the configured Ask entries, not Deny; one denied here beats every
// allow.
func (s *Server) AddRule(allow bool, entry string) error {
	if _, err := parseEntry(entry); err != nil {
		key := "deny"
		if allow {
			key = "allow"
		}
		return fmt.Errorf("proxy: network.%s entry %q: %w", key, entry, err)
	}
	s.rulesMu.Lock()
	defer s.rulesMu.Unlock()
	r := *s.rules.Load() // copied: connections being decided keep the old rules
	if allow {
		if slices.Contains(r.live, entry) {
			return nil
		}
		r.live = append(slices.Clone(r.live), entry)
	} else {
		if slices.Contains(r.Deny, entry) {
			return nil
		}
		r.Deny = append(slices.Clone(r.Deny), entry)
	}
	s.rules.Store(&r)
	return nil
}
