package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	readBufSize  = 32 << 10 // also the largest request head accepted
	writeBufSize = 32 << 10
	// tlsBatchSize is what an intercepted HTTP/1.1 client's answers are
	// gathered in before they are encrypted and sent in one write(2):
	// four records of the largest size.
	tlsBatchSize = 64 << 10
	// upstreamBufSize is what an upstream connection is read through.
	upstreamBufSize = 64 << 10
	tlsRecord       = 0x16 // first byte of a TLS handshake
	maxTLSRecord    = 5 + 1<<14 + 256
)

var (
	errHeadTooLarge  = errors.New("request head larger than 32 KiB")
	errTooManyFields = fmt.Errorf("request head with more than %d header fields", maxHeaderFields)
)

// serveHTTPConn serves one client connection of the HTTP proxy: requests
// in absolute form, kept alive, until a CONNECT takes the connection over.
func (s *Server) serveHTTPConn(c net.Conn) {
	cl := &client{conn: c, raw: c, w: watched(c), br: bufio.NewReaderSize(c, readBufSize), bw: bufio.NewWriterSize(c, 4<<10)}
	for {
		req, hostHeader, err := s.nextRequest(cl)
		if err != nil {
			badRequest(cl.bw, err)
			return
		}
		if req.Method == http.MethodConnect {
			s.connect(c, cl.br, req)
			return
		}
		if !req.URL.IsAbs() {
			writeText(cl.bw, http.StatusBadRequest, "jail: this is a proxy; send requests in absolute form (set HTTP_PROXY)\n")
			return
		}
		if !s.forward(cl, req, hostHeader) {
			return
		}
	}
}

// client is the client side of a connection that carries HTTP requests:
// the plain proxy connection, or the TLS connection inside an
// intercepted tunnel.
type client struct {
	conn net.Conn
	raw  io.Writer    // writes that reach the client at once
	w    *watchedConn // the connection from the client, whose deadlines bound every wait; nil in tests
	br   *bufio.Reader
	bw   *bufio.Writer // over raw
	// tunnel is the decided target inside a tunnel, whose requests are
	// all for it, in scheme; nil on the proxy connection itself.
	tunnel *target
	scheme string
	// ctx, when set, ends the upstream request with it: an HTTP/2
	// stream's, done when the client resets the stream.
	ctx context.Context
	// stream, when set, is the HTTP/2 stream the response goes to
	// directly; refusals still go through bw as HTTP/1.1.
	stream *streamWriter
}

// nextRequest waits for cl's next request: Idle for its first byte, then
// Header for the whole head. Its body, and the response, may then go Read
// without progress.
func (s *Server) nextRequest(cl *client) (*http.Request, string, error) {
	if cl.w == nil {
		return readRequest(cl.br)
	}
	cl.w.idle(s.timeouts.Idle, s.timeouts.Read)
	if _, err := cl.br.Peek(1); err != nil {
		return nil, "", err
	}
	cl.w.SetReadDeadline(time.Now().Add(s.timeouts.Header))
	req, hostHeader, err := readRequest(cl.br)
	cl.w.idle(s.timeouts.Read, s.timeouts.Read)
	return req, hostHeader, err
}

// readRequest reads one request and, for a request in absolute form,
// returns its raw Host header too: net/http drops it, and a Host header
// that disagrees with the URL must be refused, not ignored.
func readRequest(br *bufio.Reader) (*http.Request, string, error) {
	head, err := peekHead(br)
	if err != nil {
		return nil, "", err
	}
	var hostHeader string
	if line, _, _ := bytes.Cut(head, []byte("\n")); !originForm(line) {
		// The same parser as net/http's, on the same bytes.
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
		if _, err := tp.ReadLine(); err == nil {
			if h, err := tp.ReadMIMEHeader(); err == nil {
				hostHeader = h.Get("Host")
			}
		}
	}
	req, err := http.ReadRequest(br)
	return req, hostHeader, err
}

// originForm reports whether a request line's target is a path.
func originForm(line []byte) bool {
	_, target, _ := bytes.Cut(line, []byte(" "))
	return len(target) > 0 && target[0] == '/'
}

// peekHead returns the buffered request head (request line, header fields
// and the empty line) without consuming it.
func peekHead(br *bufio.Reader) ([]byte, error) {
	for n := 1; ; n = br.Buffered() + 1 {
		if n > br.Size() {
			return nil, errHeadTooLarge
		}
		if _, err := br.Peek(n); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = errHeadTooLarge
			}
			return nil, err
		}
		b, _ := br.Peek(br.Buffered())
		end := -1
		if i := bytes.Index(b, []byte("\n\r\n")); i >= 0 {
			end = i + 3
		}
		if i := bytes.Index(b, []byte("\n\n")); i >= 0 && (end < 0 || i+2 < end) {
			end = i + 2
		}
		if end >= 0 {
			if bytes.Count(b[:end], []byte("\n")) > maxHeaderFields+2 {
				return nil, errTooManyFields
			}
			return b[:end], nil
		}
	}
}

// badRequest answers a request that could not be read, unless the client
// simply went away.
func badRequest(bw *bufio.Writer, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return
	}
	status := http.StatusBadRequest
	if errors.Is(err, errHeadTooLarge) || errors.Is(err, errTooManyFields) {
		status = http.StatusRequestHeaderFieldsTooLarge
	}
	writeText(bw, status, fmt.Sprintf("jail: bad request: %v\n", err))
}

