package jail

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/jailsh/jail/proxy"
)

// Alphabets of the random part of a placeholder. Each is a subset of the
// bytes a placeholder may hold ([A-Za-z0-9._-]), so that a placeholder is
// written the same raw, in JSON, in a form, a URL, XML or a header.
const (
	alnum    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	base32Up = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	B64URL   = alnum + "-_"
)

// genericRandom is how many alnum characters end a generic placeholder:
// 16 of them carry 95 bits.
const genericRandom = 16

// secretShape is one known credential format: how to recognise a value of
// it and how its placeholder is shaped, so that a tool checking the format
// inside the jail accepts the placeholder.
type secretShape struct {
	name string
	// re recognises a whole value of the format; its first group, when it
	// has one, is the prefix the placeholder keeps (else keep is).
	re   *regexp.Regexp
	keep string
	// mark follows the kept prefix: "jail" or "JAIL".
	mark     string
	alphabet string
	// length is the placeholder's length; 0 keeps the value's own length.
	length int
	// check, when set, must also accept the value (a JWT's header).
	check func(string) bool
	// build, when set, makes the whole placeholder from the random bytes.
	build func(rnd func(alphabet string, n int) string) string
}

// secretShapes are the credential formats recognised by value whatever the
// variable's name, most specific first. Detection and placeholders both
// read this table.
var secretShapes = []secretShape{
	{name: "anthropic", re: regexp.MustCompile(`^(sk-ant-(?:[a-z]{3,5}[0-9]{2}-)?)[A-Za-z0-9_-]{20,}$`), mark: "jail", alphabet: alnum},
	{name: "openai-project", re: regexp.MustCompile(`^sk-proj-[A-Za-z0-9_-]{20,}$`), keep: "sk-proj-", mark: "jail", alphabet: alnum},
	{name: "openai", re: regexp.MustCompile(`^sk-[A-Za-z0-9_-]{29,}$`), keep: "sk-", mark: "jail", alphabet: alnum},
	{name: "github", re: regexp.MustCompile(`^(gh[pousr]_)[A-Za-z0-9]{16,}$`), mark: "jail", alphabet: alnum, length: 40},
	{name: "github-fine-grained", re: regexp.MustCompile(`^github_pat_[A-Za-z0-9_]{22,}$`), keep: "github_pat_", mark: "jail", alphabet: alnum},
	{name: "gitlab", re: regexp.MustCompile(`^glpat-[A-Za-z0-9_-]{20,}$`), keep: "glpat-", mark: "jail", alphabet: alnum},
	{name: "slack", re: regexp.MustCompile(`^(xox[abpr]-)[A-Za-z0-9-]{10,}$`), mark: "jail-", alphabet: alnum},
	// An access key id is 20 characters, which leave 12 random ones (60
	// bits) after AKIAJAIL: enough, since they come from the session key
	// and never from the id, which is not itself the secret.
	{name: "aws-key-id", re: regexp.MustCompile(`^(AKIA|ASIA)[A-Z0-9]{16}$`), mark: "JAIL", alphabet: base32Up, length: 20},
	{name: "google", re: regexp.MustCompile(`^AIza[A-Za-z0-9_-]{35}$`), keep: "AIza", mark: "jail", alphabet: alnum, length: 39},
	{name: "npm", re: regexp.MustCompile(`^npm_[A-Za-z0-9]{36}$`), keep: "npm_", mark: "jail", alphabet: alnum},
	{name: "jwt", re: regexp.MustCompile(`^(eyJ[A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`), check: jwtHeader, build: jwtPlaceholder},
	{name: "pem", re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)},
}

// ShapeOf returns the format of a value, or nil when it has none known.
func ShapeOf(value string) *secretShape {
	for i := range secretShapes {
		s := &secretShapes[i]
		if s.re.MatchString(value) && (s.check == nil || s.check(value)) {
			return s
		}
	}
	return nil
}

// jwtHeader reports whether a JWT's first part decodes to a JSON object
// with an "alg".
func jwtHeader(v string) bool {
	head, _, _ := strings.Cut(v, ".")
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(head, "="))
	if err != nil {
		return false
	}
	var h map[string]any
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	_, ok := h["alg"]
	return ok
}

