package jail

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlaceholderPoolStaysBounded: a pool grown past maxSpare spares of a
// kind (many jails at once) is trimmed back once a jail has run, so that
// listing it stays cheap; the trim removes only empty spares, never one a
// file was put in, and the placeholder itself is made and released as
// before.
func TestPlaceholderPoolStaysBounded(t *testing.T) {
	base := t.TempDir()
	state, project := filepath.Join(base, "state"), filepath.Join(base, "project")
	pool := filepath.Join(placeholderDir(state), "pool")
	for _, d := range []string{pool, project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < maxSpare+40; i++ {
		if err := os.Mkdir(filepath.Join(pool, fmt.Sprintf("d-%012x", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	full := filepath.Join(pool, "d-zzzzzzzzzzzz") // listed last: past the bound
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "keep"), []byte("the user's"), 0o644); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(project, ".vscode")
	plan := &Plan{StateDir: state, Session: "s1", Placeholders: []PathPlaceholder{{Path: held, Dir: true}}}
	release, err := holdPlaceholders(plan)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(held); err != nil || !fi.IsDir() {
		t.Fatalf("the placeholder %s was not made: %v", held, err)
	}
	release()
	if _, err := os.Lstat(held); err == nil {
		t.Fatalf("the placeholder %s is still there after release", held)
	}
	entries, err := os.ReadDir(pool)
	if err != nil {
		t.Fatal(err)
	}
	dirs := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "d-") {
			dirs++
		}
	}
	if dirs > maxSpare+1 {
		t.Errorf("the pool holds %d directory spares after a run, want at most %d and the non-empty one", dirs, maxSpare)
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep")); err != nil || string(b) != "the user's" {
		t.Errorf("the trim removed a spare with a file in it: %v", err)
	}
}
