package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
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