// writeText writes a complete plain-text response that closes the
// connection.
func writeText(bw *bufio.Writer, status int, body string) {
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	bw.Flush()
}

// authority splits a request's host[:port] and fills in the scheme's
// default port.
func authority(hostport, scheme string) (string, int, bool) {
	port := 80
	if scheme == "https" {
		port = 443
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		if strings.Contains(hostport, ":") && !strings.HasPrefix(hostport, "[") {
			return "", 0, false
		}
		h = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	} else if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
		return "", 0, false
	}
	return h, port, h != ""
}

// sameAuthority reports whether two host[:port] strings name the same
// host and port.
func sameAuthority(a, b, scheme string) bool {
	ah, ap, ok1 := authority(a, scheme)
	bh, bp, ok2 := authority(b, scheme)
	if !ok1 || !ok2 || ap != bp {
		return false
	}
	na, ok1 := normalizeHost(ah)
	nb, ok2 := normalizeHost(bh)
	return ok1 && ok2 && na == nb
}

// forward decides (unless it runs inside an intercepted tunnel, whose
// CONNECT was decided) and forwards one request, writes the response and
// logs both. It reports whether the client connection may serve another
// request.
func (s *Server) forward(cl *client, req *http.Request, hostHeader string) bool {
	bw, tunnel := cl.bw, cl.tunnel
	// A real value in the path never reaches the log.
	e := Entry{Time: time.Now(), Method: req.Method, Path: s.sec().redactString(req.URL.Path)}
	refuse := func(status int, r *refusal, host string) bool {
		e.Verdict, e.Rule, e.Reason = r.verdict, r.rule, r.reason
		s.record(e)
		writeText(bw, status, r.message(host))
		return false
	}

	scheme, reqAuthority := strings.ToLower(req.URL.Scheme), req.URL.Host
	if tunnel != nil {
		if scheme != "" && scheme != cl.scheme {
			scheme = "invalid"
		} else {
			scheme = cl.scheme
		}
		if reqAuthority == "" {
			reqAuthority = req.Host
		}
	}
	e.Scheme = scheme
	if scheme != "http" && scheme != "https" {
		writeText(bw, http.StatusBadRequest, fmt.Sprintf("jail: unsupported scheme %q\n", req.URL.Scheme))
		return false
	}
	host, port, ok := authority(reqAuthority, scheme)
	e.Host, e.Port = host, port
	if !ok {
		return refuse(http.StatusBadRequest, &refusal{verdict: verdictDeny, reason: "invalid host"}, reqAuthority)
	}
	if n, ok := normalizeHost(host); ok {
		e.Host = n.name
	}
	if hostHeader != "" && !sameAuthority(hostHeader, reqAuthority, scheme) {
		return refuse(http.StatusForbidden, &refusal{verdict: verdictDeny, reason: "host header mismatch",
			hint: fmt.Sprintf("the URL names %s, the Host header %s", reqAuthority, hostHeader)}, host)
	}

	if reason := s.sec().inHostName(host); reason != "" {
		e.Host = s.sec().redactString(host)
		return refuse(http.StatusForbidden, &refusal{verdict: verdictDeny, rule: "secret", reason: reason}, host)
	}
	t := tunnel
	if t == nil {
		var r *refusal
		if t, r = s.check(s.ctx, host, port, false, heldBy{cl.conn, cl.br, e}); r != nil {
			return refuse(r.status(), r, host)
		}
	} else if !sameAuthority(reqAuthority, t.addr(), scheme) {
		return refuse(http.StatusForbidden, &refusal{verdict: verdictDeny, rule: t.rule, reason: "host header mismatch",
			hint: fmt.Sprintf("the tunnel was opened to %s", t.addr())}, host)
	}
	e.Host, e.Rule = t.norm.name, t.rule
	if s.cmds.gitPush != "" && gitPushRequest(req) {
		return s.refuseCommand(bw, e, "git push", s.cmds.gitPush, "git push over smart HTTP")
	}

	// Placeholders in the header fields and the URL are replaced (or the
	// request refused) before the client is told to send its body.
	var inj *injection
	if s.sec() != nil {
		inj = s.sec().beginRequest(t, scheme, req.URL.Path)
		if !inj.request(req) {
			return s.refuseSecret(bw, e, inj.refused(), t.norm.name)
		}
	}

	// Room for a body read whole is taken before the client is told to
	// send it.
	reqMem := &held{b: s.mem}
	defer reqMem.releaseAll()
	if !reqMem.reserve(s.readWhole(req), s.timeouts.Read) {
		return s.busy(bw, e)
	}

	// The decision has been made: tell a client that waits before sending
	// its body to go ahead, and let the upstream server see no Expect.
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") && req.ProtoAtLeast(1, 1) {
		req.Header.Del("Expect")
		bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if bw.Flush() != nil {
			return false
		}
	}

	// An npm publish is told by its body, read (bounded) before anything
	// is sent.
	if s.cmds.npmPublish != "" && req.Method == http.MethodPut && req.Body != nil && req.Body != http.NoBody {
		reason, err := publishRequest(req)
		if err != nil {
			return s.bodyError(bw, e, err)
		}
		if reason != "" {
			return s.refuseCommand(bw, e, "npm publish", s.cmds.npmPublish, reason)
		}
	}

	base := s.ctx
	if cl.ctx != nil {
		base = cl.ctx
	}
	ctx, cancel := context.WithCancel(context.WithValue(base, targetKey{}, t))
	defer cancel()
	var upConn *upstreamConn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		c := ci.Conn
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		upConn, _ = c.(*upstreamConn)
	}})
	dropControlTrailers(req.Trailer) // declared ones, announced in the head
	body := &countingBody{rc: req.Body, closed: make(chan struct{}), trailer: &req.Trailer}
	out := req.WithContext(ctx)
	out.URL = &url.URL{Scheme: scheme, Host: t.addr(),
		Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	out.RequestURI = ""
	out.Close = false
	out.Header = req.Header.Clone()
	upgrade := removeHopByHop(out.Header)
	if req.Body == nil || req.Body == http.NoBody {
		body = nil
		out.Body = nil
	} else {
		out.Body = body
		if inj != nil {
			ok, err := inj.body(out, body)
			if err != nil {
				return s.bodyError(bw, e, err)
			}
			if !ok {
				return s.refuseSecret(bw, e, inj.refused(), t.norm.name)
			}
		}
	}
	if out.Body != nil {
		out.Body = &releasingBody{rc: out.Body, h: reqMem}
	}
	sent := s.watchTokenRequest(req, t, out)
	if s.sec() != nil && s.sec().vals != nil {
		// A response must be readable to be redacted: an upstream that
		// learned a value once can echo it in any later response.
		limitEncoding(out.Header)
	}

	resp, err := s.transport.RoundTrip(out)
	if inj != nil {
		// A placeholder found while the body streamed cut the request.
		if r := inj.refused(); r != nil {
			if err == nil {
				resp.Body.Close()
			}
			return s.refuseSecret(bw, e, r, t.norm.name)
		}
	}
	if err != nil {
		msg := s.sec().redactString(err.Error()) // never a value in a message
		e.Verdict, e.Reason = verdictError, "upstream: "+msg
		s.record(e)
		writeText(bw, http.StatusBadGateway, fmt.Sprintf("jail: %s: upstream: %s\n", host, msg))
		return false
	}
	if note := s.tokenAnswer(req, t, resp, inj, sent); note != "" {
		e.Reason = note
	}
	e.Verdict, e.Status = verdictAllow, resp.StatusCode
	s.sec().redactHead(resp)

	if resp.StatusCode == http.StatusSwitchingProtocols && upgrade != "" {
		if inj != nil {
			e.Injected, e.Kept = inj.names(), inj.keptPlaces()
		}
		return s.upgraded(cl, resp, e)
	}
	removeHopByHop(resp.Header)
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	resp.Close = req.Close
	var redacting *endTracker // the upstream body, when it streams through a redactor
	buffered := false         // the body is in memory
	if s.sec() != nil && bodyAllowed(req.Method, resp.StatusCode) {
		if why := s.sec().unredactable(resp); why != "" {
			resp.Body.Close()
			e.Verdict, e.Status, e.Reason = verdictError, 0, "upstream sent "+why+", which cannot be checked for secrets"
			s.record(e)
			writeText(bw, http.StatusBadGateway, fmt.Sprintf("jail: %s sent %s, which cannot be checked for secrets; ask it for gzip or no content coding\n", host, why))
			return false
		}
		respMem := &held{b: s.mem}
		defer respMem.releaseAll()
		s.holdResponse(resp, respMem)
		redacting, buffered = s.sec().redactBody(resp)
	}
	if req.ProtoMajor == 2 && bodyAllowed(req.Method, resp.StatusCode) {
		// An HTTP/2 stream's answer goes chunked, whose end can carry
		// the trailers.
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	if bodyAllowed(req.Method, resp.StatusCode) && resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 {
		if req.ProtoAtLeast(1, 1) {
			resp.TransferEncoding = []string{"chunked"}
		} else {
			resp.Close = true
		}
	}
	if resp.Trailer == nil && len(resp.TransferEncoding) > 0 {
		// Trailers an upstream sends undeclared (an HTTP/2 server's
		// gRPC status) land here as the body ends, to be redacted and
		// sent on.
		resp.Trailer = http.Header{}
	}
	down := &flushingBody{rc: resp.Body, w: bw}
	if cl.stream != nil {
		down.w = cl.stream
	}
	switch {
	case buffered:
		down.ready = func() bool { return true }
	case upConn != nil && resp.ProtoMajor == 1:
		// Over HTTP/1 the body is the next bytes on the connection: the
		// next read does not wait when they are buffered already (with
		// TLS, a whole record of the largest size).
		need := 1
		if scheme == "https" {
			need = maxTLSRecord
		}
		down.ready = func() bool { return upConn.Buffered() >= need }
		if redacting != nil {
			// Once the redactor has read the end, the connection is the
			// transport's again.
			down.ready = func() bool { return redacting.ended || upConn.Buffered() >= need }
		}
	}
	if resp.Trailer != nil {
		down.end = func() {
			// Framing and routing fields have no meaning in a trailer.
			dropControlTrailers(resp.Trailer)
			if s.sec() != nil && s.sec().vals != nil {
				s.sec().redactHeader(resp.Trailer)
			}
		}
	}
	resp.Body = down
	var toClient io.Writer = writerOnly{bw}
	if cl.conn != nil && cl.raw == io.Writer(cl.conn) {
		toClient = plainWriter{bw: bw, conn: cl.conn}
	}
	if cl.stream != nil {
		err = cl.stream.write(resp)
	} else if err = resp.Write(toClient); err == nil {
		err = bw.Flush()
	}
	resp.Body.Close()
	e.BytesDown = down.n
	keep := err == nil && !resp.Close
	if body != nil {
		var done bool
		if done, keep = body.finish(); done {
			e.BytesUp = body.n
		}
		keep = keep && err == nil && !resp.Close
	}
	if err != nil {
		e.Reason = "copying the response: " + s.sec().redactString(err.Error())
	}
	if inj != nil {
		if r := inj.refused(); r != nil {
			// Found in a body that streamed on after the response began.
			e.Verdict, e.Rule, e.Reason = verdictDeny, "secret "+r.s.name, r.reason(t.norm.name)
			keep = false
		} else {
			e.Injected, e.Kept = inj.names(), inj.keptPlaces()
		}
	}
	s.record(e)
	return keep
}

// refuseSecret answers and logs a request refused because of a secret.
func (s *Server) refuseSecret(bw *bufio.Writer, e Entry, r *secretRefusal, hostName string) bool {
	e.Verdict, e.Rule, e.Reason = verdictDeny, "secret "+r.s.name, r.reason(hostName)
	s.record(e)
	writeText(bw, r.status(), r.message(hostName))
	return false
}

// limitEncoding keeps only the content codings that the proxy can
// decode to redact a response (gzip), so that an upstream cannot echo a
// value compressed beyond its reach; for the same reason a WebSocket is
// offered no extension (permessage-deflate would compress its frames).
func limitEncoding(h http.Header) {
	h.Del("Sec-Websocket-Extensions")
	vs := h.Values("Accept-Encoding")
	if len(vs) == 0 {
		return
	}
	var keep []string
	for _, f := range strings.Split(strings.Join(vs, ","), ",") {
		f = strings.TrimSpace(f)
		name, _, _ := strings.Cut(f, ";")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip", "identity":
			keep = append(keep, f)
		}
	}
	if len(keep) == 0 {
		h.Del("Accept-Encoding")
		return
	}
	h.Set("Accept-Encoding", strings.Join(keep, ", "))
}

