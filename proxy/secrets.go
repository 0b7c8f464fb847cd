package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Secret is one credential the jailed process only knows as a
// placeholder. The proxy swaps the placeholder for the value in requests
// to the secret's Hosts, refuses a request that carries the placeholder
// anywhere else, and swaps the value back for the placeholder in every
// response.
type Secret struct {
	// Name is the variable's name, for logs ("ANTHROPIC_API_KEY").
	Name string
	// Placeholder is what the jail sees: "jail-secret-<NAME>-<random>".
	Placeholder string
	// Value is the real value. It is never logged and never sent anywhere
	// but Hosts.
	Value string
	// Hosts are where the value may be injected, with the syntax and
	// matching of Rules.Allow: "api.example.com", "*.example.com" (its
	// subdomains), an optional ":port". Empty means nowhere.
	Hosts []string
}

// PlaceholderPrefix starts every placeholder. A request in which it does
// not occur is forwarded untouched.
const PlaceholderPrefix = "jail-secret-"

const (
	// maxSecretBody is the largest request body in which placeholders are
	// replaced, and the largest response body with a Content-Length that
	// is redacted in memory (a larger one is streamed, chunked).
	maxSecretBody = 4 << 20
	// minRedacted is the shortest value that is redacted from responses:
	// replacing a shorter one would corrupt unrelated text.
	minRedacted = 8
)

var (
	prefixBytes = []byte(PlaceholderPrefix)

	errSecretExfil    = errors.New("jail: a secret's placeholder in a request to a host it is not bound to")
	errSecretTooLarge = errors.New("jail: a secret's placeholder in a request body too large to rewrite")
	errSecretHeader   = errors.New("jail: a secret whose value cannot be sent in a header")
)

// escaping is how a value is written where a placeholder stood.
type escaping int

const (
	escRaw    escaping = iota // text/* and untyped bodies, Basic credentials
	escHeader                 // a header field's value: raw, without line breaks
	escJSON                   // inside a JSON string
	escForm                   // application/x-www-form-urlencoded, URL query
	escPath                   // URL path segment
	escXML                    // XML text or attribute
	escCount
)

// secret is a Secret ready for use.
type secret struct {
	name    string
	hosts   []string
	entries []entry
	ph      []byte
	value   [escCount][]byte // the value as written in each context
	header  bool             // the value may be sent in a header field
}

// bound reports whether the secret may be sent to h:port.
func (s *secret) bound(h host, port int) bool {
	for _, e := range s.entries {
		if e.matches(h, port) {
			return true
		}
	}
	return false
}

// secrets is a Server's secrets: the placeholders to look for in
// requests and the values to look for in responses.
type secrets struct {
	list []*secret
	phs  *matcher // pattern i is list[i].ph
	// vals finds the values (raw, and as JSON and URL escapes when they
	// differ) in responses; valPh[i] is what pattern i becomes.
	vals    *matcher
	valPh   [][]byte
	valStrs []string // vals' patterns, to search strings without copying them
}

func newSecrets(list []Secret) (*secrets, error) {
	if len(list) == 0 {
		return nil, nil
	}
	ss := &secrets{}
	seen := map[string]bool{}
	var phs, vals [][]byte
	for _, in := range list {
		if in.Name == "" {
			return nil, errors.New("a secret without a name")
		}
		if !strings.HasPrefix(in.Placeholder, PlaceholderPrefix) || len(in.Placeholder) == len(PlaceholderPrefix) {
			return nil, fmt.Errorf("secret %s: placeholder must start with %q", in.Name, PlaceholderPrefix)
		}
		if seen[in.Placeholder] {
			return nil, fmt.Errorf("secret %s: placeholder used twice", in.Name)
		}
		seen[in.Placeholder] = true
		s := &secret{name: in.Name, hosts: append([]string(nil), in.Hosts...), ph: []byte(in.Placeholder)}
		for _, h := range in.Hosts {
			e, err := parseEntry(h)
			if err != nil {
				return nil, fmt.Errorf("secret %s: host %q: %w", in.Name, h, err)
			}
			s.entries = append(s.entries, e)
		}
		v := in.Value
		s.value[escRaw] = []byte(v)
		s.value[escHeader] = s.value[escRaw]
		s.value[escJSON] = jsonEscape(v)
		s.value[escForm] = []byte(url.QueryEscape(v))
		s.value[escPath] = []byte(url.PathEscape(v))
		s.value[escXML] = xmlEscape(v)
		s.header = !strings.ContainsAny(v, "\r\n\x00")
		ss.list = append(ss.list, s)
		phs = append(phs, s.ph)
		if len(v) >= minRedacted {
			for _, form := range [][]byte{s.value[escRaw], s.value[escJSON], s.value[escForm]} {
				dup := false
				for _, p := range vals {
					dup = dup || bytes.Equal(p, form)
				}
				if !dup {
					vals = append(vals, form)
					ss.valStrs = append(ss.valStrs, string(form))
					ss.valPh = append(ss.valPh, s.ph)
				}
			}
		}
	}
	ss.phs = newMatcher(phs)
	if len(vals) > 0 {
		ss.vals = newMatcher(vals)
	}
	return ss, nil
}

