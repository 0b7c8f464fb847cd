package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLearningFailedRunNotMerged: a learning run whose command fails or
// is killed writes its profile for review only: not where later runs pick
// profiles up, and not into jail.json, even with --yes. jail relays the
// command's exit code and says so in one line. Each command reads a home
// file first, so that the profile is not empty and a merge would change
// jail.json (it did, before).
func TestLearningFailedRunNotMerged(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		learnedCat := learnedPath(s, "cat")
		review := filepath.Join(filepath.Dir(learnedCat), "failed", "cat.json")
		cfg := s.Project + "/jail.json"
		for _, tc := range []struct {
			name, script string
			code         int
			jailJSON     string // "" for none
		}{
			{"exit 3, no jail.json", `cat /etc/hostname; cat "$HOME/notes.txt"; exit 3`, 3, ""},
			{"exit 3, a jail.json", `cat /etc/hostname; cat "$HOME/notes.txt"; exit 3`, 3, "{\n  // the team's policy\n  \"network\": {\"allow\": [\"example.com\"]}\n}\n"},
			{"killed", `cat /etc/hostname; cat "$HOME/notes.txt"; kill -9 $$`, 128 + 9, ""},
		} {
			os.Remove(cfg)
			os.Remove(review)
			if tc.jailJSON != "" {
				s.WriteFile(cfg, tc.jailJSON, 0o644)
			}
			r := s.Jail("--learning", "--yes", "--", "sh", "-c", tc.script)
			if r.Code != tc.code {
				t.Errorf("%s: exit %d, want the command's %d:\n%s", tc.name, r.Code, tc.code, r)
			}
			want := "jail: the command failed (exit " + strconv.Itoa(tc.code) + "); the learned profile is written to " + review + " for review only, not merged; rerun when it succeeds"
			if !hasLineStarting(r.Stderr, want) {
				t.Errorf("%s: stderr has no line %q:\n%s", tc.name, want, r.Stderr)
			}
			if strings.Contains(r.Stderr, "merged into") {
				t.Errorf("%s: the failed run was merged:\n%s", tc.name, r.Stderr)
			}
			if tc.jailJSON == "" {
				if _, err := os.Lstat(cfg); err == nil {
					t.Errorf("%s: the failed run created jail.json:\n%s", tc.name, hostFile(t, cfg))
				}
			} else {
				hostUnchanged(t, cfg, tc.jailJSON)
			}
			if _, err := os.Lstat(learnedCat); err == nil {
				t.Errorf("%s: the failed run wrote %s, which later runs of cat use:\n%s", tc.name, learnedCat, hostFile(t, learnedCat))
			}
			if text := hostFile(t, review); !strings.Contains(text, "notes.txt") && !strings.Contains(text, `"~"`) {
				t.Errorf("%s: the review profile does not hold what the run read:\n%s", tc.name, text)
			}
		}

		// A later run of cat does not use the failed run's profile.
		os.Remove(cfg)
		r := s.Jail("--", "cat", s.Home+"/notes.txt")
		if strings.Contains(r.Stderr, "using learned profile") || strings.Contains(r.Stdout, "host file in home") {
			t.Errorf("a plain run of cat used the failed run's profile:\n%s", r)
		}
	})
}
