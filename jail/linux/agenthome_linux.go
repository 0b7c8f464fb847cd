package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// maxAgentFile bounds the agent files jail copies and merges; Claude Code
// keeps every project's history in ~/.claude.json, which grows to
// megabytes.
const maxAgentFile = 64 << 20

// agentSession is the agent files of one run: what each copy started as.
type agentSession struct {
	files []AgentFile
	base  [][]byte
}

// prepareAgentFiles writes the session copy of each agent file before
// bubblewrap binds it, and remembers its content for the merge.
func prepareAgentFiles(plan *Plan) (*agentSession, error) {
	s := &agentSession{}
	for _, a := range plan.AgentFiles {
		content, err := copyAgentFile(a)
		if err != nil {
			s.remove()
			return nil, err
		}
		s.files, s.base = append(s.files, a), append(s.base, content)
	}
	return s, nil
}

func copyAgentFile(a AgentFile) ([]byte, error) {
	dirs := []string{filepath.Dir(filepath.Dir(a.Copy)), filepath.Dir(a.Copy)}
	if a.Dir != "" {
		dirs = []string{filepath.Dir(a.Dir), a.Dir}
	}
	for _, d := range dirs {
		if err := ensurePrivateDir(d); err != nil {
			return nil, err
		}
	}
	if a.Missing {
		return nil, nil // the agent starts without it, as on a first run
	}
	content, err := jail.ReadBounded(a.Host, maxAgentFile)
	if err != nil {
		return nil, fmt.Errorf("copying %s into the session: %w; make it readable, or take it out of allowWrite", a.Host, err)
	}
	if err := os.WriteFile(a.Copy, content, 0o600); err != nil {
		os.Remove(a.Copy)
		return nil, fmt.Errorf("writing the session copy of %s: %w", a.Host, err)
	}
	return content, nil
}

// mergeBack merges each copy into its host file once the jailed command has
// exited, warning (one line each) about a copy it could not merge.
func (s *agentSession) mergeBack(stderr io.Writer) {
	for i, a := range s.files {
		if err := mergeGuarded(a, s.base[i]); err != nil {
			fmt.Fprintf(stderr, "jail: warning: %s not updated from the jail: %s\n", a.Host, jail.Escaped(err.Error())) // may quote the jail's copy
		}
	}
}

// mergeGuarded is mergeAgentFile with a panic turned into the error of a
// copy not merged: the host file is written last, so it is as it was, and
// jail goes on to its warnings and to removing the copies.
func mergeGuarded(a AgentFile, base []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the merge failed (%v)", jail.ErrNotMerged, r)
		}
	}()
	return mergeAgentFile(a, base)
}

// remove deletes the session copies, merged or not.
func (s *agentSession) remove() {
	for _, a := range s.files {
		if a.Dir != "" {
			os.RemoveAll(a.Dir) // whatever the jail left in it; RemoveAll follows no symlink
		} else {
			os.Remove(a.Copy)
		}
		os.Remove(filepath.Dir(a.Copy)) // when nothing else of the session is left there
	}
}

// mergeAgentFile merges one copy into its host file under the lock Claude
// Code takes for the same file, and replaces the host file atomically, with
// its mode, only when the merge changes it.
func mergeAgentFile(a AgentFile, base []byte) error {
	ours, err := readCopy(a)
	if errors.Is(err, fs.ErrNotExist) && a.Dir != "" {
		return nil // removed inside, or a file renamed over the symlink: nothing to merge
	} else if err != nil {
		return fmt.Errorf("reading the session copy: %w", err)
	}
	if bytes.Equal(ours, base) {
		return nil
	}
	unlock := lockAgentFile(a.Host)
	defer unlock()
	theirs, mode, err := readHostAgentFile(a)
	if err != nil {
		return err
	}
	merged, changed, err := jail.MergeAgentJSON(base, ours, theirs, a.Rule)
	if err != nil || !changed {
		return err
	}
	return proxy.WriteFileAtomic(a.Host, merged, mode)
}

// readHostAgentFile is the host file's current content and mode; a file
// missing when the jail started and still missing is an empty object,
// created private.
func readHostAgentFile(a AgentFile) ([]byte, fs.FileMode, error) {
	fi, err := os.Stat(a.Host)
	switch {
	case errors.Is(err, fs.ErrNotExist) && a.Missing:
		return []byte("{}\n"), 0o600, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, fmt.Errorf("%w: it was removed on the host meanwhile", jail.ErrNotMerged)
	case err != nil:
		return nil, 0, err
	}
	theirs, err := jail.ReadBounded(a.Host, maxAgentFile)
	return theirs, fi.Mode().Perm(), err
}

// readCopy reads the session copy. In a private directory the jail could
// have put a symlink (to a host file it cannot read) or a FIFO (that never
// ends) in its place: only a regular file is read, and no link followed.
func readCopy(a AgentFile) ([]byte, error) {
	if a.Dir == "" {
		return jail.ReadBounded(a.Copy, maxAgentFile)
	}
	fd, err := unix.Open(a.Copy, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("%w: the jail left a symlink in its place", jail.ErrNotMerged)
		}
		return nil, &fs.PathError{Op: "open", Path: a.Copy, Err: err}
	}
	f := os.NewFile(uintptr(fd), a.Copy)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: the jail left a %s in its place", jail.ErrNotMerged, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxAgentFile+1))
	if err == nil && len(b) > maxAgentFile {
		err = fmt.Errorf("%s is larger than %d bytes", a.Copy, maxAgentFile)
	}
	return b, err
}

// lockAgentFile takes the lock directory Claude Code (proper-lockfile)
// takes around its own read-modify-write of the file, waiting up to two
// seconds; after that it merges anyway (a lock that old is stale to
// Claude Code too once ten seconds pass). It returns the unlock.
func lockAgentFile(path string) func() {
	lock := path + ".lock"
	for deadline := time.Now().Add(2 * time.Second); ; {
		if err := os.Mkdir(lock, 0o700); err == nil {
			return func() { os.Remove(lock) }
		} else if !errors.Is(err, fs.ErrExist) || time.Now().After(deadline) {
			return func() {}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
