package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
)

// MaskFunc returns the masked copy of a masked file (by its local path),
// or false when the file must not reach the remote at all.
type MaskFunc func(path string) ([]byte, bool)

// EnvMasker masks a .env-like file as the local jail does: each secret
// value becomes its placeholder from phs (the run's placeholders, so that
// the remote jail sees the same ones), every secret named in the policy
// forced.
func EnvMasker(pol *jail.Policy, phs *jail.Placeholders) MaskFunc {
	forced := map[string]bool{}
	for n := range pol.Secrets.Env {
		forced[n] = true
	}
	return func(path string) ([]byte, bool) {
		masked, pieces := jail.MaskEnvFile(jail.ReadEnvFile(path), forced, phs.Mask)
		return []byte(jail.MaskRepeated(string(masked), pieces)), true
	}
}

// MaskedCopies masks each file with the masked copy the local run already
// wrote for it (copies: local path -> copy), the copies the local proxy
// knows the placeholders of; a masked file with no copy is not sent.
func MaskedCopies(copies map[string]string) MaskFunc {
	return func(path string) ([]byte, bool) {
		c, ok := copies[path]
		if !ok {
			return nil, false
		}
		b, err := os.ReadFile(c)
		return b, err == nil
	}
}

// SyncConfig says which project goes to which remote workspace. A run
// calls Sync before the remote command and SyncBack after it (and for
// --remote-fetch), both with the same config, then RemoveWorkspace
// unless the workspace is to be kept or SyncBack failed.
type SyncConfig struct {
	Conn     SyncConn
	Host     string // names the remote in the state dir and in hints, as the user gave it
	Dir      string // the remote workspace; "~/" at its start is the remote home
	Policy   *jail.Policy
	Home     string // the local home
	StateDir string // jail's local state dir
	Mask     MaskFunc
	// Rsh is the ssh command line rsync runs in place of ssh (the ssh
	// program and the session's options, the host left out) and RshHost
	// the host rsync puts after it; with no Rsh the sync sends by tar.
	Rsh     []string
	RshHost string
	// Env is rsync's environment, and so its ssh's (nil for this
	// process's).
	Env []string
}

// SyncReport tells what a sync sent.
type SyncReport struct {
	Via       string   // "rsync", "tar", or "" when nothing needed sending
	Sent      int      // files and symlinks sent
	Deleted   int      // remote paths removed
	Masked    []string // files that went as their masked copies
	NotSent   []string // denied files, other names of them, special files
	RemoteDir string
}

// FetchHint is the command that fetches a workspace's changes later.
func FetchHint(host string) string {
	return "jail --remote " + quoteArg(host) + " --remote-fetch"
}

// ErrUnfetched marks a sync refused because the remote workspace holds
// changes that were never fetched.
var ErrUnfetched = errors.New("the remote workspace holds changes not fetched yet")

func (c *SyncConfig) root() string     { return c.Policy.ProjectRoot }
func (c *SyncConfig) stateDir() string { return SyncStateDir(c.StateDir, c.Host, c.root()) }
func (c *SyncConfig) rules() *secretRules {
	return newSecretRules(c.Policy, c.Home, c.StateDir)
}

