package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jailsh/jail/proxy"
)

// Hub is one session's control plane. Its methods are safe for concurrent
// use.
type Hub struct {
	cfg     HubConfig
	timeout time.Duration
	max     int

	allowed, denied atomic.Int64
	// watchers is copied on write: Record reads it with one atomic load
	// and allocates nothing while it is empty.
	watchers atomic.Pointer[[]*watcher]

	mu       sync.Mutex
	closed   bool
	n        int               // the last pending id's number
	pending  map[string]*held  // by id
	byKey    map[string]*held  // by what was asked
	remember map[string]Answer // session-scoped answers of commands and of hosts without a live rule
	added    []string          // "allow HOST", "deny HOST"
	ln       net.Listener      // nil until Listen
	sock     string            // the control socket's path
	conns    map[net.Conn]struct{}
	served   sync.WaitGroup // the connections being served; added to under mu while not closed
	done     chan struct{}  // closed by Close
}

// held is one Request waiting for its answer.
type held struct {
	req    Request
	key    string
	answer Answer
	// answering is set (under Hub.mu) while an answer's scope is being
	// applied.
	answering bool
	once      sync.Once
	ready     chan struct{} // closed once answer is set
}

// watcher is one "watch" client's bounded queue of Events.
type watcher struct {
	ch      chan Event
	dropped atomic.Int64
}

// watchBuffer is how many Events a watcher may lag behind before it loses
// them.
const watchBuffer = 1024

// NewHub makes the Hub of a session; Listen serves it.
func NewHub(cfg HubConfig) *Hub {
	h := &Hub{cfg: cfg, timeout: cfg.Timeout, max: cfg.MaxPending,
		pending: map[string]*held{}, byKey: map[string]*held{}, remember: map[string]Answer{},
		conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	if h.timeout <= 0 {
		h.timeout = DefaultTimeout
	}
	if h.max <= 0 {
		h.max = DefaultMaxPending
	}
	return h
}

// Ask holds r until a person answers it, its deadline passes (a denial
// with By "timeout"), ctx ends or the Hub closes (a denial with By
// "ended"). A request for the same kind, host and port (or argv and cwd)
// as one already held waits on that one. It never blocks past the
// timeout.
func (h *Hub) Ask(ctx context.Context, r Request) Answer {
	key := requestKey(r)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return Answer{Scope: ScopeOnce, By: "ended"}
	}
	if a, ok := h.remember[key]; ok {
		h.mu.Unlock()
		return a
	}
	hd := h.byKey[key]
	if hd != nil {
		hd.req.Waiting++
		h.mu.Unlock()
	} else {
		if len(h.pending) >= h.max {
			h.mu.Unlock()
			return Answer{Scope: ScopeOnce, By: "limit"}
		}
		hd = h.hold(r, key)
		req := hd.req
		h.mu.Unlock()
		h.emit(Event{Type: EventHeld, Request: &req})
	}
	t := time.NewTimer(time.Until(hd.req.Deadline))
	defer t.Stop()
	select {
	case <-hd.ready:
		return hd.answer
	case <-t.C:
		h.finish(hd, Answer{Scope: ScopeOnce, By: "timeout"})
	case <-ctx.Done():
		// This waiter went away; the request stays held for the others
		// until its deadline.
		if h.leave(hd) {
			h.finish(hd, Answer{Scope: ScopeOnce, By: "ended"})
		}
		return Answer{Scope: ScopeOnce, By: "ended"}
	case <-h.done:
	}
	<-hd.ready
	return hd.answer
}

// hold registers r under a new id; h.mu is held.
func (h *Hub) hold(r Request, key string) *held {
	h.n++
	now := time.Now()
	r.ID = shortID(h.cfg.Info.ID) + "-" + strconv.Itoa(h.n)
	r.Session, r.Waiting, r.Held, r.Deadline = h.cfg.Info.ID, 1, now, now.Add(h.timeout)
	hd := &held{req: r, key: key, ready: make(chan struct{})}
	h.pending[r.ID], h.byKey[key] = hd, hd
	return hd
}