func bodyAllowed(method string, status int) bool {
	return method != http.MethodHead && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// removeHopByHop deletes the header fields that concern one connection
// only, and returns the Upgrade protocol if h asked for one, which it then
// keeps, unless it offers cleartext HTTP/2 (h2c), which is dropped.
func removeHopByHop(h http.Header) (upgrade string) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); strings.EqualFold(f, "upgrade") {
				upgrade = h.Get("Upgrade")
			} else if f != "" {
				h.Del(f)
			}
		}
	}
	for _, f := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		h.Del(f)
	}
	if upgradesToH2C(upgrade) {
		// After the switch, HTTP/2 frames would name any :authority on
		// a connection decided for one host, out of the proxy's sight.
		upgrade = ""
		h.Del("Http2-Settings")
	}
	if upgrade != "" {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", upgrade)
	}
	return upgrade
}

// upgradesToH2C reports whether an Upgrade field offers cleartext
// HTTP/2.
func upgradesToH2C(upgrade string) bool {
	for _, p := range strings.Split(upgrade, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(p), "/")
		if strings.EqualFold(name, "h2c") {
			return true
		}
	}
	return false
}

// upgraded relays a connection that switched protocols (WebSocket) and
// logs it when it ends.
func (s *Server) upgraded(cl *client, resp *http.Response, e Entry) bool {
	bw := cl.bw
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		e.Verdict, e.Reason = verdictError, "upstream switched protocols without a connection"
		s.record(e)
		writeText(bw, http.StatusBadGateway, "jail: upstream switched protocols without a connection\n")
		return false
	}
	defer rw.Close()
	if s.sec().compressedStream(resp) {
		e.Verdict, e.Reason = verdictError, "upstream switched to a WebSocket extension it was not offered, which cannot be checked for secrets"
		s.record(e)
		writeText(bw, http.StatusBadGateway, "jail: upstream switched to a WebSocket extension it was not offered, which cannot be checked for secrets\n")
		return false
	}
	removeHopByHop(resp.Header)
	fmt.Fprintf(bw, "HTTP/1.1 101 %s\r\n", http.StatusText(http.StatusSwitchingProtocols))
	resp.Header.Write(bw)
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		e.Reason = err.Error()
		s.record(e)
		return false
	}
	done := make(chan int64, 1)
	var found *streamHit
	if cl.w != nil {
		cl.w.SetDeadline(time.Time{}) // the idle watch bounds it
	}
	idle := watchIdle(s.timeouts.Tunnel, cl.conn, rw)
	go func() {
		n, _ := io.Copy(rw, idle.reader(s.sec().scanStream(cl.br, &found)))
		rw.Close()
		done <- n
	}()
	var echoed *streamHit
	e.BytesDown, _ = io.Copy(cl.raw, idle.reader(s.sec().echoStream(rw, &echoed)))
	cl.conn.Close()
	e.BytesUp = <-done
	idle.stop()
	if echoed != nil && found == nil {
		e.Verdict, e.Rule, e.Reason = verdictDeny, "secret "+echoed.s.name, echoReason(echoed, e.Host)
	}
	s.recordStream(e, found, "an upgraded connection")
	return false
}

