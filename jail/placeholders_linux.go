package jail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Placeholders live only while a jail runs, but jail must still find them
// after it was killed. Each session's placeholders are recorded in one
// journal file, read and rewritten under a lock, before they are made;
// the next jail to start removes those of sessions that are gone. A
// placeholder another live session binds stays until that one is gone
// too: removing it would detach the other jail's mount on it.
//
// Making an inode costs a disk allocation (a quarter of a millisecond and
// more on a virtual disk), so placeholders come from a pool in jail's
// state directory: directories are renamed in and back out, files are
// hard links to one file per content. Where the project is on another
// filesystem, they are made and removed instead.

// journal is what one running jail made and binds.
type journal struct {
	PID   int            `json:"pid"`
	Start uint64         `json:"start"` // the process's start time: a reused PID is not the session
	Made  []journalEntry `json:"made"`  // in creation order
	Uses  []string       `json:"uses"`  // other sessions' placeholders this one binds
}

type journalEntry struct {
	PathPlaceholder
	Dev, Ino uint64
	from     string // the pool entry it is made from, "" for a new one
}

// store is the journal file, locked.
type store struct {
	dir string
	f   *os.File
}

func placeholderDir(stateDir string) string { return filepath.Join(stateDir, "placeholders") }

func openStore(stateDir string) (*store, error) {
	dir := placeholderDir(stateDir)
	if err := os.MkdirAll(filepath.Join(dir, "pool"), 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "journal.json"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the placeholder journal: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the placeholder journal: %w", err)
	}
	return &store{dir: dir, f: f}, nil
}

func (s *store) close() { s.f.Close() }

func (s *store) load() map[string]*journal {
	m := map[string]*journal{}
	if b, err := io.ReadAll(io.NewSectionReader(s.f, 0, 1<<24)); err == nil && len(b) > 0 {
		json.Unmarshal(b, &m)
	}
	return m
}

// save rewrites the journal in place: no new inode, no truncation to
// zero (which ext4 flushes to disk), and no wait for the disk, since a
// killed process loses nothing it wrote.
func (s *store) save(m map[string]*journal) error {
	b, _ := json.Marshal(m)
	if _, err := s.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("recording placeholders: %w", err)
	}
	return s.f.Truncate(int64(len(b)))
}

// SweepPlaceholders removes the placeholders of jails that are gone (killed
// before they could). It runs before planning, so that the plan sees the
// project as it really is.
func SweepPlaceholders(stateDir string) {
	if _, err := os.Stat(filepath.Join(placeholderDir(stateDir), "journal.json")); err != nil {
		return
	}
	s, err := openStore(stateDir)
	if err != nil {
		return
	}
	defer s.close()
	m := s.load()
	if sweep(s.dir, m) {
		s.save(m)
	}
}

// holdPlaceholders makes this plan's placeholders, recording them first,
// and notes the placeholders of other live sessions the plan binds. The
// returned release removes what this session made once the jail exited.
func holdPlaceholders(plan *Plan) (release func(), err error) {
	if len(plan.Placeholders) == 0 && !journalExists(plan.StateDir) {
		return func() {}, nil
	}
	s, err := openStore(plan.StateDir)
	if err != nil {
		return nil, err
	}
	defer s.close()
	m := s.load()
	me := &journal{PID: os.Getpid(), Start: procStart(os.Getpid())}
	made := madeByLive(m)
	for _, op := range plan.Ops {
		if made[op.Src] {
			me.Uses = append(me.Uses, op.Src)
		}
	}
	pool := newPool(s.dir)
	for _, ph := range plan.Placeholders {
		if _, err := os.Lstat(ph.Path); err == nil {
			if made[ph.Path] {
				me.Uses = append(me.Uses, ph.Path)
			}
			continue
		}
		me.Made = append(me.Made, pool.plan(ph))
	}
	if len(me.Made)+len(me.Uses) == 0 {
		return func() {}, nil
	}
	// The intent first: a kill from here on leaves a journal that names
	// every path that may exist.
	m[plan.Session] = me
	if err := s.save(m); err != nil {
		return nil, err
	}
	release = func() { releaseSession(plan.StateDir, plan.Session) }
	for i := range me.Made {
		if err := pool.make(&me.Made[i]); err != nil {
			s.save(m)
			s.close()
			release()
			return nil, fmt.Errorf("creating the placeholder %s (a protected path, read-only while the jail runs): %w", me.Made[i].Path, err)
		}
	}
	if err := s.save(m); err != nil {
		s.close()
		release()
		return nil, err
	}
	return release, nil
}

func journalExists(stateDir string) bool {
	_, err := os.Stat(filepath.Join(placeholderDir(stateDir), "journal.json"))
	return err == nil
}

// releaseSession removes what the session made that no other live session
// binds, and forgets the session once nothing of it is left.
func releaseSession(stateDir, session string) {
	s, err := openStore(stateDir)
	if err != nil {
		return
	}
	defer s.close()
	m := s.load()
	j, ok := m[session]
	if !ok {
		return
	}
	delete(m, session)
	if rest := releaseJournal(s.dir, j, m); rest != nil {
		m[session] = rest
	}
	s.save(m)
}

// sweep releases the journals of sessions whose process is gone; it
// reports whether it changed anything.
func sweep(dir string, m map[string]*journal) bool {
	changed := false
	for id, j := range m {
		if alive(j) {
			continue
		}
		changed = true
		delete(m, id)
		if rest := releaseJournal(dir, j, m); rest != nil {
			m[id] = rest
		}
	}
	return changed
}

