package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// viewSession is the sign-in views of one run: what jail itself made in
// each session directory (a stub or a link per host entry) and the
// session copies' inodes. It is saved beside the session directories
// (manifestName) before the jail starts, with jail's process, so that a
// later run finds what a killed jail left and moves it back
// (recoverSignInViews).
type viewSession struct {
	Session string
	PID     int
	Start   uint64 // the process's start time: a PID reused is not it
	Views   []SignInView
	Made    []map[string]viewEntry // per view: what jail made for each name
	Copies  []uint64
	keep    map[string]bool // session directories left holding what could not be moved
}

// viewEntry is what jail made in a session directory for one name: the
// inode of its entry there, and that of the host entry it stands for (the
// same inode for a hard link) with its modification time, which tells a
// new entry that reuses a freed inode number, or a file written since,
// from the one the jail was shown (the change time would not do: the
// jail's rename over its link changes it).
type viewEntry struct {
	Ino, Host uint64
	HostTime  int64 // ns
}

// manifestName is the file, beside a session's view directories, that
// describes them.
const manifestName = "session.json"

// prepareSignInViews makes each view's session directory: a stub for
// every entry of the host directory, bound over by the entry (the ops it
// returns, by view), a copy of each symlink, and an empty read-only file
// for each missing sign-in file. The session copies are written into it
// afterwards (prepareSignIn). What an earlier, killed jail left in its
// views is moved back first.
func prepareSignInViews(plan *Plan, stderr io.Writer) (*viewSession, map[string][]Op, error) {
	recoverSignInViews(plan.StateDir, plan.Session, stderr)
	vs := &viewSession{Session: plan.Session, PID: os.Getpid(), Start: procStart(os.Getpid()), Views: plan.SignInViews, keep: map[string]bool{}}
	entries := map[string][]Op{}
	for _, v := range plan.SignInViews {
		ops, made, err := makeView(v)
		vs.Made = append(vs.Made, made)
		if err == nil {
			err = vs.save()
		}
		if err != nil {
			vs.remove()
			return nil, nil, err
		}
		entries[v.Path] = ops
	}
	return vs, entries, nil
}

// save writes the manifest beside the session directories.
func (vs *viewSession) save() error {
	if len(vs.Views) == 0 {
		return nil
	}
	b, err := json.Marshal(vs)
	if err == nil {
		err = proxy.WriteFileAtomic(filepath.Join(filepath.Dir(vs.Views[0].Dir), manifestName), b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("saving the jail's view of %s: %w", vs.Views[0].Host, err)
	}
	return nil
}

// recoverSignInViews moves back what the views of jails no longer
// running hold (a jail killed before its command exited), then removes
// them. A session whose jail runs, or that jail cannot read, is left.
func recoverSignInViews(stateDir, session string, stderr io.Writer) {
	list, _ := filepath.Glob(filepath.Join(stateDir, "views", "*", manifestName))
	for _, m := range list {
		b, err := jail.ReadBounded(m, maxSignInFile)
		var vs viewSession
		if err != nil || json.Unmarshal(b, &vs) != nil || vs.Session == session || filepath.Base(filepath.Dir(m)) != vs.Session {
			continue
		}
		if vs.PID > 0 && vs.Start != 0 && procStart(vs.PID) == vs.Start {
			continue // still running
		}
		if slices.ContainsFunc(vs.Views, func(v SignInView) bool { return filepath.Dir(v.Dir) != filepath.Dir(m) }) {
			continue // not a manifest jail wrote: touch nothing
		}
		vs.keep = map[string]bool{}
		vs.moveBack(stderr)
		vs.remove()
	}
}

func makeView(v SignInView) ([]Op, map[string]viewEntry, error) {
	made := map[string]viewEntry{}
	if err := ensurePrivateDir(v.Dir); err != nil {
		return nil, made, err
	}
	list, err := os.ReadDir(v.Host)
	if err != nil {
		return nil, made, fmt.Errorf("listing %s for the jail's view of it: %w; make it readable", v.Host, err)
	}
	var ops []Op
	for _, e := range list {
		name := e.Name()
		if slices.Contains(v.SignIn, name) || slices.Contains(v.Held, name) {
			continue
		}
		op, err := makeStub(v, name, e.Type(), made)
		if err != nil {
			return nil, made, fmt.Errorf("preparing the jail's view of %s: %w", v.Host, err)
		}
		if op.Kind != "" {
			ops = append(ops, op)
		}
	}
	for _, name := range v.Held {
		c, held := v.HeldAs[name]
		if !held { // missing inside too: a sign-in made inside writes it there
			continue
		}
		stub := filepath.Join(v.Dir, name)
		if err := makeFile(stub, "", made); err != nil {
			return nil, made, fmt.Errorf("preparing the jail's view of %s: %w", v.Host, err)
		}
		if err := os.WriteFile(stub, []byte(c), 0o600); err != nil {
			return nil, made, fmt.Errorf("preparing the jail's view of %s: %w", v.Host, err)
		}
		ops = append(ops, Op{Kind: "ro-bind", Src: stub, Dest: filepath.Join(v.Path, name)})
	}
	return ops, made, nil
}

// makeStub makes the session directory's entry for the host entry name
// of type t, and returns the bind that shows the host entry over it, if
// any. A file the jail may write is a hard link to the host's (the same
// file, written in place by either side, and a rename over it inside
// lands in the session directory, moved back after exit); one that is
// protected, or that cannot be linked (another filesystem, another
// owner's), an empty stub with the host file bound over it. A symlink is
// copied as a link (a bind would follow it); a hidden name keeps its stub
// unbound (a mask is mounted over it).
func makeStub(v SignInView, name string, t fs.FileMode, made map[string]viewEntry) (Op, error) {
	host, stub := filepath.Join(v.Host, name), filepath.Join(v.Dir, name)
	hidden, ro := slices.Contains(v.Hidden, name), !v.Writable || slices.Contains(v.ReadOnly, name)
	var err error
	switch {
	case t&fs.ModeSymlink != 0:
		var target string
		if target, err = os.Readlink(host); err == nil {
			err = os.Symlink(target, stub)
		}
		if err == nil {
			err = note(stub, host, made)
		}
		return Op{}, err
	case t.IsDir():
		if err = os.Mkdir(stub, 0o700); err == nil {
			err = note(stub, host, made)
		}
	case !hidden && !ro && os.Link(host, stub) == nil:
		return Op{}, note(stub, host, made)
	default:
		err = makeFile(stub, host, made)
	}
	if err != nil || hidden {
		return Op{}, err
	}
	kind := "bind-try" // gone from the host before bubblewrap binds it: the stub stays
	if ro {
		kind = "ro-bind-try"
	}
	return Op{Kind: kind, Src: host, Dest: filepath.Join(v.Path, name)}, nil
}

func makeFile(path, host string, made map[string]viewEntry) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return note(path, host, made)
}

