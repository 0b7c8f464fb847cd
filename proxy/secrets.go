package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Secret is one credential the jailed process only knows as a
// placeholder. The proxy swaps the placeholder for the value in requests
// to the secret's Hosts, at the places Inject names; forwards it as it is
// to those hosts anywhere else; refuses a request that carries it to any
// other host, and any request that carries the real value itself; and
// swaps the value back for the placeholder in every response.
type Secret struct {
	// Name is the variable's name, for logs ("ANTHROPIC_API_KEY").
	Name string
	// Placeholder is what the jail sees: at least 20 bytes of
	// [A-Za-z0-9._-] with "jail" or "JAIL" in it ("jail-secret-NAME-…",
	// "sk-ant-api03-jail…", "AKIAJAIL…").
	Placeholder string
	// Value is the real value. It is never logged and never sent anywhere
	// but Hosts.
	Value string
	// Hosts are where the value may be injected, with the syntax and
	// matching of Rules.Allow: "api.example.com", "*.example.com" (its
	// subdomains), an optional ":port". Empty means nowhere.
	Hosts []string
	// Inject is where in a request to Hosts the value may be injected:
	// "header" (any request header field), "header:NAME" (that field; a
	// Basic credential in Authorization is decoded), "query" (anywhere in
	// the URL's query), "query:KEY" (that parameter's value), "path" (the
	// URL path), "body". Empty means request header fields only.
	Inject []string
	// Paths, when set, are the only URL paths (matched exactly) of
	// requests to Hosts the value is injected into: a sign-in's refresh
	// token goes to its token endpoint, not to every page of its host.
	// Elsewhere on Hosts the placeholder stays as it is.
	Paths []string
}

// PlaceholderPrefix starts the placeholders of values that have no shape
// of their own; shaped placeholders keep their format's prefix instead
// ("ghp_jail…"), so no prefix is common to them all.
const PlaceholderPrefix = "jail-secret-"

const (
	// maxSecretBody is the largest request body in which placeholders are
	// replaced, and the largest response body with a Content-Length that
	// is redacted in memory (a larger one is streamed, chunked).
	maxSecretBody = 4 << 20
	// minPlaceholder is the shortest placeholder accepted.
	minPlaceholder = 20
)

