// Package dashboard is a local web page over the control sockets of the
// user's running jails: it lists the sessions, streams their decisions,
// and lets a person answer held requests and add rules with one click.
//
// It serves on loopback only and trusts nothing about the browser's
// neighbourhood: a request must name the dashboard's own loopback address
// in its Host header (no DNS rebinding), carry the session cookie that
// only the secret token in the printed URL hands out, and, to change
// anything, also the page's CSRF value, a JSON body and no foreign Origin.
package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jailsh/jail/jail/control"
)

// Scan is how often the control directory is scanned for new sessions.
const Scan = time.Second

// backlogSize caps the events kept for a page that connects later.
const backlogSize = 500

// Server is one dashboard: its secrets, the sessions it watches and the
// pages it streams to.
type Server struct {
	dir     string // the control sockets' directory
	port    int
	token   string // in the printed URL; exchanged for the cookie
	cookie  string // the session cookie's value
	csrf    string // given to the page, required on every POST
	clients func(dir string) ([]*control.Client, error)

	mu       sync.Mutex
	watching map[string]bool             // socket paths being watched
	sessions map[string]*session         // by session id
	backlog  []control.Event             // the latest decisions and activity
	subs     map[chan control.Event]bool // the open /events streams
}

// session is one watched session.
type session struct {
	client  *control.Client
	status  control.Status
	pending map[string]control.Request
}

// New makes a dashboard over the control sockets in dir, for a listener
// on port (its loopback address is the only Host it answers).
func New(dir string, port int) (*Server, error) {
	s := &Server{dir: dir, port: port, clients: control.Sessions,
		watching: map[string]bool{}, sessions: map[string]*session{}, subs: map[chan control.Event]bool{}}
	for _, v := range []*string{&s.token, &s.cookie, &s.csrf} {
		r, err := secret()
		if err != nil {
			return nil, err
		}
		*v = r
	}
	return s, nil
}

// secret is 32 random bytes in base64url.
func secret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dashboard secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// URL is the address to open: it carries the secret token.
func (s *Server) URL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/?token=%s", s.port, s.token)
}

// Listen opens the loopback listener on port (0: any free port).
func Listen(port int) (net.Listener, int, error) {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, 0, fmt.Errorf("dashboard listen: %w", err)
	}
	return ln, ln.Addr().(*net.TCPAddr).Port, nil
}

// Serve watches the sessions and serves the page on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	go s.scanLoop(ctx)
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dashboard serve: %w", err)
	}
	return nil
}

// scanLoop rescans the control directory every Scan until ctx ends.
func (s *Server) scanLoop(ctx context.Context) {
	t := time.NewTicker(Scan)
	defer t.Stop()
	for {
		s.scan(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scan starts watching every session not watched yet.
func (s *Server) scan(ctx context.Context) {
	cs, err := s.clients(s.dir)
	if err != nil {
		return // no directory yet, or no control plane: nothing to watch
	}
	for _, c := range cs {
		s.mu.Lock()
		seen := s.watching[c.Path]
		s.watching[c.Path] = true
		s.mu.Unlock()
		if !seen {
			go s.watch(ctx, c)
		}
	}
}

// watch follows one session until it ends.
func (s *Server) watch(ctx context.Context, c *control.Client) {
	var id string
	c.Watch(ctx, func(e control.Event) {
		if e.Session == "" && e.Status != nil {
			e.Session = e.Status.ID
		}
		if e.Session == "" {
			e.Session = id // the page files every event under its session
		}
		if e.Type == control.EventHello && e.Status != nil {
			id = e.Status.ID
			s.publish(e)
			// requests held before this watch began
			for _, r := range s.hello(c, *e.Status) {
				s.publish(control.Event{Type: control.EventHeld, Session: id, Request: &r})
			}
			return
		}
		s.apply(e)
		s.publish(e)
	})
	s.mu.Lock()
	delete(s.watching, c.Path)
	if id != "" {
		delete(s.sessions, id)
	}
	s.mu.Unlock()
	if id != "" {
		s.publish(control.Event{Type: control.EventEnded, Session: id})
	}
}

// hello records a session's Status and returns its held requests.
func (s *Server) hello(c *control.Client, st control.Status) []control.Request {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pending, _ := c.Pending(ctx)
	ss := &session{client: c, status: st, pending: map[string]control.Request{}}
	for _, r := range pending {
		ss.pending[r.ID] = r
	}
	st.Counts.Pending = len(ss.pending)
	ss.status = st
	s.mu.Lock()
	s.sessions[st.ID] = ss
	s.mu.Unlock()
	return pending
}

// apply keeps the sessions' state in step with one event.
func (s *Server) apply(e control.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[e.Session]
	if ss == nil {
		return
	}
	switch e.Type {
	case control.EventDecision:
		if e.Decision != nil {
			count(&ss.status.Counts, e.Decision.Verdict)
		}
	case control.EventHeld:
		if e.Request != nil {
			ss.pending[e.Request.ID] = *e.Request
			ss.status.Counts.Pending = len(ss.pending)
		}
	case control.EventAnswered:
		if e.Request != nil {
			delete(ss.pending, e.Request.ID)
			ss.status.Counts.Pending = len(ss.pending)
		}
	case control.EventRule:
		ss.status.Added = append(ss.status.Added, e.Rule)
	}
}

// count adds one decision to c.
func count(c *control.Counts, verdict string) {
	switch verdict {
	case "allow":
		c.Allowed++
	case "deny", "error":
		c.Denied++
	}
}

// publish sends e to every open page, without blocking on a slow one,
// and keeps decisions and activity for pages that open later.
func (s *Server) publish(e control.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Type == control.EventDecision || e.Type == control.EventActivity {
		s.backlog = append(s.backlog, e)
		if len(s.backlog) > backlogSize {
			s.backlog = s.backlog[len(s.backlog)-backlogSize:]
		}
	}
	for ch := range s.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// snapshot is what a page that just connected needs: every session's
// Status, its held requests, and the recent decisions and activity.
func (s *Server) snapshot() []control.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []control.Event
	for id, ss := range s.sessions {
		st := ss.status
		out = append(out, control.Event{Type: control.EventHello, Session: id, Status: &st})
		for _, r := range ss.pending {
			r := r
			out = append(out, control.Event{Type: control.EventHeld, Session: id, Request: &r})
		}
	}
	return append(out, s.backlog...)
}

// subscribe opens a stream of events; cancel closes it.
func (s *Server) subscribe() (chan control.Event, func()) {
	ch := make(chan control.Event, 256)
	s.mu.Lock()
	s.subs[ch] = true
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}
}

// client returns the Client of session id, or nil.
func (s *Server) client(id string) *control.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[id]; ss != nil {
		return ss.client
	}
	return nil
}

// all returns every watched session's Client.
func (s *Server) all() []*control.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*control.Client
	for _, ss := range s.sessions {
		out = append(out, ss.client)
	}
	return out
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
