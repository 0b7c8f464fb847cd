package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// LogPos is a place in the decision log (see LogEnd). The zero LogPos is
// the start of the oldest kept file.
type LogPos struct {
	fi  fs.FileInfo
	off int64
}

// LogEnd is the decision log's end now: ReadSession from it sees only
// what is logged afterwards, in this file and in those that replace it
// when the log rotates.
func LogEnd(dir string) LogPos {
	fi, err := os.Stat(filepath.Join(dir, logFile))
	if err != nil {
		return LogPos{}
	}
	return LogPos{fi: fi, off: fi.Size()}
}

// ReadLog calls fn with each entry of dir's decision log, oldest first
// across its rotations, until fn returns false. A missing log has no
// entries. A last line without its newline is being written and is
// skipped.
func ReadLog(dir string, fn func(Entry) bool) error {
	return readEntries(dir, LogPos{}, nil, fn)
}

// ReadSession is ReadLog for one session's entries logged at or after
// from (see LogEnd). Other lines are skipped without decoding: the log
// grows with every run, a run's summary must not.
func ReadSession(dir, session string, from LogPos, fn func(Entry) bool) error {
	key, _ := json.Marshal(session)
	key = append([]byte(`"session":`), escapeJSONControls(key)...)
	return readEntries(dir, from, key, func(e Entry) bool {
		return e.Session != session || fn(e)
	})
}

func readEntries(dir string, from LogPos, key []byte, fn func(Entry) bool) error {
	c, err := OpenLogCursor(dir, from)
	if err != nil {
		return err
	}
	defer c.Close()
	var bad error
	err = c.Lines(func(line []byte) bool {
		if key != nil && !bytes.Contains(line, key) {
			return true
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			bad = fmt.Errorf("reading %q line %d: %w", c.files[0].Name(), c.line, err)
			return false
		}
		return fn(e)
	})
	if bad != nil {
		return bad
	}
	return err
}

// LogCursor reads the decision log's lines oldest first across its
// rotations and, called again, what was appended since: when the log
// rotates under it, it finishes the file it was reading and goes on into
// the ones that replaced it, so that `jail log -f` misses nothing.
type LogCursor struct {
	dir   string
	files []*os.File // files[0] is being read; the last is the newest known
	r     *bufio.Reader
	part  []byte // the start of a line not yet whole
	line  int    // lines read of files[0]
}

// OpenLogCursor opens dir's decision log for reading from from. A missing
// log is empty until it appears.
func OpenLogCursor(dir string, from LogPos) (*LogCursor, error) {
	files, err := openLogFiles(dir)
	if err != nil {
		return nil, err
	}
	if from.fi != nil {
		if i := indexOf(files, from.fi); i >= 0 {
			closeAll(files[:i])
			files = files[i:]
			if _, err := files[0].Seek(from.off, io.SeekStart); err != nil {
				closeAll(files)
				return nil, fmt.Errorf("reading decision log: %w", err)
			}
		}
	}
	c := &LogCursor{dir: dir, files: files}
	c.reset()
	return c, nil
}

// Close closes the files the cursor holds.
func (c *LogCursor) Close() {
	closeAll(c.files)
	c.files = nil
}

// Lines calls fn with every whole line available now, newline included,
// until fn returns false; the next call goes on after that line.
func (c *LogCursor) Lines(fn func(line []byte) bool) error {
	for {
		if len(c.files) > 0 {
			more, err := c.drain(fn)
			if err != nil || !more {
				return err
			}
		}
		if len(c.files) > 1 {
			c.advance()
			continue
		}
		if !c.rescan() {
			return nil
		}
	}
}

// drain reads files[0] to its end; more is false when fn stopped.
func (c *LogCursor) drain(fn func([]byte) bool) (more bool, err error) {
	for {
		b, err := c.r.ReadBytes('\n')
		if err != nil {
			c.part = append(c.part, b...)
			if errors.Is(err, io.EOF) {
				return true, nil
			}
			return false, fmt.Errorf("reading %q: %w", c.files[0].Name(), err)
		}
		if len(c.part) > 0 {
			b, c.part = append(c.part, b...), nil
		}
		c.line++
		if len(bytes.TrimSpace(b)) > 0 && !fn(b) {
			return false, nil
		}
	}
}

// advance leaves the rotated file that was read to its end for the next;
// a line left without its newline there was torn by a crash.
func (c *LogCursor) advance() {
	c.files[0].Close()
	c.files = c.files[1:]
	c.reset()
}

func (c *LogCursor) reset() {
	c.part, c.line = nil, 0
	if len(c.files) > 0 {
		c.r = bufio.NewReaderSize(c.files[0], 64<<10)
	}
}

// rescan reports whether the log rotated past the last file known (or
// appeared), adding the files that replaced it.
func (c *LogCursor) rescan() bool {
	fi, err := os.Stat(filepath.Join(c.dir, logFile))
	if err != nil {
		return false // none yet, or between a rotation's rename and the new file
	}
	var cur fs.FileInfo
	if len(c.files) > 0 {
		if cur, err = c.files[0].Stat(); err == nil && os.SameFile(fi, cur) {
			return false
		}
	}
	files, err := openLogFiles(c.dir)
	if err != nil {
		return false
	}
	i := -1 // the file being read, when it is still kept
	if cur != nil {
		i = indexOf(files, cur)
	}
	closeAll(files[:i+1])
	if len(c.files) == 0 {
		c.files = files[i+1:]
		c.reset()
	} else {
		c.files = append(c.files, files[i+1:]...)
	}
	return len(files) > i+1
}

// openLogFiles opens the decision log's files oldest first: the rotated
// ones (the highest number the oldest), then the current one. They are
// opened under the rotation lock, so that no rotation shifts their names
// in between and each entry is in exactly one of them.
func openLogFiles(dir string) ([]*os.File, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if unlock, err := lockFile(filepath.Join(dir, logLock)); err == nil {
		defer unlock()
	} // else a directory this user cannot write: no writer rotates there either
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading decision log: %w", err)
	}
	var nums []int
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), logFile+".")); err == nil && n > 0 && strings.HasPrefix(e.Name(), logFile+".") {
			nums = append(nums, n)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(nums)))
	names := make([]string, 0, len(nums)+1)
	for _, n := range nums {
		names = append(names, rotatedLog(logFile, n))
	}
	var files []*os.File
	for _, name := range append(names, logFile) {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			closeAll(files)
			return nil, fmt.Errorf("reading decision log: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// indexOf is the index of the file fi describes among files, or -1.
func indexOf(files []*os.File, fi fs.FileInfo) int {
	for i, f := range files {
		if st, err := f.Stat(); err == nil && os.SameFile(st, fi) {
			return i
		}
	}
	return -1
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