// Sync makes the remote workspace hold the project: masked files as
// their masked copies, denied ones not at all. Only what changed since
// the last sync is sent. A workspace holding remote changes that were
// never fetched is left alone (ErrUnfetched).
func Sync(ctx context.Context, cfg SyncConfig) (*SyncReport, error) {
	unlock, err := lockState(cfg.stateDir())
	if err != nil {
		return nil, err
	}
	defer unlock()
	old, err := LoadManifest(cfg.stateDir())
	if err != nil {
		return nil, err
	}
	if old != nil && old.Root != cfg.root() {
		old = nil
	}
	rem, err := listRemote(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	if err := checkWorkspace(cfg, rem); err != nil {
		return nil, err
	}
	if err := checkFetched(cfg, old, rem); err != nil {
		return nil, err
	}
	local, err := scan(cfg.root(), cfg.rules(), cfg.Mask, old)
	if err != nil {
		return nil, err
	}
	up := planUpload(local, old, rem)
	rep := up.report(local, rem.dir)
	if err := up.run(ctx, cfg, rem, rep); err != nil {
		recordPartial(ctx, cfg, old, rem.dir, up)
		return nil, err
	}
	if up.empty() {
		return rep, saveSynced(cfg, local, rem)
	}
	after, err := listRemote(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	return rep, saveSynced(cfg, local, after)
}

// checkWorkspace refuses a workspace that is the remote's root or home,
// or holds the home: a sync makes the workspace hold the project and
// nothing else.
func checkWorkspace(cfg SyncConfig, rem *remoteList) error {
	if rem.dir == "/" || rem.dir == rem.home || strings.HasPrefix(rem.home+"/", rem.dir+"/") {
		return fmt.Errorf("syncing to %s: the remote directory %s is the remote's home or above it; name a directory of its own for the project", cfg.Host, jail.Escaped(rem.dir))
	}
	return nil
}

// checkFetched refuses to overwrite a workspace holding what the last
// sync did not put there: a change not fetched yet, or, without a
// manifest, a workspace jail does not know.
func checkFetched(cfg SyncConfig, old *Manifest, rem *remoteList) error {
	hint := fmt.Sprintf("fetch them with `%s`, or remove %s on the remote", FetchHint(cfg.Host), jail.Escaped(rem.dir))
	if old != nil && old.Pending {
		return fmt.Errorf("syncing to %s: %w; %s", cfg.Host, ErrUnfetched, hint)
	}
	for _, p := range sortedKeys(rem.entries) {
		r := rem.entries[p]
		if old == nil {
			return fmt.Errorf("syncing to %s: %w (%s was not put there by jail); %s", cfg.Host, ErrUnfetched, jail.Escaped(p), hint)
		}
		if o := old.Entries[p]; o == nil || o.Remote == nil || *o.Remote != *r {
			if r.Type != "dir" {
				return fmt.Errorf("syncing to %s: %w (%s); %s", cfg.Host, ErrUnfetched, jail.Escaped(p), hint)
			}
		}
	}
	return nil
}

// saveSynced records the workspace as the sync left it: each entry sent,
// with the remote's own report of it.
func saveSynced(cfg SyncConfig, local map[string]*localEntry, rem *remoteList) error {
	m := &Manifest{Host: cfg.Host, Root: cfg.root(), Dir: rem.dir, Entries: map[string]*ManifestEntry{}}
	for p, e := range local {
		if !e.sent() {
			continue
		}
		r := rem.entries[p]
		if r == nil || r.Type != e.Type {
			return fmt.Errorf("syncing to %s: %s did not arrive", cfg.Host, p)
		}
		me := e.ManifestEntry
		me.Remote = r
		m.Entries[p] = &me
	}
	for p, r := range rem.entries {
		if !safeRel(p) {
			m.Entries[p] = &ManifestEntry{Path: p, Type: r.Type, Remote: r} // a name the remote made: known, never fetched
		}
	}
	return m.Save(cfg.stateDir())
}

// recordPartial records, after a sync that failed part way, what the
// workspace holds: what the last sync left there, and what this one was
// sending, with its content unknown so that the next sync sends it
// again. Nothing else can be there (checkFetched saw to it), so the next
// sync is not refused over the remains of this one.
func recordPartial(ctx context.Context, cfg SyncConfig, old *Manifest, dir string, up *upload) {
	rem, err := listRemote(ctx, cfg, false)
	if err != nil || rem.missing {
		return
	}
	sending := map[string]bool{}
	for _, e := range append(append([]*localEntry{}, up.dirs...), up.files...) {
		sending[e.Path] = true
	}
	m := &Manifest{Host: cfg.Host, Root: cfg.root(), Dir: dir, Entries: map[string]*ManifestEntry{}}
	for p, r := range rem.entries {
		switch {
		case old != nil && old.Entries[p] != nil && old.Entries[p].Remote != nil && *old.Entries[p].Remote == *r:
			m.Entries[p] = old.Entries[p]
		case sending[p] || !safeRel(p):
			m.Entries[p] = &ManifestEntry{Path: p, Type: r.Type, Remote: r}
		}
	}
	_ = m.Save(cfg.stateDir())
}

// upload is what one sync sends: paths to remove first, then entries.
type upload struct {
	remove []string
	dirs   []*localEntry
	files  []*localEntry // files and symlinks
}

func (u *upload) empty() bool { return len(u.remove)+len(u.dirs)+len(u.files) == 0 }

// planUpload compares the project with the manifest and the remote's
// listing: an entry unchanged on both sides since the last sync is not
// sent; a remote path the project no longer has is removed.
func planUpload(local map[string]*localEntry, old *Manifest, rem *remoteList) *upload {
	u := &upload{}
	for _, p := range sortedKeys(local) {
		e := local[p]
		if !e.sent() {
			continue
		}
		r := rem.entries[p]
		if r != nil && r.Type != e.Type {
			u.remove = append(u.remove, p)
			r = nil
		}
		switch {
		case e.Type == "dir":
			if r == nil || r.Mode != e.Mode {
				u.dirs = append(u.dirs, e)
			}
		case !unchanged(e, old, r):
			u.files = append(u.files, e)
		}
	}
	for _, p := range sortedKeys(rem.entries) {
		if e := local[p]; (e == nil || !e.sent()) && safeRel(p) && !removedAbove(u.remove, p) {
			u.remove = append(u.remove, p)
		}
	}
	return u
}

// unchanged reports whether e is what the last sync sent and the remote
// still holds it as it did then.
func unchanged(e *localEntry, old *Manifest, r *RemoteStat) bool {
	if old == nil || r == nil {
		return false
	}
	o := old.Entries[e.Path]
	return o != nil && o.Remote != nil && *o.Remote == *r && o.Type == e.Type && o.SHA256 == e.SHA256 &&
		o.Mode == e.Mode && o.Link == e.Link && o.Masked == e.Masked
}

// removedAbove reports whether p lies below a path already removed.
func removedAbove(removed []string, p string) bool {
	for _, r := range removed {
		if strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func (u *upload) report(local map[string]*localEntry, dir string) *SyncReport {
	rep := &SyncReport{RemoteDir: dir, Sent: len(u.files), Deleted: len(u.remove)}
	for _, p := range sortedKeys(local) {
		switch e := local[p]; {
		case e.why == sendMasked:
			rep.Masked = append(rep.Masked, p)
		case !e.sent():
			rep.NotSent = append(rep.NotSent, p)
		}
	}
	return rep
}

// run sends the upload: removals, then directories and masked files in
// a tar, then plain files and symlinks by rsync when both ends have it,
// else in the tar.
func (u *upload) run(ctx context.Context, cfg SyncConfig, rem *remoteList, rep *SyncReport) error {
	if u.empty() {
		return nil
	}
	if len(u.remove) > 0 {
		if err := runLimited(ctx, cfg.Conn, maxChatter, withArgs(scriptRemove, rem.dir), nulList(u.remove), io.Discard, io.Discard); err != nil {
			return fmt.Errorf("syncing to %s: removing old files: %w", cfg.Host, err)
		}
	}
	rsyncBin, err := exec.LookPath("rsync")
	viaRsync := len(cfg.Rsh) > 0 && rem.rsync && err == nil
	inTar, byRsync := append([]*localEntry{}, u.dirs...), []*localEntry(nil)
	for _, e := range u.files {
		if viaRsync && !e.Masked {
			byRsync = append(byRsync, e)
		} else {
			inTar = append(inTar, e)
		}
	}
	rep.Via = "tar"
	if len(inTar) > 0 {
		if err := sendTar(ctx, cfg, rem.dir, inTar); err != nil {
			return err
		}
	}
	if len(byRsync) > 0 {
		rep.Via = "rsync"
		return sendRsync(ctx, cfg, rsyncBin, rem.dir, byRsync)
	}
	return nil
}

// sendTar streams entries as a tar made here (a masked file's masked
// copy in place of its content) to the remote's tar.
func sendTar(ctx context.Context, cfg SyncConfig, dir string, entries []*localEntry) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, entries)) }()
	var stderr bytes.Buffer
	err := runLimited(ctx, cfg.Conn, maxChatter, withArgs(scriptUntar, dir), pr, io.Discard, &stderr)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return fmt.Errorf("syncing to %s with tar: %w: %s", cfg.Host, err, syncFirstLine(stderr.String()))
	}
	return nil
}

