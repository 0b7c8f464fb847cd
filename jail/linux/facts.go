package linux

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/credstores"
)

// maxWalk bounds how many entries one tree walk visits: the expansion of
// globs sharing a base, or one hard-link scan. A walk that needs more fails
// and jail refuses to run, since what it did not see may need masking. A
// variable so that unit tests can lower it.
var maxWalk = walkLimit(os.Getenv("JAIL_MAX_WALK"))

// walkLimit is the walk bound: 1,000,000 entries, or fewer when
// JAIL_MAX_WALK asks for fewer (never more: a lower bound only makes jail
// refuse sooner, so the variable cannot weaken the jail).
func walkLimit(env string) int {
	const limit = 1_000_000
	if n, err := strconv.Atoi(env); err == nil && n > 0 && n < limit {
		return n
	}
	return limit
}

// Gather collects the facts Build needs for a policy: the machine's
// protections, the state of every path of interest, glob matches, and the
// hard links that would let a denied file be read under another name.
func Gather(pol *jail.Policy, home, cwd string) (*Facts, error) {
	if err := checkLiteralDirs(pol.ProjectRoot, home, cwd); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the jail binary: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	// The small jail-init beside jail starts faster inside the jail than
	// jail itself; without it, jail re-executes itself as init.
	if small := filepath.Join(filepath.Dir(exe), "jail-init"); syscall.Access(small, 1 /* X_OK */) == nil {
		exe = small
	}
	f := &Facts{
		UID: os.Getuid(), GID: os.Getgid(),
		Home: home, Cwd: cwd, Exe: exe,
		LandlockABI:   LandlockABI(),
		Seccomp:       SeccompAvailable(),
		SeccompNotify: SeccompNotifyAvailable(),
		Paths:         map[string]PathInfo{},
		Matches:       map[string][]string{},
		Env:           os.Environ(),
		Session:       randomHex(8),
		SecretKey:     jail.NewSessionKey(),
	}
	f.CADir = filepath.Join(jail.UserConfigDir(home, os.Getenv), "ca")
	f.StateDir = jail.StateDir(home, os.Getenv)
	f.SessionDir = filepath.Join(runtimeDir(), f.Session)
	paths, patterns := jail.Interest(pol, home)
	paths = append(paths, f.CADir, f.StateDir, filepath.Dir(f.SessionDir))
	f.HooksPaths = jail.HooksPaths(pol.ProjectRoot, home)
	if f.AgentPrograms, err = jail.ReferencedPrograms(home, jail.ShownRoots(pol, home)); err != nil {
		return nil, err
	}
	paths = append(paths, f.AgentPrograms...)
	for _, h := range f.HooksPaths {
		paths = append(paths, jail.WithParents(strings.TrimSuffix(h, "/"), "/")...)
	}
	for _, p := range paths {
		f.Paths[p] = statPath(p)
	}
	if err := f.expandGlobs(pol, patterns); err != nil {
		return nil, err
	}
	statGuardFacts(f, pol.ProjectRoot)
	f.EnvFileSecrets = jail.EnvFileSecrets(pol, f.secretFilePaths(pol))
	if err := f.findHardLinks(pol); err != nil {
		return nil, err
	}
	return f, nil
}

// checkLiteralDirs refuses a project, home or working directory whose name
// has glob characters: the paths jail builds under it (".env", ".git/hooks")
// would be taken for patterns and match other files, or none.
func checkLiteralDirs(root, home, cwd string) error {
	for _, d := range []struct{ what, path string }{{"project directory", root}, {"home directory", home}, {"working directory", cwd}} {
		if jail.HasMeta(d.path) {
			return fmt.Errorf("the %s %s has a glob character (*, ? or [) in its name, so jail cannot tell the paths under it from patterns; rename it or run jail from a directory without them", d.what, d.path)
		}
	}
	return nil
}

