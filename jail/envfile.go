package jail

import (
	"bytes"
	"strings"
)

// defaultSecretFiles are always masked; secrets.files adds to them.
// Beyond .env and .env.*, .env* takes direnv's .envrc (a shell script of
// "export NAME=value" lines, which MaskEnvFile reads like a .env file),
// editors' backups (.env~) and variants (.env-prod, .env_local); .envs/
// is where some project templates keep theirs (.envs/.production/.django).
var defaultSecretFiles = []string{"**/.env", "**/.env.*", "**/.env*", "**/.envs/**"}

// MaskEnvFile rewrites a .env file's content so that every value that
// looks like a secret (or whose name is in forced) becomes mask(name,
// value) (the value's placeholder, or for a URL the URL with its password
// replaced); everything else, comments and layout included, is kept. A
// quoted value may span lines (a PEM key): it is masked whole. It returns
// the new content and the secrets it replaced.
func MaskEnvFile(content []byte, forced map[string]bool, mask func(name, value string) (string, []SecretPiece)) ([]byte, []SecretPiece) {
	var out bytes.Buffer
	var found []SecretPiece
	lines := strings.SplitAfter(string(content), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		body := strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimLeft(body, " \t")
		indent := body[:len(body)-len(trimmed)]
		export := ""
		if rest, ok := strings.CutPrefix(trimmed, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			export, trimmed = "export ", strings.TrimLeft(rest, " \t") // a shell takes a tab after export too
		}
		name, value, ok := strings.Cut(trimmed, "=")
		name = strings.TrimSpace(name)
		if !ok || strings.HasPrefix(trimmed, "#") || !validEnvName(name) {
			out.WriteString(line)
			continue
		}
		ev, last := envValue(value, line[len(body):], lines[i+1:])
		if ev.v == "" || !(forced[name] || LooksSecret(name, ev.v)) {
			out.WriteString(strings.Join(lines[i:i+1+last], ""))
			i += last
			continue
		}
		masked, pieces := mask(name, ev.v)
		found = append(found, pieces...)
		out.WriteString(indent + export + name + "=" + ev.quote + masked + ev.quote + ev.comment + ev.eol)
		i += last
	}
	return out.Bytes(), found
}

// dotenvValue is a .env value split from its quotes and trailing comment.
type dotenvValue struct {
	v, quote, comment, eol string
}

// envValue splits the value after NAME= (its line ending eol) from its
// quotes and a trailing comment. A quote left open runs on through the
// following lines (more) to the one that closes it, or to the end of the
// file; last is how many of them the value took.
func envValue(value, eol string, more []string) (ev dotenvValue, last int) {
	v := strings.TrimSpace(value)
	ev.eol = eol
	if len(v) == 0 || (v[0] != '"' && v[0] != '\'') {
		if i := strings.Index(v, " #"); i >= 0 {
			v, ev.comment = v[:i], v[i:]
		}
		ev.v = v
		return ev, 0
	}
	q := v[:1]
	rest := v[1:]
	for {
		if end := closingQuote(rest, q[0]); end >= 0 {
			ev.v, ev.quote, ev.comment = rest[:end], q, strings.TrimRight(rest[end+1:], "\r\n")
			return ev, last
		}
		if last == len(more) {
			ev.v, ev.quote = strings.TrimRight(rest, "\r\n"), "" // never closed: all of it
			return ev, last
		}
		rest += eol
		eol = more[last][len(strings.TrimRight(more[last], "\r\n")):]
		ev.eol = eol
		rest += strings.TrimRight(more[last], "\r\n")
		last++
	}
}

// closingQuote is the index of the quote q that closes s, or -1: inside
// double quotes a backslash escapes the next byte (KEY="a\"b" is a"b).
func closingQuote(s string, q byte) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q == '"':
			i++
		case s[i] == q:
			return i
		}
	}
	return -1
}