// writeTar writes entries to w; a file is read from its local path
// without following a symlink put there since the scan.
func writeTar(w io.Writer, entries []*localEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.Path, Mode: int64(e.Mode), ModTime: time.Unix(0, e.MTime), Format: tar.FormatPAX}
		var body io.Reader
		switch {
		case e.Type == "dir":
			h.Typeflag, h.Name = tar.TypeDir, e.Path+"/"
		case e.Type == "link":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		case e.Masked:
			h.Typeflag, h.Size, body = tar.TypeReg, int64(len(e.content)), bytes.NewReader(e.content)
		default:
			f, err := openNoFollow(e.abs)
			if err != nil {
				return err
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
				return fmt.Errorf("syncing: %s changed while it was sent; run again", e.abs)
			}
			h.Typeflag, h.Size, body = tar.TypeReg, e.Size, f
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// sendRsync sends plain files and symlinks with rsync over the
// session's ssh: the list is jail's own (no filter rules from the
// project), symlinks go as symlinks and are never followed.
func sendRsync(ctx context.Context, cfg SyncConfig, bin, dir string, entries []*localEntry) error {
	rsh, host := cfg.Rsh, cfg.RshHost
	quoted := make([]string, len(rsh))
	for i, a := range rsh {
		if strings.Contains(a, "'") {
			return fmt.Errorf("syncing to %s with rsync: the ssh option %q holds a quote, which rsync cannot pass on", cfg.Host, a)
		}
		quoted[i] = "'" + a + "'" // rsync splits -e at spaces, keeping quoted ones
	}
	paths := make([]string, len(entries))
	for i, e := range entries {
		paths[i] = e.Path
	}
	cmd := exec.CommandContext(ctx, bin, "-e", strings.Join(quoted, " "), "--from0", "--files-from=-",
		"--links", "--perms", "--times", "-s", "--no-implied-dirs", "--out-format=%n",
		"--", cfg.root()+"/", host+":"+dir+"/")
	cmd.Stdin, cmd.Env = nulList(paths), cfg.Env
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("syncing to %s with rsync: %w: %s", cfg.Host, err, syncFirstLine(stderr.String()))
	}
	return nil
}