// jwtPlaceholderHead and jwtPlaceholderBody are the first two parts of a
// JWT placeholder: fixed, so that nothing of the real token's header or
// claims shows inside.
var (
	jwtPlaceholderHead = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	jwtPlaceholderBody = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"jail-placeholder"}`))
)

// jwtPlaceholder is a JWT whose signature carries "jail" and the random
// part (43 characters, as an HS256 signature).
func jwtPlaceholder(rnd func(string, int) string) string {
	return jwtPlaceholderHead + "." + jwtPlaceholderBody + ".jail" + rnd(B64URL, 39)
}

// SessionKey is the per-session secret the random part of every
// placeholder is derived from. It stays in the host process: it never
// enters the jail and `jail plan` never prints it.
type SessionKey string

// Placeholder is the value a secret has inside the jail: shaped like value
// when value has a known format (its prefix and length kept), else
// jail-secret-NAME-<random>. The random part is derived from the session
// key, the name and ord, never from the value: ord tells apart the values
// one name has in one session (0 for the environment's, 1, 2... for other
// values found in .env files), so that the same name and value get the
// same placeholder and a short password cannot be recovered from its
// placeholder.
func (k SessionKey) Placeholder(name, value string, ord int) string {
	rnd := k.random(name, ord)
	s := ShapeOf(value)
	if s == nil || s.name == "pem" {
		return proxy.PlaceholderPrefix + PlaceholderName(name) + "-" + rnd(alnum, genericRandom)
	}
	if s.build != nil {
		return s.build(rnd)
	}
	keep := s.keep
	if m := s.re.FindStringSubmatch(value); len(m) > 1 && m[1] != "" {
		keep = m[1]
	}
	head := keep + s.mark
	if s.length > 0 {
		return head + rnd(s.alphabet, s.length-len(head))
	}
	// The value's length, but at least 13 random characters (77 bits): a
	// short value still gets an unguessable placeholder.
	return head + rnd(s.alphabet, max(len(value)-len(head), 13))
}

// PlaceholderName is name with every byte a placeholder may not hold
// replaced by '_'.
func PlaceholderName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '_' || r == '-' || strings.ContainsRune(alnum, r) {
			return r
		}
		return '_'
	}, name)
}

// random returns a generator of the placeholder's random characters for
// (name, ord): HMAC-SHA256 of the session key in counter mode, each byte
// mapped onto the alphabet (alphabets of 32 and 64 characters map evenly;
// alnum's bias is below one bit in 200).
func (k SessionKey) random(name string, ord int) func(alphabet string, n int) string {
	return func(alphabet string, n int) string {
		var b strings.Builder
		for block := uint32(0); b.Len() < n; block++ {
			mac := hmac.New(sha256.New, []byte(k))
			var hdr [8]byte
			binary.BigEndian.PutUint32(hdr[:4], uint32(ord))
			binary.BigEndian.PutUint32(hdr[4:], block)
			mac.Write(hdr[:])
			mac.Write([]byte(name))
			for _, c := range mac.Sum(nil) {
				if b.Len() == n {
					break
				}
				b.WriteByte(alphabet[int(c)%len(alphabet)])
			}
		}
		return b.String()
	}
}

// NewSessionKey is a fresh random session key of 256 bits.
func NewSessionKey() SessionKey {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail on Linux >= 3.17
	}
	return SessionKey(k)
}

// SignInPlaceholder is the placeholder of a sign-in file's token.
//
// Codex reads the claims of its JWTs: the id token's ChatGPT plan type
// (it refuses a ChatGPT sign-in without one), account and address, and
// the access token's expiry. So a Codex JWT's placeholder keeps the
// token's header and claims and replaces only its signature with "jail"
// and the random part: without its real signature a JWT is worthless,
// and what the claims tell (the account, the plan, the expiry) is the
// jailed agent's to know. Every other token (Gemini CLI never decodes
// its id token; Claude Code's tokens are opaque) gets the session key's
// usual placeholder, which shows nothing of the token.
func SignInPlaceholder(key SessionKey, r SignInRule, name, value string, ord int) string {
	if r.Format == "codex" {
		if head, ok := jwtHeadAndClaims(value); ok {
			return head + ".jail" + key.random(name, ord)(B64URL, 39)
		}
	}
	return key.Placeholder(name, value, ord)
}

// jwtHeadAndClaims returns a JWT's first two parts, joined by '.', when
// value is a JWT whose header names an "alg".
func jwtHeadAndClaims(value string) (string, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 3 || parts[2] == "" || !jwtHeader(value) || !isB64url(parts[0]) || !isB64url(parts[1]) {
		return "", false
	}
	return parts[0] + "." + parts[1], true
}

// isB64url reports whether s is made only of unpadded base64url bytes,
// all of which a placeholder may hold.
func isB64url(s string) bool {
	return s != "" && strings.Trim(s, B64URL) == ""
}
