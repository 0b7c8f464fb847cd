package jail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// A placeholder journal is what one running jail records of the
// placeholders it made on the host, so that they are removed even when
// that jail is killed: the next jail to start removes those of sessions
// that are gone. A placeholder another live session still binds stays
// until that session is gone too.
type journal struct {
	PID   int            `json:"pid"`
	Start uint64         `json:"start"` // the process's start time: a reused PID is not the session
	Made  []journalEntry `json:"made"`  // in creation order
	Uses  []string       `json:"uses"`  // other sessions' placeholders this one binds
}

type journalEntry struct {
	PathPlaceholder
	Dev, Ino uint64 // 0 until created
}

func journalDir(stateDir string) string { return filepath.Join(stateDir, "placeholders") }

// SweepPlaceholders removes the placeholders of jails that are gone (killed
// before they could). It runs before planning, so that the plan sees the
// project as it really is.
func SweepPlaceholders(stateDir string) {
	dir := journalDir(stateDir)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return
	}
	defer unlock()
	sweep(dir, readJournals(dir))
}

// holdPlaceholders creates this plan's placeholders, recording each in
// this session's journal first, and notes the placeholders of other live
// sessions the plan binds. The returned release removes what this session
// made once the jail has exited.
func holdPlaceholders(plan *Plan) (release func(), err error) {
	dir := journalDir(plan.StateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	journals := readJournals(dir)
	me := &journal{PID: os.Getpid(), Start: procStart(os.Getpid())}
	path := filepath.Join(dir, plan.Session+".json")
	// Another live session's placeholder that this jail binds must stay
	// while this one runs: removing it would detach the mount on it.
	made := madeByLive(journals)
	for _, op := range plan.Ops {
		if made[op.Src] {
			me.Uses = append(me.Uses, op.Src)
		}
	}
	for _, ph := range plan.Placeholders {
		if _, err := os.Lstat(ph.Path); err == nil {
			if made[ph.Path] {
				me.Uses = append(me.Uses, ph.Path)
			}
			continue
		}
		me.Made = append(me.Made, journalEntry{PathPlaceholder: ph})
	}
	if len(me.Made)+len(me.Uses) == 0 {
		return func() {}, nil
	}
	// The intent first: a kill between here and the end leaves a journal
	// that names every path that may exist.
	if err := writeJournal(path, me); err != nil {
		return nil, err
	}
	release = func() { releaseSession(dir, plan.Session) }
	for i := range me.Made {
		if err := createPlaceholder(&me.Made[i]); err != nil {
			failed := me.Made[i].Path
			me.Made = me.Made[:i]
			writeJournal(path, me)
			unlock()
			release()
			return nil, fmt.Errorf("creating the placeholder %s (a protected path, read-only while the jail runs): %w", failed, err)
		}
	}
	if err := writeJournal(path, me); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// createPlaceholder makes one placeholder and records its identity.
func createPlaceholder(e *journalEntry) error {
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

// releaseSession removes what the session made that no other live session
// binds, and forgets the session once nothing of it is left.
func releaseSession(dir, session string) {
	unlock, err := lockDir(dir)
	if err != nil {
		return
	}
	defer unlock()
	journals := readJournals(dir)
	j, ok := journals[session]
	if !ok {
		return
	}
	delete(journals, session)
	releaseJournal(filepath.Join(dir, session+".json"), j, journals)
}

// sweep releases the journals of sessions whose process is gone.
func sweep(dir string, journals map[string]*journal) {
	for id, j := range journals {
		if !alive(j) {
			delete(journals, id)
			releaseJournal(filepath.Join(dir, id+".json"), j, journals)
		}
	}
}

// releaseJournal removes j's placeholders, newest first, except those a
// live session in others binds; it keeps a journal of what remains.
func releaseJournal(path string, j *journal, others map[string]*journal) {
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
	var kept []journalEntry
	for i := len(j.Made) - 1; i >= 0; i-- {
		e := j.Made[i]
		if busy[e.Path] {
			kept = append([]journalEntry{e}, kept...)
			continue
		}
		removePlaceholder(e)
	}
	if len(kept) == 0 {
		os.Remove(path)
		return
	}
	j.Made, j.Uses, j.PID = kept, nil, 0 // nobody's now: the next sweep retries
	writeJournal(path, j)
}

// removePlaceholder removes a placeholder only while it is still exactly
// what jail made: the same inode, a file with the same content or an empty
// directory. Anything written into it since is the user's and stays.
func removePlaceholder(e journalEntry) {
	var st unix.Stat_t
	if unix.Lstat(e.Path, &st) != nil {
		return
	}
	if e.Ino != 0 && (st.Dev != e.Dev || st.Ino != e.Ino) {
		return
	}
	if e.Dir {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			unix.Rmdir(e.Path) // fails when not empty: then it is kept
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

func madeByLive(journals map[string]*journal) map[string]bool {
	out := map[string]bool{}
	for _, j := range journals {
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
	return j.PID > 0 && procStart(j.PID) == j.Start && j.Start != 0
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

func readJournals(dir string) map[string]*journal {
	out := map[string]*journal{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		var j journal
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && json.Unmarshal(b, &j) == nil {
			out[id] = &j
		}
	}
	return out
}

func writeJournal(path string, j *journal) error {
	b, _ := json.Marshal(j)
	if err := proxy.WriteFileAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("recording placeholders in %s: %w", path, err)
	}
	return nil
}

// lockDir takes the journals' lock: sessions starting and ending at once
// see each other's journals whole.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	var once bool
	return func() {
		if !once {
			once = true
			f.Close()
		}
	}, nil
}