var (
	errSecretExfil    = errors.New("jail: a secret's placeholder in a request to a host it is not bound to")
	errSecretTooLarge = errors.New("jail: a secret's placeholder in a request body too large to rewrite")
	errSecretHeader   = errors.New("jail: a secret whose value cannot be sent in a header")
	errSecretValue    = errors.New("jail: a secret's real value in a request")
	errSecretClear    = errors.New("jail: a secret's value to be sent in clear text")
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

// placeKind is the part of a request a placeholder is in.
type placeKind int

const (
	inHeader placeKind = iota
	inHeaderName
	inQuery
	inPath
	inBody
	inTrailer
)

// place is where in a request a placeholder was found: the kind, and the
// header field's canonical name or the query parameter's key.
type place struct {
	kind placeKind
	name string
}

// String is the place for logs and messages: "the header X-Api-Key".
func (p place) String() string {
	switch p.kind {
	case inHeader:
		return "the header " + p.name
	case inHeaderName:
		return "a header field name"
	case inQuery:
		if p.name == "" {
			return "the URL query"
		}
		return "the URL query parameter " + p.name
	case inPath:
		return "the URL path"
	case inTrailer:
		return "the trailer " + p.name
	}
	return "the body"
}

// locations is where a secret's value may be injected (Secret.Inject).
type locations struct {
	anyHeader, anyQuery, path, body bool
	headers, query                  map[string]bool
}

// CheckLocation returns an error when loc is not a place in a request
// that Secret.Inject can name.
func CheckLocation(loc string) error {
	_, err := parseLocations([]string{loc})
	return err
}

func parseLocations(list []string) (locations, error) {
	l := locations{headers: map[string]bool{}, query: map[string]bool{}}
	if len(list) == 0 {
		l.anyHeader = true
	}
	for _, loc := range list {
		kind, name, named := strings.Cut(loc, ":")
		switch {
		case !named && kind == "header":
			l.anyHeader = true
		case !named && kind == "query":
			l.anyQuery = true
		case !named && kind == "path":
			l.path = true
		case !named && kind == "body":
			l.body = true
		case kind == "header" && validFieldName(name):
			l.headers[http.CanonicalHeaderKey(name)] = true
		case kind == "query" && name != "" && !strings.ContainsAny(name, "&=#\x00\r\n"):
			l.query[name] = true
		default:
			return l, fmt.Errorf("%q is not an injection location (use header, header:NAME, query, query:KEY, path or body)", loc)
		}
	}
	return l, nil
}

// validFieldName reports whether s is an HTTP header field name (a token).
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// allows reports whether a value may be injected at p.
func (l *locations) allows(p place) bool {
	switch p.kind {
	case inHeader, inTrailer:
		return l.anyHeader || l.headers[p.name]
	case inQuery:
		return l.anyQuery || p.name != "" && l.query[p.name]
	case inPath:
		return l.path
	case inBody:
		return l.body
	}
	return false // a header field's name never gets a value
}

// secret is a Secret ready for use.
type secret struct {
	name    string
	hosts   []string
	entries []entry
	loc     locations
	paths   []string // the URL paths it may be injected at; nil: any
	ph      []byte
	value   [escCount][]byte // the value as written in each context
	header  bool             // the value may be sent in a header field
	spelled []spelling       // empty for a value shorter than minSearched
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

// atPath reports whether the secret may be injected into a request for
// the URL path.
func (s *secret) atPath(path string) bool {
	return s.paths == nil || slices.Contains(s.paths, path)
}

// secrets is a Server's secrets: the placeholders and real values to
// look for in requests and the values to look for in responses.
type secrets struct {
	list []*secret
	// req finds, in one pass, every placeholder and every spelling of
	// every value in a request; reqPats[i] says what pattern i is.
	req     *matcher
	reqPats []reqPattern
	// hostm is req's patterns in lower case, for host names, which are
	// case-insensitive.
	hostm *matcher
	// vals finds the spellings of the values in responses; valPh[i] is
	// what pattern i becomes. Nil when no value is long enough.
	vals  *matcher
	valPh [][]byte
}

// reqPattern is one of the request matcher's patterns: secret s's
// placeholder when spelling is nil, else that spelling of its value.
type reqPattern struct {
	s        int
	spelling *spelling
}

func newSecrets(list []Secret) (*secrets, error) {
	if len(list) == 0 {
		return nil, nil
	}
	ss := &secrets{}
	seen := map[string]bool{}
	var phs, spelled [][]byte
	var spells []reqPattern
	for _, in := range list {
		s, err := newSecret(in, seen)
		if err != nil {
			return nil, err
		}
		k := len(ss.list)
		ss.list = append(ss.list, s)
		phs = append(phs, s.ph)
		ss.reqPats = append(ss.reqPats, reqPattern{s: k})
		for i := range s.spelled {
			sp := &s.spelled[i]
			spelled = append(spelled, sp.text)
			spells = append(spells, reqPattern{s: k, spelling: sp})
			ss.valPh = append(ss.valPh, sp.redacted)
		}
	}
	ss.reqPats = append(ss.reqPats, spells...)
	ss.req = newMatcher(append(phs, spelled...))
	lower := make([][]byte, len(ss.req.pats))
	for i, p := range ss.req.pats {
		lower[i] = bytes.ToLower(p)
	}
	ss.hostm = newMatcher(lower)
	if len(spelled) > 0 {
		ss.vals = newMatcher(spelled)
	}
	return ss, nil
}

func newSecret(in Secret, seen map[string]bool) (*secret, error) {
	if in.Name == "" {
		return nil, errors.New("a secret without a name")
	}
	if err := checkPlaceholder(in.Placeholder); err != nil {
		return nil, fmt.Errorf("secret %s: %w", in.Name, err)
	}
	if seen[in.Placeholder] {
		return nil, fmt.Errorf("secret %s: placeholder used twice", in.Name)
	}
	seen[in.Placeholder] = true
	loc, err := parseLocations(in.Inject)
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", in.Name, err)
	}
	s := &secret{name: in.Name, hosts: append([]string(nil), in.Hosts...), ph: []byte(in.Placeholder), loc: loc, paths: append([]string(nil), in.Paths...)}
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
	s.value[escJSON] = jsonEscape(v, true)
	s.value[escForm] = []byte(url.QueryEscape(v))
	s.value[escPath] = []byte(url.PathEscape(v))
	s.value[escXML] = xmlEscape(v)
	s.header = !strings.ContainsAny(v, "\r\n\x00")
	if len(v) >= minSearched {
		s.spelled = spellings(v, in.Placeholder)
	}
	return s, nil
}

// checkPlaceholder holds a placeholder to the shape the proxy relies on:
// long enough, written the same in every context (so a byte search finds
// it in a URL, a JSON string or a header) and marked.
func checkPlaceholder(ph string) error {
	if len(ph) < minPlaceholder {
		return fmt.Errorf("placeholder must be at least %d bytes", minPlaceholder)
	}
	for i := 0; i < len(ph); i++ {
		c := ph[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return errors.New("placeholder must be made of A-Z a-z 0-9 . _ -")
		}
	}
	if !strings.Contains(ph, "jail") && !strings.Contains(ph, "JAIL") {
		return errors.New(`placeholder must contain "jail" or "JAIL"`)
	}
	return nil
}

func xmlEscape(v string) []byte {
	return []byte(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(v))
}

// redactString replaces every spelling of a value in s.
func (ss *secrets) redactString(s string) string {
	if ss == nil || ss.vals == nil {
		return s
	}
	if i, _ := ss.vals.findString(s); i < 0 {
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

// redactHead replaces every value in resp's status line (an upstream
// may write any reason phrase, and it is passed on) and header fields.
func (ss *secrets) redactHead(resp *http.Response) {
	if ss == nil {
		return
	}
	resp.Status = ss.redactString(resp.Status)
	ss.redactHeader(resp.Header)
}

// injection is what the secrets do to one request to a decided host.
type injection struct {
	ss   *secrets
	host host
	port int
	path string // the request's URL path
	// cleartext: the request goes over the network unencrypted, so no
	// value is injected into it.
	cleartext bool

	mu       sync.Mutex
	injected []bool
	kept     []string       // "NAME in the body": bound placeholders left as they are
	refusal  *secretRefusal // the first violation
}

// secretRefusal is a request refused because of a secret.
type secretRefusal struct {
	s        *secret
	err      error // one of the errSecret* errors
	where    place
	spelling string // how the real value was written, for errSecretValue
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

// beginRequest is begin for a request to t sent with scheme. A request in
// clear text (plain HTTP) gets no value injected unless every address it
// is dialled at is a loopback one (a name network.hosts maps to a local
// server): anywhere else the value would cross the network readable by
// whoever is on the path.
func (ss *secrets) beginRequest(t *target, scheme, path string) *injection {
	in := ss.begin(t.norm, t.port)
	in.path = path
	in.cleartext = scheme == "http" && !loopbackOnly(t.addrs)
	return in
}

// loopbackOnly reports whether every "ip:port" in addrs is a loopback
// address (and there is at least one).
func loopbackOnly(addrs []string) bool {
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			return false
		}
	}
	return len(addrs) > 0
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

// keptPlaces returns where bound placeholders were forwarded unchanged.
func (in *injection) keptPlaces() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.kept...)
}

func (in *injection) refused() *secretRefusal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.refusal
}