func jsonEscape(v string) []byte {
	b, _ := json.Marshal(v) // a string always marshals
	return b[1 : len(b)-1]
}

func xmlEscape(v string) []byte {
	return []byte(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(v))
}

// redactString replaces every value in s by its placeholder.
func (ss *secrets) redactString(s string) string {
	if ss == nil || ss.vals == nil {
		return s
	}
	found := false
	for _, v := range ss.valStrs {
		if strings.Contains(s, v) {
			found = true
			break
		}
	}
	if !found {
		return s
	}
	out, _, _ := ss.redactor().apply(nil, []byte(s), true)
	return string(out)
}

func (ss *secrets) redactor() replacer {
	return replacer{m: ss.vals, repl: func(k int) ([]byte, error) { return ss.valPh[k], nil }}
}

// redactHeader replaces every value in h's fields by its placeholder.
func (ss *secrets) redactHeader(h http.Header) {
	if ss == nil || ss.vals == nil {
		return
	}
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = ss.redactString(v)
		}
		if r := ss.redactString(k); r != k {
			delete(h, k)
			h[r] = append(h[r], vs...)
		}
	}
}

// injection is what the secrets do to one request to a decided host.
type injection struct {
	ss   *secrets
	host host
	port int

	mu       sync.Mutex
	injected []bool
	refusal  *secretRefusal // the first violation
}

// secretRefusal is a request refused because of a secret.
type secretRefusal struct {
	s     *secret
	err   error // errSecretExfil, errSecretTooLarge or errSecretHeader
	where string
}

// status is the HTTP status the refused client sees.
func (r *secretRefusal) status() int {
	switch r.err {
	case errSecretTooLarge:
		return http.StatusRequestEntityTooLarge
	case errSecretHeader:
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}

func (ss *secrets) begin(h host, port int) *injection {
	return &injection{ss: ss, host: h, port: port, injected: make([]bool, len(ss.list))}
}

// names returns the names of the secrets injected so far.
func (in *injection) names() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var n []string
	for i, ok := range in.injected {
		if ok {
			n = append(n, in.ss.list[i].name)
		}
	}
	return n
}

func (in *injection) refused() *secretRefusal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.refusal
}

// refuse records the first violation and returns its error.
func (in *injection) refuse(k int, err error, where string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.refusal == nil {
		in.refusal = &secretRefusal{s: in.ss.list[k], err: err, where: where}
	}
	return err
}

// injector replaces the placeholders of bound secrets by their values
// written with esc, and refuses any other.
func (in *injection) injector(esc escaping, where string) replacer {
	return replacer{m: in.ss.phs, repl: func(k int) ([]byte, error) {
		s := in.ss.list[k]
		if !s.bound(in.host, in.port) {
			return nil, in.refuse(k, errSecretExfil, where)
		}
		if esc == escHeader && !s.header {
			return nil, in.refuse(k, errSecretHeader, where)
		}
		in.mu.Lock()
		in.injected[k] = true
		in.mu.Unlock()
		return s.value[esc], nil
	}}
}

// checker leaves the placeholders of bound secrets as they are, or
// refuses them with boundErr when that is not nil, and refuses any other.
func (in *injection) checker(boundErr error, where string) replacer {
	return replacer{m: in.ss.phs, repl: func(k int) ([]byte, error) {
		s := in.ss.list[k]
		if !s.bound(in.host, in.port) {
			return nil, in.refuse(k, errSecretExfil, where)
		}
		if boundErr != nil {
			return nil, in.refuse(k, boundErr, where)
		}
		return s.ph, nil
	}}
}

// replaceString rewrites s if it holds a placeholder; ok is false when
// the request must be refused.
func (in *injection) replaceString(s string, esc escaping, where string) (string, bool) {
	if !strings.Contains(s, PlaceholderPrefix) {
		return s, true
	}
	out, _, err := in.injector(esc, where).apply(nil, []byte(s), true)
	if err != nil {
		return s, false
	}
	return string(out), true
}