// nulList is paths as NUL-terminated names.
func nulList(paths []string) io.Reader {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return &b
}

// remoteList is the remote's listing of the workspace.
type remoteList struct {
	dir     string // its real path
	home    string // the remote home's
	missing bool
	rsync   bool
	entries map[string]*RemoteStat
}

// listRemote lists the workspace (made when create is set).
func listRemote(ctx context.Context, cfg SyncConfig, create bool) (*remoteList, error) {
	mode := ""
	if create {
		mode = "create"
	}
	var out, stderr bytes.Buffer
	capped := &capWriter{w: &out, left: maxListing}
	err := runLimited(ctx, cfg.Conn, maxListing+maxChatter, withArgs(scriptList, cfg.Dir, mode), nil, capped, &capWriter{w: &stderr, left: maxChatter})
	if capped.over {
		return nil, fmt.Errorf("listing the remote workspace %s on %s: the listing is larger than %d MiB; the remote host may be compromised", cfg.Dir, cfg.Host, maxListing>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the remote workspace %s on %s: %w: %s", cfg.Dir, cfg.Host, err, syncFirstLine(stderr.String()))
	}
	l, err := parseList(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("listing the remote workspace %s on %s: %w", cfg.Dir, cfg.Host, err)
	}
	return l, nil
}

// maxListing bounds the remote's listing held in memory: some two
// million entries.
const maxListing = 256 << 20

// capWriter writes at most left bytes to w, then fails (over set): what
// a remote sends is held here only up to a bound.
type capWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, errors.New("remote output over its bound")
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// parseList reads scriptList's output.
func parseList(b []byte) (*remoteList, error) {
	l := &remoteList{entries: map[string]*RemoteStat{}}
	if string(b) == "missing\n" {
		l.missing = true
		return l, nil
	}
	if w, ok := strings.CutPrefix(string(b), "home "); ok && !strings.Contains(strings.TrimSuffix(w, "\n"), "\n") {
		l.dir, l.home = strings.TrimSuffix(w, "\n"), strings.TrimSuffix(w, "\n")
		return l, nil
	}
	head, body, ok := bytes.Cut(b, []byte("\nLIST\n"))
	lines := strings.Split(string(head), "\n")
	if !ok || len(lines) != 3 || !path.IsAbs(lines[0]) || !path.IsAbs(lines[1]) {
		return nil, errors.New("the remote's reply is not a listing (is GNU find there?)")
	}
	l.dir, l.home, l.rsync = lines[0], lines[1], lines[2] == "rsync"
	fields := strings.Split(string(body), "\x00")
	if len(fields)%2 != 1 || fields[len(fields)-1] != "" {
		return nil, errors.New("the remote's listing is cut short")
	}
	for i := 0; i+1 < len(fields); i += 2 {
		name, st, err := parseListEntry(fields[i], fields[i+1])
		if err != nil {
			return nil, err
		}
		l.entries[name] = st
	}
	return l, nil
}

// parseListEntry reads one "TYPE MODE SIZE MTIME PATH" and its link.
func parseListEntry(rec, link string) (string, *RemoteStat, error) {
	parts := strings.SplitN(rec, " ", 5)
	if len(parts) != 5 {
		return "", nil, fmt.Errorf("the remote's listing has a malformed entry %q", rec)
	}
	mode, err1 := strconv.ParseUint(parts[1], 8, 32)
	size, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", nil, fmt.Errorf("the remote's listing has a malformed entry %q", rec)
	}
	st := &RemoteStat{Mode: uint32(mode) & 0o777, MTime: parts[3], Link: link}
	switch parts[0] {
	case "f":
		st.Type, st.Size = "file", size
	case "d":
		st.Type = "dir"
	case "l":
		st.Type = "link"
	default:
		return "", nil, fmt.Errorf("the remote's listing has an entry of unknown type %q", rec)
	}
	return parts[4], st, nil
}

// syncFirstLine is the first line of what the remote wrote on stderr,
// escaped: the remote chose it, and it ends up on the local terminal.
func syncFirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return jail.Escaped(s)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// openNoFollow opens a regular file, refusing a symlink at its name.
func openNoFollow(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, fmt.Errorf("syncing: opening %s: %w", p, err)
	}
	return f, nil
}
