package proxy

import (
	"bufio"
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

// serveStream serves one HTTP/2 stream. forward writes its answer as
// HTTP/1.1 into a pipe, read back here and carried on the stream, so that
// both protocols share one per-request path; the trailers read after the
// body go out as the stream's trailers.
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
	pr, pw := io.Pipe()
	bw := bufio.NewWriterSize(pw, writeBufSize)
	cl := &client{raw: pw, bw: bw, tunnel: t, scheme: "https", ctx: r.Context()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.forward(cl, r, "")
		pw.CloseWithError(bw.Flush())
	}()
	began, err := relayResponse(w, r, pr)
	pr.CloseWithError(err) // forward's writes fail from now on
	<-done
	if began && err != nil {
		// A cut answer must not end as if it were whole: the stream is
		// reset.
		panic(http.ErrAbortHandler)
	}
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