// countingBody is a request body handed to the transport: it counts, and
// its Close only notes that the transport is done with it, so that the
// client connection can be drained and reused.
type countingBody struct {
	rc     io.ReadCloser
	n      int64
	eof    bool
	closed chan struct{}
	once   sync.Once
	// trailer is the request's, which net/http fills as the body ends
	// and the transport then sends on.
	trailer *http.Header
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		b.eof = true
		if b.trailer != nil {
			dropControlTrailers(*b.trailer)
		}
	}
	return n, err
}

// controlFields frame, route or control a message: a trailer must not
// carry them, and one that does is not sent on, so that an upstream that
// merges trailers into the header cannot be routed by one to a host that
// was never decided.
var controlFields = []string{"Host", "Content-Length", "Transfer-Encoding", "Trailer", "Content-Encoding",
	"Content-Type", "Content-Range", "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Upgrade",
	"Proxy-Authorization", "Proxy-Authenticate", "Expect", "Max-Forwards", "Range"}

// dropControlTrailers deletes the control fields from a trailer.
func dropControlTrailers(h http.Header) {
	for _, f := range controlFields {
		delete(h, f)
	}
}

func (b *countingBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// finish waits for the transport to let go of the body (done) and reads
// what it left unread, up to a limit; keep reports whether the client
// connection can carry another request.
func (b *countingBody) finish() (done, keep bool) {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-b.closed:
	case <-t.C:
		return false, false
	}
	if b.eof {
		return true, true
	}
	n, err := io.CopyN(io.Discard, b.rc, 256<<10)
	b.n += n
	return true, errors.Is(err, io.EOF)
}