// leave takes one waiter off hd and reports whether it was the last.
func (h *Hub) leave(hd *held) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd.req.Waiting--
	return hd.req.Waiting <= 0
}

// finish answers hd, unless it was answered already, and releases its
// waiters.
func (h *Hub) finish(hd *held, a Answer) bool {
	done := false
	hd.once.Do(func() {
		h.mu.Lock()
		delete(h.pending, hd.req.ID)
		if h.byKey[hd.key] == hd {
			delete(h.byKey, hd.key)
		}
		req := hd.req
		h.mu.Unlock()
		hd.answer = a
		close(hd.ready)
		h.emit(Event{Type: EventAnswered, Request: &req, Answer: &a})
		done = true
	})
	return done
}

// answer answers the held request id, applying its scope first: the live
// rule and the written one are in place before the waiters go on.
//
// One answer at a time: a request being answered is not answered again,
// so that two people answering at once do not both add their rules.
func (h *Hub) answer(id string, a Answer) error {
	if a.Scope == "" {
		a.Scope = ScopeOnce
	}
	if a.By == "" {
		a.By = "control"
	}
	h.mu.Lock()
	hd := h.pending[id]
	if hd == nil || hd.answering {
		h.mu.Unlock()
		if hd != nil {
			return fmt.Errorf("the held request %q is being answered", id)
		}
		return fmt.Errorf("no held request %q in this session", id)
	}
	hd.answering = true
	req := hd.req
	h.mu.Unlock()
	if err := h.applyScope(req, a); err != nil {
		h.mu.Lock()
		hd.answering = false
		h.mu.Unlock()
		return err
	}
	if !h.finish(hd, a) {
		return fmt.Errorf("the held request %q was answered already (%s)", id, hd.answer.By)
	}
	return nil
}

// applyScope makes an answer for more than once last: a live rule (and a
// written one for ScopeProject and ScopeUser) for a host, a remembered
// answer for a command.
func (h *Hub) applyScope(r Request, a Answer) error {
	switch a.Scope {
	case ScopeOnce:
		return nil
	case ScopeSession, ScopeProject, ScopeUser:
	default:
		return fmt.Errorf("unknown scope %q (once, session, project or user)", a.Scope)
	}
	if r.Kind == KindCommand {
		if a.Scope != ScopeSession {
			return fmt.Errorf("a command is answered once or for the session, not for the %s", a.Scope)
		}
		h.mu.Lock()
		h.remember[requestKey(r)] = Answer{Allow: a.Allow, Scope: ScopeSession, By: a.By}
		h.mu.Unlock()
		return nil
	}
	return h.rule(a.Allow, ruleEntry(r), a.Scope)
}

// rule adds a live rule for host (and writes it for ScopeProject and
// ScopeUser, first, so that a write that fails changes nothing).
func (h *Hub) rule(allow bool, host, scope string) error {
	if host == "" {
		return errors.New("no host given")
	}
	switch scope {
	case "", ScopeSession:
	case ScopeProject, ScopeUser:
		if h.cfg.Rules.Persist == nil {
			return fmt.Errorf("this session cannot write rules for the %s", scope)
		}
		if err := h.cfg.Rules.Persist(scope, allow, host); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown scope %q (session, project or user)", scope)
	}
	if h.cfg.Rules.Live == nil {
		return errors.New("this session has no proxy to change")
	}
	if err := h.cfg.Rules.Live(allow, host); err != nil {
		return err
	}
	line := "deny " + host
	if allow {
		line = "allow " + host
	}
	h.mu.Lock()
	h.added = append(h.added, line)
	h.mu.Unlock()
	h.emit(Event{Type: EventRule, Rule: line})
	return nil
}

// Record counts one decision and streams it to watchers. It never blocks:
// a watcher too slow to keep up loses events, never the caller's time.
func (h *Hub) Record(e proxy.Entry) {
	switch e.Verdict {
	case "allow":
		h.allowed.Add(1)
	case "deny", "error":
		h.denied.Add(1)
	}
	if ws := h.watchers.Load(); ws != nil && len(*ws) > 0 {
		h.emitDecision(e)
	}
}

