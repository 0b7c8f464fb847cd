package tests

import (
	"os"
	"strings"
	"testing"
)

// OpenCode writes .opencode/.gitignore at start and ends the run when it
// cannot; .opencode/ stays read-only (its plugins run outside the jail
// later). So the file is there inside with OpenCode's own content, read-
// only, whether .opencode/ is missing or present without it, git inside
// does not list it, and after exit the project is as it was.
func TestAgentStartFileOpenCodeGitignore(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		script := `cat .opencode/.gitignore; echo; echo planted > .opencode/.gitignore && echo WROTE; git status --porcelain --untracked-files=all`
		r := s.Jail("--", "sh", "-c", script)
		if r.Code != 0 || !strings.Contains(r.Stdout, "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore") || strings.Contains(r.Stdout, "WROTE") {
			t.Errorf(".opencode missing: want OpenCode's .gitignore inside, read-only:\n%s", r)
		}
		if strings.Contains(r.Stdout, ".opencode") {
			t.Errorf("git inside lists the placeholder:\n%s", r)
		}
		hostAbsent(t, s.Project+"/.opencode")

		s.WriteFile(s.Project+"/.opencode/plugin/x.js", "// a plugin\n", 0o644)
		r = s.Jail("--", "sh", "-c", script)
		if r.Code != 0 || !strings.Contains(r.Stdout, "bun.lock\n.gitignore") || strings.Contains(r.Stdout, "WROTE") {
			t.Errorf(".opencode present without a .gitignore: want OpenCode's inside, read-only:\n%s", r)
		}
		hostAbsent(t, s.Project+"/.opencode/.gitignore")
		if b, err := os.ReadFile(s.Project + "/.opencode/plugin/x.js"); err != nil || string(b) != "// a plugin\n" {
			t.Errorf("the project's .opencode changed: %q %v", b, err)
		}
	})
}
