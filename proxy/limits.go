package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bounds what the clients of one session may hold in the proxy, so
// that a jailed program that floods it or holds connections open cannot
// take the network away from the rest of the session, or from other
// sessions served by the same process. Zero fields take the defaults.
type Limits struct {
	// Conns caps the client connections one Server serves at once
	// (default 256: an agent, its package managers and their parallel
	// downloads stay well below).
	Conns int
	// TotalConns caps the client connections of every Server in the
	// process together (default 1024).
	TotalConns int
	// ResponseHeaderBytes caps the header of an upstream response
	// (default 64 KiB; common reverse proxies refuse one past 8 KiB).
	// Over HTTP/1 a field costs the proxy about twenty times its bytes
	// in memory while the response is relayed: a head of tiny fields
	// within 256 KiB held 4 MiB per connection.
	ResponseHeaderBytes int64
	// Leaves caps the leaf certificates kept in memory; the least
	// recently used is dropped first (default 1024), so that endless
	// names under an allowed wildcard cost no more than that.
	Leaves int
	// Buffered caps the bytes of bodies one Server holds in memory whole
	// at once (default 32 MiB). A request body that is read whole before
	// it is sent (to rewrite placeholders, or to tell an npm publish)
	// waits for room at most Timeouts.Read, then is answered 503 unsent;
	// a response that would be redacted whole is streamed through the
	// redactor instead when there is no room.
	Buffered int64
}

// Timeouts bound how long a client or an upstream server may keep the
// proxy waiting. Zero fields take the defaults; none is reset by a
// single byte where a whole unit is due (a request head, a handshake).
type Timeouts struct {
	// Header is the time a request head (request line and header fields)
	// has to arrive in full, counted from its first byte (default 10 s).
	// The SOCKS greeting and request have the same time from the
	// connection's start.
	Header time.Duration
	// Idle is how long a client connection may wait between requests,
	// or before its first one (default 2 min).
	Idle time.Duration
	// Read is how long a request body may go without a byte from the
	// client, and how long a write to the client may stay blocked
	// (default 2 min).
	Read time.Duration
	// Upstream is how long an upstream server may send nothing while the
	// proxy waits for its response or its body, counted from the last
	// byte either way (default 10 min). There is no deadline on a whole
	// response: a slow answer that is sending (a model streaming tokens)
	// is not cut, only a server that accepted and then went silent.
	Upstream time.Duration
	// Tunnel is how long a raw tunnel or an upgraded connection may go
	// without a byte in either direction (default 10 min).
	Tunnel time.Duration
	// Handshake is the time a client has for its TLS handshake with the
	// proxy, and for the ClientHello of a passthrough tunnel (default 10 s).
	Handshake time.Duration
}

const (
	defaultConns               = 256
	defaultTotalConns          = 1024
	defaultResponseHeaderBytes = 64 << 10
	defaultLeaves              = 1024
	maxHeaderFields            = 128 // in a request head
	refusalLinger              = 250 * time.Millisecond
	maxAnswering               = 64 // refusals answered at once; past them a refused client is closed unanswered
)

// withDefaults returns l with every zero field set to its default.
func (l Limits) withDefaults() Limits {
	l.Conns = orDefault(l.Conns, defaultConns)
	l.TotalConns = orDefault(l.TotalConns, defaultTotalConns)
	l.ResponseHeaderBytes = orDefault(l.ResponseHeaderBytes, defaultResponseHeaderBytes)
	l.Leaves = orDefault(l.Leaves, defaultLeaves)
	l.Buffered = orDefault(l.Buffered, defaultBuffered)
	return l
}