// header rewrites the placeholders in h; false when the request must be
// refused.
func (in *injection) header(h http.Header, what string) bool {
	for k, vs := range h {
		if strings.Contains(k, PlaceholderPrefix) {
			// Not rewritten, only checked.
			if _, _, err := in.checker(nil, what+" name").apply(nil, []byte(k), true); err != nil {
				return false
			}
		}
		for i, v := range vs {
			var ok bool
			if strings.Contains(v, PlaceholderPrefix) {
				if vs[i], ok = in.replaceString(v, escHeader, what+" "+k); !ok {
					return false
				}
			}
			if k == "Authorization" { // Proxy-Authorization is never sent on (removeHopByHop)
				if vs[i], ok = in.basicAuth(vs[i], what, k); !ok {
					return false
				}
			}
		}
	}
	return true
}

// basicAuth rewrites the placeholders inside a Basic credential (git's
// token as a password).
func (in *injection) basicAuth(v, what, field string) (string, bool) {
	const basic = "basic "
	if len(v) <= len(basic) || !strings.EqualFold(v[:len(basic)], basic) {
		return v, true
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[len(basic):]))
	if err != nil || !bytes.Contains(dec, prefixBytes) {
		return v, true
	}
	out, _, err := in.injector(escRaw, what+" "+field).apply(nil, dec, true)
	if err != nil {
		return v, false
	}
	return v[:len(basic)] + base64.StdEncoding.EncodeToString(out), true
}

// request rewrites the header fields and URL of req; false when the
// request must be refused.
func (in *injection) request(req *http.Request) bool {
	if !in.header(req.Header, "header") {
		return false
	}
	u := req.URL
	var ok bool
	if u.RawQuery, ok = in.replaceString(u.RawQuery, escForm, "URL"); !ok {
		return false
	}
	if p := u.EscapedPath(); strings.Contains(p, PlaceholderPrefix) {
		np, ok := in.replaceString(p, escPath, "URL")
		if !ok {
			return false
		}
		if dec, err := url.PathUnescape(np); err == nil {
			u.Path, u.RawPath = dec, np
		}
	}
	return true
}

// bodyEscaping says whether placeholders are replaced in a request body
// of this type, and how values are written there.
func bodyEscaping(contentType string) (escaping, bool) {
	if contentType == "" {
		return escRaw, true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, false
	}
	typ, sub, _ := strings.Cut(mt, "/")
	switch {
	case sub == "json" || strings.HasSuffix(sub, "+json") || sub == "x-ndjson" || sub == "ndjson" || sub == "jsonl":
		return escJSON, true
	case mt == "application/x-www-form-urlencoded":
		return escForm, true
	case sub == "xml" || strings.HasSuffix(sub, "+xml"):
		return escXML, true
	case typ == "text":
		return escRaw, true
	}
	return 0, false
}