// expandGlobs fills f.Matches. It fails when a walk could not see all that
// a pattern may match, unless what it missed lies under a path the jail
// masks anyway.
func (f *Facts) expandGlobs(pol *jail.Policy, patterns []string) error {
	var unread []*WalkError
	err := walkGlobs(patterns, func(pat, path string, d fs.DirEntry) {
		f.Matches[pat] = append(f.Matches[pat], path)
		f.Paths[path] = statPath(path)
	}, func(e *WalkError) { unread = append(unread, e) })
	if err != nil {
		return globRefusal(pol, err)
	}
	for _, pat := range patterns {
		sort.Strings(f.Matches[pat])
		f.Matches[pat] = jail.Union(nil, f.Matches[pat])
	}
	masked := f.masked(pol)
	for _, e := range unread {
		if !masked(e.Path) {
			return globRefusal(pol, e)
		}
	}
	return nil
}

// masked reports whether a host path is at or below a path the jail masks:
// a denied path, or a match of a denied glob (f.Matches must be filled).
func (f *Facts) masked(pol *jail.Policy) func(string) bool {
	set := map[string]bool{}
	for _, pat := range jail.DeniedPatterns(pol, f.Home, f.CADir, f.StateDir) {
		if !jail.HasMeta(pat) {
			set[pat] = true
		}
		for _, m := range f.Matches[pat] {
			set[m] = true
		}
	}
	return func(p string) bool { return set[p] || jail.CoveredBy(p, set) }
}

// globRefusal is the one-line refusal for a glob jail could not expand
// completely: it names the pattern (as the policy lists it) and the fix.
func globRefusal(pol *jail.Policy, err error) error {
	var we *WalkError
	if !errors.As(err, &we) {
		return fmt.Errorf("expanding globs: %w", err)
	}
	list, pat := namePattern(pol, we.Patterns)
	switch {
	case we.Limit > 0 && list == "protected path":
		return fmt.Errorf("%s %q: %w; run jail from a smaller directory", list, pat, we)
	case we.Limit > 0:
		return fmt.Errorf("%s %q: %w; narrow the pattern or deny the directory itself", list, pat, we)
	case we.Root:
		return fmt.Errorf("%s %q: %w; start the pattern with a directory", list, pat, we)
	}
	return fmt.Errorf("%s %q: %w; make it readable (chmod u+rx %s) or deny the directory itself", list, pat, we, we.Path)
}

// namePattern picks the pattern a refusal names, the user's own lists
// first, and the list it comes from.
func namePattern(pol *jail.Policy, pats []string) (list, pat string) {
	for _, l := range []struct {
		name string
		pats []string
	}{
		{"denyRead", pol.DenyRead}, {"secrets.files", pol.Secrets.Files}, {"denyWrite", pol.DenyWrite},
		{"allowRead", pol.AllowRead}, {"allowWrite", pol.AllowWrite},
	} {
		for _, p := range pats {
			for _, q := range l.pats {
				if p == q {
					return l.name, p
				}
			}
		}
	}
	if len(pats) == 0 {
		return "protected path", ""
	}
	return "protected path", pats[0]
}

