package proxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what a Server needs.
type Config struct {
	Rules Rules
	// CA signs the leaf certificates of intercepted hosts (cached per
	// host, in memory).
	CA *CA
	// Log receives one entry per decision; nil logs nothing.
	Log     *Log
	Session string
	// Resolver resolves names; nil uses net.DefaultResolver.
	Resolver func(ctx context.Context, host string) ([]net.IP, error)
	// Upstream verifies the servers of intercepted connections; nil uses
	// the host's trust (Go's system pool honours SSL_CERT_FILE).
	Upstream *tls.Config
	// Secrets are injected into the requests the proxy reads (plain HTTP
	// and intercepted TLS) to their bound hosts, refused toward any other
	// host and in raw tunnels, and redacted from every response. See
	// Secret.
	Secrets []Secret
	// DenyCommands are the command.deny rules the proxy also enforces on
	// the wire, as "program args..." strings: "git push" refuses git
	// smart-HTTP pushes and SSH to port 22 of any host not explicitly
	// allowed with its port; "npm publish" refuses registry publishes.
	//
	// Rules are normalised like the exec-time ones (white space, the
	// program's base name); a program alone ("git", "npm") implies all of
	// its subcommands. "git send-pack" counts as "git push"; "pnpm
	// publish", "yarn publish" and "yarn npm publish" (and those programs
	// alone) as "npm publish", whose request is the same. Other rules,
	// and rules more specific than the action ("git push --force"), are
	// left to the exec-time check. command.allow is not consulted: pass
	// only the rules that are in force.
	//
	// While git push is denied, every request of a push over smart HTTP
	// (GET …/info/refs?service=git-receive-pack, POST …/git-receive-pack)
	// is refused with 403, in plain HTTP and inside intercepted TLS, and
	// a CONNECT or SOCKS tunnel to port 22 is refused unless an Allow
	// entry names the host with ":22"; a tunnel to another port in which
	// the client speaks SSH first is cut the same way, unless an Allow
	// entry names the host with that port. Fetches (git-upload-pack) pass.
	//
	// While npm publish is denied, a PUT whose body is a JSON object with
	// a top-level "_attachments" key is refused with 403 before anything
	// is sent; PUT bodies are read whole up to 4 MiB for that, and one
	// that cannot be inspected (larger, not valid JSON, content-encoded)
	// is refused when its path looks like a package's and its first byte
	// does not rule out a JSON object. See publishRequest.
	DenyCommands []string
	// TokenEndpoints are the sign-in token endpoints whose answers carry
	// new tokens: the proxy swaps each for a placeholder it mints, adds
	// it to Secrets, and hands the real ones to the endpoint's Save. See
	// TokenEndpoint.
	TokenEndpoints []TokenEndpoint
	// Limits caps connections, header sizes and the certificate cache;
	// Timeouts bounds every wait. Zero fields take the defaults.
	Limits   Limits
	Timeouts Timeouts
	// Ask answers the connections Rules hold for a person (see Question);
	// nil denies them.
	Ask func(ctx context.Context, q Question) Verdict
	// OnRecord sees every entry the Server records, after the log; it
	// must not block.
	OnRecord func(e Entry)

	// total counts the connections that Limits.TotalConns caps; nil
	// shares the process's counter (tests give Servers their own).
	total *connCounter
}

