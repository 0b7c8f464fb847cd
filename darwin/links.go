package darwin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/jailsh/jail/jail"
)

// maxLinkWalk bounds how many entries the hard-link census visits.
const maxLinkWalk = 2_000_000

// inode names a file whatever its path: device and inode number.
type inode [2]uint64

// linkCensus counts the names of files with more than one hard link.
type linkCensus struct {
	seen      int
	sensitive map[inode]bool     // inodes of denied files
	shown     map[inode][]string // names in the shown trees
}

// HardLinkNames are the other names, in the trees the jail shows, of
// denied files with more than one hard link: Seatbelt's rules are by path,
// so a project file hard-linked to a credential or to a masked .env would
// read it under its own name. Denied are the literal paths of denied (the
// credential stores, the system secrets, denyRead) with all below them,
// and in the shown trees every file a pattern of denied matches. The census
// fails when it cannot finish, since a missed name would show a denied file.
// Paths are the host's, resolved; the planner maps the names for Seatbelt.
func HardLinkNames(denied, shown []string) ([]string, error) {
	c := &linkCensus{sensitive: map[inode]bool{}, shown: map[inode][]string{}}
	var patterns, trees []string
	for _, d := range denied {
		if jail.HasMeta(d) {
			patterns = append(patterns, d)
		} else {
			trees = append(trees, d)
		}
	}
	for _, s := range shown {
		err := c.walk(s, func(path string, key inode) {
			c.shown[key] = append(c.shown[key], path)
			if matchAny(patterns, path) {
				c.sensitive[key] = true
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if len(c.shown) == 0 {
		return nil, nil // no shown file has another name: nothing to look for
	}
	for _, d := range trees {
		if err := c.walk(d, func(path string, key inode) { c.sensitive[key] = true }); err != nil {
			return nil, err
		}
	}
	var out []string
	for key, names := range c.shown {
		if c.sensitive[key] {
			out = append(out, names...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// walk calls note for each regular file below root (root included) that
// has more than one hard link. A missing root has nothing to note; an
// unreadable directory is unreadable inside the jail as well.
func (c *linkCensus) walk(root string, note func(string, inode)) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if c.seen++; c.seen > maxLinkWalk {
			return fmt.Errorf("more than %d entries to search for hard links to denied files; run jail in a smaller project", maxLinkWalk)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if key, n, ok := linkCount(path); ok && n > 1 {
			note(path, key)
		}
		return nil
	})
}

// linkCount is a file's inode and its number of hard links.
func linkCount(path string) (inode, uint64, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return inode{}, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inode{}, 0, false
	}
	return inode{uint64(st.Dev), uint64(st.Ino)}, uint64(st.Nlink), true
}

// hardLinks runs the census for a policy: denied are the policy's denied
// paths, macOS's secrets and the project's .env patterns; shown are the
// project and the literal allowRead and allowWrite trees.
func hardLinks(pol *jail.Policy, root string, f *Facts) ([]string, error) {
	denied := append(jail.DeniedPatterns(pol, f.Home, f.CADir, f.StateDir), macSecrets...)
	for _, p := range secretFilePatterns {
		denied = append(denied, filepath.Join(root, p))
	}
	denied = append(denied, pol.Secrets.Files...)
	shown := []string{root}
	for _, p := range append(slices.Clone(pol.AllowRead), pol.AllowWrite...) {
		if !jail.HasMeta(p) {
			shown = append(shown, resolve(p))
		}
	}
	return HardLinkNames(denied, shown)
}

// withinFold is within in any ASCII case: the default macOS volume opens
// ~/library as ~/Library.
func withinFold(p, dir string) bool {
	return within(strings.ToLower(p), strings.ToLower(dir))
}