// textualResponse reports whether a response body of this type is
// redacted.
func textualResponse(contentType string) bool {
	if _, ok := bodyEscaping(contentType); ok {
		return true
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/javascript" || mt == "application/x-javascript"
}

// body prepares out's body (read from body) for a bound or unbound host:
//
//   - a textual body up to maxSecretBody is read whole, then its
//     placeholders are replaced (or the request refused) before anything
//     is sent, and Content-Length is fixed;
//   - a larger chunked textual body is streamed, its placeholders
//     replaced on the way (a sliding window finds them across reads);
//   - any other body (binary, compressed, or textual with a
//     Content-Length above maxSecretBody) is streamed unchanged, and a
//     placeholder in it cuts the request: 403 for a host the secret is not
//     bound to, 413 for a textual body that is too large to rewrite.
//
// It returns false when the request must be refused now, and an error
// when the client's body could not be read.
func (in *injection) body(out *http.Request, body *countingBody) (bool, error) {
	textual := false
	var esc escaping
	ce := out.Header.Get("Content-Encoding")
	if ce == "" || strings.EqualFold(ce, "identity") {
		esc, textual = bodyEscaping(out.Header.Get("Content-Type"))
	}
	var head []byte
	if textual && out.ContentLength <= maxSecretBody {
		b, err := readUpTo(body, out.ContentLength, maxSecretBody)
		if err != nil {
			return false, err
		}
		if len(b) <= maxSecretBody {
			return in.whole(out, body, b, esc)
		}
		head = b
	}
	var r replacer
	switch {
	case textual && out.ContentLength < 0:
		r = in.injector(esc, "body")
	case textual:
		r = in.checker(errSecretTooLarge, "body")
	default:
		r = in.checker(nil, "body")
	}
	src := io.Reader(body)
	if head != nil {
		src = io.MultiReader(bytes.NewReader(head), body)
	}
	out.Body = &readCloser{Reader: newReplacingReader(src, r), c: body}
	return true, nil
}

// whole rewrites a body read whole.
func (in *injection) whole(out *http.Request, body *countingBody, b []byte, esc escaping) (bool, error) {
	if out.Trailer != nil && !in.header(out.Trailer, "trailer") {
		return false, nil
	}
	if out.Header.Get("Content-Type") == "" && bytes.IndexByte(b, 0) >= 0 {
		// Untyped and binary: placeholders are not replaced, only checked.
		if _, _, err := in.checker(nil, "body").apply(nil, b, true); err != nil {
			return false, nil
		}
	} else if bytes.Contains(b, prefixBytes) {
		nb, _, err := in.injector(esc, "body").apply(nil, b, true)
		if err != nil {
			return false, nil
		}
		if out.ContentLength >= 0 {
			out.ContentLength = int64(len(nb))
		}
		b = nb
	}
	out.Body = &readCloser{Reader: bytes.NewReader(b), c: body}
	return true, nil
}

// message is the one line a client refused because of a secret sees.
func (r *secretRefusal) message(hostName string) string {
	name := r.s.name
	switch r.err {
	case errSecretTooLarge:
		return fmt.Sprintf("jail: %s is in a request body larger than %d MiB; placeholders are replaced only in textual bodies up to %d MiB, or chunked ones\n",
			name, maxSecretBody>>20, maxSecretBody>>20)
	case errSecretHeader:
		return fmt.Sprintf("jail: %s cannot be sent in a header: its value contains a line break or NUL\n", name)
	}
	if len(r.s.hosts) == 0 {
		return fmt.Sprintf("jail: %s has no binding; add \"secrets\": {\"env\": {%q: [%q]}} to jail.json\n", name, name, hostName)
	}
	return fmt.Sprintf("jail: %s may only be sent to %s; add %q to \"secrets.env\" {%q: %s} in jail.json if this is intended\n",
		name, strings.Join(r.s.hosts, ", "), hostName, name, quotedList(r.s.hosts))
}

// reason is the log's reason for the refusal.
func (r *secretRefusal) reason(hostName string) string {
	name := r.s.name
	switch r.err {
	case errSecretTooLarge:
		return fmt.Sprintf("secret %s in a request body larger than %d MiB", name, maxSecretBody>>20)
	case errSecretHeader:
		return fmt.Sprintf("secret %s cannot be sent in a header (line break or NUL in its value)", name)
	}
	return exfilReason(r.s, "in the "+r.where, hostName)
}

func exfilReason(s *secret, where, hostName string) string {
	bound := "it has no binding in secrets.env"
	if len(s.hosts) > 0 {
		bound = "it may only be sent to " + strings.Join(s.hosts, ", ")
	}
	return fmt.Sprintf("exfiltration attempt: %s %s to %s; %s", s.name, where, hostName, bound)
}

func quotedList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// readUpTo reads r to its end, or to limit+1 bytes when it is longer
// (more than limit means it did not all fit). size is the length
// announced, if any (-1 if none), for which room is made at once.
func readUpTo(r io.Reader, size int64, limit int) ([]byte, error) {
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(min(size, int64(limit)+1)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1))
	return buf.Bytes(), err
}

// readCloser reads from Reader and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r *readCloser) Close() error { return r.c.Close() }

// matcher finds any of a few patterns: the leftmost match, and the
// longest of those that start there.
type matcher struct {
	pats   [][]byte
	prefix []byte // common to every pattern, when long enough to search for
	maxLen int
}

func newMatcher(pats [][]byte) *matcher {
	m := &matcher{pats: pats}
	prefix := pats[0]
	for _, p := range pats {
		m.maxLen = max(m.maxLen, len(p))
		n := 0
		for n < len(prefix) && n < len(p) && prefix[n] == p[n] {
			n++
		}
		prefix = prefix[:n]
	}
	if len(prefix) >= 4 {
		m.prefix = prefix
	}
	return m
}

