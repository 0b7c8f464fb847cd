package jail

import (
	"bufio"
	"bytes"
	"strings"
)

// The toolchains keep their registry settings in four small formats: INI
// (.npmrc, pip.conf), KEY=VALUE (Go's env files), TOML (uv.toml,
// pyproject.toml, .cargo/config.toml, bunfig.toml) and YAML (.yarnrc.yml).
// The readers here parse only as much of each as registry keys need: a
// value they cannot read is skipped, which allows nothing.

// confEntry is one setting: the path of table names and keys that leads to
// it (["install", "scopes", "myorg", "url"]) and one string it holds.
type confEntry struct {
	path  []string
	value string
}

// is reports whether the entry's path is pattern, where "*" matches any
// one name.
func (e confEntry) is(pattern ...string) bool {
	if len(e.path) != len(pattern) {
		return false
	}
	for i, p := range pattern {
		if p != "*" && p != e.path[i] {
			return false
		}
	}
	return true
}

// confLines splits data into lines without their line endings.
func confLines(data []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, strings.TrimSuffix(sc.Text(), "\r"))
	}
	return out
}

// parseIni returns the key = value settings of an INI file, each under its
// [section] ("" before the first). npm's dialect (npmStyle) unquotes
// values and cuts a trailing ; or # comment; pip's (configparser) instead
// continues a value on the indented lines that follow it.
func parseIni(data []byte, npmStyle bool) []confEntry {
	var out []confEntry
	section := ""
	for _, raw := range confLines(data) {
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if !npmStyle && raw[0] != line[0] && len(out) > 0 {
			last := &out[len(out)-1]
			last.value = strings.TrimSpace(last.value + "\n" + line)
			continue
		}
		if line[0] == '[' {
			section = strings.TrimSpace(strings.Trim(line, "[]"))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok && !npmStyle {
			k, v, ok = strings.Cut(line, ":")
		}
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if npmStyle {
			k, v = unquote(k), npmValue(v)
		}
		out = append(out, confEntry{[]string{section, k}, v})
	}
	return out
}

// npmValue is an .npmrc value as npm's ini reader gives it: a quoted
// value unquoted, an unquoted one cut at a ; or # comment.
func npmValue(v string) string {
	if len(v) > 1 && (v[0] == '"' || v[0] == '\'') {
		if i := strings.IndexByte(v[1:], v[0]); i >= 0 {
			return v[1 : i+1]
		}
	}
	if i := strings.IndexAny(v, ";#"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

func unquote(s string) string {
	if len(s) > 1 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// parseEnvFile returns the KEY=VALUE lines of a Go env file (GOENV,
// $GOROOT/go.env), comments skipped, later lines winning.
func parseEnvFile(data []byte) map[string]string {
	m := map[string]string{}
	for _, line := range confLines(data) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			m[strings.TrimSpace(k)] = unquote(strings.TrimSpace(v))
		}
	}
	return m
}

// parseTOML returns every string a TOML document holds, each with the
// path of tables and keys that leads to it. An array's strings share the
// array's path; an inline table's keys extend it. [[array]] tables are
// read like [tables]. Numbers, booleans and dates are skipped.
func parseTOML(data []byte) []confEntry {
	var out []confEntry
	var table []string
	lines := confLines(data)
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			h := strings.TrimSpace(stripComment(line))
			h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
			h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
			table = tomlKey(h)
			continue
		}
		k, v, ok := cutOutsideQuotes(line, '=')
		if !ok {
			continue
		}
		// An array, inline table or triple-quoted string may go on over
		// the following lines.
		for goesOn(v) && i+1 < len(lines) {
			i++
			v += "\n" + lines[i]
		}
		p := &tomlValue{s: v}
		p.read(append(append([]string{}, table...), tomlKey(k)...), &out)
	}
	return out
}

// tomlKey splits a dotted key (a.b, "a.b".c, 'x') into its names.
func tomlKey(k string) []string {
	var out []string
	for {
		part, rest, more := cutOutsideQuotes(k, '.')
		out = append(out, unquote(strings.TrimSpace(part)))
		if !more {
			return out
		}
		k = rest
	}
}

// cutOutsideQuotes cuts s at the first sep that is not inside a quoted
// string.
func cutOutsideQuotes(s string, sep byte) (before, after string, found bool) {
	at := -1
	outsideQuotes(s, func(i int, c byte) bool {
		if c == sep {
			at = i
			return false
		}
		return true
	})
	if at < 0 {
		return s, "", false
	}
	return s[:at], s[at+1:], true
}

