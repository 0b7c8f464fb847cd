package jail

import (
	"path/filepath"
	"strings"
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
func MatchPath(pattern, path string) bool {
	return matchSegs(strings.Split(strings.Trim(pattern, "/"), "/"), strings.Split(strings.Trim(path, "/"), "/"))
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := filepath.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}