// refuse records the first violation and returns its error.
func (in *injection) refuse(r secretRefusal) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.refusal == nil {
		in.refusal = &r
	}
	return r.err
}

func (in *injection) keep(s *secret, p place) {
	k := s.name + " in " + p.String()
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, have := range in.kept {
		if have == k {
			return
		}
	}
	in.kept = append(in.kept, k)
}

// mode is what a rewriter does with a bound placeholder at a place its
// binding allows.
type mode int

const (
	modeInject   mode = iota // inject the value
	modeKeep                 // leave it (a binary body, a header field's name)
	modeTooLarge             // refuse: a textual body too large to rewrite
)

// rewriter goes once over bytes from p. A spelling of a real value
// refuses the request, whatever the host: the jailed process was never
// given it, so it can only be sending what it should not have. A
// placeholder of a secret not bound to the host refuses it too. A bound
// placeholder gets the value, written with esc, where the binding allows
// p, and is left as it is (and noted as kept) anywhere else.
func (in *injection) rewriter(p place, esc escaping, md mode) replacer {
	return replacer{m: in.ss.req, repl: func(k int) ([]byte, error) {
		pat := in.ss.reqPats[k]
		s := in.ss.list[pat.s]
		switch {
		case pat.spelling != nil:
			return nil, in.refuse(secretRefusal{s: s, err: errSecretValue, where: p, spelling: pat.spelling.label})
		case !s.bound(in.host, in.port):
			return nil, in.refuse(secretRefusal{s: s, err: errSecretExfil, where: p})
		case md == modeKeep || !s.loc.allows(p) || !s.atPath(in.path):
			in.keep(s, p)
			return s.ph, nil
		case md == modeTooLarge:
			return nil, in.refuse(secretRefusal{s: s, err: errSecretTooLarge, where: p})
		case esc == escHeader && !s.header:
			return nil, in.refuse(secretRefusal{s: s, err: errSecretHeader, where: p})
		case in.cleartext:
			return nil, in.refuse(secretRefusal{s: s, err: errSecretClear, where: p})
		}
		in.mu.Lock()
		in.injected[pat.s] = true
		in.mu.Unlock()
		return s.value[esc], nil
	}}
}

