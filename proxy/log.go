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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Entry is one decision: one JSON line of the decision log.
type Entry struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	Client  string    `json:"client,omitempty"`
	Method  string    `json:"method,omitempty"` // "GET", "CONNECT", "UDP ASSOCIATE", ...
	Scheme  string    `json:"scheme,omitempty"` // "http", "https", "tcp" (a raw tunnel), "socks5"
	Host    string    `json:"host"`
	Port    int       `json:"port,omitempty"`
	Path    string    `json:"path,omitempty"` // plain and intercepted requests only, without the query
	Status  int       `json:"status,omitempty"`
	Rule    string    `json:"rule,omitempty"`
	Verdict string    `json:"verdict"` // "allow", "deny" or "error"
	Reason  string    `json:"reason,omitempty"`
	// Injected names the secrets whose values replaced their placeholders
	// in this request.
	Injected []string `json:"injected,omitempty"`
	// Kept lists the placeholders forwarded as they are to a host their
	// secret is bound to, outside the places its binding injects into
	// ("ANTHROPIC_API_KEY in the body").
	Kept []string `json:"kept,omitempty"`
	// BytesUp and BytesDown count request and response bodies for HTTP
	// requests and every byte for tunnels.
	BytesUp    int64   `json:"bytesUp"`
	BytesDown  int64   `json:"bytesDown"`
	DurationMS float64 `json:"durationMs"`
}

const (
	verdictAllow = "allow"
	verdictDeny  = "deny"
	verdictError = "error"
)

const logFile = "decisions.jsonl"

// Log appends entries to dir/decisions.jsonl. Each entry is one write(2)
// to a file opened with O_APPEND, so writers in several processes never
// interleave within a line.
//
// The log is a record, not a boundary: a write that fails (a full disk, a
// removed directory) does not stop the jail, but it is reported once per
// burst of failures on the Log's warning writer, so that missing records
// are never a surprise.
type Log struct {
	mu     sync.Mutex
	f      *os.File
	dir    string
	path   string
	warn   io.Writer
	closed bool
}

// OpenLog opens (creating mode 0600, in dir created mode 0700) the
// decision log in dir for appending. Write failures are reported on
// stderr.
func OpenLog(dir string) (*Log, error) {
	l := &Log{dir: dir, path: filepath.Join(dir, logFile), warn: os.Stderr}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// OpenLogOrWarn is OpenLog for a run that goes on without its record: when
// the log cannot be opened it says so once on warn and returns a Log that
// tries again at each write, reporting the next failure after a success.
// Failures are reported on warn.
func OpenLogOrWarn(dir string, warn io.Writer) *Log {
	l := &Log{dir: dir, path: filepath.Join(dir, logFile), warn: warn}
	if err := l.open(); err != nil {
		l.failed(err)
	}
	return l
}

func (l *Log) open() error {
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return fmt.Errorf("creating log directory: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening decision log: %w", err)
	}
	l.f = f
	return nil
}

// Write appends e as one line.
func (l *Log) Write(e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("writing decision log: %w", os.ErrClosed)
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			l.failed(err)
			return err
		}
	}
	if _, err := l.f.Write(b); err != nil {
		err = fmt.Errorf("writing decision log: %w", err)
		l.failed(err)
		return err
	}
	l.recorded()
	return nil
}

// failing holds, per log file, whether a failure to record was reported
// and nothing was recorded since: the proxy's and the supervisor's Logs on
// one file report one burst once.
// n counts the entries of m, so that a write needs no lock when nothing
// is failing.
var failing = struct {
	sync.Mutex
	m map[string]bool
	n atomic.Int32
}{m: map[string]bool{}}

// failed reports err unless this burst of failures was reported already.
func (l *Log) failed(err error) {
	failing.Lock()
	defer failing.Unlock()
	if failing.m[l.path] || l.warn == nil {
		return
	}
	failing.m[l.path] = true
	failing.n.Add(1)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is in the message already
	}
	fmt.Fprintf(l.warn, "jail: warning: decision log %s: %v; decisions are not being recorded\n", l.path, err)
}

// recorded ends a burst of failures: the next one is reported again.
func (l *Log) recorded() {
	if failing.n.Load() == 0 {
		return
	}
	failing.Lock()
	if failing.m[l.path] {
		delete(failing.m, l.path)
		failing.n.Add(-1)
	}
	failing.Unlock()
}

// Close closes the log; later writes fail, and are not reported.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// ReadLog calls fn with each entry of dir's decision log in file order
// until fn returns false. A missing log has no entries. A last line
// without its newline is being written and is skipped.
func ReadLog(dir string, fn func(Entry) bool) error {
	return readLog(dir, 0, nil, fn)
}

// LogSize is the decision log's length now: ReadSession from it sees only
// what is logged afterwards.
func LogSize(dir string) int64 {
	st, err := os.Stat(filepath.Join(dir, logFile))
	if err != nil {
		return 0
	}
	return st.Size()
}

// ReadSession is ReadLog for one session's entries logged at or after
// offset from (see LogSize). Other lines are skipped without decoding: the
// log grows with every run, a run's summary must not.
func ReadSession(dir, session string, from int64, fn func(Entry) bool) error {
	key, _ := json.Marshal(session)
	key = append([]byte(`"session":`), key...)
	return readLog(dir, from, key, func(e Entry) bool {
		return e.Session != session || fn(e)
	})
}

func readLog(dir string, from int64, key []byte, fn func(Entry) bool) error {
	path := filepath.Join(dir, logFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading decision log: %w", err)
	}
	defer f.Close()
	if from > 0 {
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return fmt.Errorf("reading decision log: %w", err)
		}
	}
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %q: %w", path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 || key != nil && !bytes.Contains(line, key) {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("reading %q line %d: %w", path, n, err)
		}
		if !fn(e) {
			return nil
		}
	}
}

// Summary is the exit line about denials: "" when there were none, else
// for example "3 requests denied (evil.example ×2, 1.1.1.1); see jail log".
func Summary(denied []Entry) string {
	if len(denied) == 0 {
		return ""
	}
	var hosts []string
	count := map[string]int{}
	for _, e := range denied {
		if count[e.Host] == 0 {
			hosts = append(hosts, e.Host)
		}
		count[e.Host]++
	}
	const shown = 5
	var parts []string
	for i, h := range hosts {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more", len(hosts)-shown))
			break
		}
		if h == "" {
			h = "?"
		}
		if n := count[hosts[i]]; n > 1 {
			h += " ×" + strconv.Itoa(n)
		}
		parts = append(parts, h)
	}
	noun := "requests"
	if len(denied) == 1 {
		noun = "request"
	}
	return fmt.Sprintf("%d %s denied (%s); see jail log", len(denied), noun, strings.Join(parts, ", "))
}
