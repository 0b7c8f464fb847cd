package darwin

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/credstores"
)

// inode names a file whatever its path: device and inode number.
type inode [2]uint64

// census is what the hard-link walks found: per inode with several names,
// the names seen, the link count, one masked name (sensitive) and the
// names in the shown trees; and which names are masked themselves.
type census struct {
	names     map[inode]map[string]bool
	nlink     map[inode]uint64
	sensitive map[inode]string
	shown     map[inode][]string
	masked    map[string]bool
}

func (c *census) note(path string, key inode, n uint64, masked, shown bool) {
	if c.names[key] == nil {
		c.names[key] = map[string]bool{}
	}
	if shown && !slices.Contains(c.shown[key], path) { // a glob's walk may have seen it first
		c.shown[key] = append(c.shown[key], path)
	}
	c.names[key][path], c.nlink[key] = true, n
	if masked && c.sensitive[key] == "" {
		c.sensitive[key] = path
	}
	if masked {
		c.masked[path] = true
	}
}

// hardLinks returns the other names, in the trees the jail shows, of
// masked files with more than one hard link: Seatbelt decides by path, so
// such a name would read the secret. Those names are masked too, as the
// Linux jail masks them. masks are the resolved masked paths and patterns,
// envFiles the project's .env files (whose names in the project are
// denied already), shown the trees the jail shows. A shown tree that
// cannot be walked whole is an error when a masked file has another name,
// since the name missed there would show it; so is a masked tree partly
// unreadable when a shown file has a name no walk found.
func hardLinks(masks, envFiles, shown []string, home string) ([]string, error) {
	c := &census{names: map[inode]map[string]bool{}, nlink: map[inode]uint64{}, sensitive: map[inode]string{}, shown: map[inode][]string{}, masked: map[string]bool{}}
	var blind error
	for _, top := range maskTrees(masks, home) {
		err := walkLinked(top, nil, func(path string, key inode, n uint64) {
			c.note(path, key, n, maskedBy(masks, path), false)
		})
		if err != nil && blind == nil {
			blind = fmt.Errorf("%s: %w", top, err)
		}
	}
	for _, e := range envFiles {
		walkLinked(e, nil, func(path string, key inode, n uint64) { c.note(path, key, n, true, false) })
	}
	if len(c.sensitive) == 0 && blind == nil {
		return nil, nil
	}
	if err := c.scanShown(masks, shown); err != nil {
		if len(c.sensitive) == 0 {
			return nil, fmt.Errorf("hard-link scan: %w, and a masked tree cannot be read whole (%v); make both readable so that jail can tell whether the masked files have other names", err, blind)
		}
		return nil, fmt.Errorf("hard-link scan: %s has another name, and jail cannot search all of %w for it; make it readable or remove the extra name", c.sensitive[firstKey(c.sensitive)], err)
	}
	return c.linked(envFiles, blind)
}

// maskTrees are the trees to walk for masked files: each mask's path (a
// pattern's literal base), those below another left out, and the bulk
// credential stores passed over.
func maskTrees(masks []string, home string) []string {
	tops := map[string]bool{}
	for _, m := range masks {
		if jail.HasMeta(m) {
			m = jail.GlobBase(m)
		}
		if !bulkStore(m, home) {
			tops[m] = true
		}
	}
	var out []string
	for _, t := range jail.SortedKeys(tops) {
		if !jail.CoveredBy(t, tops) {
			out = append(out, t)
		}
	}
	return out
}

// maskedBy reports whether one of the masks covers path: a literal path at
// or above it, or a pattern matching it or a directory above it.
func maskedBy(masks []string, path string) bool {
	return slices.ContainsFunc(masks, func(m string) bool {
		if jail.HasMeta(m) {
			return matchesOrBelow(m, path)
		}
		return within(path, m)
	})
}

// scanShown counts the names of multiply-linked files in the shown trees,
// passing over what is masked by path.
func (c *census) scanShown(masks, shown []string) error {
	roots := map[string]bool{}
	for _, r := range shown {
		roots[r] = true
	}
	masked := func(p string) bool {
		return slices.ContainsFunc(masks, func(m string) bool { return !jail.HasMeta(m) && within(p, m) })
	}
	for _, r := range jail.SortedKeys(roots) {
		if jail.CoveredBy(r, roots) {
			continue
		}
		if err := walkLinked(r, masked, func(path string, key inode, n uint64) { c.note(path, key, n, false, true) }); err != nil {
			return fmt.Errorf("%s (%w)", r, err)
		}
	}
	return nil
}

// linked returns the shown names of masked inodes, or an error when a
// masked tree was partly unreadable and a shown file has a name no walk
// found, which may be a masked file in the part not seen.
func (c *census) linked(envFiles []string, blind error) ([]string, error) {
	var out []string
	for key, paths := range c.shown {
		if c.sensitive[key] != "" {
			for _, p := range paths {
				if !c.masked[p] && !slices.Contains(envFiles, p) {
					out = append(out, p)
				}
			}
		} else if blind != nil && uint64(len(c.names[key])) < c.nlink[key] {
			return nil, fmt.Errorf("hard-link scan: %s has a name jail cannot find, which may be in %v; make it readable or remove the extra name", slices.Min(paths), blind)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// walkLinked calls fn with each regular file at or below root that has
// more than one hard link, passing over what skip names (nil: nothing).
// A directory the jailed process could read or make readable but the walk
// cannot read, or more than maxWalk entries, end the walk with an error;
// one gone or closed to the jailed process too (jail.ClosedInside) is
// passed over.
func walkLinked(root string, skip func(string) bool, fn func(path string, key inode, nlink uint64)) error {
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if jail.ClosedInside(path, err) {
				return nil // gone, or closed to the jailed process too
			}
			return err
		}
		if skip != nil && path != root && skip(path) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if seen++; seen > maxWalk {
			return fmt.Errorf("more than %d entries", maxWalk)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if jail.ClosedInside(path, err) {
				return nil
			}
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			fn(path, inode{uint64(st.Dev), uint64(st.Ino)}, uint64(st.Nlink))
		}
		return nil
	})
	return err
}

// matchesOrBelow reports whether path matches the pattern or lies below
// a directory that does.
func matchesOrBelow(pattern, path string) bool {
	if !jail.HasMeta(pattern) {
		return false
	}
	for d := path; d != "/" && d != "."; d = filepath.Dir(d) {
		if jail.MatchPath(pattern, d) {
			return true
		}
	}
	return false
}

// bulkStore reports whether p lies in one of the credential stores masked
// whole without a search for other names of their files: they hold tens
// of thousands of files, and a jailed command cannot link what it cannot
// see.
func bulkStore(p, home string) bool {
	for _, b := range credstores.Bulk {
		if within(p, filepath.Join(home, b)) {
			return true
		}
	}
	return false
}

// firstKey is the key of m's smallest value, for a stable message.
func firstKey(m map[inode]string) inode {
	var first inode
	best := ""
	for k, v := range m {
		if best == "" || v < best {
			first, best = k, v
		}
	}
	return first
}
