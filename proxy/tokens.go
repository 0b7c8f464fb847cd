package proxy

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// TokenEndpoint is a sign-in provider's token endpoint (an OAuth 2 token
// URL). A successful JSON answer to a POST there (or to any request to
// its host that carried a secret) carries new tokens: the
// proxy swaps each for a placeholder from Mint before the client sees the
// answer, adds the placeholder as a secret of the session (so that the
// client's next requests with it get the real value injected), and hands
// the answer with the real values to Save, which keeps them outside the
// jail. The request itself gets its real refresh token the ordinary way:
// the refresh token's placeholder is a Secret bound to Host and "body".
type TokenEndpoint struct {
	// Host is the endpoint's host, with the syntax and matching of
	// Rules.Allow ("platform.example.com", an optional ":port").
	Host string
	// Path is the endpoint's URL path, matched exactly ("/v1/oauth/token").
	Path string
	// Tokens maps a string field of the answer ("access_token", at any
	// depth) to the secret its new value becomes; Save sees the top
	// level's.
	Tokens map[string]TokenSecret
	// Mint returns a new placeholder for the new value of field: one the
	// session has not used, of the shape Secret.Placeholder requires.
	Mint func(field, value string) string
	// Carrying names the secret (the refresh token's) that must have been
	// injected into the request for its answer to go to Save. Empty sends
	// every answer there.
	Carrying string
	// Save receives the answer, decoded with json.Decoder.UseNumber, with
	// the real values, before the client sees it. An error is logged and
	// the client still gets the placeholders.
	Save func(answer map[string]any) error
	// Login receives, the same way, the answer to a request that did not
	// carry Carrying: a sign-in made by the client (an authorization code
	// or a device code exchanged), or a token of the client's own, maybe
	// another account's. Its tokens reach the client as placeholders all
	// the same, so no real token enters by a sign-in either; whether the
	// host keeps them is Login's call. Nil keeps nothing.
	Login func(answer map[string]any) error
}

// TokenSecret is what a new token from a TokenEndpoint becomes: the Name,
// Hosts and Inject of its Secret.
type TokenSecret struct {
	Name   string
	Hosts  []string
	Inject []string
	Paths  []string
}

// maxMinted bounds the secrets token endpoints may add to one session: a
// refresh an hour is a few dozen in a day.
const maxMinted = 1024

// tokenState is a Server's token endpoints and the secrets they added.
type tokenState struct {
	endpoints []TokenEndpoint
	mu        sync.Mutex
	list      []Secret // every secret of the session, the Config's first
	minted    int
}

// sec is the session's secrets as they are now (nil without any).
func (s *Server) sec() *secrets { return s.secrets.Load() }

// tokenEndpoint returns the endpoint whose host t is, and whether the
// request is the endpoint's own: a POST to its path. A server may route
// other spellings of the path (a trailing slash, another case) to the
// endpoint, so every answer from its host can carry new tokens. Of
// several endpoints there (one provider's sign-in kept by several CLIs),
// the one whose Carrying secret the request carried is taken, else the
// first; the endpoint's own path first.
func (s *Server) tokenEndpoint(t *target, method, path string, injected []string) (*TokenEndpoint, bool) {
	var own, other [2]*TokenEndpoint // [0]: the first; [1]: the first that carried its refresh token
	for i := range s.tokens.endpoints {
		ep := &s.tokens.endpoints[i]
		if e, err := parseEntry(ep.Host); err != nil || !e.matches(t.norm, t.port) {
			continue
		}
		pick := &other
		if method == http.MethodPost && path == ep.Path {
			pick = &own
		}
		if pick[0] == nil {
			pick[0] = ep
		}
		if pick[1] == nil && ep.Carrying != "" && slices.Contains(injected, ep.Carrying) {
			pick[1] = ep
		}
	}
	for _, p := range []struct {
		eps [2]*TokenEndpoint
		own bool
	}{{own, true}, {other, false}} {
		if p.eps[1] != nil {
			return p.eps[1], p.own
		}
		if p.eps[0] != nil {
			return p.eps[0], p.own
		}
	}
	return nil, false
}

// addSecrets makes add secrets of the session.
func (s *Server) addSecrets(add []Secret) error {
	s.tokens.mu.Lock()
	defer s.tokens.mu.Unlock()
	if s.tokens.minted+len(add) > maxMinted {
		return fmt.Errorf("more than %d tokens minted in one session", maxMinted)
	}
	list := append(append([]Secret(nil), s.tokens.list...), add...)
	ss, err := newSecrets(list)
	if err != nil {
		return err
	}
	s.tokens.list, s.tokens.minted = list, s.tokens.minted+len(add)
	s.secrets.Store(ss)
	return nil
}

