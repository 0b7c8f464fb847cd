package jail

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// maxWalk bounds how many entries one glob expansion visits.
const maxWalk = 1_000_000

// Gather collects the facts Build needs for a policy: the machine's
// protections, the state of every path of interest, glob matches, and the
// hard links that would let a denied file be read under another name.
func Gather(pol *Policy, home, cwd string) (*Facts, error) {
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
		SecretSuffix:  randomHex(12),
	}
	f.CADir = filepath.Join(UserConfigDir(home, os.Getenv), "ca")
	f.Bundle = filepath.Join(f.CADir, "bundle.pem")
	f.StateDir = StateDir(home, os.Getenv)
	f.SessionDir = filepath.Join(runtimeDir(), f.Session)
	paths, patterns := Interest(pol, home)
	paths = append(paths, f.CADir, f.StateDir)
	f.HooksPaths = hooksPaths(pol.ProjectRoot, home)
	for _, h := range f.HooksPaths {
		paths = append(paths, withParents(strings.TrimSuffix(h, "/"), "/")...)
	}
	for _, p := range paths {
		f.Paths[p] = statPath(p)
	}
	walkGlobs(patterns, func(pat, path string, d fs.DirEntry) {
		f.Matches[pat] = append(f.Matches[pat], path)
		f.Paths[path] = statPath(path)
	})
	for _, pat := range patterns {
		sort.Strings(f.Matches[pat])
		f.Matches[pat] = union(nil, f.Matches[pat])
	}
	statGuardFacts(f, pol.ProjectRoot)
	// Inodes of denied files with more than one name. A glob such as
	// ~/.ssh/** matches the directory and everything below it: each tree
	// is walked once.
	sensitive := map[[2]uint64]bool{}
	walked := map[string]bool{}
	for _, pat := range deniedPatterns(pol, home, f.CADir, f.StateDir) {
		list := []string{pat}
		if HasMeta(pat) {
			list = f.Matches[pat]
		}
		for _, p := range list {
			if walked[p] || coveredBy(p, walked) {
				continue
			}
			walked[p] = true
			walkLinked(p, 10_000, func(_ string, key [2]uint64) { sensitive[key] = true })
		}
	}
	if len(sensitive) > 0 {
		// Every host tree the jail shows: the project, the allowed paths,
		// and in learning and watch modes the whole home.
		roots := map[string]bool{}
		for _, r := range append(append([]string{pol.ProjectRoot}, pol.AllowRead...), pol.AllowWrite...) {
			if !HasMeta(r) {
				roots[r] = true
			}
		}
		if pol.Mode != "" {
			roots[home] = true
		}
		for r := range roots {
			if coveredBy(r, roots) {
				continue
			}
			walkLinked(r, maxWalk, func(path string, key [2]uint64) {
				if sensitive[key] {
					f.HardLinks = append(f.HardLinks, path)
				}
			})
		}
		sort.Strings(f.HardLinks)
		for _, p := range f.HardLinks {
			f.Paths[p] = statPath(p)
		}
	}
	return f, nil
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
			for _, d := range parentsBelow(m, root) {
				stat(d)
			}
		}
	}
	for _, g := range f.Matches[filepath.Join(root, nestedGit)] {
		for _, c := range []string{"hooks", "config", "info"} {
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
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() && syscall.Access(p, 4 /* R_OK */) != nil {
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
// are not entered unless a pattern's base is inside one.
func walkGlobs(patterns []string, match func(pat, path string, d fs.DirEntry)) {
	bases := map[string][]string{}
	for _, pat := range patterns {
		bases[GlobBase(pat)] = append(bases[GlobBase(pat)], pat)
	}
	roots := sortedKeys(bases)
	var tops []string
	for _, r := range roots {
		if len(tops) > 0 && under(r, tops[len(tops)-1]) {
			continue
		}
		tops = append(tops, r)
	}
	for _, top := range tops {
		var pats []string
		for _, r := range roots {
			if under(r, top) {
				pats = append(pats, bases[r]...)
			}
		}
		if top == "/" {
			continue // never walk the whole machine
		}
		seen := 0
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if seen++; seen > maxWalk {
				return fs.SkipAll
			}
			for _, pat := range pats {
				if MatchPath(pat, path) {
					match(pat, path, d)
				}
			}
			if d.IsDir() && d.Name() == ".git" && path != top {
				inside := false
				for _, pat := range pats {
					inside = inside || strings.Contains(GlobBase(pat)+"/", "/.git/")
				}
				if !inside {
					return fs.SkipDir
				}
			}
			return nil
		})
	}
}

// walkLinked calls fn with each regular file at or below root that has
// more than one hard link, and its inode, visiting at most limit entries and
// passing over what cannot be read.
func walkLinked(root string, limit int, fn func(path string, key [2]uint64)) {
	seen := 0
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if seen++; seen > limit {
			return fs.SkipAll
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					fn(path, [2]uint64{uint64(st.Dev), st.Ino})
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

// HomeDir returns the user's home: $HOME when it is absolute, else the
// password database's.
func HomeDir() (string, error) {
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Clean(h), nil
	}
	h, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(h) {
		return "", errors.New("cannot tell your home directory; set HOME to an absolute path")
	}
	return h, nil
}

// Created returns the delayed-escape paths the command created that no
// placeholder could hold: new matches of protected globs (a jail.json or
// a .git in a new directory). jail warns about them after the command
// exits.
func Created(p *Plan) []string {
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
	walkGlobs(p.WatchGlobs, func(pat, path string, d fs.DirEntry) {
		if !existing[path] {
			existing[path] = true
			out = append(out, path)
		}
	})
	sort.Strings(out)
	return out
}

// StateDir is where jail keeps its decision log: $XDG_STATE_HOME/jail,
// else ~/.local/state/jail.
func StateDir(home string, getenv func(string) string) string {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "jail")
	}
	return filepath.Join(home, ".local", "state", "jail")
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
