package jail

import (
	"net/url"
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

// placeholders hands out one session's placeholders: the same name and
// value always get the same one, another value of the same name another.
type placeholders struct {
	key  SessionKey
	seen map[string][]string // name -> its values, in the order first seen
}

func newPlaceholders(key SessionKey) *placeholders {
	return &placeholders{key: key, seen: map[string][]string{}}
}

// of is the placeholder of name's value.
func (p *placeholders) of(name, value string) string {
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

// mask returns what a secret variable's value becomes inside the jail and
// the secret it stands for. In a URL with a password only the password is
// replaced, so that the URL still parses to the same user, host, port and
// path; in a URL named as a secret with a user but no password (a Sentry
// DSN's key), the user is. Anything else is replaced whole.
func (p *placeholders) mask(name, value string) (string, SecretPiece) {
	user, pass := urlUserinfo(value)
	sp := pass
	if sp == nil && user != nil && secretName(name) && shapeOf(value) == nil {
		sp = user
	}
	if sp == nil {
		ph := p.of(name, value)
		return ph, SecretPiece{Name: name, Value: value, Placeholder: ph}
	}
	ph := p.of(name, sp.Decoded)
	return value[:sp.start] + ph + value[sp.end:], SecretPiece{Name: name, Value: sp.Decoded, Placeholder: ph}
}
