package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/jailsh/jail/jail"
)

// BackReport tells what a fetch did with the remote's changes.
type BackReport struct {
	Applied    []string // changed, added or removed here as on the remote
	Conflicts  []string // changed on both sides: the remote version is NAME.jail-remote
	Kept       []string // protected or masked paths the remote changed: kept under KeptDir, never applied
	NotDeleted []string // removed on the remote but changed here (or protected): left as they are
	Refused    []string // names no project file may have (.., absolute, below a symlink)
	KeptDir    string
}

// ConflictSuffix is added to a file's name for the remote's version when
// both sides changed it.
const ConflictSuffix = ".jail-remote"

// maxFetch bounds one fetched file.
const maxFetch = 1 << 30

// SyncBack fetches what the remote command changed in the workspace since
// the last sync and applies it to the project, losing nothing: a file
// changed on both sides keeps the local version and gets the remote one
// beside it; changes to protected paths (hooks, git config, editor and
// agent settings, jail.json...) and to masked or denied files are kept
// under the state dir and reported, never applied; a remote deletion is
// applied only to a file unchanged here. Nothing is written outside the
// project. When the fetch fails the workspace stays on the remote and the
// error names the command that fetches it later.
func SyncBack(ctx context.Context, cfg SyncConfig) (*BackReport, error) {
	unlock, err := lockState(cfg.stateDir())
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep, err := syncBack(ctx, cfg)
	if err == nil {
		return rep, nil
	}
	if m, _ := LoadManifest(cfg.stateDir()); m != nil {
		m.Pending = true
		_ = m.Save(cfg.stateDir())
	} else {
		_ = (&Manifest{Host: cfg.Host, Root: cfg.root(), Pending: true}).Save(cfg.stateDir())
	}
	return rep, fmt.Errorf("fetching changes from %s: %w; the remote keeps its workspace %s: fetch them later with `%s`",
		cfg.Host, err, cfg.Dir, FetchHint(cfg.Host))
}