// releaseJournal removes j's placeholders, newest first, except those a
// live session in others binds, and returns what remains (nil: nothing).
func releaseJournal(dir string, j *journal, others map[string]*journal) *journal {
	busy := map[string]bool{}
	for _, o := range others {
		if alive(o) {
			for _, e := range o.Made {
				busy[e.Path] = true
			}
			for _, u := range o.Uses {
				busy[u] = true
			}
		}
	}
	pool := newPool(dir)
	var kept []journalEntry
	for i := len(j.Made) - 1; i >= 0; i-- {
		if e := j.Made[i]; busy[e.Path] {
			kept = append([]journalEntry{e}, kept...)
		} else {
			pool.remove(e)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	// Nobody's now: a later sweep retries once the other session is gone.
	return &journal{Made: kept}
}

// pool holds spare placeholder inodes in jail's state directory.
type pool struct {
	dir  string
	dirs []string // spare directories, taken in order
}

func newPool(dir string) *pool {
	p := &pool{dir: filepath.Join(dir, "pool")}
	entries, _ := os.ReadDir(p.dir)
	for _, e := range entries {
		if e.IsDir() {
			p.dirs = append(p.dirs, e.Name())
		}
	}
	return p
}

// plan picks where a placeholder comes from and records the inode it will
// have, so that the journal is written once before anything is made.
func (p *pool) plan(ph PathPlaceholder) journalEntry {
	e := journalEntry{PathPlaceholder: ph}
	src := p.source(ph)
	var st unix.Stat_t
	if src != "" && unix.Lstat(src, &st) == nil && sameFS(st.Dev, filepath.Dir(ph.Path)) {
		e.Dev, e.Ino, e.from = st.Dev, st.Ino, src
		if ph.Dir {
			p.dirs = p.dirs[1:]
		}
	}
	return e
}

// source is the pool entry a placeholder would come from: the next spare
// directory, or the file holding its content (made when missing).
func (p *pool) source(ph PathPlaceholder) string {
	if ph.Dir {
		if len(p.dirs) == 0 {
			return ""
		}
		return filepath.Join(p.dir, p.dirs[0])
	}
	sum := sha256.Sum256([]byte(ph.Content))
	f := filepath.Join(p.dir, "f-"+hex.EncodeToString(sum[:6]))
	if b, err := os.ReadFile(f); err == nil && string(b) == ph.Content {
		return f
	}
	os.Remove(f)
	if err := os.WriteFile(f, []byte(ph.Content), 0o644); err != nil {
		return ""
	}
	return f
}

func sameFS(dev uint64, dir string) bool {
	var st unix.Stat_t
	return unix.Stat(dir, &st) == nil && st.Dev == dev
}

// make puts the placeholder in place: from the pool as planned, else a new
// directory or file.
func (p *pool) make(e *journalEntry) error {
	if e.from != "" {
		var err error
		if e.Dir {
			err = unix.Renameat2(unix.AT_FDCWD, e.from, unix.AT_FDCWD, e.Path, unix.RENAME_NOREPLACE)
		} else {
			err = os.Link(e.from, e.Path)
		}
		if err == nil {
			return nil
		}
	}
	if e.Dir {
		if err := os.Mkdir(e.Path, 0o755); err != nil {
			return err
		}
	} else {
		f, err := os.OpenFile(e.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, werr := f.WriteString(e.Content)
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(e.Path, &st); err != nil {
		return err
	}
	e.Dev, e.Ino = st.Dev, st.Ino
	return nil
}

// remove takes a placeholder away only while it is still exactly what
// jail put there: the same inode, a file with the same content or an
// empty directory. Anything written into it since is the user's and stays.
func (p *pool) remove(e journalEntry) {
	var st unix.Stat_t
	if unix.Lstat(e.Path, &st) != nil || st.Dev != e.Dev || st.Ino != e.Ino || e.Ino == 0 {
		return
	}
	if e.Dir {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			p.removeDir(e)
		}
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(len(e.Content)) {
		return
	}
	if b, err := os.ReadFile(e.Path); err == nil && bytes.Equal(b, []byte(e.Content)) {
		os.Remove(e.Path)
	}
}

// removeDir moves an empty placeholder directory to the pool (or removes
// it, across filesystems), moving it back out if something was written
// into it.
func (p *pool) removeDir(e journalEntry) {
	spare := filepath.Join(p.dir, "d-"+randomHex(6))
	if unix.Renameat2(unix.AT_FDCWD, e.Path, unix.AT_FDCWD, spare, unix.RENAME_NOREPLACE) != nil {
		unix.Rmdir(e.Path) // fails when not empty: then it is kept
		return
	}
	if !emptyDir(spare) {
		unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, e.Path, unix.RENAME_NOREPLACE)
	}
}

func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

func madeByLive(m map[string]*journal) map[string]bool {
	out := map[string]bool{}
	for _, j := range m {
		if alive(j) {
			for _, e := range j.Made {
				out[e.Path] = true
			}
		}
	}
	return out
}

// alive reports whether the journal's jail process still runs.
func alive(j *journal) bool {
	return j.PID > 0 && j.Start != 0 && procStart(j.PID) == j.Start
}

// procStart is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat), 0 when there is no such process.
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after it start past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}