// findHardLinks fills f.HardLinks: the other names, in the trees the jail
// shows, of denied files with more than one hard link. It fails when a
// tree cannot be scanned completely, since a missed name would show a
// denied file.
func (f *Facts) findHardLinks(pol *jail.Policy) error {
	c := &linkCensus{names: map[[2]uint64]map[string]bool{}, nlink: map[[2]uint64]uint64{}, shown: map[[2]uint64][]string{}}
	// Inodes of denied files with more than one name, and one of the
	// names. A glob such as ~/.ssh/** matches the directory and everything
	// below it: each tree is walked once. A directory in a denied tree
	// that cannot be read hides which inodes are denied (blind).
	sensitive := map[[2]uint64]string{}
	var blind *WalkError
	walked := map[string]bool{}
	// Sign-in views hold hard links to the shown files of their
	// directories: names counted, never denied files.
	views := filepath.Join(f.StateDir, "views")
	walkLinked(views, nil, func(path string, key [2]uint64, n uint64) { c.note(path, key, n, false) }, func(*WalkError) {})
	// The placeholder pool holds only jail's spare placeholders (empty
	// directories, files of placeholder content, each taken only while
	// it is exactly that): no secret to find other names of, and as many
	// entries as placeholders were ever held at once, which would make
	// every start walk them.
	pool := filepath.Join(f.StateDir, "placeholders", "pool")
	skip := func(path string) bool { return path == views || path == pool }
	for _, pat := range jail.DeniedPatterns(pol, f.Home, f.CADir, f.StateDir) {
		list := []string{pat}
		if jail.HasMeta(pat) {
			list = f.Matches[pat]
		}
		for _, p := range list {
			if walked[p] || jail.CoveredBy(p, walked) || bulkStore(p, f.Home) {
				continue
			}
			walked[p] = true
			err := walkLinked(p, skip, func(path string, key [2]uint64, n uint64) {
				c.note(path, key, n, false)
				if sensitive[key] == "" {
					sensitive[key] = path
				}
			}, func(e *WalkError) {
				if blind == nil {
					blind = e
				}
			})
			if err != nil {
				return linkRefusal(err, "", p)
			}
		}
	}
	// A masked .env with another name would show its real values there.
	envNames := f.secretFilePaths(pol)
	for _, p := range envNames {
		noteLinked(p, c, sensitive)
	}
	if len(sensitive) == 0 && blind == nil {
		return nil
	}
	if err := f.scanShown(pol, c); err != nil {
		if len(sensitive) == 0 {
			return linkRefusal(blind, "", "")
		}
		return linkRefusal(err, firstValue(sensitive), "")
	}
	for key, paths := range c.shown {
		if sensitive[key] != "" {
			for _, p := range paths {
				if !slices.Contains(envNames, p) { // a .env name gets its masked copy
					f.HardLinks = append(f.HardLinks, p)
				}
			}
		}
	}
	sort.Strings(f.HardLinks)
	for _, p := range f.HardLinks {
		f.Paths[p] = statPath(p)
	}
	// With a denied tree only partly seen, a shown file whose names are
	// not all found may have its missing name in the part not seen.
	if blind != nil {
		if p := c.unaccounted(); p != "" {
			return fmt.Errorf("hard-link scan: %s has a name jail cannot find, which may be in %w; make it readable (chmod u+rx %s) or remove the extra name", p, blind, blind.Path)
		}
	}
	return nil
}

// scanShown counts the names of files with several hard links in every
// host tree the jail shows: the project, the allowed paths, and in
// learning and watch modes the whole home. What the jail masks need not be
// searched. The error is a *WalkError naming the tree.
func (f *Facts) scanShown(pol *jail.Policy, c *linkCensus) error {
	roots := map[string]bool{}
	for _, r := range append(append([]string{pol.ProjectRoot}, pol.AllowRead...), pol.AllowWrite...) {
		if !jail.HasMeta(r) {
			roots[r] = true
		}
	}
	if pol.Mode != "" {
		roots[f.Home] = true
	}
	masked := f.masked(pol)
	for _, r := range jail.SortedKeys(roots) {
		if jail.CoveredBy(r, roots) {
			continue
		}
		var unread error
		err := walkLinked(r, masked, func(path string, key [2]uint64, n uint64) {
			c.note(path, key, n, true)
		}, func(e *WalkError) {
			if unread == nil {
				unread = e
			}
		})
		if err == nil {
			err = unread
		}
		if err != nil {
			var we *WalkError
			if errors.As(err, &we) {
				we.Tree = r
			}
			return err
		}
	}
	return nil
}

// linkCensus is what the hard-link scans found: per inode with several
// names, the names found, the link count, and the names in shown trees.
type linkCensus struct {
	names map[[2]uint64]map[string]bool
	nlink map[[2]uint64]uint64
	shown map[[2]uint64][]string
}

