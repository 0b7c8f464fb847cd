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
func (g Glob) regex() (string, error) {
	if !absClean(g.Dir) || g.Pattern == "" || strings.HasPrefix(g.Pattern, "/") || strings.ContainsAny(g.Pattern, "\x00\n") {
		return "", fmt.Errorf("glob %q: needs a clean absolute directory and a relative pattern", g.String())
	}
	var b strings.Builder
	b.WriteString("^")
	b.WriteString(regexp.QuoteMeta(strings.TrimSuffix(g.Dir, "/")))
	for _, seg := range strings.Split(strings.Trim(g.Pattern, "/"), "/") {
		if seg == "**" {
			b.WriteString("(/[^/]+)*")
			continue
		}
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("glob %q: empty, . or .. segment", g.String())
		}
		b.WriteString("/")
		if err := segmentRegex(&b, seg); err != nil {
			return "", fmt.Errorf("glob %q: %w", g.String(), err)
		}
	}
	b.WriteString("$")
	return b.String(), nil
}

// treeRegex is regex widened to everything below each match: a rule on a
// path names the path alone, so a masked or protected directory matched by
// a pattern needs its contents matched too.
func (g Glob) treeRegex() (string, error) {
	re, err := g.regex()
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(re, "$") + "(/.*)?$", nil
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
func segmentRegex(b *strings.Builder, seg string) error {
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; c {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '[':
			n, err := classRegex(b, seg[i:])
			if err != nil {
				return err
			}
			i += n - 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return nil
}

// classRegex writes the class at the start of s and returns its length.
// Ranges "a-z" and a leading "^" (negation) are kept; a negated class never
// matches "/". Classes holding characters whose meaning differs between
// glob and POSIX brackets are refused rather than guessed.
func classRegex(b *strings.Builder, s string) (int, error) {
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
	b.WriteString("]")
	return end + 2, nil
}