// rewriteString rewrites s if it holds a placeholder or a value; ok is
// false when the request must be refused.
func (in *injection) rewriteString(s string, p place, esc escaping, md mode) (string, bool) {
	if i, _ := in.ss.req.findString(s); i < 0 {
		return s, true
	}
	out, _, err := in.rewriter(p, esc, md).apply(nil, []byte(s), true)
	if err != nil {
		return s, false
	}
	return string(out), true
}

// header rewrites the placeholders in h (the header, or the trailer when
// kind is inTrailer); false when the request must be refused.
func (in *injection) header(h http.Header, kind placeKind) bool {
	for k, vs := range h {
		if _, ok := in.rewriteString(k, place{kind: inHeaderName}, escHeader, modeKeep); !ok {
			return false
		}
		for i, v := range vs {
			p := place{kind: kind, name: k}
			var ok bool
			if vs[i], ok = in.rewriteString(v, p, escHeader, modeInject); !ok {
				return false
			}
			if k == "Authorization" { // Proxy-Authorization is never sent on (removeHopByHop)
				if vs[i], ok = in.basicAuth(vs[i], p); !ok {
					return false
				}
			}
		}
	}
	return true
}

// basicAuth rewrites the placeholders inside a Basic credential (git's
// token as a password).
func (in *injection) basicAuth(v string, p place) (string, bool) {
	const basic = "basic "
	if len(v) <= len(basic) || !strings.EqualFold(v[:len(basic)], basic) {
		return v, true
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[len(basic):]))
	if err != nil {
		return v, true
	}
	if i, _ := in.ss.req.find(dec); i < 0 {
		return v, true
	}
	out, _, err := in.rewriter(p, escRaw, modeInject).apply(nil, dec, true)
	if err != nil {
		return v, false
	}
	return v[:len(basic)] + base64.StdEncoding.EncodeToString(out), true
}

// request rewrites the header fields and URL of req; false when the
// request must be refused.
func (in *injection) request(req *http.Request) bool {
	if !in.header(req.Header, inHeader) {
		return false
	}
	u := req.URL
	// The URL is checked as sent, then unescaped: a value URL-escaped
	// over another spelling ("\/" in a path written %5C/) is found too.
	query, path := place{kind: inQuery}, place{kind: inPath}
	if !in.noValue(u.RawQuery, query) || !in.noValue(u.EscapedPath(), path) || !in.noValue(u.Path, path) {
		return false
	}
	if q, err := url.QueryUnescape(u.RawQuery); err == nil && !in.noValue(q, query) {
		return false
	}
	var ok bool
	if u.RawQuery, ok = in.query(u.RawQuery); !ok {
		return false
	}
	p := u.EscapedPath()
	if i, _ := in.ss.req.findString(p); i < 0 {
		return true
	}
	np, ok := in.rewriteString(p, place{kind: inPath}, escPath, modeInject)
	if !ok {
		return false
	}
	if dec, err := url.PathUnescape(np); err == nil {
		u.Path, u.RawPath = dec, np
	}
	return true
}