// tokenAnswer swaps the new tokens of a token endpoint's answer for new
// placeholders (see TokenEndpoint), in any answer from the endpoint's
// host to a request that carried a credential of the person's. The answer
// goes to Save only when the request sent was a refresh of the carried
// token itself (see refreshes), else, at the endpoint, to Login. It
// returns what went wrong, for the log, or "". An answer that cannot be
// read whole is not passed on: a token in it would reach the client.
func (s *Server) tokenAnswer(req *http.Request, t *target, resp *http.Response, inj *injection, sent *sentBody) string {
	var injected []string
	if inj != nil {
		injected = inj.names()
	}
	ep, own := s.tokenEndpoint(t, req.Method, req.URL.Path, injected)
	if ep == nil || resp.StatusCode/100 != 2 || !own && (inj == nil || len(inj.names()) == 0 || !jsonAnswer(resp)) {
		return "" // elsewhere on the host: no credential of the person's was sent, or the answer is no token's (a page, a stream)
	}
	refresh := ep.Carrying != "" && inj != nil && slices.Contains(inj.names(), ep.Carrying) && sent.refreshes(inj.ss, ep.Carrying)
	save := ep.Login
	switch {
	case refresh || own && ep.Carrying == "":
		save = ep.Save
	case !own:
		save = nil // neither the endpoint's request nor a refresh: no sign-in to keep
	}
	body, err := readAnswer(resp)
	resp.Body.Close()
	if err != nil {
		setBody(resp, http.StatusBadGateway, []byte(`{"error":"jail: the token endpoint's answer could not be read"}`))
		return "token endpoint: " + err.Error()
	}
	if !own && len(bytes.TrimSpace(body)) == 0 {
		setBody(resp, resp.StatusCode, body)
		return ""
	}
	answer, err := decodeAnswer(body)
	real, _ := decodeAnswer(body) // a copy the placeholders do not touch
	if err != nil {
		setBody(resp, http.StatusBadGateway, []byte(`{"error":"jail: the token endpoint's answer is not a JSON object"}`))
		return "token endpoint: " + err.Error()
	}
	minted := mintTokens(ep, answer)
	if len(minted) == 0 {
		setBody(resp, resp.StatusCode, body)
		return ""
	}
	// Saved first: the provider may have spent the old refresh token, so
	// the new ones are kept even when the session can take no more.
	note := ""
	if save != nil {
		if err := save(real); err != nil {
			note = "token endpoint: saving the new tokens: " + s.sec().redactString(err.Error())
		}
	}
	if err := s.addSecrets(minted); err != nil {
		setBody(resp, http.StatusBadGateway, []byte(`{"error":"jail: the new tokens could not be kept"}`))
		return "token endpoint: " + err.Error()
	}
	out, _ := json.Marshal(answer)
	setBody(resp, resp.StatusCode, out)
	return note
}

// jsonAnswer reports whether resp says its body is JSON.
func jsonAnswer(resp *http.Response) bool {
	ct, _, _ := strings.Cut(strings.ToLower(resp.Header.Get("Content-Type")), ";")
	ct = strings.TrimSpace(ct)
	return ct == "application/json" || strings.HasSuffix(ct, "+json")
}

// mintTokens replaces, in answer, the value of every field ep names with
// a new placeholder, at any depth (an object in an object or an array
// carries a token as well), and returns the new secrets.
func mintTokens(ep *TokenEndpoint, answer map[string]any) []Secret {
	var minted []Secret
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for field, e := range v {
				ts, named := ep.Tokens[field]
				if tok, ok := e.(string); named && ok && tok != "" && ep.Mint != nil {
					ph := ep.Mint(field, tok)
					minted = append(minted, Secret{Name: ts.Name, Placeholder: ph, Value: tok, Hosts: ts.Hosts, Inject: ts.Inject, Paths: ts.Paths})
					v[field] = ph
					continue
				}
				walk(e)
			}
		}
	}
	walk(answer)
	return minted
}