// flushingBody is a response body that flushes what was written to the
// client before every read from upstream that may wait, so streamed
// responses (server-sent events, chunked progress) reach the client as
// they arrive while a bulk download goes out in large writes.
type flushingBody struct {
	rc    io.ReadCloser
	w     pendingWriter
	n     int64
	ready func() bool // whether the next read returns without waiting
	end   func()      // called once the body has ended, before trailers are written
	err   error
}

func (b *flushingBody) Read(p []byte) (int, error) {
	if b.err != nil {
		// After the end, the transport's read loop owns the upstream
		// connection again: ready must not look at it.
		return 0, b.err
	}
	if b.w.Buffered() > 0 && (b.ready == nil || !b.ready()) {
		if err := b.w.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	b.err = err
	if err != nil && b.end != nil {
		b.end()
		b.end = nil
	}
	return n, err
}

func (b *flushingBody) Close() error { return b.rc.Close() }

// pendingWriter holds written bytes until Flush: a *bufio.Writer, or a
// streamWriter.
type pendingWriter interface {
	Buffered() int
	Flush() error
}

// writerOnly hides bufio.Writer's ReadFrom, which would read into the
// buffer that flushingBody flushes.
type writerOnly struct{ io.Writer }

// plainBodyBuf is the buffer a plain HTTP response body is copied with.
const plainBodyBuf = 128 << 10

var plainBodyBufs = sync.Pool{New: func() any { b := make([]byte, plainBodyBuf); return &b }}

// plainWriter writes a response to a client that speaks plain HTTP on
// conn: the head through bw, and a body that is copied whole (one with a
// length, or read to the end; a chunked one goes through bw) straight to
// the connection, bw flushed first, in reads and writes of up to
// plainBodyBuf bytes. A bulk download takes fewer, larger read(2) and
// write(2) calls than through bw, and each write reaches the client at
// once, as a streamed answer needs. The body read is the one forward
// built: counted, checked for secrets and redacted as before.
type plainWriter struct {
	bw   *bufio.Writer
	conn net.Conn
}

func (w plainWriter) Write(p []byte) (int, error) { return w.bw.Write(p) }

func (w plainWriter) ReadFrom(r io.Reader) (int64, error) {
	if err := w.bw.Flush(); err != nil {
		return 0, err
	}
	buf := plainBodyBufs.Get().(*[]byte)
	defer plainBodyBufs.Put(buf)
	return io.CopyBuffer(writerOnly{w.conn}, struct{ io.Reader }{r}, *buf)
}

// connect serves a CONNECT request: a refusal before any tunnel, or a
// tunnel that is intercepted when the client speaks TLS and tunnelled raw
// otherwise.
func (s *Server) connect(c net.Conn, br *bufio.Reader, req *http.Request) {
	e := Entry{Time: time.Now(), Method: http.MethodConnect, Scheme: "tcp"}
	bw := bufio.NewWriterSize(c, 512)
	host, portStr, err := net.SplitHostPort(req.RequestURI)
	port, perr := strconv.Atoi(portStr)
	e.Host, e.Port = host, port
	if err != nil || perr != nil {
		e.Host = req.RequestURI
		e.Verdict, e.Reason = verdictDeny, "invalid host"
		s.record(e)
		writeText(bw, http.StatusBadRequest, fmt.Sprintf("jail: CONNECT %q: want host:port\n", req.RequestURI))
		return
	}
	if reason := s.sec().inHostName(host); reason != "" {
		e.Host, e.Verdict, e.Rule, e.Reason = s.sec().redactString(host), verdictDeny, "secret", reason
		s.record(e)
		writeText(bw, http.StatusForbidden, "jail: the host name carries a secret\n")
		return
	}
	var reason string
	if host, reason = s.namedHost(host); reason != "" {
		e.Verdict, e.Reason = verdictDeny, reason
		s.record(e)
		writeText(bw, http.StatusForbidden, fmt.Sprintf("jail: CONNECT %s: %s\n", host, reason))
		return
	}
	t, r := s.check(s.ctx, host, port, true, heldBy{c, br, e})
	if r != nil {
		if n, ok := normalizeHost(host); ok {
			e.Host = n.name
		}
		e.Verdict, e.Rule, e.Reason = r.verdict, r.rule, r.reason
		s.record(e)
		writeText(bw, r.status(), r.message(host))
		return
	}
	e.Host, e.Rule, e.Verdict = t.norm.name, t.rule, verdictAllow
	s.open(c, br, t, e, func(err error) error {
		if err != nil {
			writeText(bw, http.StatusBadGateway, fmt.Sprintf("jail: %s: %v\n", t.norm.name, err))
			return err
		}
		_, err = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		return err
	})
}

// open serves an allowed tunnel, from CONNECT or SOCKS. accept answers the
// client: the tunnel is open (nil) or the dial failed. A passthrough host
// is dialled first and, when the client speaks TLS, tunnelled raw once its
// ClientHello names the decided host. Otherwise the tunnel is intercepted
// when the client speaks TLS, served request by request when it speaks
// plain HTTP, and tunnelled raw to the checked address when it speaks
// anything else (SSH, a database protocol) or stays silent (a protocol in
// which the server speaks first).
func (s *Server) open(c net.Conn, br *bufio.Reader, t *target, e Entry, accept func(dialErr error) error) {
	if matchAny(s.rules.Load().Passthrough, t.norm, t.port) {
		up, err := s.dial(s.ctx, t)
		if err != nil {
			e.Verdict, e.Reason = verdictError, err.Error()
			s.record(e)
			accept(err)
			return
		}
		if accept(nil) != nil {
			up.Close()
			return
		}
		first, err := peekWithin(c, br, 1, sniffTimeout)
		if err == nil && first[0] == tlsRecord {
			s.passthrough(c, br, up, t, e)
			return
		}
		up.Close() // not TLS: no different from any other tunnel
		s.sniffed(c, br, t, e, err)
		return
	}
	if accept(nil) != nil {
		return
	}
	_, err := peekWithin(c, br, 1, sniffTimeout)
	s.sniffed(c, br, t, e, err)
}

// sniffed serves an open tunnel by what the client sent first (err is the
// error of waiting the sniffing time for its first byte). A client still
// silent then may be waiting for a server that speaks first, or just be
// slow (a busy client's ClientHello): the upstream server is dialled and
// whichever side speaks first decides.
func (s *Server) sniffed(c net.Conn, br *bufio.Reader, t *target, e Entry, err error) {
	var up net.Conn // the upstream server when it spoke first
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		var clientFirst bool
		up, clientFirst, err = s.firstSpeaker(c, br, t)
		if err != nil && !clientFirst {
			e.Verdict, e.Reason = verdictError, err.Error()
			s.record(e)
			return
		}
	}
	var first []byte
	if err == nil && up == nil {
		first, _ = br.Peek(1)
	}
	switch {
	case up != nil:
		s.rawTunnel(c, br, up, t, e)
	case err == nil && first[0] == tlsRecord:
		s.intercept(c, br, t, e)
	case err == nil && s.refuseSSH(c, br, t, e):
		// The client speaks SSH while git push is denied.
	case err == nil && s.speaksHTTP(c, br):
		// Plain HTTP in a tunnel: served as requests, so that a Host
		// header cannot name another site on the same address.
		s.serveTunnel(&client{conn: c, raw: c, w: watched(c), br: br, bw: bufio.NewWriterSize(c, 4<<10), tunnel: t, scheme: "http"}, e)
	case err == nil:
		s.rawTunnel(c, br, nil, t, e)
	default:
		s.record(e) // the client left without a byte
	}
}

