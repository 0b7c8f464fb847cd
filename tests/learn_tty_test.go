package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On a terminal, a learning run asks before merging into jail.json: "n"
// leaves the file byte-identical, "y" merges and records trust, so the next
// run does not ask about the widening.
func TestLearningMergePrompt(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.NoAutoTrust = true
		cfg := filepath.Join(s.Project, "jail.json")
		orig := "{\n  // the team's policy\n  \"filesystem\": {\"allowWrite\": [\".\"]}\n}\n"
		s.WriteFile(cfg, orig, 0o644)
		tm := NewTerm(t, s)

		tm.Type(tm.Jail("--learning -- sh -c 'cat ~/notes.txt'; echo rc-n=$?"))
		tm.WaitLine(`Merge it into .*jail\.json\? \[y/N\]`)
		tm.Type("n")
		tm.WaitLine(`jail: not merged`)
		tm.WaitLine(`rc-n=0`)
		if b, _ := os.ReadFile(cfg); string(b) != orig {
			t.Fatalf("answering n changed jail.json:\n%s", b)
		}

		tm.Type(tm.Jail("--learning -- sh -c 'cat ~/notes.txt'; echo rc-y=$?"))
		tm.WaitLine(`Merge it into .*jail\.json\? \[y/N\]`)
		tm.Type("y")
		tm.WaitLine(`jail: merged into .*jail\.json`)
		tm.WaitLine(`rc-y=0`)
		b, _ := os.ReadFile(cfg)
		if !strings.Contains(string(b), "// the team's policy") || !strings.Contains(string(b), `"~/notes.txt"`) {
			t.Fatalf("answering y: want the comment kept and ~/notes.txt added to jail.json:\n%s", b)
		}

		// The merged file widens reads into the home; the user approved it.
		r := s.Jail("--", "sh", "-c", "cat ~/notes.txt")
		if r.Code != 0 || !strings.Contains(r.Stdout, "host file in home") || strings.Contains(r.Stderr, "widens the jail") {
			t.Fatalf("a run after merging at the prompt: want no trust question and ~/notes.txt readable:\n%s", r)
		}
	})
}
