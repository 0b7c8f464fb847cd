package linux

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

// TestPlaceholdersForInit: placeholders are made beside bubblewrap's start
// only when nothing bubblewrap binds depends on them; a bind onto or from
// a path at or below one (host or jail side), a placeholder outside every
// tree init binds, or a sign-in view makes them first, as before.
func TestPlaceholdersForInit(t *testing.T) {
	base := func() *Plan {
		return &Plan{
			Ops:          []Op{{Kind: "bind", Src: "/p", Dest: "/p"}, {Kind: "ro-bind", Src: "/etc", Dest: "/etc"}},
			Mounts:       []InitMount{{Path: "/p/.vscode", Host: "/p/.vscode", ReadOnly: true}, {Path: "/j/cfg", Host: "/h/cfg", ReadOnly: true}},
			Placeholders: []PathPlaceholder{{Path: "/p/.vscode", Dir: true}},
		}
	}
	cases := []struct {
		name string
		edit func(*Plan)
		want bool
	}{
		{"only init binds them", func(*Plan) {}, true},
		{"inside a tree init binds", func(p *Plan) {
			p.Placeholders = append(p.Placeholders, PathPlaceholder{Path: "/p/.vscode/settings.json", Content: "{}"})
		}, true},
		{"none", func(p *Plan) { p.Placeholders = nil }, false},
		{"bubblewrap binds onto one", func(p *Plan) { p.Ops = append(p.Ops, Op{Kind: "mask", Dest: "/p/.vscode"}) }, false},
		{"bubblewrap binds below one", func(p *Plan) {
			p.Ops = append(p.Ops, Op{Kind: "ro-bind", Src: "/s/x", Dest: "/p/.vscode/x"})
		}, false},
		{"bubblewrap binds from one", func(p *Plan) { p.Ops = append(p.Ops, Op{Kind: "ro-bind", Src: "/p/.vscode", Dest: "/q"}) }, false},
		{"bubblewrap binds below its jail path", func(p *Plan) {
			p.Placeholders = []PathPlaceholder{{Path: "/h/cfg", Dir: true}}
			p.Ops = append(p.Ops, Op{Kind: "mask", Dest: "/j/cfg/token"})
		}, false},
		{"outside every tree init binds", func(p *Plan) {
			p.Placeholders = append(p.Placeholders, PathPlaceholder{Path: "/p/.envrc"})
		}, false},
		{"sign-in views", func(p *Plan) { p.SignInViews = []SignInView{{}} }, false},
	}
	for _, c := range cases {
		p := base()
		c.edit(p)
		if got := placeholdersForInit(p); got != c.want {
			t.Errorf("%s: placeholdersForInit = %v, want %v", c.name, got, c.want)
		}
	}
}
