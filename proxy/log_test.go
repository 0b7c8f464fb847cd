package proxy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// TestMain runs the test binary as a log writer process when
// TestLogRotateProcesses starts it so.
func TestMain(m *testing.M) {
	if spec := os.Getenv("JAIL_TEST_LOG_WRITER"); spec != "" {
		os.Exit(logWriterProcess(spec))
	}
	os.Exit(m.Run())
}

// logWriterProcess writes N entries of session ID into DIR's log, spec
// being "DIR ID N MAX": the log rotating every MAX bytes and keeping all.
func logWriterProcess(spec string) int {
	f := strings.Fields(spec)
	n, _ := strconv.Atoi(f[2])
	maxLogBytes, _ = strconv.ParseInt(f[3], 10, 64)
	keptLogs = 100000
	l, err := OpenLog(f[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	for i := range n {
		if err := l.Write(Entry{Session: f[1], Host: "allowed.test", Port: i + 1, Verdict: "allow"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func TestLogConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	// Two Logs on one file stand for two processes.
	logs := make([]*Log, 2)
	for i := range logs {
		l, err := OpenLog(dir)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	const writers, each = 16, 200
	long := strings.Repeat("x", 3000) // lines longer than a pipe buffer's atomic size
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := Entry{Time: time.Now(), Session: fmt.Sprintf("w%d", w), Host: "allowed.test", Port: i, Path: "/" + long, Verdict: "allow"}
				if err := logs[w%2].Write(e); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(filepath.Join(dir, "decisions.jsonl"))
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	for i, line := range lines {
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Path != "/"+long {
			t.Fatalf("line %d is not a whole entry: %v", i+1, err)
		}
	}
	n := 0
	if err := ReadLog(dir, func(Entry) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Fatalf("ReadLog saw %d entries, want %d", n, writers*each)
	}
}

func TestReadLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	in := []Entry{
		{Time: now, Session: "s1", Method: "GET", Scheme: "https", Host: "allowed.test", Port: 443, Path: "/v1", Status: 200, Rule: "allow allowed.test", Verdict: "allow", BytesUp: 1, BytesDown: 2, DurationMS: 1.5},
		{Time: now, Session: "s1", Method: "CONNECT", Scheme: "tcp", Host: "evil.test", Port: 443, Rule: "unknown=deny", Verdict: "deny", Reason: "not in network.allow"},
		{Time: now, Session: "s2", Method: "GET", Scheme: "http", Host: "gone.test", Port: 80, Verdict: "error", Reason: "resolving gone.test: no such host"},
	}
	for _, e := range in {
		if err := l.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if err := l.Write(in[0]); err == nil {
		t.Error("Write after Close succeeded")
	}
	// A line being written by another process is not an entry yet.
	f, _ := os.OpenFile(filepath.Join(dir, "decisions.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-01-02T03:04:05Z","sess`)
	f.Close()

	var out []Entry
	if err := ReadLog(dir, func(e Entry) bool { out = append(out, e); return true }); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("read %d entries, want %d", len(out), len(in))
	}
	for i := range in {
		if fmt.Sprint(out[i]) != fmt.Sprint(in[i]) {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, out[i], in[i])
		}
	}
	// fn returning false stops the stream.
	n := 0
	ReadLog(dir, func(Entry) bool { n++; return false })
	if n != 1 {
		t.Errorf("ReadLog went on after fn returned false (%d calls)", n)
	}
	b, _ := json.Marshal(in[0])
	for _, key := range []string{`"time"`, `"session"`, `"method"`, `"scheme"`, `"host"`, `"port"`, `"path"`, `"status"`, `"rule"`, `"verdict"`, `"bytesUp"`, `"bytesDown"`, `"durationMs"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks key %s", b, key)
		}
	}
	if err := ReadLog(filepath.Join(dir, "none"), func(Entry) bool { return true }); err != nil {
		t.Errorf("ReadLog of a missing log: %v", err)
	}
}

func TestSummary(t *testing.T) {
	d := func(hosts ...string) []Entry {
		var es []Entry
		for _, h := range hosts {
			es = append(es, Entry{Host: h, Verdict: "deny"})
		}
		return es
	}
	tests := []struct {
		in   []Entry
		want string
	}{
		{nil, ""},
		{d("evil.example"), "1 request denied (evil.example); see jail log"},
		{d("evil.example", "1.1.1.1", "evil.example"), "3 requests denied (evil.example ×2, 1.1.1.1); see jail log"},
		{d("a", "b", "c", "d", "e", "f", "g", "a"), "8 requests denied (a ×2, b, c, d, e, 2 more); see jail log"},
	}
	for _, tt := range tests {
		if got := Summary(tt.in); got != tt.want {
			t.Errorf("Summary(%d entries) = %q, want %q", len(tt.in), got, tt.want)
		}
	}
}

// ReadSession sees one session's entries logged after an offset, and only
// those, whatever else the log holds.
func TestReadSession(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write(Entry{Session: "s1", Host: "before.test", Verdict: "allow"})
	from := LogEnd(dir)
	l.Write(Entry{Session: "s1", Host: "a.test", Verdict: "allow"})
	l.Write(Entry{Session: "s2", Host: "other.test", Path: `"session":"s1"x`, Verdict: "allow"})
	l.Write(Entry{Session: "s10", Host: "prefix.test", Verdict: "allow"})
	l.Write(Entry{Session: "s1", Host: "b.test", Verdict: "deny"})
	var got []string
	if err := ReadSession(dir, "s1", from, func(e Entry) bool { got = append(got, e.Host); return true }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "a.test,b.test" {
		t.Errorf("ReadSession = %v, want [a.test b.test]", got)
	}
}

// smallLogs makes the Logs opened by the test rotate at max bytes and keep
// keep rotated files.
func smallLogs(t *testing.T, max int64, keep int) {
	oldMax, oldKeep := maxLogBytes, keptLogs
	maxLogBytes, keptLogs = max, keep
	t.Cleanup(func() { maxLogBytes, keptLogs = oldMax, oldKeep })
}

// logNames lists the decision log's files in dir, sorted.
func logNames(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "decisions.jsonl*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// TestLogRotateConcurrent: eight writers with separate Logs (separate
// opens, so the rotation lock and the reopen check work as between
// processes) write 20 000 entries into a log that rotates every 8 KiB.
// Every entry is in exactly one file, whole, and ReadLog sees each once,
// each writer's in the order written.
func TestLogRotateConcurrent(t *testing.T) {
	smallLogs(t, 8<<10, 1000)
	dir := filepath.Join(t.TempDir(), "state")
	const writers, each = 8, 2500
	var wg sync.WaitGroup
	for w := range writers {
		l, err := OpenLog(dir)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer l.Close()
			for i := range each {
				if err := l.Write(Entry{Session: fmt.Sprintf("w%d", w), Host: "allowed.test", Port: i + 1, Verdict: "allow"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	names := logNames(t, dir)
	if len(names) < 100 {
		t.Fatalf("the log rotated into only %d files: %v", len(names), names)
	}
	onDisk := 0
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue // the new log a rotation at the very last write opened
		}
		if b[len(b)-1] != '\n' {
			t.Errorf("%s ends inside a line", n)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			var e Entry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%s holds a torn line %q: %v", n, line, err)
			}
			onDisk++
		}
		if fi, _ := os.Stat(filepath.Join(dir, n)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", n, fi.Mode().Perm())
		}
	}
	if onDisk != writers*each {
		t.Errorf("the files hold %d entries, want %d", onDisk, writers*each)
	}
	next := map[string]int{}
	n := 0
	err := ReadLog(dir, func(e Entry) bool {
		n++
		if next[e.Session]++; e.Port != next[e.Session] {
			t.Errorf("ReadLog gave %s's entry %d after %d", e.Session, e.Port, next[e.Session]-1)
			return false
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Fatalf("ReadLog saw %d entries, want %d", n, writers*each)
	}
}

// TestLogRotateProcesses: eight processes write 20 000 entries into a
// log that rotates every 8 KiB; every entry is in exactly one file, each
// process's in the order written.
func TestLogRotateProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	const procs, each = 8, 2500
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("JAIL_TEST_LOG_WRITER=%s p%d %d %d", dir, p, each, 8<<10))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("a writer process failed: %v", err)
		}
	}
	if n := len(logNames(t, dir)); n < 100 {
		t.Fatalf("the log rotated into only %d files", n)
	}
	next := map[string]int{}
	n := 0
	err := ReadLog(dir, func(e Entry) bool {
		n++
		if next[e.Session]++; e.Port != next[e.Session] {
			t.Errorf("ReadLog gave %s's entry %d after %d", e.Session, e.Port, next[e.Session]-1)
			return false
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != procs*each {
		t.Fatalf("ReadLog saw %d entries across the files, want %d", n, procs*each)
	}
}

// TestLogKeepsFive: the log keeps the current file and five rotated ones;
// the oldest entries go, the newest stay.
func TestLogKeepsFive(t *testing.T) {
	smallLogs(t, 1024, 5)
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		l.Write(Entry{Session: "s", Host: "a.test", Port: i + 1, Verdict: "allow"})
	}
	l.Close()
	want := []string{"decisions.jsonl", "decisions.jsonl.1", "decisions.jsonl.2", "decisions.jsonl.3", "decisions.jsonl.4", "decisions.jsonl.5"}
	if got := logNames(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", got, want)
	}
	for _, n := range want[1:] {
		if fi, _ := os.Stat(filepath.Join(dir, n)); fi.Size() < 1024 || fi.Size() > 1024+200 {
			t.Errorf("%s is %d bytes, want the limit plus at most one entry", n, fi.Size())
		}
	}
	var ports []int
	ReadLog(dir, func(e Entry) bool { ports = append(ports, e.Port); return true })
	if len(ports) == 0 || len(ports) >= 500 || ports[len(ports)-1] != 500 {
		t.Fatalf("read %d entries ending %v; want the newest kept, the oldest dropped", len(ports), ports[max(0, len(ports)-3):])
	}
	for i := 1; i < len(ports); i++ {
		if ports[i] != ports[i-1]+1 {
			t.Fatalf("entries out of order across the files: %d after %d", ports[i], ports[i-1])
		}
	}
}

// TestLogMaxBytesEnv: JAIL_LOG_MAX_BYTES lowers the rotation size and
// cannot raise it.
func TestLogMaxBytesEnv(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want int64
	}{
		{"", maxLogBytes},
		{"4096", 4096},
		{"1", 1},
		{strconv.FormatInt(maxLogBytes*10, 10), maxLogBytes},
		{"0", maxLogBytes},
		{"-5", maxLogBytes},
		{"16MiB", maxLogBytes},
	} {
		t.Setenv("JAIL_LOG_MAX_BYTES", tt.env)
		if got := logLimit(); got != tt.want {
			t.Errorf("JAIL_LOG_MAX_BYTES=%q: limit %d, want %d", tt.env, got, tt.want)
		}
	}
}

// TestLogCursorFollowsRotation: a cursor reading while the log rotates
// many times under it (as jail log -f does) sees every entry once, in
// order, and then what comes after a pause.
func TestLogCursorFollowsRotation(t *testing.T) {
	smallLogs(t, 2048, 1000)
	dir := t.TempDir()
	c, err := OpenLogCursor(dir, LogPos{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := 0
	read := func() {
		t.Helper()
		err := c.Lines(func(line []byte) bool {
			var e Entry
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatalf("cursor gave a line that is not an entry: %q", line)
			}
			if seen++; e.Port != seen {
				t.Fatalf("cursor gave entry %d after %d", e.Port, seen-1)
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	written := 0
	for burst := range 40 {
		for range burst * 3 { // from no rotation to several between reads
			written++
			l.Write(Entry{Session: "s", Host: "a.test", Port: written, Verdict: "allow"})
		}
		read()
		if seen != written {
			t.Fatalf("after burst %d the cursor saw %d of %d entries", burst, seen, written)
		}
	}
	if n := len(logNames(t, dir)); n < 20 {
		t.Fatalf("the log rotated only into %d files", n)
	}
}

// TestReadSessionAcrossRotation: ReadSession from LogEnd sees the
// session's entries written afterwards even when the log rotated in
// between, and none written before.
func TestReadSessionAcrossRotation(t *testing.T) {
	smallLogs(t, 1024, 1000)
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 20 {
		l.Write(Entry{Session: "s1", Host: "before.test", Port: i, Verdict: "allow"})
	}
	from := LogEnd(dir)
	for i := range 100 {
		l.Write(Entry{Session: "s1", Host: "after.test", Port: i + 1, Verdict: "allow"})
		l.Write(Entry{Session: "s2", Host: "other.test", Verdict: "allow"})
	}
	var got []int
	if err := ReadSession(dir, "s1", from, func(e Entry) bool {
		if e.Host != "after.test" {
			t.Errorf("ReadSession gave %s", e.Host)
		}
		got = append(got, e.Port)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 || got[0] != 1 || got[99] != 100 {
		t.Fatalf("ReadSession saw %d entries (%v…), want the 100 after the mark", len(got), got[:min(3, len(got))])
	}
	if len(logNames(t, dir)) < 10 {
		t.Fatal("the log did not rotate")
	}
}

// TestEntryJSONControls: an entry carrying invalid UTF-8, ESC, DEL, C1
// controls (U+009B is CSI) and Unicode line separators is stored as valid
// UTF-8 JSON with none of them raw, and reads back with the invalid bytes
// replaced and every character kept.
func TestEntryJSONControls(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	hostile := "\x1b[2J\x1b]0;pwned\x07\x7f\u009b31m\u0085\u2028\u202e\U000e0041ok"
	e := Entry{Session: "s", Host: "h\xff\xfe" + hostile, Path: "/p\xc3" + hostile, Reason: hostile, Rule: hostile, Verdict: "deny", Injected: []string{hostile}}
	if err := l.Write(e); err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) {
		t.Errorf("the log is not valid UTF-8: %q", b)
	}
	for i, r := range string(b) {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && !strconv.IsPrint(r) {
			t.Errorf("the log holds a raw %U at byte %d: %s", r, i, b)
		}
	}
	var got []Entry
	ReadLog(dir, func(e Entry) bool { got = append(got, e); return true })
	if len(got) != 1 {
		t.Fatalf("read %d entries", len(got))
	}
	if got[0].Host != "h\ufffd\ufffd"+hostile || got[0].Path != "/p\ufffd"+hostile || got[0].Reason != hostile || got[0].Injected[0] != hostile {
		t.Errorf("read back %+v", got[0])
	}
}
