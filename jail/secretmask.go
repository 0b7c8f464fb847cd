package jail

import (
	"net/url"
	"slices"
	"strings"
)

// SecretPiece is one secret a masked value holds: Value is what its
// Placeholder stands for (a whole value, or the password of a URL).
type SecretPiece struct {
	Name, Value, Placeholder string
}

// valueSpan is a part of a value: value[start:end] as written, Decoded as
// a client sends it (a URL's percent escapes decoded).
type valueSpan struct {
	start, end int
	Decoded    string
}

// urlPassword finds the password of a URL with credentials in it
// (postgres://app:PASS@db/app, redis://:PASS@host), or nil.
func urlPassword(v string) *valueSpan {
	_, pass := urlUserinfo(v)
	return pass
}

// urlUserinfo finds the user and the password of a URL that parses with
// credentials; either is nil when missing or empty.
func urlUserinfo(v string) (user, pass *valueSpan) {
	i := strings.Index(v, "://")
	if i <= 0 || !validScheme(v[:i]) {
		return nil, nil
	}
	base := i + 3
	auth := v[base:]
	if end := strings.IndexAny(auth, "/?#"); end >= 0 {
		auth = auth[:end]
	}
	at := strings.LastIndexByte(auth, '@')
	if at <= 0 || at == len(auth)-1 {
		return nil, nil
	}
	u, err := url.Parse(v)
	if err != nil || u.User == nil || u.Host == "" {
		return nil, nil
	}
	info := auth[:at]
	userEnd := at
	if colon := strings.IndexByte(info, ':'); colon >= 0 {
		userEnd = colon
		if p, ok := u.User.Password(); ok && p != "" {
			pass = &valueSpan{start: base + colon + 1, end: base + at, Decoded: p}
		}
	}
	if name := u.User.Username(); name != "" {
		user = &valueSpan{start: base, end: base + userEnd, Decoded: name}
	}
	return user, pass
}

// validScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func validScheme(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

// Placeholders hands out one session's placeholders: the same name and
// value always get the same one, another value of the same name another.
type Placeholders struct {
	key  SessionKey
	seen map[string][]string // name -> its values, in the order first seen
	// whole are names the policy makes secret: their values are masked
	// whole, never only the credentials found inside them.
	whole map[string]bool
}

func NewPlaceholders(key SessionKey, whole ...string) *Placeholders {
	p := &Placeholders{key: key, seen: map[string][]string{}, whole: map[string]bool{}}
	for _, n := range whole {
		p.whole[n] = true
	}
	return p
}

// of is the placeholder of name's value.
func (p *Placeholders) of(name, value string) string {
	ord := -1
	for i, v := range p.seen[name] {
		if v == value {
			ord = i
		}
	}
	if ord < 0 {
		ord = len(p.seen[name])
		p.seen[name] = append(p.seen[name], value)
	}
	return p.key.Placeholder(name, value, ord)
}

// Mask returns what a secret variable's value becomes inside the jail and
// the secrets it stands for. In a URL with a password only the password
// is replaced, so that the URL still parses to the same user, host, port
// and path; in a URL named as a secret with a user but no password (a
// Sentry DSN's key), the user is. In a value that is no secret by its
// name or format, only the credentials found inside it are
// (embeddedSecrets). Anything else is replaced whole.
func (p *Placeholders) Mask(name, value string) (string, []SecretPiece) {
	spans := p.spans(name, value)
	if len(spans) == 0 {
		ph := p.of(name, value)
		return ph, []SecretPiece{{Name: name, Value: value, Placeholder: ph}}
	}
	var b strings.Builder
	var pieces []SecretPiece
	last := 0
	for _, sp := range spans {
		ph := p.of(name, sp.Decoded)
		b.WriteString(value[last:sp.start])
		b.WriteString(ph)
		last = sp.end
		if !slices.ContainsFunc(pieces, func(s SecretPiece) bool { return s.Placeholder == ph }) {
			pieces = append(pieces, SecretPiece{Name: name, Value: sp.Decoded, Placeholder: ph})
		}
	}
	b.WriteString(value[last:])
	return b.String(), pieces
}

// spans are the parts of a secret variable's value that mask replaces,
// in order; none when it replaces the whole value.
func (p *Placeholders) spans(name, value string) []valueSpan {
	user, pass := urlUserinfo(value)
	switch {
	case pass != nil && strings.ContainsAny(value, " \t\n"):
		return embeddedSecrets(value) // several words: each URL's password
	case pass != nil:
		return []valueSpan{*pass}
	case user != nil && secretName(name) && ShapeOf(value) == nil:
		return []valueSpan{*user}
	case p.whole[name] || secretName(name) || ShapeOf(value) != nil:
		return nil
	}
	return embeddedSecrets(value)
}

// embeddedSecrets finds the credentials inside a longer value: the
// password of a URL among other words (PIP_EXTRA_INDEX_URL="https://u:PW@a
// https://u:PW@b") and tokens of a known format between other characters
// (CURL_FLAGS="-H Authorization: Bearer ghp_…", a token as a URL's user).
func embeddedSecrets(v string) []valueSpan {
	var out []valueSpan
	for _, w := range runs(v, 0, len(v), urlWordByte) {
		if _, pass := urlUserinfo(v[w[0]:w[1]]); pass != nil {
			out = append(out, valueSpan{start: w[0] + pass.start, end: w[0] + pass.end, Decoded: pass.Decoded})
			continue
		}
		for _, t := range runs(v, w[0], w[1], tokenByte) {
			tok := strings.TrimRight(v[t[0]:t[1]], ".")
			if s := ShapeOf(tok); s != nil && s.name != "pem" {
				out = append(out, valueSpan{start: t[0], end: t[0] + len(tok), Decoded: tok})
			}
		}
	}
	return out
}

// runs are the [start, end) ranges of the maximal runs of bytes in
// v[from:to] that in accepts.
func runs(v string, from, to int, in func(byte) bool) [][2]int {
	var out [][2]int
	start := -1
	for i := from; i <= to; i++ {
		ok := i < to && in(v[i])
		switch {
		case ok && start < 0:
			start = i
		case !ok && start >= 0:
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	return out
}

// urlWordByte is a byte a URL among other words is made of.
func urlWordByte(c byte) bool {
	return c > ' ' && c < 0x7f && strings.IndexByte(`"'<>()[]{}|,;\`+"`", c) < 0
}

// tokenByte is a byte a credential token is made of.
func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}