// Server is one session's proxy. It serves any number of listeners (unix
// sockets in production) for HTTP and SOCKS5 and shares one policy, one
// upstream connection pool and one leaf certificate cache between them.
type Server struct {
	rules     atomic.Pointer[Rules] // replaced whole by AddRule, never changed in place
	ask       func(ctx context.Context, q Question) Verdict
	onRecord  func(e Entry)
	rulesMu   sync.Mutex        // serializes AddRule
	hosts     map[string]string // normalized name -> "ip:port"
	ca        *CA
	log       *Log
	session   string
	resolve   func(ctx context.Context, host string) ([]net.IP, error)
	transport *http.Transport
	mitm      *tls.Config // cloned per intercepted connection
	leafKey   *ecdsa.PrivateKey
	secrets   atomic.Pointer[secrets] // nil without secrets; grows as token endpoints mint placeholders (tokens.go)
	tokens    tokenState
	cmds      wireCommands
	limits    Limits
	timeouts  Timeouts
	slots     connCounter  // this session's client connections
	answering connCounter  // refused connections being answered
	total     *connCounter // the process's, shared by every Server
	leaves    *leafCache
	mem       *budget        // bodies held whole
	names     syntheticNames // the resolver's synthetic addresses (dns.go)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	denied    []Entry
	// handlers counts the client connections being served: Close waits
	// (a while) for them, so that a relay it ends is logged before the
	// log is closed. Added to under mu, only while not closed.
	handlers sync.WaitGroup
}

const (
	dialTimeout     = 10 * time.Second
	resolveTimeout  = 10 * time.Second
	sniffTimeout    = 300 * time.Millisecond // a tunnel client silent this long waits for the server to speak first
	maxDenied       = 10000                  // kept for the summary; later denials are only logged
	maxSummaryField = 256                    // bytes of a kept denial's host and reason
	closeWait       = 2 * time.Second        // how long Close waits for the handlers it ended to log
)

// New checks cfg and returns a Server that serves nothing yet.
func New(cfg Config) (*Server, error) {
	if cfg.CA == nil || cfg.CA.Cert == nil || cfg.CA.Key == nil {
		return nil, errors.New("proxy: no CA to sign intercepted hosts' certificates (load one with LoadOrCreateCA)")
	}
	if err := cfg.Rules.Validate(); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	sec, err := newSecrets(cfg.Secrets)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("proxy: generating leaf key: %w", err)
	}
	s := &Server{
		ask:       cfg.Ask,
		onRecord:  cfg.OnRecord,
		hosts:     map[string]string{},
		ca:        cfg.CA,
		log:       cfg.Log,
		session:   cfg.Session,
		resolve:   cfg.Resolver,
		leafKey:   leafKey,
		tokens:    tokenState{endpoints: cfg.TokenEndpoints, list: append([]Secret(nil), cfg.Secrets...)},
		cmds:      parseDenyCommands(cfg.DenyCommands),
		limits:    cfg.Limits.withDefaults(),
		timeouts:  cfg.Timeouts.withDefaults(),
		total:     cfg.total,
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}
	s.secrets.Store(sec)
	rules := cfg.Rules
	s.rules.Store(&rules)
	s.leaves = newLeafCache(s.limits.Leaves)
	s.mem = newBudget(s.limits.Buffered)
	if s.total == nil {
		s.total = &processConns
	}
	for name, addr := range cfg.Rules.Hosts {
		h, _ := normalizeHost(name)
		s.hosts[h.name] = netip.MustParseAddrPort(addr).String()
	}
	if s.resolve == nil {
		s.resolve = func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	upstream := &tls.Config{}
	if cfg.Upstream != nil {
		upstream = cfg.Upstream.Clone()
	}
	s.transport = &http.Transport{
		Proxy:                  nil, // never the host's HTTP_PROXY
		DialContext:            s.dialDecided,
		TLSClientConfig:        upstream,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    dialTimeout,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    32,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true, // pass the client's encoding through untouched
		ResponseHeaderTimeout:  0,    // slow answers (LLM APIs) are normal; silence is cut by upstreamConn
		MaxResponseHeaderBytes: s.limits.ResponseHeaderBytes,
	}

	s.mitm = &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		// Records of the largest size from the first byte: the small
		// ones meant for a browser's first paint cost a bulk answer
		// more records, and a write(2) each, on every new connection.
		DynamicRecordSizingDisabled: true,
	}
	var ticketKey [32]byte
	if _, err := rand.Read(ticketKey[:]); err != nil {
		return nil, err
	}
	s.mitm.SetSessionTicketKeys([][32]byte{ticketKey}) // resumption across tunnels
	return s, nil
}

