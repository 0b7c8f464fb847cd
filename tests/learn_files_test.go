package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What a learning run wrote to files that exist only in its overlay, or
// to the files every jail keeps read-only, is not proposed; a later run
// under the learned profile leaves the home on disk as it was (no file
// path turned into a directory), while a directory the command created is
// made on disk for it.
func TestLearningProposesNoPhantomFiles(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		script := `echo x > ~/.nbtoolrc; echo y >> ~/.bashrc; mv ~/.bashrc ~/.bashrc.bak; mkdir -p ~/work/a/b; echo z > ~/work/a/b/f; ls ~/notes.txt`
		r := s.Jail("--learning", "--", "sh", "-c", script)
		if r.Code != 0 {
			t.Logf("learning run (its failed writes are expected):\n%s", r)
		}
		l := readLearned(t, learnedPath(s, "sh"), r)
		for _, p := range append(append([]string{}, l.Filesystem.AllowRead...), l.Filesystem.AllowWrite...) {
			if p == "~/.nbtoolrc" || strings.HasPrefix(p, "~/.bashrc") {
				t.Errorf("proposed %s:\n%s", p, l.raw)
			}
		}
		if !contains(l.Filesystem.AllowWrite, "~/work") {
			t.Errorf("the directory the command made is not proposed writable:\n%s", l.raw)
		}
		for _, want := range []string{"tried to write ~/.bashrc: kept read-only", "wrote ~/.nbtoolrc, which exists only in the learning run"} {
			found := false
			for _, k := range l.Learned.KeptDenied {
				found = found || strings.HasPrefix(k, want)
			}
			if !found {
				t.Errorf("keptDenied lacks %q: %v", want, l.Learned.KeptDenied)
			}
		}

		again := s.Jail("--", "sh", "-c", "echo go; mkdir -p ~/work/a/b && echo z > ~/work/a/b/f && echo ran") // named sh, as the learning run
		if again.Code != 0 || !strings.Contains(again.Stdout, "ran") {
			t.Fatalf("a run under the learned profile:\n%s", again)
		}
		if _, err := os.Lstat(filepath.Join(s.Home, ".nbtoolrc")); err == nil {
			t.Errorf("~/.nbtoolrc exists on disk after a run under the learned profile")
		}
		if fi, err := os.Stat(filepath.Join(s.Home, ".bashrc")); err != nil || fi.IsDir() {
			t.Errorf("~/.bashrc on disk: %v %v", fi, err)
		}
		if b, err := os.ReadFile(filepath.Join(s.Home, "work/a/b/f")); err != nil || string(b) != "z\n" {
			t.Errorf("~/work, learned writable, did not keep what the later run wrote there: %q %v", b, err)
		}
	})
}

// jail learned lists, shows and forgets learned profiles; a forgotten one
// no longer widens later runs, and names that are not profiles' are
// refused, not resolved as paths.
func TestLearnedCommand(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		if r := s.Jail("learned"); r.Code != 0 || !strings.Contains(r.Stdout, "no learned profiles") {
			t.Fatalf("jail learned with none:\n%s", r)
		}
		if r := s.Jail("--learning", "--", "sh", "-c", "true; cat ~/notes.txt"); r.Code != 0 {
			t.Fatalf("learning run:\n%s", r)
		}
		r := s.Jail("learned", "list")
		if r.Code != 0 || !strings.Contains(r.Stdout, "sh ") || !strings.Contains(r.Stdout, "1 read-only") {
			t.Fatalf("jail learned list:\n%s", r)
		}
		if r := s.Jail("learned", "show", "sh"); r.Code != 0 || !strings.Contains(r.Stdout, `"~/notes.txt"`) {
			t.Fatalf("jail learned show sh:\n%s", r)
		}
		if r := s.Jail("learned", "show", "../../etc/passwd"); r.Code != 125 || strings.Contains(r.Stdout, "root:") {
			t.Fatalf("jail learned show of a path: want 125 and nothing shown:\n%s", r)
		}
		if r := s.Jail("--", "sh", "-c", "true; cat ~/notes.txt"); r.Code != 0 {
			t.Fatalf("under the learned profile ~/notes.txt is readable:\n%s", r)
		}
		if r := s.Jail("learned", "rm", "sh"); r.Code != 0 {
			t.Fatalf("jail learned rm sh:\n%s", r)
		}
		if r := s.Jail("--", "sh", "-c", "true; cat ~/notes.txt"); r.Code == 0 || strings.Contains(r.Stderr, "using learned profile") {
			t.Fatalf("after jail learned rm, the profile still widens the run:\n%s", r)
		}
	})
}