func syncBack(ctx context.Context, cfg SyncConfig) (*BackReport, error) {
	old, err := LoadManifest(cfg.stateDir())
	if err != nil {
		return nil, err
	}
	if old == nil || old.Root != cfg.root() {
		old = &Manifest{Host: cfg.Host, Root: cfg.root(), Entries: map[string]*ManifestEntry{}}
	}
	rem, err := listRemote(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	if rem.missing {
		return nil, fmt.Errorf("the remote workspace %s is gone", cfg.Dir)
	}
	if err := checkWorkspace(cfg, rem); err != nil {
		return nil, err
	}
	local, err := scan(cfg.root(), cfg.rules(), nil, old)
	if err != nil {
		return nil, err
	}
	b, err := newBack(cfg, old, rem, local)
	if err != nil {
		return nil, err
	}
	defer b.close()
	if err := b.fetch(ctx); err != nil {
		return b.rep, err
	}
	b.deletions()
	b.next.Dir = rem.dir
	return b.rep, b.next.Save(cfg.stateDir())
}

// back is one fetch in progress.
type back struct {
	cfg     SyncConfig
	old     *Manifest
	next    *Manifest // the workspace as this fetch leaves it
	rem     *remoteList
	local   map[string]*localEntry
	rules   *secretRules
	project *os.Root
	kept    *os.Root
	rep     *BackReport
	changed []string // remote paths that differ from the manifest, safe names only
}

func newBack(cfg SyncConfig, old *Manifest, rem *remoteList, local map[string]*localEntry) (*back, error) {
	project, err := os.OpenRoot(cfg.root())
	if err != nil {
		return nil, fmt.Errorf("opening the project: %w", err)
	}
	b := &back{cfg: cfg, old: old, rem: rem, local: local, rules: cfg.rules(), project: project, rep: &BackReport{},
		next: &Manifest{Host: cfg.Host, Root: cfg.root(), Entries: map[string]*ManifestEntry{}}}
	for p, o := range old.Entries {
		if rem.entries[p] != nil {
			b.next.Entries[p] = o
		}
	}
	for _, p := range sortedKeys(rem.entries) {
		r := rem.entries[p]
		if o := old.Entries[p]; o != nil && o.Remote != nil && *o.Remote == *r {
			continue
		}
		if !safeRel(p) {
			b.rep.Refused = append(b.rep.Refused, p)
			b.next.Entries[p] = &ManifestEntry{Path: p, Type: r.Type, Remote: r} // known, never fetched
			continue
		}
		b.changed = append(b.changed, p)
	}
	return b, nil
}

func (b *back) close() {
	b.project.Close()
	if b.kept != nil {
		b.kept.Close()
	}
}

// fetch gets the changed files' content in one tar and settles each
// changed entry.
func (b *back) fetch(ctx context.Context) error {
	var files []string
	for _, p := range b.changed {
		if b.rem.entries[p].Type == "file" {
			files = append(files, p)
		}
	}
	content := map[string]*fetched{}
	if len(files) > 0 {
		incoming, err := os.MkdirTemp(ensureDir(b.cfg.stateDir()), "incoming-")
		if err != nil {
			return fmt.Errorf("fetching: %w", err)
		}
		defer os.RemoveAll(incoming)
		if content, err = b.fetchTar(ctx, files, incoming); err != nil {
			return err
		}
	}
	for _, p := range b.changed {
		if err := b.settle(p, content[p]); err != nil {
			return err
		}
	}
	return nil
}

// ensureDir makes dir (private) and returns it.
func ensureDir(dir string) string {
	_ = os.MkdirAll(dir, 0o700)
	return dir
}

// fetched is a file the remote sent, held in the state dir until
// settled.
type fetched struct {
	path, sum string
}

// fetchTar reads the files' content from the remote's tar into dir,
// taking only regular files it asked for.
func (b *back) fetchTar(ctx context.Context, files []string, dir string) (map[string]*fetched, error) {
	want := map[string]bool{}
	for _, p := range files {
		want[p] = true
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		err := runLimited(ctx, b.cfg.Conn, b.fetchBound(files), withArgs(scriptFetch, b.rem.dir), nulList(files), pw, &stderr)
		pw.CloseWithError(err)
		done <- err
	}()
	out, readErr := readFetched(pr, want, dir)
	if readErr == nil {
		_, _ = io.Copy(io.Discard, pr) // tar's padding after the end
	}
	pr.CloseWithError(io.ErrClosedPipe)
	if err := <-done; err != nil && readErr == nil {
		return nil, fmt.Errorf("fetching: %w: %s", err, syncFirstLine(stderr.String()))
	}
	return out, readErr
}

// fetchBound is the most a tar of files can take: the sizes the listing
// gave (each at most maxFetch), a header of its own for each, and its
// end, with room for the remote's messages.
func (b *back) fetchBound(files []string) int64 {
	n := int64(maxChatter + 64<<10)
	for _, p := range files {
		n += min(b.rem.entries[p].Size, maxFetch) + 3<<10 + 2*int64(len(p))
	}
	return n
}

// readFetched reads a tar of the wanted regular files into dir.
func readFetched(r io.Reader, want map[string]bool, dir string) (map[string]*fetched, error) {
	out := map[string]*fetched{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("fetching: reading the remote's tar: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if !want[name] || out[name] != nil || h.Typeflag != tar.TypeReg || h.Size > maxFetch {
			return nil, fmt.Errorf("fetching: the remote sent %q, which was not asked for", h.Name)
		}
		f, err := os.CreateTemp(dir, "f-")
		if err != nil {
			return nil, fmt.Errorf("fetching %s: %w", jail.Escaped(name), err)
		}
		sum := sha256.New()
		_, err = io.Copy(io.MultiWriter(f, sum), io.LimitReader(tr, maxFetch))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("fetching %s: %w", jail.Escaped(name), err)
		}
		out[name] = &fetched{path: f.Name(), sum: hex.EncodeToString(sum.Sum(nil))}
	}
}

// copyInto writes f at name under root, created anew with mode.
func copyInto(root *os.Root, name string, f *fetched, mode fs.FileMode) error {
	src, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(name, mode)
	}
	return err
}