// outsideQuotes calls fn with each byte of s that is not inside a quoted
// string (a backslash escapes in double quotes), until fn returns false.
func outsideQuotes(s string, fn func(i int, c byte) bool) {
	var q byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case q != 0:
			if c == '\\' && q == '"' {
				i++
			} else if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		default:
			if !fn(i, c) {
				return
			}
		}
	}
}

// stripComment cuts a # comment that is not inside a quoted string.
func stripComment(s string) string {
	before, _, _ := cutOutsideQuotes(s, '#')
	return before
}

// goesOn reports whether a TOML value goes on after s: a bracket, brace or
// triple-quoted string is left open.
func goesOn(s string) bool {
	return depth(s) > 0 || strings.Count(s, `"""`)%2 == 1 || strings.Count(s, "'''")%2 == 1
}

// depth is how many brackets and braces s leaves open, strings and
// comments aside.
func depth(s string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		outsideQuotes(stripComment(line), func(_ int, c byte) bool {
			switch c {
			case '[', '{':
				n++
			case ']', '}':
				n--
			}
			return true
		})
	}
	return n
}

// tomlValue reads one TOML value from s.
type tomlValue struct {
	s string
	i int
}

func (p *tomlValue) skipSpace() {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			p.i++
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

// read reads the value at p.i, appending its strings under path.
func (p *tomlValue) read(path []string, out *[]confEntry) {
	p.skipSpace()
	if p.i >= len(p.s) {
		return
	}
	switch c := p.s[p.i]; c {
	case '"', '\'':
		*out = append(*out, confEntry{path, p.str()})
	case '[':
		p.i++
		for p.skipSpace(); p.i < len(p.s) && p.s[p.i] != ']'; p.skipSpace() {
			start := p.i
			p.read(path, out)
			if p.i == start {
				return
			}
		}
		p.i++
	case '{':
		p.i++
		for p.skipSpace(); p.i < len(p.s) && p.s[p.i] != '}'; p.skipSpace() {
			k, _, ok := cutOutsideQuotes(p.s[p.i:], '=')
			if !ok {
				return
			}
			p.i += len(k) + 1
			p.read(append(append([]string{}, path...), tomlKey(k)...), out)
		}
		p.i++
	default: // a number, boolean or date: nothing a registry reader wants
		for p.i < len(p.s) && !strings.ContainsRune(",]}\n", rune(p.s[p.i])) {
			p.i++
		}
	}
}

// str reads a basic "…" or literal '…' string (triple-quoted ones read as
// their content), with \" \\ \n \t escapes in basic strings.
func (p *tomlValue) str() string {
	q := p.s[p.i]
	triple := strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3))
	if triple {
		p.i += 3
		end := strings.Index(p.s[p.i:], strings.Repeat(string(q), 3))
		if end < 0 {
			end = len(p.s) - p.i
		}
		v := p.s[p.i : p.i+end]
		p.i += end + 3
		return strings.TrimPrefix(v, "\n")
	}
	p.i++
	var b strings.Builder
	for ; p.i < len(p.s) && p.s[p.i] != q; p.i++ {
		c := p.s[p.i]
		if c == '\\' && q == '"' && p.i+1 < len(p.s) {
			p.i++
			c = map[byte]byte{'n': '\n', 't': '\t', 'r': '\r'}[p.s[p.i]]
			if c == 0 {
				c = p.s[p.i]
			}
		}
		b.WriteByte(c)
	}
	p.i++
	return b.String()
}

// parseYAML returns the scalar settings of a block-style YAML document
// (.yarnrc.yml), each with the path of mapping keys that leads to it, by
// indentation. Flow collections, anchors and multi-line scalars are not
// read.
func parseYAML(data []byte) []confEntry {
	var out []confEntry
	type level struct {
		indent int
		key    string
	}
	var stack []level
	for _, raw := range confLines(data) {
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line == "---" {
			continue
		}
		indent := len(raw) - len(strings.TrimLeft(raw, " "))
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		k, v, ok := cutOutsideQuotes(line, ':')
		if !ok {
			continue
		}
		k = unquote(strings.TrimSpace(k))
		v = strings.TrimSpace(stripComment(v))
		if v == "" {
			stack = append(stack, level{indent, k})
			continue
		}
		path := make([]string, 0, len(stack)+1)
		for _, l := range stack {
			path = append(path, l.key)
		}
		out = append(out, confEntry{append(path, k), unquote(v)})
	}
	return out
}
