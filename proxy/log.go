package proxy

import (
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
	"unicode/utf16"
	"unicode/utf8"
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
	// Raw marks a raw stream (neither TLS nor HTTP: SSH, a database
	// protocol), relayed or refused: it needs an allow entry that names
	// the host with this port, even 80 or 443.
	Raw bool `json:"raw,omitempty"`
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

const (
	logFile = "decisions.jsonl"
	// logLock serializes rotations, and readers opening the log's files
	// against them.
	logLock = "decisions.lock"
)

// maxLogBytes is the size at which the decision log rotates. The
// environment variable JAIL_LOG_MAX_BYTES can lower it (tests rotate a
// small log), never raise it: the log's room on disk stays bounded.
var maxLogBytes int64 = 16 << 20

// keptLogs is how many rotated logs are kept besides the current one:
// decisions.jsonl.1 (the newest) to decisions.jsonl.5 (the oldest).
var keptLogs = 5

// logLimit is maxLogBytes, or JAIL_LOG_MAX_BYTES when that is lower.
func logLimit() int64 {
	v, err := strconv.ParseInt(os.Getenv("JAIL_LOG_MAX_BYTES"), 10, 64)
	if err == nil && v > 0 && v < maxLogBytes {
		return v
	}
	return maxLogBytes
}

// Log appends entries to dir/decisions.jsonl. Each entry is one write(2)
// to a file opened with O_APPEND, so writers in several processes never
// interleave within a line.
//
// The log rotates by size: the writer whose entry takes the file past the
// limit renames it to decisions.jsonl.1 (shifting the older ones, the
// oldest dropped) under a lock, after checking again under the lock that
// the file is still the one it wrote and still that large, so that of
// several writers only one rotates. Every writer checks before each write
// that its file is still the one at the path, and reopens when it is not;
// an entry that went into a file removed in between is written again.
//
// The log is a record, not a boundary: a write that fails (a full disk, a
// removed directory) does not stop the jail, but it is reported once per
// burst of failures on the Log's warning writer, so that missing records
// are never a surprise.
type Log struct {
	mu     sync.Mutex
	f      *os.File
	fi     fs.FileInfo // of f when it was opened
	dir    string
	path   string
	max    int64
	keep   int
	warn   io.Writer
	closed bool
}

// OpenLog opens (creating mode 0600, in dir created mode 0700) the
// decision log in dir for appending. Write failures are reported on
// stderr.
func OpenLog(dir string) (*Log, error) {
	l := newLog(dir, os.Stderr)
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
	l := newLog(dir, warn)
	if err := l.open(); err != nil {
		l.failed(err)
	}
	return l
}

func newLog(dir string, warn io.Writer) *Log {
	return &Log{dir: dir, path: filepath.Join(dir, logFile), max: logLimit(), keep: keptLogs, warn: warn}
}

func (l *Log) open() error {
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return fmt.Errorf("creating log directory: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening decision log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("opening decision log: %w", err)
	}
	l.f, l.fi = f, fi
	return nil
}

// Write appends e as one line.
func (l *Log) Write(e Entry) error {
	b, err := EntryJSON(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("writing decision log: %w", os.ErrClosed)
	}
	if err := l.current(); err != nil {
		l.failed(err)
		return err
	}
	if err := l.append(b); err != nil {
		l.failed(err)
		return err
	}
	l.recorded()
	return nil
}

// current makes l.f the file at the log's path: opened when there is
// none, reopened when another writer rotated the log.
func (l *Log) current() error {
	if l.f != nil {
		if fi, err := os.Stat(l.path); err == nil && os.SameFile(fi, l.fi) {
			return nil
		}
		l.f.Close()
		l.f = nil
	}
	return l.open()
}

// append writes b in one write(2), again into the current file when the
// one written to was rotated out of the kept files (removed) meanwhile, and
// rotates the log when b took it to its limit.
func (l *Log) append(b []byte) error {
	for try := 0; ; try++ {
		if _, err := l.f.Write(b); err != nil {
			return fmt.Errorf("writing decision log: %w", err)
		}
		fi, err := l.f.Stat()
		if err != nil {
			return nil // written; the next write finds out what is wrong
		}
		if removed(fi) && try < 3 {
			l.f.Close()
			if err := l.open(); err != nil {
				return err
			}
			continue
		}
		if fi.Size() >= l.max {
			l.rotate()
		}
		return nil
	}
}

// rotate renames the log to decisions.jsonl.1, the older ones one number
// up and the oldest kept over the one beyond, then opens the new log. A
// rotation that fails leaves the log growing: the entry is recorded, and
// the next write past the limit tries again.
func (l *Log) rotate() {
	unlock, err := lockFile(filepath.Join(l.dir, logLock))
	if err != nil {
		return
	}
	defer unlock()
	fi, err := os.Stat(l.path)
	if err != nil || !os.SameFile(fi, l.fi) || fi.Size() < l.max {
		return // another writer rotated it already
	}
	top := 1 // the first free number, or the oldest kept
	for top < l.keep {
		if _, err := os.Lstat(rotatedLog(l.path, top)); err != nil {
			break
		}
		top++
	}
	for i := top; i > 1; i-- {
		os.Rename(rotatedLog(l.path, i-1), rotatedLog(l.path, i))
	}
	if os.Rename(l.path, rotatedLog(l.path, 1)) != nil {
		return
	}
	l.f.Close()
	l.f = nil
	l.open() // or the next write opens it, and reports what failed
}

// rotatedLog is the name of the n-th newest rotated log.
func rotatedLog(path string, n int) string { return path + "." + strconv.Itoa(n) }

// EntryJSON is e as the decision log stores it and `jail log --json`
// prints it: JSON whose every string is valid UTF-8 (encoding/json
// replaces invalid bytes with U+FFFD) and holds no raw control character.
// encoding/json escapes the C0 controls, U+2028 and U+2029 but writes
// DEL, the C1 controls (U+0080–U+009F, of which U+009B introduces a
// terminal command as ESC [ does) and other non-printable characters such
// as U+202E as they are, so those are escaped here: the log is printed and
// tailed on terminals.
func EntryJSON(e Entry) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return escapeJSONControls(b), nil
}

// escapeJSONControls writes DEL and every non-printable character above
// ASCII in b (JSON text, where such characters can only be inside strings)
// as a \uXXXX escape.
func escapeJSONControls(b []byte) []byte {
	clean := true
	for _, c := range b {
		if c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r != 0x7f && (r < 0x80 || strconv.IsPrint(r)):
			out = append(out, b[:n]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		b = b[n:]
	}
	return out
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