// note records the inodes of what jail made at path and of the host
// entry it stands for ("" for none).
func note(path, host string, made map[string]viewEntry) error {
	var st, hs unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	if host != "" && unix.Lstat(host, &hs) != nil {
		hs.Ino = 0 // gone meanwhile
	}
	made[filepath.Base(path)] = viewEntry{Ino: st.Ino, Host: hs.Ino, HostTime: hs.Mtim.Nano()}
	return nil
}

// noteCopies records the inodes of the session copies in the views: a
// copy the jail renamed or linked to another name is still the session's
// copy, never moved into the host directory.
func (vs *viewSession) noteCopies(files []jail.SignInFile) error {
	for _, sf := range files {
		var st unix.Stat_t
		if vs.holds(sf.Copy) && unix.Lstat(sf.Copy, &st) == nil {
			vs.Copies = append(vs.Copies, st.Ino)
		}
	}
	return vs.save()
}

// holds reports whether path lies in a view's session directory.
func (vs *viewSession) holds(path string) bool {
	for _, v := range vs.Views {
		if jail.Under(path, v.Dir) {
			return true
		}
	}
	return false
}

// moveBack applies to each host directory what the jail changed at the
// top of its session directory, once the jailed command has exited: a new
// entry is moved in under its own name where the host has none (checked
// atomically by the rename itself), else beside it under a suffixed name,
// reported in one line; an entry put in place of a host file replaces it,
// and a host file removed inside is removed, unless the host changed it
// meanwhile. What cannot be moved (another filesystem) stays in the
// session directory, reported.
func (vs *viewSession) moveBack(stderr io.Writer) {
	for i, v := range vs.Views {
		names, kept, left := vs.moveView(i, v)
		if len(kept) > 0 {
			fmt.Fprintf(stderr, "jail: %s: the host created %s meanwhile; the jail's kept beside as %s\n", v.Host, jail.Escaped(strings.Join(names, ", ")), jail.Escaped(strings.Join(kept, ", ")))
		}
		if len(left) > 0 {
			vs.keep[v.Dir] = true
			fmt.Fprintf(stderr, "jail: warning: %s not moved into %s; they are left in %s\n", jail.Escaped(strings.Join(left, ", ")), v.Host, v.Dir)
		}
	}
}

func (vs *viewSession) moveView(i int, v SignInView) (names, kept, left []string) {
	list, err := os.ReadDir(v.Dir)
	if err != nil {
		return nil, nil, nil
	}
	for _, e := range list {
		name := e.Name()
		verdict, rec := vs.classify(i, v, name)
		if verdict == stays {
			continue
		}
		src, dst := filepath.Join(v.Dir, name), filepath.Join(v.Host, name)
		err := errHostChanged
		if verdict == replaces {
			err = replaceUnchanged(src, dst, rec)
		}
		if errors.Is(err, errHostChanged) {
			err = unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
		}
		if errors.Is(err, unix.EEXIST) {
			beside := name + ".jail-" + vs.Session[:min(8, len(vs.Session))]
			if err = unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, filepath.Join(v.Host, beside), unix.RENAME_NOREPLACE); err == nil {
				names, kept = append(names, name), append(kept, beside)
				continue
			}
		}
		if err != nil {
			left = append(left, fmt.Sprintf("%s (%v)", name, err))
		}
	}
	vs.removeDeleted(i, v)
	return names, kept, left
}