// settle decides one changed remote entry: applied, kept aside, or
// saved beside the local version.
func (b *back) settle(p string, body *fetched) error {
	r := b.rem.entries[p]
	o := b.old.Entries[p]
	remote := &ManifestEntry{Path: p, Type: r.Type, Mode: r.Mode, Size: r.Size, Link: r.Link, Remote: r}
	if r.Type == "file" {
		if body == nil {
			return fmt.Errorf("fetching: the remote did not send %s", jail.Escaped(p))
		}
		remote.SHA256 = body.sum
	}
	if o != nil && o.Type == r.Type && o.SHA256 == remote.SHA256 && o.Link == r.Link && o.Mode == r.Mode {
		o2 := *o
		o2.Remote = r
		b.next.Entries[p] = &o2 // touched, not changed
		return nil
	}
	b.next.Entries[p] = remote // the remote holds it; a later sync sends the local version over it
	if why := b.notApplied(p, o, r); why != "" {
		return b.keep(p, r, body)
	}
	if r.Type == "dir" {
		return b.makeDir(p)
	}
	e := b.local[p]
	switch {
	case sameAsRemote(e, remote):
		if e.Type == "file" && o != nil && o.SHA256 == remote.SHA256 && e.Mode == o.Mode && e.Mode != r.Mode {
			if b.project.Chmod(p, fs.FileMode(r.Mode&0o777)) == nil { // only the mode changed, there alone
				e.Mode = r.Mode & 0o777
				b.rep.Applied = append(b.rep.Applied, p)
			}
		}
		b.next.Entries[p] = applied(remote, e)
		return nil
	case localChanged(e, o):
		return b.conflict(p, r, body)
	}
	return b.apply(p, r, body, remote)
}

// notApplied says why a remote change must not reach the project, or "".
func (b *back) notApplied(p string, o *ManifestEntry, r *RemoteStat) string {
	abs := filepath.Join(b.cfg.root(), filepath.FromSlash(p))
	e := b.local[p]
	folded := filepath.Join(b.cfg.root(), filepath.FromSlash(foldName(p)))
	switch {
	case protectedRel(p, b.cfg.root()) || protectedRel(foldName(p), b.cfg.root()):
		return "protected"
	case b.rules.isSecret(abs) || b.rules.isDenied(abs) || b.rules.isSecret(folded) || b.rules.isDenied(folded) ||
		(o != nil && o.Masked) || (e != nil && e.why != sendPlain):
		return "masked"
	case newHEAD(p, o, e) || b.inBareRepo(p):
		return "protected"
	case r.Type == "link" && !linkInside(p, r.Link):
		return "link out of the project"
	case b.parentNotDir(p):
		return "below a symlink"
	}
	return ""
}

// inBareRepo reports whether p is a file that makes git run something in
// a directory git takes for a repository of its own (one holding a
// HEAD, here or on the remote): a test fixture's bare repository, say.
func (b *back) inBareRepo(p string) bool {
	for d := path.Dir(p); ; d = path.Dir(d) {
		head, rest := "HEAD", p
		if d != "." {
			head, rest = d+"/HEAD", p[len(d)+1:]
		}
		if rest != "HEAD" && (b.rem.entries[head] != nil || b.exists(head)) && gitInternal(rest) {
			return true
		}
		if d == "." {
			return false
		}
	}
}

func (b *back) exists(p string) bool {
	_, err := b.project.Lstat(p)
	return err == nil
}

// gitInternal reports whether rest, a path inside a git directory, is
// one of those that make git run or trust something.
func gitInternal(rest string) bool {
	for _, g := range gitProtected {
		if rest == g || strings.HasPrefix(rest, g+"/") {
			return true
		}
	}
	return false
}

