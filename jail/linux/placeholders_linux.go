package linux

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
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // the process's start time: a reused PID is not the session
	// JailPID and JailStart are the jail's first process (its PID 1): a
	// killed jail's processes are gone once it is.
	JailPID   int            `json:"jailPid,omitempty"`
	JailStart uint64         `json:"jailStart,omitempty"`
	Made      []journalEntry `json:"made"` // in creation order
	Uses      []string       `json:"uses"` // other sessions' placeholders this one binds
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
		return nil, fmt.Errorf("the placeholder journal: %w; jail records there the placeholders it makes, to remove them even after a kill: make %s a directory you can write", err, stateDir)
	}
	// A journal jail did not make could make it remove a user's file.
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("the placeholder journal: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "journal.json"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
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

// writeGitExclude writes the jail's .git/info/exclude: the project's, and
// a line for each placeholder.
func writeGitExclude(x *GitExclude) error {
	if x == nil {
		return nil
	}
	b, err := os.ReadFile(x.Path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", x.Path, err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	b = append(b, "# jail: placeholders while the jail runs\n"+strings.Join(x.Lines, "\n")+"\n"...)
	if err := ensurePrivateDir(filepath.Dir(filepath.Dir(x.Copy))); err != nil {
		return err
	}
	if err := ensurePrivateDir(filepath.Dir(x.Copy)); err != nil {
		return err
	}
	return os.WriteFile(x.Copy, b, 0o644)
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
	for _, mt := range plan.Mounts {
		if made[mt.Host] {
			me.Uses = append(me.Uses, mt.Host)
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
	excess := pool.excess
	release = func() {
		releaseSession(plan.StateDir, plan.Session)
		trimPool(pool.dir, excess)
	}
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
	// What other sessions that are gone kept for this one is free now.
	sweep(s.dir, m)
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
	pool := &pool{dir: filepath.Join(dir, "pool")} // removing needs no list of the spares
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

// pool holds spare placeholder inodes in jail's state directory:
// directories named d-RANDOM and files named f-CONTENTHASH-RANDOM. Files
// are renamed in and out like directories rather than hard-linked: a file
// with several names is packed as a link by tar and npm.
type pool struct {
	dir   string
	spare map[string][]string // kind ("d" or "f-HASH") -> entry names
	// excess are the spares past maxSpare of their kind: the pool grows
	// to as many placeholders as were ever held at once, and every start
	// lists it.
	excess []string
	dev    uint64          // the pool's filesystem
	fs     map[string]bool // directory -> on the pool's filesystem
}

func newPool(dir string) *pool {
	p := &pool{dir: filepath.Join(dir, "pool"), spare: map[string][]string{}, fs: map[string]bool{}}
	// Only a pool that is a private directory of this user's is used: a
	// planted one could hand jail a directory full of files to put in
	// the project as a placeholder.
	var st unix.Stat_t
	if privateDir(p.dir) != nil || unix.Lstat(p.dir, &st) != nil {
		return p
	}
	p.dev = st.Dev
	entries, _ := os.ReadDir(p.dir)
	for _, e := range entries {
		if i := strings.LastIndexByte(e.Name(), '-'); i > 0 {
			kind := e.Name()[:i]
			if len(p.spare[kind]) >= maxSpare {
				p.excess = append(p.excess, e.Name())
				continue
			}
			p.spare[kind] = append(p.spare[kind], e.Name())
		}
	}
	return p
}

// maxSpare is how many spares of one kind the pool keeps.
const maxSpare = 64

// trimPool removes the named spares of the pool dir: empty directories
// and regular files, never anything else.
func trimPool(dir string, names []string) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			unix.Rmdir(p) // fails when not empty: then it stays
		case unix.S_IFREG:
			unix.Unlink(p)
		}
	}
}

// kind names the pool bucket a placeholder comes from.
func kind(ph PathPlaceholder) string {
	if ph.Dir {
		return "d"
	}
	sum := sha256.Sum256([]byte(ph.Content))
	return "f-" + hex.EncodeToString(sum[:6])
}

// plan picks the pool entry a placeholder will come from and records its
// inode, so that the journal is written once before anything is made.
func (p *pool) plan(ph PathPlaceholder) journalEntry {
	e := journalEntry{PathPlaceholder: ph}
	k := kind(ph)
	for len(p.spare[k]) > 0 {
		src := filepath.Join(p.dir, p.spare[k][0])
		p.spare[k] = p.spare[k][1:]
		var st unix.Stat_t
		if unix.Lstat(src, &st) == nil && p.sameFS(existingParent(ph.Path)) && p.intact(src, ph) {
			e.Dev, e.Ino, e.from = st.Dev, st.Ino, src
			break
		}
	}
	return e
}

// intact reports whether an entry is exactly a placeholder: an empty
// directory, or a regular file of one name holding its content, of this
// user's, never a symlink. A file with another name could be changed
// through that name while it holds another project's protected path.
func (p *pool) intact(src string, ph PathPlaceholder) bool {
	var st unix.Stat_t
	if unix.Lstat(src, &st) != nil || int(st.Uid) != os.Getuid() {
		return false
	}
	if ph.Dir {
		return st.Mode&unix.S_IFMT == unix.S_IFDIR && emptyDir(src)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || st.Size != int64(len(ph.Content)) {
		return false
	}
	b, err := os.ReadFile(src)
	return err == nil && string(b) == ph.Content
}

// existingParent is the nearest directory above p that exists now (a
// placeholder's parent may itself be a placeholder made just before it).
func existingParent(p string) string {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == "/" {
			return d
		}
	}
}

// sameFS reports whether dir is on the pool's filesystem (a rename
// between them works).
func (p *pool) sameFS(dir string) bool {
	same, ok := p.fs[dir]
	if !ok {
		var st unix.Stat_t
		same = unix.Stat(dir, &st) == nil && st.Dev == p.dev
		p.fs[dir] = same
	}
	return same
}

// make puts the placeholder in place: from the pool as planned, else a new
// directory or file.
func (p *pool) make(e *journalEntry) error {
	if e.from != "" && unix.Renameat2(unix.AT_FDCWD, e.from, unix.AT_FDCWD, e.Path, unix.RENAME_NOREPLACE) == nil {
		// Checked again where it landed: nothing may have been put in
		// it between the plan and the rename.
		if p.intact(e.Path, e.PathPlaceholder) {
			return nil
		}
		return fmt.Errorf("the spare placeholder taken from %s was not empty; remove %s and try again", p.dir, e.Path)
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
// empty directory. It goes back to the pool (across filesystems it is
// removed); anything written into it since is the user's and stays.
func (p *pool) remove(e journalEntry) {
	var st unix.Stat_t
	if unix.Lstat(e.Path, &st) != nil || st.Dev != e.Dev || st.Ino != e.Ino || e.Ino == 0 {
		return
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if e.Dir != isDir || (!isDir && (st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(len(e.Content)))) {
		return
	}
	if !isDir && st.Nlink != 1 {
		// Given another name since it was made: the name jail made goes,
		// never into the pool, and the other keeps what it holds.
		os.Remove(e.Path)
		return
	}
	spare := filepath.Join(p.dir, kind(e.PathPlaceholder)+"-"+randomHex(6))
	if unix.Renameat2(unix.AT_FDCWD, e.Path, unix.AT_FDCWD, spare, unix.RENAME_NOREPLACE) != nil {
		if isDir {
			unix.Rmdir(e.Path) // fails when not empty: then it is kept
		} else if p.intact(e.Path, e.PathPlaceholder) {
			os.Remove(e.Path)
		}
		return
	}
	// Moved out first, checked after: what was written into it in
	// between is not lost, it goes back.
	if !p.intact(spare, e.PathPlaceholder) {
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

// alive reports whether the journal's jail process, or the first process
// of its jail, still runs.
func alive(j *journal) bool {
	running := func(pid int, start uint64) bool { return pid > 0 && start != 0 && procStart(pid) == start }
	return running(j.PID, j.Start) || running(j.JailPID, j.JailStart)
}

// recordJailPID notes the jail's first process in the session's journal.
func recordJailPID(stateDir, session string, pid int) error {
	s, err := openStore(stateDir)
	if err != nil {
		return err
	}
	defer s.close()
	m := s.load()
	j, ok := m[session]
	if !ok {
		return nil
	}
	j.JailPID, j.JailStart = pid, procStart(pid)
	return s.save(m)
}

// procStart is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat), 0 when there is no such process or it has exited.
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
	// A zombie has run its last: a namespace's first process becomes one
	// only once every other process in it is gone. (Its parent may never
	// reap it.)
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}