func (c *linkCensus) note(path string, key [2]uint64, n uint64, shown bool) {
	if c.names[key] == nil {
		c.names[key] = map[string]bool{}
	}
	if shown && !c.names[key][path] {
		c.shown[key] = append(c.shown[key], path)
	}
	c.names[key][path] = true
	c.nlink[key] = n
}

// unaccounted returns a shown name of an inode with names the scans did
// not find, "" when there is none.
func (c *linkCensus) unaccounted() string {
	first := ""
	for key, paths := range c.shown {
		if uint64(len(c.names[key])) < c.nlink[key] {
			for _, p := range paths {
				if first == "" || p < first {
					first = p
				}
			}
		}
	}
	return first
}

// linkRefusal is the one-line refusal for a hard-link scan of tree that
// could not finish. linked is a denied file with another name when the
// scan looked for its names, "" when it looked for denied files.
func linkRefusal(err error, linked, tree string) error {
	var we *WalkError
	if errors.As(err, &we) && we.Tree != "" {
		tree = we.Tree
	}
	switch {
	case we == nil:
		return fmt.Errorf("hard-link scan of %s: %w", tree, err)
	case linked == "" && we.Limit > 0:
		return fmt.Errorf("hard-link scan: %w; jail cannot tell whether the files denied there have other names; deny less there or narrow the pattern", we)
	case linked == "":
		return fmt.Errorf("hard-link scan: %w; make it readable (chmod u+rx %s) so that jail can tell whether the denied files in it have other names", we, we.Path)
	case we.Limit > 0:
		return fmt.Errorf("hard-link scan: %s has another name, and there are %w to look for it in; remove the extra name (find %s -samefile %s) or run jail from a smaller directory", linked, we, tree, linked)
	}
	return fmt.Errorf("hard-link scan: %s has another name, and jail %w to look for it; make it readable (chmod u+rx %s) or deny the directory itself", linked, we, we.Path)
}

// firstValue is the smallest value of m, for a stable message.
func firstValue(m map[[2]uint64]string) string {
	first := ""
	for _, v := range m {
		if first == "" || v < first {
			first = v
		}
	}
	return first
}

// bulkStore reports whether p is one of the credential stores masked whole
// without a search for other names of their files (credstores.Bulk).
func bulkStore(p, home string) bool {
	for _, b := range credstores.Bulk {
		if jail.Under(p, filepath.Join(home, b)) {
			return true
		}
	}
	return false
}

// statGuardFacts stats what guarding the glob matches needs: the
// directories above each match, and the hooks, config and info of each
// nested repository's .git.
func statGuardFacts(f *Facts, root string) {
	stat := func(p string) {
		if _, ok := f.Paths[p]; !ok {
			f.Paths[p] = statPath(p)
		}
	}
	for _, list := range f.Matches {
		for _, m := range list {
			for _, d := range jail.ParentsBelow(m, root) {
				stat(d)
			}
		}
	}
	for _, g := range f.Matches[filepath.Join(root, jail.NestedGit)] {
		for _, c := range []string{"hooks", "config", "info", "commondir", "../HEAD"} {
			stat(filepath.Join(g, c))
		}
	}
}

// statPath describes one host path without following a final symlink.
func statPath(p string) PathInfo {
	fi, err := os.Lstat(p)
	if err != nil {
		return PathInfo{}
	}
	in := PathInfo{Exists: true, Dir: fi.IsDir()}
	// A directory that is only searchable still shows the files in it
	// whose names are known.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() && syscall.Access(p, 4 /* R_OK */) != nil &&
		(!fi.IsDir() || syscall.Access(p, 1 /* X_OK */) != nil) {
		in.Unreadable = true
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		in.Link, _ = os.Readlink(p)
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return PathInfo{} // dangling: nothing to bind
		}
		in.Resolved = r
		if st, err := os.Stat(r); err == nil {
			in.Dir = st.IsDir()
		}
	} else if r := resolveDir(filepath.Dir(p)); r != filepath.Dir(p) {
		in.Resolved = filepath.Join(r, filepath.Base(p)) // a parent directory is a symlink
	}
	return in
}

