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
	lines := envLines(string(content))
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		body := strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimLeft(body, " \t")
		indent := body[:len(body)-len(trimmed)]
		export := ""
		if rest, ok := strings.CutPrefix(trimmed, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			export, trimmed = "export ", strings.TrimLeft(rest, " \t") // a shell takes a tab after export too
		}
		name, sep, value, ok := envAssignment(trimmed)
		if !ok || strings.HasPrefix(trimmed, "#") {
			masked, pieces := maskLine(line, mask)
			out.WriteString(masked)
			found = append(found, pieces...)
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
		out.WriteString(indent + export + name + sep + ev.quote + masked + ev.quote + ev.comment + ev.eol)
		i += last
	}
	return out.Bytes(), found
}

// lineSecretName names the credentials found in a line that assigns
// nothing (a comment, a line no dotenv library reads): they are bound
// nowhere.
const lineSecretName = "ENV_FILE_LINE"

// maskLine masks the credentials of a known format in a line that
// assigns nothing ("# the old token was ghp_…"), keeping the rest.
func maskLine(line string, mask func(name, value string) (string, []SecretPiece)) (string, []SecretPiece) {
	body := strings.TrimRight(line, "\r\n")
	if len(embeddedSecrets(body)) == 0 {
		return line, nil
	}
	masked, pieces := mask(lineSecretName, body)
	return masked + line[len(body):], pieces
}

// envLines splits a .env file into lines, each with its line ending: a
// lone "\r" ends a line too, as dotenv libraries read it, so that no line
// hides behind another one's value.
func envLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\n':
			out = append(out, s[start:i+1])
			start = i + 1
		case s[i] == '\r' && (i+1 == len(s) || s[i+1] != '\n'):
			out = append(out, s[start:i+1])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// envAssignment splits a line (after any "export") into a name, the
// separator as it is written again ("=", or ": " in the NAME: value form
// some dotenv libraries read) and the value. Names are those dotenv
// libraries take: letters, digits, '_', '.' and '-'.
func envAssignment(s string) (name, sep, value string, ok bool) {
	i := strings.IndexAny(s, "=:")
	if i < 0 {
		return "", "", "", false
	}
	name, sep, value = strings.TrimSpace(s[:i]), "=", s[i+1:]
	if s[i] == ':' {
		if value == "" || value[0] != ' ' && value[0] != '\t' {
			return "", "", "", false
		}
		sep = ": "
	}
	return name, sep, value, dotenvName(name)
}

// dotenvName reports whether s is a variable name as dotenv libraries
// read one.
func dotenvName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '.' || c == '-' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// dotenvValue is a .env value split from its quotes and trailing comment.
type dotenvValue struct {
	v, quote, comment, eol string
}

// envValue splits the value after NAME= (its line ending eol) from its
// quotes (', " or `) and a trailing comment. A quote left open runs on through the
// following lines (more) to the one that closes it, or to the end of the
// file; last is how many of them the value took.
func envValue(value, eol string, more []string) (ev dotenvValue, last int) {
	v := strings.TrimSpace(value)
	ev.eol = eol
	if len(v) == 0 || (v[0] != '"' && v[0] != '\'' && v[0] != '`') { // dotenv for node quotes with backticks too
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