// find returns the position of the first match in b and which pattern
// matched, or -1, -1.
func (m *matcher) find(b []byte) (int, int) {
	if m.prefix != nil {
		for off := 0; ; {
			i := bytes.Index(b[off:], m.prefix)
			if i < 0 {
				return -1, -1
			}
			i += off
			best := -1
			for k, p := range m.pats {
				if bytes.HasPrefix(b[i:], p) && (best < 0 || len(p) > len(m.pats[best])) {
					best = k
				}
			}
			if best >= 0 {
				return i, best
			}
			off = i + 1
		}
	}
	at, best := -1, -1
	for k, p := range m.pats {
		area := b
		if at >= 0 {
			area = b[:min(len(b), at+len(p))] // only matches that start by at
		}
		i := bytes.Index(area, p)
		if i >= 0 && (at < 0 || i < at || len(p) > len(m.pats[best])) {
			at, best = i, k
		}
	}
	return at, best
}

// partial returns the length of the longest suffix of b that a pattern
// starts with (without being that whole pattern).
func (m *matcher) partial(b []byte) int {
	for n := min(len(b), m.maxLen-1); n > 0; n-- {
		s := b[len(b)-n:]
		for _, p := range m.pats {
			if len(p) > n && p[0] == s[0] && bytes.HasPrefix(p, s) {
				return n
			}
		}
	}
	return 0
}

// longer reports whether b (the bytes from a match to the end of what
// has arrived) is a proper prefix of a pattern longer than the match,
// which more bytes could complete.
func (m *matcher) longer(b []byte, matched int) bool {
	for _, p := range m.pats {
		if len(p) > matched && len(p) > len(b) && bytes.HasPrefix(p, b) {
			return true
		}
	}
	return false
}

// replacer replaces every match of m by what repl returns for it; an
// error from repl stops it.
type replacer struct {
	m    *matcher
	repl func(k int) ([]byte, error)
}

// apply appends b with its matches replaced to dst. Unless final, it
// holds back the end of b that could be the start of a match completed
// by later bytes, and returns its length.
func (r replacer) apply(dst, b []byte, final bool) (out []byte, held int, err error) {
	pos := 0
	for {
		i, k := r.m.find(b[pos:])
		if i < 0 {
			break
		}
		i += pos
		if !final && r.m.longer(b[i:], len(r.m.pats[k])) {
			dst = append(dst, b[pos:i]...)
			return dst, len(b) - i, nil
		}
		rep, err := r.repl(k)
		if err != nil {
			return dst, 0, err
		}
		dst = append(append(dst, b[pos:i]...), rep...)
		pos = i + len(r.m.pats[k])
	}
	if !final {
		held = r.m.partial(b[pos:])
	}
	return append(dst, b[pos:len(b)-held]...), held, nil
}

// replacingReader streams src through a replacer. A match split across
// reads is found: the bytes that could start one are held back until the
// next read (or the end) decides.
type replacingReader struct {
	src    io.Reader
	r      replacer
	buf    []byte // read buffer
	in     []byte // held back
	out    []byte // ready to return
	off    int
	srcErr error // the source's error (io.EOF at the end)
	err    error // the replacer's error
}

func newReplacingReader(src io.Reader, r replacer) *replacingReader {
	return &replacingReader{src: src, r: r, buf: make([]byte, 32<<10)}
}

func (rr *replacingReader) Read(p []byte) (int, error) {
	for rr.off == len(rr.out) {
		if rr.err != nil {
			return 0, rr.err
		}
		if rr.srcErr != nil {
			return 0, rr.srcErr
		}
		n, err := rr.src.Read(rr.buf)
		rr.srcErr = err
		data := rr.buf[:n]
		if len(rr.in) > 0 {
			rr.in = append(rr.in, data...)
			data = rr.in
		}
		out, held, rerr := rr.r.apply(rr.out[:0], data, err != nil)
		if rerr != nil {
			rr.err, rr.out, rr.off = rerr, rr.out[:0], 0
			return 0, rerr
		}
		rr.out, rr.off = out, 0
		rr.in = append(rr.in[:0], data[len(data)-held:]...)
	}
	n := copy(p, rr.out[rr.off:])
	rr.off += n
	return n, nil
}

// scanner finds placeholders in a stream without holding anything back
// (a raw tunnel's protocol may wait for a reply to every byte): it keeps
// the end of the previous read that could start one.
type scanner struct {
	m    *matcher
	tail []byte
	join []byte
}

