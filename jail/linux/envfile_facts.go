package linux

import (
	"syscall"

	"github.com/jailsh/jail/jail"
)

// Facts about secrets, gathered before planning: the session key and the
// names of the secrets in .env files.

// secretFilePaths are the files the secret-file patterns match that jail
// masks, as read (a symlink's target).
func (f *Facts) secretFilePaths(pol *jail.Policy) []string {
	var out []string
	for _, pat := range jail.SecretFiles(pol) {
		files := []string{pat}
		if jail.HasMeta(pat) {
			files = f.Matches[pat]
		}
		for _, path := range files {
			in := f.info(path)
			if !in.Exists || in.Dir || in.Unreadable {
				continue
			}
			if in.Resolved != "" {
				path = in.Resolved
			}
			out = append(out, path)
		}
	}
	return jail.Union(nil, out)
}

// noteLinked notes in c a file with more than one hard link, as one whose
// other names must be hidden (sensitive).
func noteLinked(path string, c *linkCensus, sensitive map[[2]uint64]string) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink < 2 {
		return
	}
	key := [2]uint64{uint64(st.Dev), st.Ino}
	c.note(path, key, uint64(st.Nlink), false)
	if sensitive[key] == "" {
		sensitive[key] = path
	}
}