// query rewrites a URL's raw query parameter by parameter, so that a
// binding can name the parameter its value goes in. request has checked
// the whole query for real values first: a value with '&' in it spans
// parameters.
func (in *injection) query(raw string) (string, bool) {
	if i, _ := in.ss.req.findString(raw); i < 0 {
		return raw, true
	}
	parts := strings.Split(raw, "&")
	for i, part := range parts {
		key, val, hasVal := strings.Cut(part, "=")
		name, err := url.QueryUnescape(key)
		if err != nil {
			name = key
		}
		nk, ok := in.rewriteString(key, place{kind: inQuery}, escForm, modeInject)
		if !ok {
			return raw, false
		}
		parts[i] = nk
		if hasVal {
			nv, ok := in.rewriteString(val, place{kind: inQuery, name: name}, escForm, modeInject)
			if !ok {
				return raw, false
			}
			parts[i] += "=" + nv
		}
	}
	return strings.Join(parts, "&"), true
}

// noValue refuses the request when s holds a spelling of a real value;
// placeholders are left to the caller.
func (in *injection) noValue(s string, p place) bool {
	for off := 0; off < len(s); {
		i, k := in.ss.req.findString(s[off:])
		if i < 0 {
			return true
		}
		if pat := in.ss.reqPats[k]; pat.spelling != nil {
			in.refuse(secretRefusal{s: in.ss.list[pat.s], err: errSecretValue, where: p, spelling: pat.spelling.label})
			return false
		}
		off += i + 1
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

// body prepares out's body (read from body) for a bound or unbound host.
// Every body, whatever its type, is checked for real values and
// placeholders; only a textual one gets values injected:
//
//   - a textual body up to maxSecretBody is read whole, then rewritten
//     (or the request refused) before anything is sent, and
//     Content-Length is fixed;
//   - a larger chunked textual body is streamed, rewritten on the way (a
//     sliding window finds what is split across reads);
//   - a gzip-encoded body up to maxSecretBody is read whole and checked
//     as it inflates, then sent as it came; a larger one is refused
//     (errGzipTooLarge), since its compressed bytes hide what it holds;
//   - any other body (binary, compressed, or textual with a
//     Content-Length above maxSecretBody) is streamed unchanged, bound
//     placeholders kept, and a real value or a placeholder to a host its
//     secret is not bound to cuts the request (403), as does a
//     placeholder that should be injected into a textual body too large
//     to rewrite (413).
//
// It returns false when the request must be refused now, and an error
// when the client's body could not be read, or checked within bounds
// (errInflated, errGzipTooLarge, errRewritten).
func (in *injection) body(out *http.Request, body *countingBody) (bool, error) {
	textual := false
	var esc escaping
	ce := out.Header.Get("Content-Encoding")
	if ce == "" || strings.EqualFold(ce, "identity") {
		esc, textual = bodyEscaping(out.Header.Get("Content-Type"))
	}
	var head []byte
	if gzipped(ce) && out.ContentLength <= maxSecretBody {
		b, err := readUpTo(body, out.ContentLength, maxSecretBody)
		if err != nil {
			return false, err
		}
		if len(b) > maxSecretBody {
			return false, errGzipTooLarge
		}
		if ok, err := in.inflatedClean(b); !ok {
			return false, err
		}
		out.Body = &readCloser{Reader: in.trailerChecked(bytes.NewReader(b), out), c: body}
		return true, nil
	}
	if gzipped(ce) {
		return false, errGzipTooLarge
	}
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
	md := modeKeep
	switch {
	case textual && out.ContentLength < 0:
		md = modeInject
	case textual:
		md = modeTooLarge
	}
	src := io.Reader(body)
	if head != nil {
		src = io.MultiReader(bytes.NewReader(head), body)
	}
	out.Body = &readCloser{Reader: in.trailerChecked(newReplacingReader(src, in.rewriter(place{kind: inBody}, esc, md)), out), c: body}
	return true, nil
}

// trailerChecked reads r, and at its end rewrites out's trailer (which
// the client has sent by then) as the header is, so that a real value or
// an unbound placeholder cannot follow a streamed body: the end of the
// body fails instead, before the transport sends the trailer.
func (in *injection) trailerChecked(r io.Reader, out *http.Request) io.Reader {
	return &trailerReader{r: r, check: func() bool { return out.Trailer == nil || in.header(out.Trailer, inTrailer) }}
}

type trailerReader struct {
	r     io.Reader
	check func() bool
	done  bool
}

func (t *trailerReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err == io.EOF && !t.done {
		t.done = true
		if !t.check() {
			return n, errSecretExfil
		}
	}
	return n, err
}

func gzipped(ce string) bool {
	ce = strings.ToLower(strings.TrimSpace(ce))
	return ce == "gzip" || ce == "x-gzip"
}

// inflatedClean checks what a gzip-encoded body read whole inflates to,
// which is sent on compressed as it came: a real value or an unbound
// placeholder compressed out of sight is refused like one in plain
// text. It is streamed, never held inflated, so a small body that
// inflates hugely costs time, not memory; what follows a gzip error is
// what the upstream cannot inflate either. A body that inflates past
// maxInflated (a gzip bomb: 4 MiB of it inflate to 4 GiB, a second of
// CPU per request) is refused with errInflated.
func (in *injection) inflatedClean(b []byte) (bool, error) {
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return true, nil
	}
	lr := &io.LimitedReader{R: gz, N: maxInflated + 1}
	io.Copy(io.Discard, newReplacingReader(lr, in.rewriter(place{kind: inBody}, escRaw, modeKeep)))
	if lr.N == 0 {
		return false, errInflated
	}
	return in.refused() == nil, nil
}

// whole rewrites a body read whole.
func (in *injection) whole(out *http.Request, body *countingBody, b []byte, esc escaping) (bool, error) {
	if out.Trailer != nil && !in.header(out.Trailer, inTrailer) {
		return false, nil
	}
	if i, _ := in.ss.req.find(b); i >= 0 {
		md := modeInject
		if out.Header.Get("Content-Type") == "" && bytes.IndexByte(b, 0) >= 0 {
			md = modeKeep // untyped and binary: nothing is injected
		}
		nb, _, err := boundRewrite(in.rewriter(place{kind: inBody}, esc, md), len(b)).apply(nil, b, true)
		if errors.Is(err, errRewritten) {
			return false, err
		}
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
	case errSecretClear:
		return fmt.Sprintf("jail: %s is not sent in clear text to %s; use https://%s\n", name, hostName, hostName)
	case errSecretValue:
		return fmt.Sprintf("jail: the real value of %s (%s) is in %s to %s; send its placeholder, which the proxy replaces where %s is bound\n",
			name, r.spelling, r.where, hostName, name)
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
	case errSecretClear:
		return fmt.Sprintf("secret %s not injected into a plain HTTP request to %s, which is not a loopback address", name, hostName)
	case errSecretValue:
		return valueReason(r.s, r.spelling, "in "+r.where.String(), hostName)
	}
	return exfilReason(r.s, "in "+r.where.String(), hostName)
}

func exfilReason(s *secret, where, hostName string) string {
	bound := "it has no binding in secrets.env"
	if len(s.hosts) > 0 {
		bound = "it may only be sent to " + strings.Join(s.hosts, ", ")
	}
	return fmt.Sprintf("exfiltration attempt: %s %s to %s; %s", s.name, where, hostName, bound)
}

func valueReason(s *secret, spelling, where, hostName string) string {
	return fmt.Sprintf("exfiltration attempt: real value of %s (%s) %s to %s", s.name, spelling, where, hostName)
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

// scanner finds placeholders and real values in a stream across reads:
// it keeps the end of the previous read that could start one.
type scanner struct {
	m    *matcher
	tail []byte
	join []byte
}

// scan returns the index of a pattern that ends in b, or -1.
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

// minHeld is the shortest start of a pattern that a raw stream holds
// back until the next bytes say whether they complete it. A shorter one
// passes at once, so that a protocol that waits for a reply to every
// byte is not stalled by a byte that happens to start a pattern; it is
// also the most of a value's spelling that can leave before the stream
// is cut (three bytes, which reveal nothing of a value long enough to be
// searched for).
const minHeld = 4

// scanningReader cuts a raw stream at the first placeholder or value. It
// holds back the end of what it read while that end is the start of a
// pattern at least minHeld long.
type scanningReader struct {
	r     io.Reader
	s     scanner
	found func(k int)
	buf   []byte
	held  []byte // scanned, not yet passed on
	out   []byte // ready to pass on
	err   error
}

func (r *scanningReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			if len(r.held) > 0 && r.err != errSecretExfil {
				// The stream ended: what was held completes nothing.
				r.out, r.held = r.held, nil
				break
			}
			return 0, r.err
		}
		if r.buf == nil {
			r.buf = make([]byte, 32<<10)
		}
		n, err := r.r.Read(r.buf)
		r.err = err
		if n == 0 {
			continue
		}
		if k := r.s.scan(r.buf[:n]); k >= 0 {
			r.found(k)
			r.err, r.held = errSecretExfil, nil
			return 0, errSecretExfil
		}
		data := append(r.held, r.buf[:n]...)
		h := r.s.m.partial(data)
		if h < minHeld {
			h = 0
		}
		r.out = append(r.out[:0], data[:len(data)-h]...)
		r.held = append([]byte(nil), data[len(data)-h:]...)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// streamHit is what cut a raw stream: secret s's placeholder, or its
// real value written as spelling.
type streamHit struct {
	s        *secret
	spelling string
}

// scanStream wraps the client's side of a raw stream: the first
// placeholder of any secret in it, or the first spelling of a real value,
// cuts the stream and is reported through *found (set before the read
// that fails returns).
func (ss *secrets) scanStream(r io.Reader, found **streamHit) io.Reader {
	if ss == nil {
		return r
	}
	var mu sync.Mutex
	return &scanningReader{r: r, s: scanner{m: ss.req}, found: func(k int) {
		mu.Lock()
		defer mu.Unlock()
		if *found == nil {
			pat := ss.reqPats[k]
			*found = &streamHit{s: ss.list[pat.s]}
			if pat.spelling != nil {
				(*found).spelling = pat.spelling.label
			}
		}
	}}
}

// echoStream wraps the upstream's side of an upgraded connection (a
// WebSocket): the first spelling of a real value in it cuts the stream
// and is reported through *found. A bound host got the value in the
// upgrade request and may echo it in any frame; the frames cannot be
// redacted in place without holding back the end of each one, which
// would stall the protocol, so the connection is cut instead.
func (ss *secrets) echoStream(r io.Reader, found **streamHit) io.Reader {
	if ss == nil || ss.vals == nil {
		return r
	}
	var mu sync.Mutex
	return &scanningReader{r: r, s: scanner{m: ss.vals}, found: func(k int) {
		mu.Lock()
		defer mu.Unlock()
		if *found == nil {
			pat := ss.reqPats[len(ss.list)+k] // vals are req's patterns after the placeholders
			*found = &streamHit{s: ss.list[pat.s], spelling: pat.spelling.label}
		}
	}}
}

// compressedStream reports whether an upgraded connection's upstream took
// up a WebSocket extension (limitEncoding offers none): its frames could
// carry a value compressed out of echoStream's sight.
func (ss *secrets) compressedStream(resp *http.Response) bool {
	return ss != nil && ss.vals != nil && resp.Header.Get("Sec-Websocket-Extensions") != ""
}

// echoReason is the log's reason for an upgraded connection cut at a
// real value its upstream sent.
func echoReason(hit *streamHit, hostName string) string {
	return fmt.Sprintf("real value of %s (%s) sent by %s in an upgraded connection; cut before it reached the jail", hit.s.name, hit.spelling, hostName)
}

// inHostName returns the reason to refuse a host name that carries a
// placeholder or a spelling of a real value ("<hex>.attacker.example"
// under an allowed wildcard): looking it up would already send it to a
// resolver. "" when it carries neither. The reason names the host with
// the value redacted, as the log must show it.
func (ss *secrets) inHostName(name string) string {
	if ss == nil {
		return ""
	}
	i, k := ss.hostm.findString(strings.ToLower(name))
	if i < 0 {
		return ""
	}
	name = ss.redactString(name)
	pat := ss.reqPats[k]
	s := ss.list[pat.s]
	if pat.spelling != nil {
		return valueReason(s, pat.spelling.label, "in the host name", name)
	}
	return exfilReason(s, "in the host name", name)
}

// streamReason is the log's reason for a raw stream cut at what hit.
func (ss *secrets) streamReason(hit *streamHit, what, hostName string, port int) string {
	s, where := hit.s, "in "+what
	if hit.spelling != "" {
		return valueReason(s, hit.spelling, where, hostName)
	}
	if h, ok := normalizeHost(hostName); ok && s.bound(h, port) {
		return fmt.Sprintf("exfiltration attempt: %s %s to %s; placeholders are replaced only in HTTP requests the proxy reads", s.name, where, hostName)
	}
	return exfilReason(s, where, hostName)
}

// redactBody makes resp's body (a response that has one), whatever its
// type, come with every spelling of a value replaced:
//
//   - with a Content-Length up to maxSecretBody, it is read whole and
//     redacted, and Content-Length fixed (buffered is true);
//   - otherwise it is streamed through a sliding window and sent without
//     a Content-Length (chunked);
//   - a gzip-encoded one is decoded, then streamed (Content-Encoding
//     dropped); one labelled gzip that is not is redacted as it is.
//     Other codings are refused before (unredactable).
//
// A binary response is redacted too: a value echoed in it is worth more
// to an attacker than the bytes around it are to anyone, and a base64
// or hex spelling can hide in any format.
//
// streaming, when not nil, reports whether the upstream body has ended
// (so the connection is the transport's again) while its redacted bytes
// stream on.
func (ss *secrets) redactBody(resp *http.Response) (streaming *endTracker, buffered bool) {
	if ss.vals == nil {
		return nil, false
	}
	upstream := &endTracker{r: resp.Body}
	src := io.Reader(upstream)
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))) {
	case "", "identity":
		if resp.ContentLength >= 0 && resp.ContentLength <= maxSecretBody {
			b, err := io.ReadAll(resp.Body)
			if i, _ := ss.vals.find(b); i >= 0 {
				b, _, _ = ss.redactor().apply(nil, b, true)
				resp.ContentLength = int64(len(b))
			}
			r := io.Reader(bytes.NewReader(b))
			if err != nil {
				r = io.MultiReader(r, &errReader{err})
			}
			resp.Body = &readCloser{Reader: r, c: resp.Body}
			return nil, true
		}
	case "gzip", "x-gzip":
		if resp.ContentLength == 0 {
			return nil, false
		}
		br := bufio.NewReader(upstream)
		src = br // not gzip after all: redacted as it is
		if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			gz, err := gzip.NewReader(br)
			if err != nil {
				resp.Body = &readCloser{Reader: &errReader{err}, c: resp.Body}
				return nil, false
			}
			resp.Header.Del("Content-Encoding")
			src = gz
		}
	default:
		return nil, false
	}
	resp.Body = &readCloser{Reader: newReplacingReader(src, ss.redactor()), c: resp.Body}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return upstream, false
}

// unredactable returns why resp's body cannot be redacted, or "": a
// content coding the proxy cannot decode (br, zstd, deflate, a chain of
// codings), which a client that can may decode to a value, or a range of
// a gzip stream, which only the client holding the other ranges can
// inflate. limitEncoding never asks for these; an upstream that sends
// them anyway is refused.
func (ss *secrets) unredactable(resp *http.Response) string {
	if ss == nil || ss.vals == nil {
		return ""
	}
	ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	switch {
	case ce == "" || ce == "identity":
		return ""
	case ce == "gzip" || ce == "x-gzip":
		if resp.StatusCode == http.StatusPartialContent && resp.ContentLength != 0 {
			return "a range of a gzip-encoded body"
		}
		return ""
	}
	return fmt.Sprintf("a body in the content coding %q", ce)
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