// emitDecision streams e; apart from Record, so that Record's own copy
// of e stays on the stack.
func (h *Hub) emitDecision(e proxy.Entry) { h.emit(Event{Type: EventDecision, Decision: &e}) }

// Activity streams one --watch event to watchers, without blocking.
func (h *Hub) Activity(a Activity) {
	if ws := h.watchers.Load(); ws != nil && len(*ws) > 0 {
		h.emit(Event{Type: EventActivity, Activity: &a})
	}
}

// emit hands ev to every watcher that has room for it.
func (h *Hub) emit(ev Event) {
	ws := h.watchers.Load()
	if ws == nil {
		return
	}
	ev.Session = h.cfg.Info.ID
	for _, w := range *ws {
		select {
		case w.ch <- ev:
		default:
			w.dropped.Add(1)
		}
	}
}

// watch adds a watcher; the returned func removes it.
func (h *Hub) watch() (*watcher, func()) {
	w := &watcher{ch: make(chan Event, watchBuffer)}
	h.mu.Lock()
	h.setWatchers(append(h.currentWatchers(), w))
	h.mu.Unlock()
	return w, func() {
		h.mu.Lock()
		ws := slices.DeleteFunc(h.currentWatchers(), func(x *watcher) bool { return x == w })
		h.setWatchers(ws)
		h.mu.Unlock()
	}
}

// currentWatchers is a copy of the watchers; h.mu is held.
func (h *Hub) currentWatchers() []*watcher {
	if ws := h.watchers.Load(); ws != nil {
		return slices.Clone(*ws)
	}
	return nil
}

func (h *Hub) setWatchers(ws []*watcher) { h.watchers.Store(&ws) }

// Status is the session's Status now.
func (h *Hub) Status() *Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Status{Info: h.cfg.Info, Added: slices.Clone(h.added),
		Counts: Counts{Allowed: h.allowed.Load(), Denied: h.denied.Load(), Pending: len(h.pending)}}
}

// Pending is the held requests, oldest first.
func (h *Hub) Pending() []Request {
	h.mu.Lock()
	out := make([]Request, 0, len(h.pending))
	for _, hd := range h.pending {
		out = append(out, hd.req)
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b Request) int {
		if c := a.Held.Compare(b.Held); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Close denies every held request (By "ended"), tells watchers the session
// ended, and removes the control socket.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.done)
	var all []*held
	for _, hd := range h.pending {
		all = append(all, hd)
	}
	ln, sock := h.ln, h.sock
	h.mu.Unlock()
	for _, hd := range all {
		h.finish(hd, Answer{Scope: ScopeOnce, By: "ended"})
	}
	h.emit(Event{Type: EventEnded})
	if ln == nil {
		return nil
	}
	err := ln.Close()
	removeSocket(sock)
	// Watchers write what was queued and the end; what is still open
	// after a while is cut.
	served := make(chan struct{})
	go func() { h.served.Wait(); close(served) }()
	select {
	case <-served:
	case <-time.After(closeWait):
		h.closeConns()
	}
	return err
}

// requestKey is what makes two requests the same question: the kind with
// the host and port, or with the argv and the working directory.
func requestKey(r Request) string {
	if r.Kind == KindCommand {
		return r.Kind + "\x00" + strings.Join(r.Argv, "\x00") + "\x00\x00" + r.Cwd
	}
	return r.Kind + "\x00" + r.Host + "\x00" + strconv.Itoa(r.Port)
}

// ruleEntry is the network entry an answer for more than once adds: the
// host, which covers HTTP and TLS on any port, or host:port for a raw
// stream, which needs its port named.
func ruleEntry(r Request) string {
	if r.Scheme == "http" || r.Scheme == "https" || r.Port == 0 {
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// shortID is the first six characters of a session id.
func shortID(s string) string {
	if len(s) > 6 {
		return s[:6]
	}
	return s
}
