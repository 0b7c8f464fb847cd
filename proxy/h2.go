package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// h2MaxStreams bounds the streams one intercepted HTTP/2 connection may
// have open at once, each of which may hold request memory.
const h2MaxStreams = 64

// h2StreamWindow is how much of a request body a stream may send ahead of
// the proxy's reads.
const h2StreamWindow = 64 << 10

// serveH2 serves an intercepted connection whose client chose HTTP/2 by
// ALPN: every stream is one request through forward, the same decision,
// injection, redaction, limits and log entry as a request over HTTP/1.1,
// for the tunnel's target only. A connection that ends without a stream
// is logged as the tunnel e, as an HTTP/1.1 one without a request is.
func (s *Server) serveH2(tc net.Conn, t *target, e Entry) {
	// Every stream gets a window of its own within the connection's, so
	// that a body not read yet (its request waiting for memory) cannot
	// stall the others on the connection.
	srv := &http2.Server{MaxConcurrentStreams: h2MaxStreams, IdleTimeout: s.timeouts.Idle,
		MaxUploadBufferPerStream: h2StreamWindow, MaxUploadBufferPerConnection: h2MaxStreams * h2StreamWindow}
	var streams atomic.Int64
	srv.ServeConn(tc, &http2.ServeConnOpts{
		Context:    s.ctx,
		BaseConfig: &http.Server{MaxHeaderBytes: readBufSize},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			streams.Add(1)
			s.serveStream(w, r, t)
		}),
	})
	if streams.Load() == 0 {
		e.Scheme, e.Reason = "https", "no HTTP/2 stream inside the tunnel"
		s.record(e)
	}
}

// serveStream serves one HTTP/2 stream through forward, so that both
// protocols share one per-request path. The upstream's answer goes to the
// stream directly; an answer forward writes itself (a refusal, an error)
// is HTTP/1.1, read back here and carried on the stream.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, t *target) {
	if r.Method == http.MethodConnect {
		// As inside an HTTP/1.1 tunnel: sent on, it would ask the
		// server for a raw stream the proxy cannot read.
		http.Error(w, "jail: CONNECT inside a tunnel", http.StatusBadRequest)
		return
	}
	if n := len(r.Header); n > maxHeaderFields {
		http.Error(w, "jail: "+errTooManyFields.Error()+"\n", http.StatusRequestHeaderFieldsTooLarge)
		return
	}
	// The HTTP/2 server asks for the body only when forward first reads
	// it, which is after the decision.
	r.Header.Del("Expect")
	// A body read waits at most the read timeout for the client's next
	// byte, as on HTTP/1.1, instead of holding the stream (and its
	// request's memory) until the whole connection goes idle.
	if r.Body != nil && r.Body != http.NoBody {
		rc := http.NewResponseController(w)
		sw := watchStall(r.Body, s.timeouts.Read, func() { rc.SetReadDeadline(time.Unix(1, 0)) })
		defer sw.stop()
		r.Body = sw
	}
	var own bytes.Buffer // what forward answers itself
	sw := &streamWriter{w: w}
	cl := &client{raw: &own, bw: bufio.NewWriterSize(&own, 4<<10), stream: sw, tunnel: t, scheme: "https", ctx: r.Context()}
	s.forward(cl, r, "")
	if sw.began {
		if sw.err != nil {
			// A cut answer must not end as if it were whole: the
			// stream is reset.
			panic(http.ErrAbortHandler)
		}
		return
	}
	cl.bw.Flush()
	if began, err := relayResponse(w, r, &own); began && err != nil {
		panic(http.ErrAbortHandler)
	}
}

// streamBatch is how much of a response body a stream gathers before it
// hands it to the HTTP/2 server, which frames it: fewer, larger writes
// than one for every read from upstream.
const streamBatch = 128 << 10

// streamWriter is an HTTP/2 stream the upstream's response is written to
// directly, its body gathered in batches of up to streamBatch bytes that
// go out when full or when flushingBody flushes (before a read from
// upstream that may wait).
type streamWriter struct {
	w     http.ResponseWriter
	batch []byte
	began bool  // the head was sent
	err   error // the first write error
}

// Buffered reports the bytes gathered and not handed on yet.
func (sw *streamWriter) Buffered() int { return len(sw.batch) }

// Flush hands the gathered bytes to the stream and sends them at once.
func (sw *streamWriter) Flush() error {
	if sw.err != nil {
		return sw.err
	}
	if len(sw.batch) > 0 {
		_, sw.err = sw.w.Write(sw.batch)
		sw.batch = sw.batch[:0]
	}
	if sw.err == nil {
		sw.err = http.NewResponseController(sw.w).Flush()
	}
	return sw.err
}

