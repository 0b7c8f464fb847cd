package linux

import (
	"os"
	"path/filepath"
	"testing"
)

// A spare is taken from the pool only while it is exactly a placeholder,
// and only from a pool that is a private directory of the user's: a
// planted pool, or a spare with a file in it, would put that content in
// the project under a protected name.
func TestPoolTakesOnlyIntactSpares(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool")
	os.Mkdir(pool, 0o700)
	os.Mkdir(filepath.Join(pool, "d-full"), 0o755)
	os.WriteFile(filepath.Join(pool, "d-full", "settings.json"), []byte(`{"hooks":{}}`), 0o644)
	if e := newPool(dir).plan(PathPlaceholder{Path: filepath.Join(dir, ".claude"), Dir: true}); e.from != "" {
		t.Errorf("a spare directory with a file in it was taken: %s", e.from)
	}
	os.Mkdir(filepath.Join(pool, "d-empty"), 0o755)
	e := newPool(dir).plan(PathPlaceholder{Path: filepath.Join(dir, ".claude"), Dir: true})
	if filepath.Base(e.from) != "d-empty" {
		t.Fatalf("the empty spare was not taken: %q", e.from)
	}
	// Something written into it between the plan and the rename: refused.
	os.WriteFile(filepath.Join(pool, "d-empty", "x"), nil, 0o644)
	if err := newPool(dir).make(&e); err == nil {
		t.Errorf("a spare filled after it was planned was put in place")
	}
	// A pool others may write is not used at all.
	os.Chmod(pool, 0o777)
	os.Mkdir(filepath.Join(pool, "d-other"), 0o755)
	if e := newPool(dir).plan(PathPlaceholder{Path: filepath.Join(dir, ".vscode"), Dir: true}); e.from != "" {
		t.Errorf("a spare was taken from a pool others may write: %s", e.from)
	}
}

// A placeholder file given a second name (a hard link) could be changed
// through it while it holds a protected path of another project: it never
// goes back to the pool, and a spare with two names is never taken.
func TestPoolRefusesLinkedFiles(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool")
	os.Mkdir(pool, 0o700)
	ph := PathPlaceholder{Path: filepath.Join(dir, ".envrc")}
	p := newPool(dir)
	e := p.plan(ph)
	if err := p.make(&e); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(ph.Path, filepath.Join(dir, "other-name")); err != nil {
		t.Fatal(err)
	}
	newPool(dir).remove(e)
	if _, err := os.Lstat(ph.Path); err == nil {
		t.Errorf("the linked placeholder stayed at its protected path")
	}
	if ents, _ := os.ReadDir(pool); len(ents) != 0 {
		t.Errorf("the linked placeholder went back to the pool: %v", ents)
	}
	spare := filepath.Join(pool, kind(ph)+"-linked")
	os.Link(filepath.Join(dir, "other-name"), spare)
	if e := newPool(dir).plan(ph); e.from != "" {
		t.Errorf("a spare with a second name was taken: %s", e.from)
	}
	os.Remove(filepath.Join(dir, "other-name"))
	if e := newPool(dir).plan(ph); e.from != spare {
		t.Errorf("control: the spare with one name left was not taken: %q", e.from)
	}
}

// A session is alive while jail runs or while the first process of its
// jail does; a zombie or a reused PID is not it.
func TestJournalAlive(t *testing.T) {
	me, start := os.Getpid(), procStart(os.Getpid())
	for _, tt := range []struct {
		j    journal
		want bool
	}{
		{journal{PID: me, Start: start}, true},
		{journal{PID: 999999999, Start: 1, JailPID: me, JailStart: start}, true},
		{journal{PID: me, Start: start + 1}, false},
		{journal{}, false},
	} {
		if got := alive(&tt.j); got != tt.want {
			t.Errorf("alive(%+v) = %v, want %v", tt.j, got, tt.want)
		}
	}
}
