package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// defaultBuffered is the default of Limits.Buffered.
const defaultBuffered = 32 << 20

var errBusy = errors.New("too many bodies held for inspection at once")

// maxInflated caps the bytes a gzip request body is inflated to when it
// is checked for secrets: sixteen times the largest body checked, far
// above what text compresses by, far below a bomb's thousandfold.
const maxInflated = 16 * maxSecretBody

var errInflated = fmt.Errorf("a gzip request body that inflates past %d MiB is not checked for secrets, so it is not sent", maxInflated>>20)

// errGzipTooLarge refuses a gzip request body larger than the largest
// one inflated for the check: streamed on compressed, it could carry a
// real value out of sight.
var errGzipTooLarge = fmt.Errorf("a gzip request body larger than %d MiB is not checked for secrets, so it is not sent", maxSecretBody>>20)

// budget bounds the bytes that the requests of one Server hold in memory
// whole at once: request bodies read before they are sent (to rewrite
// placeholders, or to tell an npm publish) and responses redacted whole.
// Without it, 256 connections each sending 4 MiB would hold a gigabyte.
type budget struct {
	mu    sync.Mutex
	used  int64
	max   int64
	freed chan struct{} // closed and replaced whenever bytes are given back
}

func newBudget(max int64) *budget { return &budget{max: max, freed: make(chan struct{})} }

// tryTake takes n bytes if they fit. A request may take more than max
// alone: one body is never refused for its size here.
func (b *budget) tryTake(n int64) (ok bool, freed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.max {
		return false, b.freed
	}
	b.used += n
	return true, nil
}

// take takes n bytes, waiting at most wait for them to fit.
func (b *budget) take(n int64, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		ok, freed := b.tryTake(n)
		if ok {
			return true
		}
		select {
		case <-freed:
		case <-timer.C:
			return false
		}
	}
}

func (b *budget) give(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// held is what one request holds of its Server's budget.
type held struct {
	b  *budget
	mu sync.Mutex
	n  int64
}

// reserve takes n more bytes, waiting at most wait.
func (h *held) reserve(n int64, wait time.Duration) bool {
	if n <= 0 {
		return true
	}
	if !h.b.take(n, wait) {
		return false
	}
	h.mu.Lock()
	h.n += n
	h.mu.Unlock()
	return true
}

// tryReserve takes n more bytes if they fit now.
func (h *held) tryReserve(n int64) bool {
	if ok, _ := h.b.tryTake(n); !ok {
		return false
	}
	h.mu.Lock()
	h.n += n
	h.mu.Unlock()
	return true
}

// release gives back up to n of the held bytes.
func (h *held) release(n int64) {
	h.mu.Lock()
	n = min(n, h.n)
	h.n -= n
	h.mu.Unlock()
	h.b.give(n)
}

// releaseAll gives back every held byte.
func (h *held) releaseAll() { h.release(1 << 62) }

// wholeBodySize is what a request body may cost in memory when the proxy
// reads it whole before sending it: up to maxSecretBody, unless its
// length says it is larger (then it is streamed).
func wholeBodySize(req *http.Request) int64 {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength > maxSecretBody {
		return 0
	}
	if req.ContentLength < 0 {
		return maxSecretBody
	}
	return req.ContentLength
}

// readWhole is the memory that forward may hold of req's body at once:
// the secrets check reads a textual or gzip body whole (a textual one
// is rewritten into a copy), the npm publish check a PUT body that is
// not content-encoded, and both a PUT body that is both.
func (s *Server) readWhole(req *http.Request) int64 {
	n := wholeBodySize(req)
	ce := strings.TrimSpace(req.Header.Get("Content-Encoding"))
	identity := ce == "" || strings.EqualFold(ce, "identity")
	var need int64
	if s.cmds.npmPublish != "" && req.Method == http.MethodPut && identity {
		need += n
	}
	if s.sec() != nil {
		_, textual := bodyEscaping(req.Header.Get("Content-Type"))
		switch {
		case gzipped(ce):
			need += n
		case identity && textual:
			need += 2 * n // and its rewritten copy
		}
	}
	return need
}

// holdResponse reserves the memory of a response that would be redacted
// whole, or, when there is no room, makes it look of unknown length so
// that it is streamed through the redactor instead.
func (s *Server) holdResponse(resp *http.Response, h *held) {
	ce := strings.TrimSpace(resp.Header.Get("Content-Encoding"))
	if s.sec().vals == nil || ce != "" && !strings.EqualFold(ce, "identity") ||
		resp.ContentLength < 0 || resp.ContentLength > maxSecretBody {
		return
	}
	if !h.tryReserve(resp.ContentLength) {
		resp.ContentLength = -1
	}
}

// busy answers a request whose body there is no room to hold.
func (s *Server) busy(bw *bufio.Writer, e Entry) bool {
	e.Verdict = verdictError
	e.Reason = fmt.Sprintf("%v (%d MiB); the request was not sent", errBusy, s.limits.Buffered>>20)
	s.record(e)
	writeText(bw, http.StatusServiceUnavailable, "jail: "+e.Reason+"; retry later\n")
	return false
}

// maxRewritten caps a body rewritten whole: a value can be a hundred
// times longer than its placeholder (a PEM key), and a 4 MiB body of
// placeholders would then be rewritten to gigabytes in memory.
const maxRewritten = 2 * maxSecretBody

var errRewritten = fmt.Errorf("a request body whose placeholders expand past %d MiB is not sent", maxRewritten>>20)

// boundRewrite makes r fail with errRewritten once its replacements would
// take a body of n bytes past maxRewritten.
func boundRewrite(r replacer, n int) replacer {
	size, repl := n, r.repl
	r.repl = func(k int) ([]byte, error) {
		b, err := repl(k)
		if size += len(b) - len(r.m.pats[k]); err == nil && size > maxRewritten {
			return nil, errRewritten
		}
		return b, err
	}
	return r
}

// bodyError logs a request whose body could not be read or checked, and
// tells the client why when the body is the reason.
func (s *Server) bodyError(bw *bufio.Writer, e Entry, err error) bool {
	if errors.Is(err, errInflated) || errors.Is(err, errGzipTooLarge) || errors.Is(err, errRewritten) {
		hint := "send it uncompressed"
		if errors.Is(err, errRewritten) {
			hint = "send it in smaller requests"
		}
		e.Verdict, e.Rule, e.Reason = verdictDeny, "secret", err.Error()
		s.record(e)
		writeText(bw, http.StatusRequestEntityTooLarge, "jail: "+err.Error()+"; "+hint+"\n")
		return false
	}
	e.Verdict, e.Reason = verdictError, "reading the request body: "+err.Error()
	s.record(e)
	return false
}

// releasingBody is a request body that gives back the budget held for it
// when the transport closes it, and drops the bytes it read whole then.
type releasingBody struct {
	mu sync.Mutex
	rc io.ReadCloser
	h  *held
}

func (b *releasingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	rc := b.rc
	b.mu.Unlock()
	if rc == nil {
		return 0, io.ErrClosedPipe
	}
	return rc.Read(p)
}

func (b *releasingBody) Close() error {
	b.mu.Lock()
	rc := b.rc
	b.rc = nil
	b.mu.Unlock()
	b.h.releaseAll()
	if rc == nil {
		return nil
	}
	return rc.Close()
}