// parentNotDir reports whether a directory on the way to p is here a
// symlink or not a directory: writing through it could leave the
// project or reach a protected path under another name.
func (b *back) parentNotDir(p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		fi, err := b.project.Lstat(d)
		if err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// keep stores the remote's version under the state dir.
func (b *back) keep(p string, r *RemoteStat, body *fetched) error {
	b.rep.Kept = append(b.rep.Kept, p)
	if r.Type == "dir" {
		return nil
	}
	if b.kept == nil {
		dir := filepath.Join(b.cfg.stateDir(), "kept", time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("keeping %s: %w", jail.Escaped(p), err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("keeping %s: %w", jail.Escaped(p), err)
		}
		b.kept, b.rep.KeptDir = root, dir
	}
	if d := path.Dir(p); d != "." {
		if err := b.kept.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("keeping %s: %w", jail.Escaped(p), err)
		}
	}
	if r.Type == "link" {
		return b.kept.WriteFile(p+".symlink", []byte(r.Link), 0o600)
	}
	_ = b.kept.Remove(p)
	return copyInto(b.kept, p, body, 0o600)
}

// makeDir makes a directory the remote added.
func (b *back) makeDir(p string) error {
	if fi, err := b.project.Lstat(p); err == nil {
		if !fi.IsDir() {
			b.rep.Conflicts = append(b.rep.Conflicts, p)
		}
		return nil
	}
	if err := b.project.MkdirAll(p, 0o755); err != nil {
		b.rep.Kept = append(b.rep.Kept, p) // not writable here: reported, never lost
	}
	return nil
}

// conflict saves the remote's version beside the local one.
func (b *back) conflict(p string, r *RemoteStat, body *fetched) error {
	b.rep.Conflicts = append(b.rep.Conflicts, p)
	side := p + ConflictSuffix
	if r.Type == "dir" {
		return nil
	}
	if protectedRel(side, b.cfg.root()) || protectedRel(foldName(side), b.cfg.root()) ||
		b.rules.isSecret(filepath.Join(b.cfg.root(), side)) || b.write(side, r, body) != nil {
		return b.keep(p, r, body)
	}
	return nil
}

// apply writes the remote's version over the unchanged local one.
func (b *back) apply(p string, r *RemoteStat, body *fetched, remote *ManifestEntry) error {
	if fi, err := b.project.Lstat(p); err == nil && fi.IsDir() {
		return b.conflict(p, r, body)
	}
	if err := b.write(p, r, body); err != nil {
		return b.keep(p, r, body) // not writable here: kept, never lost
	}
	b.rep.Applied = append(b.rep.Applied, p)
	fi, err := b.project.Lstat(p)
	if err == nil {
		e := &localEntry{}
		if e2, err := scanEntry(filepath.Join(b.cfg.root(), p), p, fs.FileInfoToDirEntry(fi)); err == nil {
			e = e2
		}
		b.next.Entries[p] = applied(remote, e)
	}
	return nil
}

// write puts a file or symlink at p in the project: a temporary name
// beside it, then renamed over it (a symlink there is replaced, never
// followed). Set-id bits are dropped.
func (b *back) write(p string, r *RemoteStat, body *fetched) error {
	if d := path.Dir(p); d != "." {
		if err := b.project.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("applying %s: %w", jail.Escaped(p), err)
		}
	}
	tmp := path.Join(path.Dir(p), fmt.Sprintf(".%s.jail-%d", path.Base(p), time.Now().UnixNano()))
	var err error
	if r.Type == "link" {
		err = b.project.Symlink(r.Link, tmp)
	} else {
		err = copyInto(b.project, tmp, body, fs.FileMode(r.Mode&0o777))
	}
	if err == nil {
		err = b.project.Rename(tmp, p)
	}
	if err != nil {
		_ = b.project.Remove(tmp)
		return fmt.Errorf("applying %s: %w", jail.Escaped(p), err)
	}
	return nil
}