// scan returns the index of a secret whose placeholder ends in b, or -1.
func (s *scanner) scan(b []byte) int {
	if len(s.tail) > 0 {
		s.join = append(append(s.join[:0], s.tail...), b[:min(len(b), s.m.maxLen-1)]...)
		if i, k := s.m.find(s.join); i >= 0 {
			return k
		}
	}
	if i, k := s.m.find(b); i >= 0 {
		return k
	}
	if len(b) >= s.m.maxLen-1 {
		s.tail = append(s.tail[:0], b[len(b)-s.m.partial(b):]...)
	} else {
		s.join = append(append(s.join[:0], s.tail...), b...)
		s.tail = append(s.tail[:0], s.join[len(s.join)-s.m.partial(s.join):]...)
	}
	return -1
}

// scanningReader cuts a raw stream at the first placeholder.
type scanningReader struct {
	r     io.Reader
	s     scanner
	found func(k int)
}

func (r *scanningReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		if k := r.s.scan(p[:n]); k >= 0 {
			r.found(k)
			return 0, errSecretExfil
		}
	}
	return n, err
}

// scanStream wraps the client's side of a raw stream to hostName: the
// first placeholder of any secret in it cuts the stream and is reported
// through *found (set before the read that fails returns).
func (ss *secrets) scanStream(r io.Reader, found **secret) io.Reader {
	if ss == nil {
		return r
	}
	var mu sync.Mutex
	return &scanningReader{r: r, s: scanner{m: ss.phs}, found: func(k int) {
		mu.Lock()
		defer mu.Unlock()
		if *found == nil {
			*found = ss.list[k]
		}
	}}
}

// streamReason is the log's reason for a raw stream cut at s's
// placeholder.
func (ss *secrets) streamReason(s *secret, what, hostName string, port int) string {
	where := "in " + what
	if h, ok := normalizeHost(hostName); ok && s.bound(h, port) {
		return fmt.Sprintf("exfiltration attempt: %s %s to %s; placeholders are replaced only in HTTP requests the proxy reads", s.name, where, hostName)
	}
	return exfilReason(s, where, hostName)
}

// redactBody makes resp's body (a response that has one) come with every
// value replaced by its placeholder when it is textual:
//
//   - with a Content-Length up to maxSecretBody, it is read whole and
//     redacted, and Content-Length fixed (buffered is true);
//   - otherwise it is streamed through a sliding window and sent without
//     a Content-Length (chunked);
//   - a gzip-encoded one is decoded, then streamed (Content-Encoding
//     dropped). Other codings (br, zstd, deflate) are not redacted; they
//     are never asked for in a request that carries a value.
//
// A binary response is not touched.
//
// streaming, when not nil, reports whether the upstream body has ended
// (so the connection is the transport's again) while its redacted bytes
// stream on.
func (ss *secrets) redactBody(resp *http.Response) (streaming *endTracker, buffered bool) {
	if ss.vals == nil {
		return nil, false
	}
	ct := resp.Header.Get("Content-Type")
	if !textualResponse(ct) {
		return nil, false
	}
	upstream := &endTracker{r: resp.Body}
	src := io.Reader(upstream)
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))) {
	case "", "identity":
		if resp.ContentLength >= 0 && resp.ContentLength <= maxSecretBody {
			b, err := io.ReadAll(resp.Body)
			if ct != "" || bytes.IndexByte(b, 0) < 0 {
				if i, _ := ss.vals.find(b); i >= 0 {
					b, _, _ = ss.redactor().apply(nil, b, true)
					resp.ContentLength = int64(len(b))
				}
			}
			r := io.Reader(bytes.NewReader(b))
			if err != nil {
				r = io.MultiReader(r, &errReader{err})
			}
			resp.Body = &readCloser{Reader: r, c: resp.Body}
			return nil, true
		}
	case "gzip", "x-gzip":
		if resp.StatusCode == http.StatusPartialContent || resp.ContentLength == 0 {
			return nil, false
		}
		br := bufio.NewReader(upstream)
		if magic, _ := br.Peek(2); len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
			resp.Body = &readCloser{Reader: br, c: resp.Body}
			return nil, false
		}
		gz, err := gzip.NewReader(br)
		if err != nil {
			resp.Body = &readCloser{Reader: &errReader{err}, c: resp.Body}
			return nil, false
		}
		resp.Header.Del("Content-Encoding")
		src = gz
	default:
		return nil, false
	}
	resp.Body = &readCloser{Reader: newReplacingReader(src, ss.redactor()), c: resp.Body}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return upstream, false
}

// endTracker notes when its reader has ended.
type endTracker struct {
	r     io.Reader
	ended bool
}

func (t *endTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil {
		t.ended = true
	}
	return n, err
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }
