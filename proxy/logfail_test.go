package proxy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the Log's concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSuffix(b.b.String(), "\n"), "\n")
}

func (b *lockedBuffer) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Len() == 0
}

func denial(host string) Entry {
	return Entry{Time: time.Now(), Session: "s", Host: host, Verdict: verdictDeny}
}

// TestLogFullDisk: a decision log on a full disk (its file is /dev/full,
// where every write fails with ENOSPC) reports the failure once however
// many writes fail, and again after a write succeeded in between.
func TestLogFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/dev/full", filepath.Join(dir, logFile)); err != nil {
		t.Fatal(err)
	}
	var warn lockedBuffer
	l := OpenLogOrWarn(dir, &warn)
	if !warn.empty() {
		t.Fatalf("opening /dev/full warned: %q", warn.lines())
	}
	for i := 0; i < 5; i++ {
		if err := l.Write(denial("a.test")); err == nil {
			t.Fatal("a write to /dev/full succeeded")
		}
	}
	want := "jail: warning: decision log " + filepath.Join(dir, logFile) + ": no space left on device; decisions are not being recorded"
	if got := warn.lines(); len(got) != 1 || got[0] != want {
		t.Fatalf("warnings after 5 failed writes = %q, want once %q", got, want)
	}

	// The disk has room again: records resume, then a new burst of
	// failures is reported again.
	f, err := os.CreateTemp(dir, "real")
	if err != nil {
		t.Fatal(err)
	}
	full := l.f
	l.mu.Lock()
	l.f = f
	l.mu.Unlock()
	if err := l.Write(denial("b.test")); err != nil {
		t.Fatalf("write after the disk has room: %v", err)
	}
	l.mu.Lock()
	l.f = full
	l.mu.Unlock()
	l.Write(denial("c.test"))
	l.Write(denial("d.test"))
	if got := warn.lines(); len(got) != 2 || got[1] != want {
		t.Fatalf("warnings after a second burst = %q, want two", got)
	}
	f.Close()
	l.Close()
}

// TestLogCannotOpen: a log that cannot be opened at start (its directory
// is a file) is reported once, the run goes on, and when the directory
// can be made later, the next write records again.
func TestLogCannotOpen(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "state")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var warn lockedBuffer
	l := OpenLogOrWarn(dir, &warn)
	defer l.Close()
	for i := 0; i < 3; i++ {
		if err := l.Write(denial("a.test")); err == nil {
			t.Fatal("a write succeeded with no log directory")
		}
	}
	got := warn.lines()
	if len(got) != 1 || !strings.HasPrefix(got[0], "jail: warning: decision log "+filepath.Join(dir, logFile)+": ") ||
		!strings.HasSuffix(got[0], "; decisions are not being recorded") || !strings.Contains(got[0], "not a directory") {
		t.Fatalf("warnings = %q, want one line naming the log and the cause", got)
	}
	if _, err := OpenLog(dir); err == nil {
		t.Fatal("OpenLog succeeded with a file in the way")
	}

	os.Remove(dir)
	if err := l.Write(denial("late.test")); err != nil {
		t.Fatalf("write once the directory can be made: %v", err)
	}
	var hosts []string
	if err := ReadLog(dir, func(e Entry) bool { hosts = append(hosts, e.Host); return true }); err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0] != "late.test" {
		t.Errorf("log holds %q, want the late entry", hosts)
	}
}

// TestLogClosedUnderneath: a log whose file was closed under it (the
// descriptor gone) reports it; a log closed by its owner at the end of a
// run fails later writes without a report.
func TestLogClosedUnderneath(t *testing.T) {
	var warn lockedBuffer
	l := OpenLogOrWarn(t.TempDir(), &warn)
	l.f.Close()
	if err := l.Write(denial("a.test")); err == nil {
		t.Fatal("a write to a closed file succeeded")
	}
	if got := warn.lines(); len(got) != 1 || !strings.Contains(got[0], "file already closed; decisions are not being recorded") {
		t.Fatalf("warnings = %q", got)
	}

	var quiet lockedBuffer
	m := OpenLogOrWarn(t.TempDir(), &quiet)
	m.Close()
	if err := m.Write(denial("b.test")); err == nil {
		t.Fatal("a write after Close succeeded")
	}
	if !quiet.empty() {
		t.Errorf("a write after Close warned: %q", quiet.lines())
	}
}
