package darwin

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// errClass is returned for a character class Seatbelt's regex cannot be
// trusted to read the same way Go's glob matcher does.
var errClass = errors.New("character class holds a bracket, backslash, caret or dash")

// hasMeta reports whether a path pattern contains glob characters.
func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// Glob is a path pattern: Dir is a literal absolute directory, matched
// byte for byte whatever it holds, and Pattern a relative glob below it.
type Glob struct {
	Dir, Pattern string
}

// String is the glob as one path, for messages.
func (g Glob) String() string { return path.Join(g.Dir, g.Pattern) }

// regex turns a glob into an anchored regular expression that matches the
// same paths: every byte of Dir is escaped so that a metacharacter in a
// directory name matches only itself; in Pattern "*" and "?" stay within one
// path segment, "**" matches zero or more whole segments (so "secrets/**"
// also matches secrets itself), and "[...]" is a class within a segment.
// With fold the regex matches every spelling the default macOS volume
// (APFS, case- and normalization-insensitive) opens as the same file: each
// ASCII letter is a class of both cases, and each run of non-ASCII bytes
// with the letter before it (whose NFC and NFD spellings differ, é against
// e and a combining accent, and whose case Seatbelt's regex cannot fold)
// matches any run of bytes within the segment. Only rules that deny are folded:
// a wider deny takes nothing a spelling of the same file would give.
func (g Glob) regex(fold bool) (string, error) {
	if !absClean(g.Dir) || g.Pattern == "" || strings.HasPrefix(g.Pattern, "/") || strings.ContainsAny(g.Pattern, "\x00\n") {
		return "", fmt.Errorf("glob %q: needs a clean absolute directory and a relative pattern", g.String())
	}
	var b strings.Builder
	b.WriteString("^")
	if err := literalRegex(&b, g.Dir, fold); err != nil {
		return "", fmt.Errorf("glob %q: %w", g.String(), err)
	}
	for _, seg := range strings.Split(strings.Trim(g.Pattern, "/"), "/") {
		if seg == "**" {
			b.WriteString("(/[^/]+)*")
			continue
		}
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("glob %q: empty, . or .. segment", g.String())
		}
		b.WriteString("/")
		if err := segmentRegex(&b, seg, fold); err != nil {
			return "", fmt.Errorf("glob %q: %w", g.String(), err)
		}
	}
	b.WriteString("$")
	return b.String(), nil
}

// treeRegex is regex widened to everything below each match: a rule on a
// path names the path alone, so a masked or protected directory matched by
// a pattern needs its contents matched too.
func (g Glob) treeRegex(fold bool) (string, error) {
	re, err := g.regex(fold)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(re, "$") + "(/.*)?$", nil
}

// pathRegex is the anchored regex of one literal path, the path alone or
// (tree) with everything below it, folded as Glob.regex folds.
func pathRegex(p string, tree, fold bool) (string, error) {
	if !absClean(p) {
		return "", fmt.Errorf("path %q is not a clean absolute path", p)
	}
	var b strings.Builder
	b.Grow(4*len(p) + 8) // a folded letter takes four bytes
	b.WriteString("^")
	if err := literalRegex(&b, p, fold); err != nil {
		return "", err
	}
	if tree {
		b.WriteString("(/.*)?")
	}
	b.WriteString("$")
	return b.String(), nil
}

// literalRegex writes the regex of a literal absolute path (the root as
// nothing, so a pattern below it starts with its own "/").
func literalRegex(b *strings.Builder, p string, fold bool) error {
	for rest := p; rest != ""; {
		var seg string
		rest = strings.TrimLeft(rest, "/")
		seg, rest, _ = strings.Cut(rest, "/")
		if seg == "" {
			continue
		}
		b.WriteString("/")
		switch {
		case fold:
			foldSegment(b, seg)
		default:
			b.WriteString(regexp.QuoteMeta(seg))
		}
	}
	return nil
}

// foldBytes writes s with each ASCII letter as a class of both cases and
// every other byte escaped.
func foldBytes(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		foldByte(b, s[i])
	}
}

