package remote

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSafeRel(t *testing.T) {
	for p, want := range map[string]bool{
		"a": true, "a/b.txt": true, ".env": true, "..x": true, "x..": true,
		"": false, "/etc/passwd": false, "..": false, "../x": false, "a/../../x": false, "a/./b": false,
		"a//b": false, "a/": false, "a\\..\\b": false, "a\x00b": false, ".": false,
	} {
		if got := safeRel(p); got != want {
			t.Errorf("safeRel(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestProtectedRel(t *testing.T) {
	root := "/p"
	for p, want := range map[string]bool{
		".git/hooks/pre-commit": true, ".git/config": true, ".git/info/attributes": true, ".git/commondir": true,
		".git/modules/x/hooks/post-checkout": true, ".git/worktrees/w/HEAD": true, ".git/objects/info/alternates": true,
		"vendor/x/.git/config": true, "vendor/x/.git/hooks/a": true, "x/.git": true, "HEAD": true, "bare/HEAD": true,
		".envrc": true, "jail.json": true, "deep/er/jail.json": true, ".vscode/settings.json": true,
		".claude/settings.json": true, ".mcp.json": true, ".gitmodules": true, ".husky/pre-commit": true, ".npmrc": true,
		".git/objects/ab/cdef": false, ".git/refs/heads/main": false, ".git/HEAD": false, ".git/index": false,
		"src/main.go": false, "README.md": false, "hooks/pre-commit": false, "configs/app.json": false,
	} {
		if got := protectedRel(p, root); got != want {
			t.Errorf("protectedRel(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestLinkInside(t *testing.T) {
	for _, c := range []struct {
		p, target string
		want      bool
	}{
		{"a", "b", true}, {"d/a", "../b", true}, {"d/e/a", "../../b", true},
		{"a", "../b", false}, {"d/a", "../../b", false}, {"a", "/etc", false}, {"a", "", false}, {"a", "..", false},
	} {
		if got := linkInside(c.p, c.target); got != c.want {
			t.Errorf("linkInside(%q, %q) = %v, want %v", c.p, c.target, got, c.want)
		}
	}
}

func TestParseList(t *testing.T) {
	good := "/home/u/w\n/home/u\nrsync\nLIST\nf 644 3 1700000000.5000000000 a b.txt\x00\x00l 777 4 1700000000.0000000000 ln\x00../x\x00d 755 4096 1700000000.0 dir\x00\x00"
	l, err := parseList([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if l.dir != "/home/u/w" || !l.rsync || len(l.entries) != 3 || l.entries["a b.txt"].Size != 3 || l.entries["ln"].Link != "../x" || l.entries["dir"].Type != "dir" {
		t.Errorf("parsed %+v", l)
	}
	if l, err := parseList([]byte("missing\n")); err != nil || !l.missing {
		t.Errorf("missing workspace: %+v, %v", l, err)
	}
	for _, bad := range []string{
		"", "relative\n/h\nrsync\nLIST\n", "/w\nrsync\nLIST\n", "/w\n/h\nrsync\n", "/w\n/h\nrsync\nLIST\nf 644 3 1 a\x00",
		"/w\n/h\nrsync\nLIST\nf 64x 3 1 a\x00\x00", "/w\n/h\nrsync\nLIST\nz 644 3 1 a\x00\x00", "/w\n/h\nrsync\nLIST\nf 644 a\x00\x00",
	} {
		if _, err := parseList([]byte(bad)); err == nil {
			t.Errorf("parseList(%q) took it", bad)
		}
	}
}

func FuzzParseList(f *testing.F) {
	f.Add([]byte("/w\n/h\nrsync\nLIST\nf 644 3 1700000000.5 a\x00\x00"))
	f.Add([]byte("missing\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseList(b)
		if err != nil || l.missing {
			return
		}
		if !filepath.IsAbs(l.dir) || strings.Contains(l.dir, "\n") {
			t.Errorf("dir %q", l.dir)
		}
		for _, st := range l.entries {
			if st.Mode&^0o777 != 0 {
				t.Errorf("mode %o keeps bits beyond the permissions", st.Mode)
			}
		}
	})
}

func TestWithArgsQuotes(t *testing.T) {
	got := withArgs("echo \"$1\"", "~/x'; rm -rf / #", "-n")
	want := "set -- '~/x'\\''; rm -rf / #' '-n'\necho \"$1\""
	if got != want {
		t.Errorf("withArgs = %q, want %q", got, want)
	}
}