// withDefaults returns t with every zero field set to its default.
func (t Timeouts) withDefaults() Timeouts {
	t.Header = orDefault(t.Header, 10*time.Second)
	t.Idle = orDefault(t.Idle, 2*time.Minute)
	t.Read = orDefault(t.Read, 2*time.Minute)
	t.Upstream = orDefault(t.Upstream, 10*time.Minute)
	t.Tunnel = orDefault(t.Tunnel, 10*time.Minute)
	t.Handshake = orDefault(t.Handshake, 10*time.Second)
	return t
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// connCounter counts client connections against a cap.
type connCounter struct{ n atomic.Int64 }

// acquire takes a slot when fewer than limit are taken.
func (c *connCounter) acquire(limit int) bool {
	if c.n.Add(1) > int64(limit) {
		c.n.Add(-1)
		return false
	}
	return true
}

func (c *connCounter) release() { c.n.Add(-1) }

// processConns counts the client connections of every Server in the
// process.
var processConns connCounter

// admit takes a connection slot of the session and of the process; the
// reason is the cap that was reached when it cannot.
func (s *Server) admit() (ok bool, reason string) {
	if !s.slots.acquire(s.limits.Conns) {
		return false, fmt.Sprintf("connection limit reached: %d connections of this session", s.limits.Conns)
	}
	if !s.total.acquire(s.limits.TotalConns) {
		s.slots.release()
		return false, fmt.Sprintf("connection limit reached: %d connections of all sessions", s.limits.TotalConns)
	}
	return true, ""
}

func (s *Server) leave() {
	s.total.release()
	s.slots.release()
}

// refuse turns away a client past a connection cap. At most
// maxAnswering are answered at once, each by a goroutine of its own that
// waits at most refusalLinger for the client; past them a client is
// closed unanswered here, in the accept loop, so that a flood waits on
// the loop (and the kernel's backlog) instead of piling up goroutines.
//
// With handed, the client's socket the bridge hands over on c is taken
// first, to answer the client itself.
func (s *Server) refuse(c net.Conn, socks, handed bool, reason string) {
	e := Entry{Time: time.Now(), Verdict: verdictDeny, Rule: "limit connections", Reason: reason}
	if !s.answering.acquire(maxAnswering) {
		c.Close()
		e.Reason += " (closed unanswered)"
		s.record(e)
		return
	}
	go func() {
		defer s.answering.release()
		if handed {
			hc, err := takeHandedSocket(c, refusalLinger)
			if err != nil {
				c.Close()
				e.Reason += " (closed unanswered: " + err.Error() + ")"
				s.record(e)
				return
			}
			c = hc
		}
		s.refuseConn(c, socks, e)
	}()
}

// refuseConn answers a client past a connection cap in its protocol and
// closes it: 503 with one line for HTTP, a general failure for SOCKS.
func (s *Server) refuseConn(c net.Conn, socks bool, e Entry) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(refusalLinger))
	if socks {
		e.Scheme = "socks5"
		socksRefuse(c, &e)
	} else {
		e.Scheme = "http"
		writeText(bufio.NewWriterSize(c, 512), http.StatusServiceUnavailable,
			"jail: "+e.Reason+"; the jail's connection limit was reached, close idle connections or retry later\n")
	}
	s.record(e)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10)) // what the client sent, so that closing does not reset the answer
}

// socksRefuse reads a SOCKS greeting and request, if they come at once,
// to answer with a general failure in the place a client reads it.
func socksRefuse(c net.Conn, e *Entry) {
	var b [262]byte
	if _, err := io.ReadFull(c, b[:2]); err != nil || b[0] != socksVersion {
		return
	}
	if _, err := io.ReadFull(c, b[:b[1]]); err != nil {
		return
	}
	c.Write([]byte{socksVersion, socksNoAuth})
	if _, err := io.ReadFull(c, b[:4]); err == nil {
		e.Method = socksCommands[b[1]]
	}
	socksReply(c, socksGeneralFailure)
}

// watchedConn is a client connection whose reads and writes wait only as
// long as the current phase allows: a fixed time for a unit (a request
// head, a handshake), or a time without progress (bodies, keep-alive
// waits), renewed on every read or write.
type watchedConn struct {
	net.Conn
	readIdle  atomic.Int64 // a time.Duration renewed on every Read; 0: the fixed deadline holds
	writeIdle atomic.Int64 // likewise for Write
}

func (c *watchedConn) Read(p []byte) (int, error) {
	if d := time.Duration(c.readIdle.Load()); d > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(d))
	}
	return c.Conn.Read(p)
}