// ServeHTTP serves HTTP proxy requests on l: plain HTTP in absolute form
// and CONNECT. On a unix socket, a client's TCP socket handed over by the
// jail's bridge is served itself (see takeHandedSocket). It returns nil
// when l or the Server is closed.
func (s *Server) ServeHTTP(l net.Listener) error { return s.accept(l, s.serveHTTPConn, false, true) }

// ServeSOCKS serves SOCKS5 on l: no authentication, CONNECT only (BIND and
// UDP ASSOCIATE are answered "command not supported" and logged as
// denials). A tunnel is treated as after an HTTP CONNECT: TLS is
// intercepted, other protocols are relayed raw. A handed-over socket is
// served as by ServeHTTP. It returns nil when l or the Server is closed.
func (s *Server) ServeSOCKS(l net.Listener) error { return s.accept(l, s.serveSOCKSConn, true, true) }

// serve accepts on l until it or the Server is closed. A connection past
// a cap is refused at once in its protocol (socks tells which).
func (s *Server) serve(l net.Listener, handle func(net.Conn), socks bool) error {
	return s.accept(l, handle, socks, false)
}

// accept is serve, taking first the socket the bridge may hand over on
// each connection when handed is set.
func (s *Server) accept(l net.Listener, handle func(net.Conn), socks, handed bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("proxy: accepting: %w", err)
		}
		backoff = 0
		if ok, reason := s.admit(); !ok {
			s.refuse(c, socks, handed, reason)
			continue
		}
		wc := &watchedConn{Conn: c}
		if !s.trackHandler(wc) {
			s.leave()
			c.Close()
			return nil
		}
		go func() {
			defer s.handlers.Done()
			defer s.leave()
			defer s.untrack(wc)
			defer wc.Close()
			if handed {
				s.serveHanded(wc, handle, socks)
				return
			}
			handle(wc)
		}()
	}
}

// serveHanded serves the connection takeHandedSocket returns for c, a
// tracked client connection; a descriptor it refuses is logged.
func (s *Server) serveHanded(c *watchedConn, handle func(net.Conn), socks bool) {
	conn, err := takeHandedSocket(c, s.timeouts.Header)
	if err != nil {
		var he *handoffError
		if errors.As(err, &he) {
			s.record(Entry{Time: time.Now(), Scheme: schemeOf(socks), Verdict: verdictDeny, Reason: "invalid proxy connection: " + err.Error()})
		}
		return
	}
	if conn == net.Conn(c) {
		handle(c)
		return
	}
	wc, ok := conn.(*watchedConn)
	if !ok {
		wc = &watchedConn{Conn: conn}
	}
	if !s.track(wc) {
		wc.Close()
		return
	}
	defer s.untrack(wc)
	defer wc.Close()
	handle(wc)
}

// schemeOf is the scheme a proxy connection is logged with.
func schemeOf(socks bool) string {
	if socks {
		return "socks5"
	}
	return "http"
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// track registers c to be closed by Close; false means the Server is
// already closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// trackHandler tracks a client connection and counts its handler.
func (s *Server) trackHandler(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.handlers.Add(1)
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops every listener given to ServeHTTP and ServeSOCKS, ends every
// connection and in-flight request, and drops idle upstream connections.
// It waits up to closeWait for the ended connections to be logged.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ls, cs := s.listeners, s.conns
	s.listeners, s.conns = map[net.Listener]struct{}{}, map[net.Conn]struct{}{}
	s.mu.Unlock()
	s.cancel()
	for l := range ls {
		l.Close()
	}
	for c := range cs {
		c.Close()
	}
	s.transport.CloseIdleConnections()
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done: // every handler logged what it served
	case <-time.After(closeWait):
	}
	return nil
}

// Denied returns the denials of this server's session, oldest first, as
// the summary needs them: without a path, with the host and the reason
// cut to a few hundred bytes (the decision log has them in full).
func (s *Server) Denied() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.denied...)
}