// deletions applies the remote's removals to files unchanged here.
func (b *back) deletions() {
	var gone []string
	for p, o := range b.old.Entries {
		if b.rem.entries[p] == nil && o.Remote != nil {
			gone = append(gone, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(gone))) // deepest first
	for _, p := range gone {
		o, e := b.old.Entries[p], b.local[p]
		switch {
		case e == nil:
		case protectedRel(p, b.cfg.root()) || o.Masked || e.why != sendPlain || b.parentNotDir(p) || localChanged(e, o):
			b.rep.NotDeleted = append(b.rep.NotDeleted, p)
		case e.Type == "dir":
			if b.project.Remove(p) == nil {
				b.rep.Applied = append(b.rep.Applied, p)
			}
		default:
			if err := b.project.Remove(p); err == nil {
				b.rep.Applied = append(b.rep.Applied, p)
			} else {
				b.rep.NotDeleted = append(b.rep.NotDeleted, p)
			}
		}
	}
}

// sameAsRemote reports whether the local entry already is the remote's.
func sameAsRemote(e *localEntry, remote *ManifestEntry) bool {
	return e != nil && e.Type == remote.Type && e.SHA256 == remote.SHA256 && e.Link == remote.Link
}

// localChanged reports whether the local entry differs from what the
// last sync sent (a new, changed or removed file).
func localChanged(e *localEntry, o *ManifestEntry) bool {
	switch {
	case o == nil:
		return e != nil
	case e == nil:
		return true
	}
	return e.Type != o.Type || e.SHA256 != o.SHA256 || e.Link != o.Link
}

// applied is the manifest entry of a remote version now also here.
func applied(remote *ManifestEntry, e *localEntry) *ManifestEntry {
	m := *remote
	if e != nil {
		m.MTime, m.Ino, m.CTime, m.Mode = e.MTime, e.Ino, e.CTime, e.Mode
	}
	return &m
}

// safeRel reports whether p is a plain relative path inside the project:
// not empty, not absolute, no "." or ".." segment, no NUL or backslash.
func safeRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\\") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// linkInside reports whether a symlink at p with target stays inside the
// project by its text: relative, never climbing above the project.
func linkInside(p, target string) bool {
	if target == "" || path.IsAbs(target) {
		return false
	}
	j := path.Join(path.Dir(p), target)
	return j != ".." && !strings.HasPrefix(j, "../")
}

// gitProtected are the paths inside a .git directory (the project's or a
// nested one) that make git run or trust something: never taken from the
// remote.
var gitProtected = []string{"hooks", "config", "info", "commondir", "modules", "worktrees", "objects/info/alternates"}

// protectedRel reports whether a remote change to p, relative to the
// project at root, must never be applied: the project's protected paths
// (a later, unjailed program would run or obey them), anything in a
// .git that makes git run something, a .git file, and a HEAD beside a
// .git (which would make the work tree pass for a bare repository).
func protectedRel(p, root string) bool {
	abs := filepath.Join(root, filepath.FromSlash(p))
	var list []string
	for _, q := range jail.ProtectedProjectPaths(root) {
		if q != filepath.Join(root, ".git") {
			list = append(list, q)
		}
	}
	if matchesOrUnder(list, abs) {
		return true
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s != ".git" {
			continue
		}
		if i == len(segs)-1 {
			return true // a .git itself: a gitdir file, or a new repository
		}
		if gitInternal(strings.Join(segs[i+1:], "/")) {
			return true
		}
	}
	return strings.EqualFold(segs[len(segs)-1], "HEAD") && !slicesContains(segs[:len(segs)-1], ".git")
}

// foldName is p as a case-insensitive filesystem (macOS's, a casefold
// directory) takes it: each letter's lower case (by way of its upper
// case, so that the long s is an s and the Kelvin sign a k), without the
// code points HFS+ ignores in a name. A remote name that folds to a
// protected or masked path would land on it there.
func foldName(p string) string {
	var b strings.Builder
	for _, r := range p {
		if hfsIgnored(r) {
			continue
		}
		b.WriteRune(unicode.ToLower(unicode.ToUpper(r)))
	}
	return b.String()
}

// hfsIgnored reports the code points HFS+ leaves out of a name when it
// compares names.
func hfsIgnored(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}

// newHEAD reports a HEAD file the remote added outside any .git: with a
// config beside it, git would take its directory for a bare repository.
func newHEAD(p string, o *ManifestEntry, e *localEntry) bool {
	return path.Base(p) == "HEAD" && o == nil && e == nil
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// RemoveWorkspace removes the remote workspace and forgets its manifest:
// for a run without --remote-keep, after its changes came back.
func RemoveWorkspace(ctx context.Context, cfg SyncConfig) error {
	unlock, err := lockState(cfg.stateDir())
	if err != nil {
		return err
	}
	defer unlock()
	var stderr bytes.Buffer
	if err := runLimited(ctx, cfg.Conn, maxChatter, withArgs(scriptDrop, cfg.Dir), nil, io.Discard, &stderr); err != nil {
		return fmt.Errorf("removing the remote workspace %s: %w: %s", cfg.Dir, err, syncFirstLine(stderr.String()))
	}
	if err := os.Remove(filepath.Join(cfg.stateDir(), "manifest.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the remote workspace's manifest: %w", err)
	}
	return nil
}

// Lines are the report for the user, one line for each kind of entry
// that needs a look (none when every change was applied).
func (r *BackReport) Lines() []string {
	var out []string
	add := func(what string, list []string) {
		if len(list) > 0 {
			out = append(out, what+": "+strings.Join(escapedAll(list), ", "))
		}
	}
	add("changed on both sides, the remote version saved as NAME"+ConflictSuffix, r.Conflicts)
	if len(r.Kept) > 0 {
		add("protected or masked, not applied (kept in "+jail.Escaped(r.KeptDir)+")", r.Kept)
	}
	add("removed on the remote but changed here, left in place", r.NotDeleted)
	add("names outside the project, refused", r.Refused)
	return out
}

func escapedAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = jail.Escaped(s)
	}
	return out
}