// rawTunnel relays a tunnel that is neither TLS nor HTTP (SSH, a
// database protocol, a protocol in which the server speaks first) to the
// checked address, when an Allow entry names the host with this very
// port (or "unknown": "allow" opens every name): the proxy can check no
// name inside such a stream, so an entry that allows a host's HTTPS does
// not let one through to any port of that host. up is the server when it
// spoke first; otherwise it is dialled here, only once the stream is
// allowed.
func (s *Server) rawTunnel(c net.Conn, br *bufio.Reader, up net.Conn, t *target, e Entry) {
	e.Raw = true
	if !s.rules.Load().rawAllowed(t.norm, t.port) {
		if up != nil {
			up.Close()
		}
		s.denyRaw(c, t, e)
		return
	}
	if up == nil {
		var err error
		if up, err = s.dial(s.ctx, t); err != nil {
			e.Verdict, e.Reason = verdictError, err.Error()
			s.record(e)
			return
		}
	}
	up, refused := s.sshAfterBanner(c, br, up, t, &e)
	if !refused {
		s.tunnel(c, br, up, e)
	}
}

// denyRaw logs a raw stream refused for want of an Allow entry with its
// port and tells the client which entry to add, in a line that an SSH
// client shows (with -v) before the server's identification.
func (s *Server) denyRaw(c net.Conn, t *target, e Entry) {
	hp := t.addr()
	e.Verdict = verdictDeny
	e.Reason = fmt.Sprintf("raw tcp (neither TLS nor HTTP) needs a network.allow entry with the port: add %q", hp)
	s.record(e)
	io.WriteString(c, fmt.Sprintf("jail: %s: raw tcp (neither TLS nor HTTP) is not allowed; to allow it, add %q to jail.json \"network.allow\"\r\n", hp, hp))
}