// foldByte writes one byte: an ASCII letter as the class of both its
// cases, a regex metacharacter escaped, any other byte as itself.
func foldByte(b *strings.Builder, c byte) {
	if lo, up, ok := letterCases(c); ok {
		b.WriteByte('[')
		b.WriteByte(lo)
		b.WriteByte(up)
		b.WriteByte(']')
		return
	}
	if strings.IndexByte(`\.+*?()|[]{}^$`, c) >= 0 {
		b.WriteByte('\\')
	}
	b.WriteByte(c)
}

// foldSegment writes a literal segment case-folded, each run of non-ASCII
// bytes with the ASCII byte before it as "[^/]+", so that both Unicode
// normalizations and every case of a letter match.
func foldSegment(b *strings.Builder, seg string) {
	wild := false // the last thing written is [^/]+
	for i := 0; i < len(seg); i++ {
		if seg[i] >= 0x80 || (i+1 < len(seg) && seg[i+1] >= 0x80) {
			if !wild {
				b.WriteString("[^/]+")
				wild = true
			}
			continue
		}
		wild = false
		foldByte(b, seg[i])
	}
}

func letterCases(c byte) (lo, up byte, ok bool) {
	switch {
	case c >= 'a' && c <= 'z':
		return c, c - 'a' + 'A', true
	case c >= 'A' && c <= 'Z':
		return c - 'A' + 'a', c, true
	}
	return 0, 0, false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// base is the longest leading directory of the glob without glob
// characters: renaming it or anything above it would move what it matches.
func (g Glob) base() string {
	dir := g.Dir
	for _, seg := range strings.Split(strings.Trim(g.Pattern, "/"), "/") {
		if hasMeta(seg) {
			break
		}
		dir = path.Join(dir, seg)
	}
	return dir
}

// segmentRegex writes the regex of one path segment.
func segmentRegex(b *strings.Builder, seg string, fold bool) error {
	if fold && !isASCII(seg) {
		if hasMeta(seg) {
			b.WriteString("[^/]+") // a pattern with non-ASCII bytes: any segment
		} else {
			foldSegment(b, seg)
		}
		return nil
	}
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; c {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '[':
			n, err := classRegex(b, seg[i:], fold)
			if err != nil {
				return err
			}
			i += n - 1
		default:
			if fold {
				foldBytes(b, string(c))
			} else {
				b.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
	}
	return nil
}

// classRegex writes the class at the start of s and returns its length.
// Ranges "a-z" and a leading "^" (negation) are kept; a negated class never
// matches "/". Classes holding characters whose meaning differs between
// glob and POSIX brackets are refused rather than guessed. With fold the
// class also holds the other case of each letter and range in it.
func classRegex(b *strings.Builder, s string, fold bool) (int, error) {
	end := strings.IndexByte(s[1:], ']')
	if end < 0 {
		return 0, errors.New("unterminated character class")
	}
	body := s[1 : end+1]
	neg := strings.HasPrefix(body, "^")
	if neg {
		body = body[1:]
	}
	if body == "" {
		return 0, errors.New("empty character class")
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '-' && i > 0 && i < len(body)-1 {
			continue
		}
		if strings.IndexByte(`[]\^-/`, c) >= 0 || c < 0x20 || c >= 0x7f {
			return 0, errClass
		}
	}
	b.WriteString("[")
	if neg {
		b.WriteString("^/")
	}
	b.WriteString(body)
	if fold {
		b.WriteString(otherCases(body))
	}
	b.WriteString("]")
	return end + 2, nil
}

// otherCases is a class body's letters and letter ranges in the other case
// ("a-f" gives "A-F"); a range from a letter to a non-letter gives every
// letter of both cases, which only widens the folded class.
func otherCases(body string) string {
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if i+2 < len(body) && body[i+1] == '-' {
			lo, hi := c, body[i+2]
			i += 2
			l1, u1, ok1 := letterCases(lo)
			l2, u2, ok2 := letterCases(hi)
			switch {
			case ok1 && ok2 && (lo == l1) == (hi == l2):
				if lo == l1 {
					b.WriteString(string(u1) + "-" + string(u2))
				} else {
					b.WriteString(string(l1) + "-" + string(l2))
				}
			case ok1 || ok2 || lo <= 'z' && hi >= 'A':
				b.WriteString("a-zA-Z")
			}
			continue
		}
		if lo, up, ok := letterCases(c); ok {
			if c == lo {
				b.WriteByte(up)
			} else {
				b.WriteByte(lo)
			}
		}
	}
	return b.String()
}
