package jail

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// HasMeta reports whether a path pattern contains glob characters.
func HasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// GlobBase is the longest leading directory of an absolute pattern that has
// no glob characters: the place a walk for the pattern must start.
func GlobBase(pattern string) string {
	parts := strings.Split(pattern, "/")
	for i, part := range parts {
		if HasMeta(part) {
			base := strings.Join(parts[:i], "/")
			if base == "" {
				return "/"
			}
			return base
		}
	}
	return pattern
}

// MatchPath reports whether an absolute path matches an absolute pattern.
// Segments match as in filepath.Match; "**" matches zero or more whole
// segments, so "/p/secrets/**" matches /p/secrets itself and all below it.
// A segment without glob characters matches itself literally. Matching is
// linear in len(pattern)*len(path): hostile patterns cannot stall jail.
func MatchPath(pattern, path string) bool {
	pat := strings.Split(strings.Trim(pattern, "/"), "/")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	// ok[i][j]: pat[i:] matches segs[j:]; filled from the end.
	w := len(segs) + 1
	ok := make([]bool, (len(pat)+1)*w)
	ok[len(pat)*w+len(segs)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(segs); j >= 0; j-- {
			switch {
			case pat[i] == "**":
				ok[i*w+j] = ok[(i+1)*w+j] || (j < len(segs) && ok[i*w+j+1])
			case j < len(segs) && SegMatch(pat[i], segs[j]):
				ok[i*w+j] = ok[(i+1)*w+j+1]
			}
		}
	}
	return ok[0]
}

func SegMatch(pat, seg string) bool {
	if !HasMeta(pat) {
		return pat == seg
	}
	m, err := filepath.Match(pat, seg)
	return err == nil && m
}

// Under reports whether path is dir or below it.
func Under(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// CheckPattern reports why MatchPath could not honour a path pattern
// exactly: an empty pattern or a NUL byte, a malformed bracket expression
// or escape (filepath.Match would fail and the segment would match
// nothing), a "[!...]" class (a literal "!" in Go, not a negation), an
// empty range such as "[z-a]", "**" inside a segment (it would mean "*"),
// a ".." segment after a glob segment (cleaning the path would fold it
// into the glob), and a glob in the first segment of an absolute pattern
// (jail never walks the whole machine to expand it). Patterns without glob
// characters are literal paths and are always honoured.
func CheckPattern(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return errors.New("empty path")
	case strings.ContainsRune(p, 0):
		return errors.New("the path has a NUL byte")
	case !HasMeta(p):
		return nil
	}
	segs := strings.Split(p, "/")
	globbed := false
	for i, seg := range segs {
		if seg == ".." && globbed {
			return errors.New(`".." after a glob segment; write the path without it`)
		}
		if err := checkSegment(seg); err != nil {
			return err
		}
		if HasMeta(seg) {
			if i == 1 && segs[0] == "" {
				return errors.New(`a glob right below "/" would walk the whole machine; start the pattern with a directory`)
			}
			globbed = true
		}
	}
	return nil
}

// checkSegment checks one segment of a pattern with filepath.Match's
// syntax, stricter where Match is silent (it does not always report a
// trailing backslash, and reads "[!a]" as "! or a").
func checkSegment(seg string) error {
	if seg != "**" && strings.Contains(seg, "**") {
		return fmt.Errorf(`%q: "**" must be a whole path segment, as in "a/**/b" or "a*/**"`, seg)
	}
	if !HasMeta(seg) {
		return nil // a literal name: a backslash in it is a file name character
	}
	for i := 0; i < len(seg); i++ {
		switch seg[i] {
		case '\\':
			if i++; i == len(seg) {
				return fmt.Errorf("%q ends in a backslash that escapes nothing; double it for a literal backslash", seg)
			}
		case '[':
			end, err := classEnd(seg, i)
			if err != nil {
				return fmt.Errorf("%q: %v", seg, err)
			}
			i = end
		}
	}
	return nil
}

// classEnd returns the index of the "]" closing the bracket expression
// that starts at seg[start], which is "[".
func classEnd(seg string, start int) (int, error) {
	i := start + 1
	if i < len(seg) && seg[i] == '!' {
		return 0, errors.New(`"[!" is a literal "!" here; negate a class with "[^...]"`)
	}
	if i < len(seg) && seg[i] == '^' {
		i++
	}
	// char reads one class character, escaped or not, at seg[i].
	char := func() (rune, error) {
		if i >= len(seg) {
			return 0, errBracket
		}
		c := seg[i]
		if c == '-' || c == ']' {
			return 0, errBracket
		}
		if c == '\\' {
			if i++; i >= len(seg) {
				return 0, errBracket
			}
		}
		r, n := utf8.DecodeRuneInString(seg[i:])
		if r == utf8.RuneError && n == 1 {
			return 0, errors.New("a bracket expression with a byte that is not UTF-8")
		}
		i += n
		return r, nil
	}
	for n := 0; ; n++ {
		if i < len(seg) && seg[i] == ']' && n > 0 {
			return i, nil
		}
		lo, err := char()
		if err != nil {
			return 0, err
		}
		if i < len(seg) && seg[i] == '-' {
			i++
			hi, err := char()
			if err != nil {
				return 0, err
			}
			if hi < lo {
				return 0, fmt.Errorf("the range %c-%c is empty", lo, hi)
			}
		}
	}
}

var errBracket = errors.New(`malformed bracket expression; close it with "]", or put a backslash before a literal "["`)