// resolvedDirs caches symlink resolution of directories: the paths jail
// stats share most of their parents, and resolving each path from the root
// cost most of the fact gathering's system calls.
var resolvedDirs sync.Map

func resolveDir(dir string) string {
	if r, ok := resolvedDirs.Load(dir); ok {
		return r.(string)
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		r = dir
	}
	resolvedDirs.Store(dir, r)
	return r
}

// walkGlobs expands patterns with as few tree walks as possible: patterns
// whose bases nest share the walk of the outermost base. .git directories
// are not entered unless a pattern's base is inside one. A directory the
// walk cannot read is handed to unread (with the patterns that could match
// below it) unless it is closed to the jailed process too; a walk that
// would visit more than maxWalk entries, or a pattern based at "/", stops
// the expansion with a *WalkError: what was not seen may match.
func walkGlobs(patterns []string, match func(pat, path string, d fs.DirEntry), unread func(*WalkError)) error {
	bases := map[string][]string{}
	for _, pat := range patterns {
		bases[jail.GlobBase(pat)] = append(bases[jail.GlobBase(pat)], pat)
	}
	roots := jail.SortedKeys(bases)
	var tops []string
	for _, r := range roots {
		if len(tops) > 0 && jail.Under(r, tops[len(tops)-1]) {
			continue
		}
		tops = append(tops, r)
	}
	for _, top := range tops {
		var pats []string
		for _, r := range roots {
			if jail.Under(r, top) {
				pats = append(pats, bases[r]...)
			}
		}
		if top == "/" {
			return &WalkError{Patterns: pats, Path: "/", Root: true} // never walk the whole machine
		}
		if err := walkGlobTree(top, pats, match, unread); err != nil {
			return err
		}
	}
	return nil
}

// walkGlobTree is one walk of walkGlobs, from top, for pats.
func walkGlobTree(top string, pats []string, match func(pat, path string, d fs.DirEntry), unread func(*WalkError)) error {
	seen := 0
	return filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if jail.ClosedInside(path, err) {
				return nil
			}
			var below []string
			for _, pat := range pats {
				if matchBelow(pat, path) {
					below = append(below, pat)
				}
			}
			if len(below) > 0 {
				unread(&WalkError{Patterns: below, Path: path, Err: err})
			}
			return nil
		}
		if seen++; seen > maxWalk {
			return &WalkError{Patterns: pats, Path: top, Limit: maxWalk}
		}
		for _, pat := range pats {
			if jail.MatchPath(pat, path) {
				match(pat, path, d)
			}
		}
		if d.IsDir() && path != top && inGitDir(path) && !gitDirWanted(path, pats) {
			return fs.SkipDir
		}
		return nil
	})
}

// inGitDir reports whether p is a .git directory or lies in one.
func inGitDir(p string) bool {
	return filepath.Base(p) == ".git" || strings.Contains(p, "/.git/")
}

// gitDirWanted reports whether a walk must enter dir, a .git directory or
// one in it: only on the way to, or below, a pattern's base that lies in
// it (.git/modules/*/hooks), never through objects and refs.
func gitDirWanted(dir string, pats []string) bool {
	for _, pat := range pats {
		b := jail.GlobBase(pat)
		if inGitDir(b) && (jail.Under(b, dir) || jail.Under(dir, b)) && matchBelow(pat, dir) {
			return true
		}
	}
	return false
}

// WalkError is a tree walk that could not see everything it had to: it
// reached the limit on entries (Limit), its base is "/" (Root), or it could
// not read a directory that the jailed process could read or make readable
// (Err). Patterns are the patterns that might match what was not seen.
type WalkError struct {
	Patterns []string
	Path     string
	Tree     string // the tree a hard-link scan was searching, if any
	Limit    int
	Root     bool
	Err      error
}