// readAnswer reads a token endpoint's answer whole (at most
// maxSecretBody bytes), gzip decoded.
func readAnswer(resp *http.Response) ([]byte, error) {
	var r io.Reader = resp.Body
	switch ce := strings.TrimSpace(resp.Header.Get("Content-Encoding")); {
	case gzipped(ce):
		zr, err := gzip.NewReader(io.LimitReader(resp.Body, maxSecretBody))
		if err != nil {
			return nil, fmt.Errorf("reading the gzip answer: %w", err)
		}
		r = zr
	case ce != "" && !strings.EqualFold(ce, "identity"):
		return nil, fmt.Errorf("an answer in %q", ce)
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSecretBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(b) > maxSecretBody {
		return nil, errors.New("an answer larger than the largest body read whole")
	}
	return b, nil
}

// decodeAnswer decodes a JSON object, numbers kept as written.
func decodeAnswer(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, errors.New("the answer is not a JSON object")
	}
	return m, nil
}

// setBody makes b the whole body of resp, with no content coding.
func setBody(resp *http.Response, status int, b []byte) {
	if status != resp.StatusCode {
		resp.StatusCode, resp.Status = status, strconv.Itoa(status)+" "+http.StatusText(status)
		resp.Header = http.Header{"Content-Type": {"application/json"}}
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.TransferEncoding = nil
	resp.ContentLength = int64(len(b))
	resp.Body = io.NopCloser(bytes.NewReader(b))
}

// maxGrantBody bounds what is kept of a token request's body: a grant's
// few fields. A larger body is no refresh.
const maxGrantBody = 64 << 10

// sentBody is what a request to a token endpoint sent upstream, after
// injection, up to maxGrantBody bytes.
type sentBody struct {
	rc   io.ReadCloser
	mu   sync.Mutex
	b    []byte
	over bool
}

func (sb *sentBody) Read(p []byte) (int, error) {
	n, err := sb.rc.Read(p)
	sb.mu.Lock()
	if len(sb.b)+n > maxGrantBody {
		sb.over = true
	} else {
		sb.b = append(sb.b, p[:n]...)
	}
	sb.mu.Unlock()
	return n, err
}

func (sb *sentBody) Close() error { return sb.rc.Close() }

// watchTokenRequest makes out's body, for a request to the host of a
// token endpoint whose answers may be saved (one with Carrying), one whose
// bytes tokenAnswer can read afterwards; nil for any other.
func (s *Server) watchTokenRequest(req *http.Request, t *target, out *http.Request) *sentBody {
	if ep, _ := s.tokenEndpoint(t, req.Method, req.URL.Path, nil); out.Body == nil || ep == nil || ep.Carrying == "" {
		return nil
	}
	sb := &sentBody{rc: out.Body}
	out.Body = sb
	return sb
}

// refreshes reports whether the body sent is a refresh grant and nothing
// else: one grant_type, "refresh_token", and one refresh_token, the real
// value of a secret named carrying. A refresh token's placeholder sent
// beside another grant (an authorization code of another account), or in
// another field, gets its value injected all the same, but the answer is
// then not a refresh of the person's own sign-in.
func (sb *sentBody) refreshes(ss *secrets, carrying string) bool {
	if sb == nil || ss == nil {
		return false
	}
	sb.mu.Lock()
	b, over := append([]byte(nil), sb.b...), sb.over
	sb.mu.Unlock()
	params, ok := grantParams(b)
	if over || !ok || len(params["grant_type"]) != 1 || params["grant_type"][0] != "refresh_token" || len(params["refresh_token"]) != 1 {
		return false
	}
	for _, sec := range ss.list {
		if sec.name == carrying && string(sec.value[escRaw]) == params["refresh_token"][0] {
			return true
		}
	}
	return false
}

// grantParams are the top-level fields of an OAuth token request body:
// a JSON object's string fields, or a form's fields. A field named twice
// keeps both values, and names are matched in any case, so that no
// provider's reading of the request can differ from this one's.
func grantParams(b []byte) (map[string][]string, bool) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		return jsonParams(t)
	}
	v, err := url.ParseQuery(string(b))
	out := map[string][]string{}
	for k, vs := range v {
		out[strings.ToLower(k)] = append(out[strings.ToLower(k)], vs...)
	}
	return out, err == nil
}

// jsonParams are the top-level fields of a JSON object; a value that is
// not a string counts as "".
func jsonParams(b []byte) (map[string][]string, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := map[string][]string{}
	for d.More() {
		tok, err := d.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, false
		}
		var v any
		if d.Decode(&v) != nil {
			return nil, false
		}
		s, _ := v.(string)
		out[strings.ToLower(key)] = append(out[strings.ToLower(key)], s)
	}
	if tok, err := d.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false // something after the object
	}
	return out, true
}
