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
			case j < len(segs) && segMatch(pat[i], segs[j]):
				ok[i*w+j] = ok[(i+1)*w+j+1]
			}
		}
	}
	return ok[0]
}

func segMatch(pat, seg string) bool {
	if !HasMeta(pat) {
		return pat == seg
	}
	m, err := filepath.Match(pat, seg)
	return err == nil && m
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}