// Write gathers p, handing on a full batch.
func (sw *streamWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if sw.err != nil {
			return n, sw.err
		}
		k := min(len(p), cap(sw.batch)-len(sw.batch))
		sw.batch = append(sw.batch, p[:k]...)
		n, p = n+k, p[k:]
		if len(sw.batch) == cap(sw.batch) {
			_, sw.err = sw.w.Write(sw.batch)
			sw.batch = sw.batch[:0]
		}
	}
	return n, sw.err
}

// write sends resp, as forward has made it ready for the client, on the
// stream: the head at once (a stream may wait long for its first byte),
// then the body, then the trailers read after it.
func (sw *streamWriter) write(resp *http.Response) error {
	h := sw.w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	removeHopByHop(h)
	sw.w.WriteHeader(resp.StatusCode)
	sw.began = true
	if err := sw.Flush(); err != nil {
		return err
	}
	buf := plainBodyBufs.Get().(*[]byte)
	defer plainBodyBufs.Put(buf)
	sw.batch = (*buf)[:0:streamBatch]
	defer func() { sw.batch = nil }()
	read := make([]byte, 32<<10)
	if _, err := io.CopyBuffer(writerOnly{sw}, struct{ io.Reader }{resp.Body}, read); err != nil {
		if sw.err == nil {
			sw.err = err
		}
		return err
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	for k, vv := range resp.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
	return nil
}

// relayResponse copies one HTTP/1.1 response read from pr to an HTTP/2
// stream, flushing every read so that a streamed answer reaches the client
// as it comes. began reports whether the head was sent.
func relayResponse(w http.ResponseWriter, r *http.Request, pr io.Reader) (began bool, err error) {
	resp, err := http.ReadResponse(bufio.NewReaderSize(pr, readBufSize), r)
	if err != nil {
		http.Error(w, "jail: no answer\n", http.StatusBadGateway)
		return false, err
	}
	defer resp.Body.Close()
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	removeHopByHop(h)
	w.WriteHeader(resp.StatusCode)
	f, _ := w.(http.Flusher)
	if f != nil {
		f.Flush() // the head goes now: a stream may wait long for its first byte
	}
	buf := make([]byte, writeBufSize)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return true, err
			}
			if f != nil {
				f.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return true, rerr
		}
	}
	for k, vv := range resp.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
	return true, nil
}

// coalesceLimit is how much a coalescer holds before writes wait for the
// connection.
const coalesceLimit = 256 << 10

// coalescedTLS is an intercepted TLS connection to an HTTP/2 client. The
// HTTP/2 server writes every frame on its own (a DATA frame is 16 KiB and
// 9 bytes for most clients, one byte more than a record holds); here the
// frames written while the previous ones are encrypted and sent are
// encrypted together, in records of the largest size, and go out in one
// write(2).
type coalescedTLS struct {
	*tls.Conn
	co  *coalescer
	raw net.Conn // under the TLS connection
}

// coalesceDrain is how long a Close waits for the queued frames to go
// out before it cuts the connection: a client that stopped reading must
// not hold the proxy.
const coalesceDrain = time.Second

func newCoalescedTLS(tc *tls.Conn, cc *batchConn) coalescedTLS {
	co := &coalescer{w: tlsWriter{tc, cc}, done: make(chan struct{})}
	co.cond = sync.NewCond(&co.mu)
	go co.run()
	return coalescedTLS{tc, co, cc.Conn}
}

func (c coalescedTLS) Write(p []byte) (int, error) { return c.co.Write(p) }

// Close sends what is queued, then closes the connection.
func (c coalescedTLS) Close() error {
	c.co.close()
	t := time.NewTimer(coalesceDrain)
	defer t.Stop()
	select {
	case <-c.co.done:
	case <-t.C:
		c.raw.Close() // the write that waits fails
		<-c.co.done
	}
	return c.Conn.Close()
}

// coalescer writes to w, from a goroutine of its own, everything written
// to it since its last write there, in one write. A Write returns once its
// bytes are queued, or an earlier write's error.
type coalescer struct {
	w       io.Writer
	mu      sync.Mutex
	cond    *sync.Cond // queued bytes, room, an error, or the close
	pending []byte
	err     error
	closed  bool
	done    chan struct{} // run has returned
}

func (w *coalescer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && !w.closed && len(w.pending) >= coalesceLimit {
		w.cond.Wait()
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, net.ErrClosed
	}
	w.pending = append(w.pending, p...)
	w.cond.Broadcast()
	return len(p), nil
}

// run writes what is queued until the coalescer is closed and drained, or
// a write fails.
func (w *coalescer) run() {
	defer close(w.done)
	var out []byte
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.pending) == 0 && !w.closed {
			w.cond.Wait()
		}
		if len(w.pending) == 0 {
			return
		}
		out, w.pending = w.pending, out[:0]
		w.mu.Unlock()
		_, err := w.w.Write(out)
		w.mu.Lock()
		if err != nil {
			w.err = err
		}
		w.cond.Broadcast()
		if err != nil {
			return
		}
	}
}

// close lets run write what is queued and return; done tells when it has.
func (w *coalescer) close() {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
}