// record logs e, stamping the session and the duration since e.Time.
func (s *Server) record(e Entry) {
	e.Session = s.session
	if e.DurationMS == 0 {
		e.DurationMS = float64(time.Since(e.Time).Microseconds()) / 1000
	}
	e.Time = e.Time.UTC()
	if e.Verdict == verdictDeny {
		s.mu.Lock()
		if len(s.denied) < maxDenied {
			s.denied = append(s.denied, summaryEntry(e))
		}
		s.mu.Unlock()
	}
	if s.log != nil {
		s.log.Write(e) // a full disk must not take the network down
	}
	if s.onRecord != nil {
		s.onRecord(e)
	}
}

// summaryEntry is e as Denied keeps it: a denied request's path and host
// are the client's, up to 32 KiB each, and ten thousand of them must not
// hold hundreds of megabytes until the run ends. Every string is copied:
// the method and scheme are slices of the request line.
func summaryEntry(e Entry) Entry {
	return Entry{
		Time: e.Time, Session: strings.Clone(e.Session), Client: keep(e.Client),
		Method: keep(e.Method), Scheme: keep(e.Scheme), Host: keep(e.Host), Port: e.Port,
		Status: e.Status, Rule: keep(e.Rule), Verdict: keep(e.Verdict), Reason: keep(e.Reason),
		BytesUp: e.BytesUp, BytesDown: e.BytesDown, DurationMS: e.DurationMS,
	}
}

// keep is a copy of s cut to maxSummaryField bytes, marked with "…" when
// it was cut.
func keep(s string) string {
	if len(s) <= maxSummaryField {
		return strings.Clone(s)
	}
	return strings.ToValidUTF8(s[:maxSummaryField], "") + "…"
}

// target is a connection that was allowed: the name the client asked for
// and the addresses, checked, that it may be dialled at.
type target struct {
	norm  host // norm.name: the normalized name or IP literal
	port  int
	addrs []string // "ip:port", each checked
	rule  string
	// asked: a person allowed this very host and port when asked, the
	// consent a raw stream needs, as an Allow entry with the port gives.
	asked bool
}

// addr is t's normalized host and its port, as "host:port".
func (t *target) addr() string { return net.JoinHostPort(t.norm.name, strconv.Itoa(t.port)) }

// refusal is a connection that was not allowed (verdict "deny") or could
// not be decided (verdict "error": the name does not resolve).
type refusal struct {
	verdict, rule, reason, hint string
}

// check is the one decision for every path: the rules on the name the
// client asked for, then (for a tunnel, which may carry SSH) the command
// rules on its port, then the addresses it resolves to, and last, when a
// rule asks, the person's answer, waited for while the client is held
// (see hold).
func (s *Server) check(ctx context.Context, name string, port int, tunnel bool, from heldBy) (*target, *refusal) {
	d := s.rules.Load().Decide(name, port)
	h, _ := normalizeHost(name)
	if !d.Allow && !d.Ask {
		r := &refusal{verdict: verdictDeny, rule: d.Rule, reason: d.Reason}
		switch {
		case d.Reason == "invalid host":
		case strings.HasPrefix(d.Rule, "deny "):
			r.hint = fmt.Sprintf("it matches %q in jail.json \"network.deny\"", strings.TrimPrefix(d.Rule, "deny "))
		default:
			r.hint = `allow it in jail.json "network.allow"`
		}
		return nil, r
	}
	if tunnel {
		if r := s.sshPort22(h, port); r != nil {
			return nil, r
		}
	}
	if !d.Ask {
		return s.addresses(ctx, h, port, d.Rule)
	}
	// A person answers before the name is resolved on the host: a lookup
	// of a name nobody allowed would carry what the name spells out.
	rule, r := s.hold(from, h, port, d.Rule)
	if r != nil {
		return nil, r
	}
	t, r := s.addresses(ctx, h, port, rule)
	if t != nil {
		t.asked = true
	}
	return t, r
}