// removeDeleted removes from the host directory each file (or symlink)
// the jail was shown as its own entry and removed, or renamed away, inside,
// when the host has not changed it since: as if the jail had removed it
// there. A file the host changed meanwhile stays.
func (vs *viewSession) removeDeleted(i int, v SignInView) {
	if i >= len(vs.Made) {
		return
	}
	parked := parkedInodes(v)
	for name, rec := range vs.Made[i] {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(v.Dir, name), &st) == nil || rec.Host == 0 || slices.Contains(v.ReadOnly, name) || slices.Contains(v.Hidden, name) {
			continue // still there, not a host entry, or never the jail's to remove
		}
		if parked[rec.Host] {
			continue // renamed onto a name that never reaches the host: the host keeps it
		}
		host := filepath.Join(v.Host, name)
		if unix.Lstat(host, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR || st.Ino != rec.Host || st.Mtim.Nano() != rec.HostTime {
			continue
		}
		os.Remove(host)
	}
}

// parkedInodes are the inodes the session directory holds under names
// that never reach the host (a sign-in file's, a held one's): a host file
// the jail renamed there is not removed from the host.
func parkedInodes(v SignInView) map[uint64]bool {
	out := map[uint64]bool{}
	for _, name := range append(append([]string{}, v.SignIn...), v.Held...) {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(v.Dir, name), &st) == nil {
			out[st.Ino] = true
		}
	}
	return out
}

// errHostChanged is a host entry no longer the one the jail was shown.
var errHostChanged = errors.New("changed on the host")

// replaceUnchanged puts src in dst's place if dst is still the host entry
// rec stands for, by exchanging the two atomically: what the host has at
// dst is never replaced unseen. The old entry goes with the session
// directory.
func replaceUnchanged(src, dst string, rec viewEntry) error {
	same := func(path string) bool {
		var st unix.Stat_t
		return rec.Host != 0 && unix.Lstat(path, &st) == nil && st.Ino == rec.Host && st.Mtim.Nano() == rec.HostTime
	}
	if !same(dst) {
		return errHostChanged
	}
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err != nil {
		return err
	}
	if same(src) {
		return nil
	}
	// The host replaced it between the check and the exchange: undo.
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err != nil {
		return err
	}
	return errHostChanged
}

// What becomes of an entry of a session directory after exit.
const (
	stays    = iota // the host's own, a protected or sign-in name, a session copy
	isNew           // the jail's, under a name the host did not have
	replaces        // the jail's, in place of the host entry it was shown
)

// classify tells what becomes of the session directory's entry name: a
// sign-in file's name, a protected or masked one, or a session copy under
// another name stays (whatever is there); what jail made there stays
// unless the jail wrote into a stub (its host entry was gone before it
// could be bound); an entry the jail put in place of a host entry
// replaces it, unless the host changed it meanwhile.
func (vs *viewSession) classify(i int, v SignInView, name string) (int, viewEntry) {
	for _, names := range [][]string{v.SignIn, v.Held, v.ReadOnly, v.Hidden} {
		if slices.Contains(names, name) {
			return stays, viewEntry{}
		}
	}
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(v.Dir, name), &st) != nil || slices.Contains(vs.Copies, st.Ino) {
		return stays, viewEntry{}
	}
	var rec viewEntry
	ours := false
	if i < len(vs.Made) {
		rec, ours = vs.Made[i][name]
	}
	switch {
	case !ours:
		return isNew, rec
	case rec.Ino != st.Ino:
		return replaces, rec
	case rec.Ino == rec.Host || st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return stays, rec // the host's file itself, or its link copied
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		if sub, _ := os.ReadDir(filepath.Join(v.Dir, name)); len(sub) > 0 {
			return isNew, rec
		}
		return stays, rec
	case st.Size > 0:
		return isNew, rec
	}
	return stays, rec
}

// remove deletes the manifest, then the session directories but those
// holding what could not be moved back: in this order, so that a jail
// killed halfway leaves no manifest naming a directory partly removed,
// whose missing entries would read as removed by the jail.
func (vs *viewSession) remove() {
	if len(vs.Views) == 0 {
		return
	}
	dir := filepath.Dir(vs.Views[0].Dir)
	os.Remove(filepath.Join(dir, manifestName))
	for _, v := range vs.Views {
		if !vs.keep[v.Dir] {
			os.RemoveAll(v.Dir) // follows no symlink; the jail's mounts died with it
		}
	}
	os.Remove(dir) // once empty
}