// firstSpeaker dials t and waits, at most the tunnel's idle time, for the
// first byte from the client (clientFirst: br holds it, or err says why
// not) or from the server (the returned conn replays it).
func (s *Server) firstSpeaker(c net.Conn, br *bufio.Reader, t *target) (up net.Conn, clientFirst bool, err error) {
	conn, err := s.dial(s.ctx, t)
	if err != nil {
		return nil, false, err
	}
	uc := &upstreamConn{Conn: conn, r: bufio.NewReader(conn)}
	deadline := time.Now().Add(s.timeouts.Tunnel)
	c.SetReadDeadline(deadline)
	conn.SetReadDeadline(deadline)
	fromServer, fromClient := make(chan error, 1), make(chan error, 1)
	go func() { _, err := uc.r.Peek(1); fromServer <- err }()
	go func() { _, err := br.Peek(1); fromClient <- err }()
	stop := time.Unix(1, 0) // a deadline in the past ends the other wait
	select {
	case err = <-fromClient:
		conn.SetReadDeadline(stop)
		<-fromServer
		clientFirst = true
	case err = <-fromServer:
		c.SetReadDeadline(stop)
		<-fromClient
	}
	c.SetReadDeadline(time.Time{})
	conn.SetReadDeadline(time.Time{})
	if clientFirst || err != nil {
		uc.Close()
		if !clientFirst {
			err = fmt.Errorf("waiting for the upstream server to speak: %w", err)
		}
		return nil, clientFirst, err
	}
	return uc, false, nil
}

// speaksHTTP reports whether the client of a tunnel speaks HTTP/1, waiting
// at most the header timeout for enough of its first line to tell: a
// client that sends its first request a byte at a time must not have it
// relayed raw, where the server at the tunnel's address would read it for
// whatever host its Host header names. Still undecided then, or when the
// buffer is full, it is taken for HTTP, whose reading refuses what is not.
func (s *Server) speaksHTTP(c net.Conn, br *bufio.Reader) bool {
	c.SetReadDeadline(time.Now().Add(s.timeouts.Header))
	defer c.SetReadDeadline(time.Time{})
	for {
		b, _ := br.Peek(br.Buffered())
		if isHTTP, decided := sniffHTTP(b); decided {
			return isHTTP
		}
		if br.Buffered() == br.Size() {
			return true
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return true
		}
	}
}

// sniffHTTP tells from the first bytes a tunnel's client sent whether
// they are a request line that some server would take for HTTP: after
// any empty lines (servers skip them), a token, then on the same line
// "HTTP/" (any case), or a whole line with a space or tab before a "/" (a
// path: HTTP/0.9). A first byte outside a token, or a control byte in the
// line, is another protocol (an SSH banner is a line without either).
// decided is false while the line is incomplete and could still become
// one.
func sniffHTTP(b []byte) (isHTTP, decided bool) {
	b = bytes.TrimLeft(b, "\r\n")
	if len(b) == 0 {
		return false, false
	}
	if !tokenChar(b[0]) {
		return false, true
	}
	line, _, complete := bytes.Cut(b, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	for _, c := range line {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false, true
		}
	}
	if bytes.Contains(bytes.ToLower(line), []byte("http/")) {
		return true, true
	}
	if !complete {
		return false, false
	}
	return bytes.Contains(line, []byte(" /")) || bytes.Contains(line, []byte("\t/")), true
}

// tokenChar reports whether c may be in an HTTP token (a method).
func tokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// passthrough relays a TLS tunnel that is not intercepted, once the
// ClientHello asks for the name that was decided: a different name (a
// fronted domain behind the same CDN address), or none for a name, is
// refused.
func (s *Server) passthrough(c net.Conn, br *bufio.Reader, up net.Conn, t *target, e Entry) {
	c.SetReadDeadline(time.Now().Add(s.timeouts.Handshake))
	hello, sni, err := readClientHello(br)
	c.SetReadDeadline(time.Time{})
	if err == nil {
		if why := sniMismatch(t, sni); why != "" {
			err = errors.New(why)
			e.Verdict = verdictDeny
		}
	} else if errors.Is(err, errHiddenName) || errors.Is(err, errTwoNames) {
		e.Verdict = verdictDeny
	}
	if err != nil {
		up.Close()
		if e.Verdict != verdictDeny {
			e.Verdict, err = verdictError, fmt.Errorf("reading the TLS ClientHello of a passthrough tunnel: %w", err)
		}
		e.Reason, e.BytesUp = err.Error(), int64(len(hello))
		s.record(e)
		return
	}
	s.tunnel(c, io.MultiReader(bytes.NewReader(hello), br), up, e)
}

// tunnel relays raw bytes between the client (read through r) and up and
// logs the tunnel when it ends.
func (s *Server) tunnel(c net.Conn, r io.Reader, up net.Conn, e Entry) {
	if !s.track(up) {
		up.Close()
		e.Verdict, e.Reason = verdictError, "the proxy is shutting down"
		s.record(e)
		return
	}
	defer s.untrack(up)
	c.SetDeadline(time.Time{}) // the idle watch of the relay bounds it
	var found *streamHit
	bytesUp, bytesDown, cut := relay(c, s.sec().scanStream(r, &found), up, s.timeouts.Tunnel)
	e.BytesUp, e.BytesDown = e.BytesUp+bytesUp, e.BytesDown+bytesDown // after what was sent before the relay
	if cut && found == nil {
		e.Reason = fmt.Sprintf("closed after %v without a byte either way", s.timeouts.Tunnel)
	}
	s.recordStream(e, found, "a raw tunnel")
}