func (c *watchedConn) Write(p []byte) (int, error) {
	if d := time.Duration(c.writeIdle.Load()); d > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(d))
	}
	return c.Conn.Write(p)
}

// idle makes every read wait at most d for progress, and every write wd.
func (c *watchedConn) idle(d, wd time.Duration) {
	c.readIdle.Store(int64(d))
	c.writeIdle.Store(int64(wd))
}

// SetReadDeadline fixes the read deadline, ending renewal on reads.
func (c *watchedConn) SetReadDeadline(t time.Time) error {
	c.readIdle.Store(0)
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline fixes both deadlines, ending renewal.
func (c *watchedConn) SetDeadline(t time.Time) error {
	c.readIdle.Store(0)
	c.writeIdle.Store(0)
	return c.Conn.SetDeadline(t)
}

// CloseWrite half-closes the connection when it can.
func (c *watchedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// watched returns the watchedConn under c, or nil.
func watched(c net.Conn) *watchedConn {
	w, _ := c.(*watchedConn)
	return w
}

// idleWatch closes a stream's connections once no byte has moved either
// way for its timeout: one timer for both directions, so that a long
// upload without an answer (or the reverse) is not cut.
type idleWatch struct {
	d     time.Duration
	last  atomic.Int64 // unix nanoseconds of the last progress
	mu    sync.Mutex
	timer *time.Timer
	fired bool
}

// watchIdle starts a watch that closes every one of cs after d without
// progress.
func watchIdle(d time.Duration, cs ...io.Closer) *idleWatch {
	w := &idleWatch{d: d}
	w.last.Store(time.Now().UnixNano())
	w.timer = time.AfterFunc(d, func() { w.check(cs) })
	return w
}

func (w *idleWatch) check(cs []io.Closer) {
	quiet := time.Since(time.Unix(0, w.last.Load()))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		return
	}
	if quiet < w.d {
		w.timer.Reset(w.d - quiet)
		return
	}
	w.fired = true
	for _, c := range cs {
		c.Close()
	}
}

// stop ends the watch and reports whether it had cut the stream.
func (w *idleWatch) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
	cut := w.fired
	w.fired = true
	return cut
}

// reader counts progress on r.
func (w *idleWatch) reader(r io.Reader) io.Reader { return &progressReader{r: r, w: w} }

type progressReader struct {
	r io.Reader
	w *idleWatch
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.w.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// stallWatch is a request body whose every read waits at most d for the
// client: a read pending that long is ended by cut, which makes it fail.
// Only a pending read counts, so that time the upstream takes to take
// what was read is not held against the client.
type stallWatch struct {
	io.ReadCloser
	d       time.Duration
	cut     func()
	mu      sync.Mutex
	since   time.Time // start of the pending read; zero when none is
	timer   *time.Timer
	stopped bool
	cutOff  bool // cut was called
}

// watchStall starts watching reads of body; stop must be called before
// cut stops being safe to call.
func watchStall(body io.ReadCloser, d time.Duration, cut func()) *stallWatch {
	w := &stallWatch{ReadCloser: body, d: d, cut: cut}
	w.timer = time.AfterFunc(d, w.check)
	return w
}

func (w *stallWatch) Read(p []byte) (int, error) {
	w.mu.Lock()
	w.since = time.Now()
	w.mu.Unlock()
	n, err := w.ReadCloser.Read(p)
	w.mu.Lock()
	w.since = time.Time{}
	cut := w.cutOff
	w.mu.Unlock()
	if err != nil && cut {
		err = fmt.Errorf("the client sent no byte of its body for %v: %w", w.d, err)
	}
	return n, err
}

func (w *stallWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	wait := w.d
	if !w.since.IsZero() {
		if waited := time.Since(w.since); waited < w.d {
			wait = w.d - waited
		} else {
			w.stopped, w.cutOff = true, true
			w.cut()
			return
		}
	}
	w.timer.Reset(wait)
}

// stop ends the watch: cut is not called from now on.
func (w *stallWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}