func (e *WalkError) Error() string {
	switch {
	case e.Limit > 0:
		return fmt.Sprintf("more than %d entries under %s", e.Limit, e.Path)
	case e.Root:
		return "a glob right below / would walk the whole machine"
	}
	cause := e.Err
	var pe *fs.PathError
	if errors.As(cause, &pe) {
		cause = pe.Err // the path is already in the message
	}
	return fmt.Sprintf("cannot read %s (%v)", e.Path, cause)
}

func (e *WalkError) Unwrap() error { return e.Err }

// matchBelow reports whether pattern could match a path strictly below
// dir: some leading part of the pattern matches dir, and more of the
// pattern is left (or it ends in "**").
func matchBelow(pattern, dir string) bool {
	pat := strings.Split(strings.Trim(pattern, "/"), "/")
	segs := strings.Split(strings.Trim(dir, "/"), "/")
	if dir == "/" {
		segs = nil
	}
	// at[j]: pat[:i] matches segs[:j], for the i of the loop.
	at := make([]bool, len(segs)+1)
	at[0] = true
	for i := 0; i < len(pat); i++ {
		if at[len(segs)] {
			return true
		}
		next := make([]bool, len(segs)+1)
		for j := range at {
			switch {
			case !at[j]:
			case pat[i] == "**":
				for k := j; k <= len(segs); k++ {
					next[k] = true
				}
			case j < len(segs) && jail.SegMatch(pat[i], segs[j]):
				next[j+1] = true
			}
		}
		at = next
	}
	return at[len(segs)] && pat[len(pat)-1] == "**"
}

// walkLinked calls fn with each regular file at or below root that has
// more than one hard link, its inode and its link count, passing over the
// directories skip names (nil: none). A directory the jailed process could
// read or make readable but the walk cannot read goes to unread: a hard
// link there would be missed. More than maxWalk entries stop the walk with
// a *WalkError.
func walkLinked(root string, skip func(string) bool, fn func(path string, key [2]uint64, nlink uint64), unread func(*WalkError)) error {
	seen := 0
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if skip != nil && path != root && skip(path) {
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err != nil {
			if !jail.ClosedInside(path, err) {
				unread(&WalkError{Path: path, Err: err})
			}
			return nil
		}
		if seen++; seen > maxWalk {
			return &WalkError{Path: root, Limit: maxWalk}
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					fn(path, [2]uint64{uint64(st.Dev), st.Ino}, uint64(st.Nlink))
				}
			}
		}
		return nil
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux >= 3.17
	}
	return hex.EncodeToString(b)
}

// Created returns the delayed-escape paths the command created that no
// placeholder could hold: protected paths held only when present, and new
// matches of protected globs (a jail.json or a .git in a new directory).
// jail warns about them after the command exits. The error says what it
// could not look through (a walk limit, an unreadable directory): the
// command may have created more there.
func Created(p *Plan) ([]string, error) {
	var out []string
	for _, m := range p.WatchNew {
		if _, err := os.Lstat(m); err == nil {
			out = append(out, m)
		}
	}
	existing := map[string]bool{}
	for _, e := range p.Existing {
		existing[e] = true
	}
	var unread error
	err := walkGlobs(p.WatchGlobs, func(pat, path string, d fs.DirEntry) {
		if !existing[path] {
			existing[path] = true
			out = append(out, path)
		}
	}, func(e *WalkError) {
		if unread == nil {
			unread = e
		}
	})
	if err == nil {
		err = unread
	}
	sort.Strings(out)
	return out, err
}

// runtimeDir is the per-user directory for session sockets:
// $XDG_RUNTIME_DIR/jail when it is usable, else a private directory in /tmp
// (checked for ownership and mode before use).
func runtimeDir() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		if fi, err := os.Stat(x); err == nil && fi.IsDir() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Getuid() {
				return filepath.Join(x, "jail")
			}
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("jail-%d", os.Getuid()))
}