// recordStream logs a raw stream (a tunnel, an upgraded connection) when
// it has ended: as a denial when the client's bytes carried a placeholder
// or a real value, which cut it.
func (s *Server) recordStream(e Entry, found *streamHit, what string) {
	if found != nil {
		e.Verdict, e.Rule, e.Reason = verdictDeny, "secret "+found.s.name, s.sec().streamReason(found, what, e.Host, e.Port)
	}
	s.record(e)
}

// peekWithin peeks at the next n bytes of br, read from c, waiting at most
// d for them.
func peekWithin(c net.Conn, br *bufio.Reader, n int, d time.Duration) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(d))
	b, err := br.Peek(n)
	c.SetReadDeadline(time.Time{})
	return b, err
}

// intercept terminates the client's TLS with a certificate for the
// CONNECT host signed by the jail CA and serves the HTTP requests inside,
// each forwarded upstream over TLS verified as usual.
func (s *Server) intercept(c net.Conn, br *bufio.Reader, t *target, e Entry) {
	cfg := s.mitm.Clone()
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.leaf(t.norm.name) }
	cc := &batchConn{Conn: c, r: br}
	tc := tls.Server(cc, cfg)
	defer tc.Close()
	c.SetDeadline(time.Now().Add(s.timeouts.Handshake))
	err := tc.Handshake()
	c.SetDeadline(time.Time{})
	if err != nil {
		e.Verdict, e.Reason = verdictError, fmt.Sprintf("TLS handshake with the client: %v (a client that does not trust the jail CA fails here)", err)
		s.record(e)
		return
	}
	cc.startBatching()
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		s.serveH2(newCoalescedTLS(tc, cc), t, e)
		return
	}
	raw := tlsWriter{tc, cc}
	s.serveTunnel(&client{conn: tc, raw: raw, w: watched(c), br: bufio.NewReaderSize(tc, readBufSize), bw: bufio.NewWriterSize(raw, tlsBatchSize),
		tunnel: t, scheme: "https"}, e)
}

// serveTunnel serves the HTTP requests inside a tunnel, each for the
// tunnel's target only.
func (s *Server) serveTunnel(cl *client, e Entry) {
	for n := 0; ; n++ {
		req, hostHeader, err := s.nextRequest(cl)
		if err != nil {
			if n == 0 {
				e.Scheme, e.Reason = cl.scheme, "no HTTP request inside the tunnel"
				s.record(e)
			}
			badRequest(cl.bw, err)
			return
		}
		if req.Method == http.MethodConnect {
			writeText(cl.bw, http.StatusBadRequest, "jail: CONNECT inside a tunnel\n")
			return
		}
		if !s.forward(cl, req, hostHeader) {
			return
		}
	}
}

// batchConn is the client connection under an intercepting TLS server.
// It reads through the bufio.Reader that already holds the first bytes.
// After the handshake it gathers the TLS records of one write (a
// tlsBatchSize write makes four or five) and sends them in one write(2)
// when tlsWriter flushes.
type batchConn struct {
	net.Conn
	r  *bufio.Reader
	mu sync.Mutex
	w  *bufio.Writer
}

func (c *batchConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return c.Conn.Write(p)
	}
	return c.w.Write(p)
}

func (c *batchConn) startBatching() {
	c.mu.Lock()
	c.w = bufio.NewWriterSize(c.Conn, tlsBatchSize+4*1024)
	c.mu.Unlock()
}

func (c *batchConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return nil
	}
	return c.w.Flush()
}

func (c *batchConn) Close() error {
	c.flush()
	return c.Conn.Close()
}

// tlsWriter writes through the TLS connection and sends the records at
// once.
type tlsWriter struct {
	tc *tls.Conn
	cc *batchConn
}

func (w tlsWriter) Write(p []byte) (int, error) {
	n, err := w.tc.Write(p)
	if err == nil {
		err = w.cc.flush()
	}
	return n, err
}

// upstreamConn is a connection to an upstream server read through r: the
// transport's reads in large chunks, so that a bulk download costs fewer
// read(2) calls, and tells how much it holds; a raw tunnel's replays the
// first bytes firstSpeaker or sshAfterBanner read.
type upstreamConn struct {
	net.Conn
	r *bufio.Reader
	// held is what r held after the last read, for goroutines other than
	// the reader's (the transport reads on one, the body is forwarded on
	// another).
	held atomic.Int64
	// silence, when set, is how long the server may send nothing after
	// the proxy last wrote to it or read from it.
	silence time.Duration
}

func (c *upstreamConn) Read(p []byte) (int, error) {
	if c.silence > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.silence))
	}
	n, err := c.r.Read(p)
	c.held.Store(int64(c.r.Buffered()))
	return n, err
}

// Buffered is how many bytes the reader held after its last read.
func (c *upstreamConn) Buffered() int { return int(c.held.Load()) }

func (c *upstreamConn) Write(p []byte) (int, error) {
	if c.silence > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.silence))
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes the underlying connection when it can.
func (c *upstreamConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
