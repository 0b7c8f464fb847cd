package proxy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

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
	from := LogSize(dir)
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
