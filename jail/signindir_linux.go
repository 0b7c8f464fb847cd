package jail

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
	Made    []map[string]uint64 // per view: name -> inode jail made
	Copies  []uint64
	keep    map[string]bool // session directories left holding what could not be moved
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
		b, err := readBounded(m, maxSignInFile)
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

func makeView(v SignInView) ([]Op, map[string]uint64, error) {
	made := map[string]uint64{}
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
		stub := filepath.Join(v.Dir, name)
		if err := makeFile(stub, made); err != nil {
			return nil, made, fmt.Errorf("preparing the jail's view of %s: %w", v.Host, err)
		}
		ops = append(ops, Op{Kind: "ro-bind", Src: stub, Dest: filepath.Join(v.Path, name)})
	}
	return ops, made, nil
}

// makeStub makes the session directory's entry for the host entry name
// of type t, and returns the bind that shows the host entry over it: none
// for a symlink (copied as a link: a bind would follow it) nor for a
// hidden name (a mask is mounted over its stub).
func makeStub(v SignInView, name string, t fs.FileMode, made map[string]uint64) (Op, error) {
	host, stub := filepath.Join(v.Host, name), filepath.Join(v.Dir, name)
	var err error
	switch {
	case t&fs.ModeSymlink != 0:
		var target string
		if target, err = os.Readlink(host); err == nil {
			err = os.Symlink(target, stub)
		}
		if err == nil {
			err = note(stub, made)
		}
		return Op{}, err
	case t.IsDir():
		if err = os.Mkdir(stub, 0o700); err == nil {
			err = note(stub, made)
		}
	default:
		err = makeFile(stub, made)
	}
	if err != nil || slices.Contains(v.Hidden, name) {
		return Op{}, err
	}
	kind := "bind-try" // gone from the host before bubblewrap binds it: the stub stays
	if !v.Writable || slices.Contains(v.ReadOnly, name) {
		kind = "ro-bind-try"
	}
	return Op{Kind: kind, Src: host, Dest: filepath.Join(v.Path, name)}, nil
}

func makeFile(path string, made map[string]uint64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return note(path, made)
}

// note records the inode of what jail made at path.
func note(path string, made map[string]uint64) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	made[filepath.Base(path)] = st.Ino
	return nil
}

// noteCopies records the inodes of the session copies in the views: a
// copy the jail renamed or linked to another name is still the session's
// copy, never moved into the host directory.
func (vs *viewSession) noteCopies(files []SignInFile) error {
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
		if under(path, v.Dir) {
			return true
		}
	}
	return false
}

// moveBack moves the top-level entries the jail created in each session
// directory into the host directory, once the jailed command has exited:
// under their own name where the host has none (checked atomically by
// the rename itself), else beside it under a suffixed name, reported in
// one line; what cannot be moved (another filesystem) stays in the
// session directory, reported too.
func (vs *viewSession) moveBack(stderr io.Writer) {
	for i, v := range vs.Views {
		names, kept, left := vs.moveView(i, v)
		if len(kept) > 0 {
			fmt.Fprintf(stderr, "jail: %s: the host created %s meanwhile; the jail's kept beside as %s\n", v.Host, Escaped(strings.Join(names, ", ")), Escaped(strings.Join(kept, ", ")))
		}
		if len(left) > 0 {
			vs.keep[v.Dir] = true
			fmt.Fprintf(stderr, "jail: warning: %s not moved into %s; they are left in %s\n", Escaped(strings.Join(left, ", ")), v.Host, v.Dir)
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
		if !vs.jailMade(i, v, name) {
			continue
		}
		src := filepath.Join(v.Dir, name)
		err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, filepath.Join(v.Host, name), unix.RENAME_NOREPLACE)
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
	return names, kept, left
}

// jailMade reports whether the session directory's entry name is the
// jail's own: not a sign-in file's name nor a protected or masked one
// (never moved, whatever is there), not a session copy under another
// name, and not what jail made there unless the jail wrote into it (a
// stub whose host entry was gone before it could be bound).
func (vs *viewSession) jailMade(i int, v SignInView, name string) bool {
	for _, names := range [][]string{v.SignIn, v.Held, v.ReadOnly, v.Hidden} {
		if slices.Contains(names, name) {
			return false
		}
	}
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(v.Dir, name), &st) != nil || slices.Contains(vs.Copies, st.Ino) {
		return false
	}
	var ino uint64
	ours := false
	if i < len(vs.Made) {
		ino, ours = vs.Made[i][name]
	}
	if !ours || ino != st.Ino {
		return true
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return false
	case unix.S_IFDIR:
		sub, _ := os.ReadDir(filepath.Join(v.Dir, name))
		return len(sub) > 0
	}
	return st.Size > 0
}

// remove deletes the session directories, but those holding what could
// not be moved back, and the manifest.
func (vs *viewSession) remove() {
	for _, v := range vs.Views {
		if !vs.keep[v.Dir] {
			os.RemoveAll(v.Dir) // follows no symlink; the jail's mounts died with it
		}
	}
	if len(vs.Views) > 0 {
		dir := filepath.Dir(vs.Views[0].Dir)
		os.Remove(filepath.Join(dir, manifestName))
		os.Remove(dir) // once empty
	}
}