// addresses are the checked addresses h:port, which rule let through, may
// be dialled at.
func (s *Server) addresses(ctx context.Context, h host, port int, rule string) (*target, *refusal) {
	t := &target{norm: h, port: port, rule: rule}
	if addr, ok := s.hosts[h.name]; ok {
		t.addrs = []string{addr} // explicit consent, even to loopback
		return t, nil
	}
	if h.ip.IsValid() { // Decide allows or asks for an IP literal only when a rule names it
		t.addrs = []string{netip.AddrPortFrom(h.ip, uint16(port)).String()}
		return t, nil
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := s.resolve(rctx, h.name)
	if err == nil && len(ips) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return nil, &refusal{verdict: verdictError, rule: rule, reason: fmt.Sprintf("resolving %s: %v", h.name, err)}
	}
	seen := map[netip.Addr]bool{}
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return nil, &refusal{verdict: verdictError, rule: rule, reason: fmt.Sprintf("resolving %s: bad address %v", h.name, ip)}
		}
		a = a.Unmap()
		class := addrClass(a)
		if class == "" && ownAddr(a) {
			class = "this host's"
		}
		if class != "" {
			return nil, &refusal{verdict: verdictDeny, rule: rule,
				reason: fmt.Sprintf("%s address %s after resolving %s", class, a, h.name),
				hint:   `to reach a local service, map the name in jail.json "network.hosts"`}
		}
		if !seen[a] {
			seen[a] = true
			t.addrs = append(t.addrs, netip.AddrPortFrom(a, uint16(port)).String())
		}
	}
	return t, nil
}

// status is the HTTP status a refused client sees: 502 when the
// connection could not be decided, 403 when it was denied.
func (r *refusal) status() int {
	if r.verdict == verdictError {
		return http.StatusBadGateway
	}
	return http.StatusForbidden
}

// message is the one-line text a refused client sees.
func (r *refusal) message(host string) string {
	if _, ok := normalizeHost(host); !ok {
		host = strconv.Quote(host)
	}
	msg := "jail: " + host + ": " + r.reason
	if r.hint != "" {
		msg += "; " + r.hint
	}
	return msg + "\n"
}

// dial connects to the first of t's checked addresses that answers. No
// name is resolved here.
func (s *Server) dial(ctx context.Context, t *target) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	var err error
	for _, addr := range t.addrs {
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", addr); err == nil {
			return c, nil
		}
	}
	return nil, err
}

type targetKey struct{}

// dialDecided is the upstream transport's dialer: it dials only the
// target that the request's context carries, which check produced.
func (s *Server) dialDecided(ctx context.Context, network, addr string) (net.Conn, error) {
	t, _ := ctx.Value(targetKey{}).(*target)
	if t == nil || addr != t.addr() {
		return nil, fmt.Errorf("jail: dialling %s without a decision", addr)
	}
	c, err := s.dial(ctx, t)
	if err != nil {
		return nil, err
	}
	return &upstreamConn{Conn: c, r: bufio.NewReaderSize(c, upstreamBufSize), silence: s.timeouts.Upstream}, nil
}

// leaf returns the cached certificate for host, signing one when there is
// none or it is about to expire.
func (s *Server) leaf(host string) (*tls.Certificate, error) {
	return s.leaves.get(host, func() (*tls.Certificate, error) { return s.ca.Leaf(host, s.leafKey) })
}

// relay copies between the client (read through cr) and the upstream
// connection until both directions end, passing half-closes on, or until
// no byte has moved either way for idle (cut). It returns the bytes sent
// each way.
func relay(client net.Conn, cr io.Reader, up net.Conn, idle time.Duration) (upBytes, downBytes int64, cut bool) {
	w := watchIdle(idle, client, up)
	done := make(chan int64, 1)
	go func() {
		n, err := io.Copy(up, w.reader(cr))
		finish(up, client, err)
		done <- n
	}()
	downBytes, err := io.Copy(client, w.reader(up))
	finish(client, up, err)
	upBytes = <-done
	client.Close()
	up.Close()
	return upBytes, downBytes, w.stop()
}

// finish ends one direction of a relay: a clean end half-closes dst, an
// error closes both connections so that the other direction ends too.
func finish(dst, src net.Conn, err error) {
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		cw.CloseWrite()
		return
	}
	dst.Close()
	src.Close()
}
