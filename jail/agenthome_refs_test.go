package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The programs an agent's settings name in the home (a status line, a
// hook) are found, so the planner keeps them read-only; a file that does
// not exist, a path outside the home and a tree the jail does not show
// give nothing.
func TestReferencedPrograms(t *testing.T) {
	home := t.TempDir()
	for _, f := range []string{".claude/statusline.sh", ".claude/hooks-x/run.py", "bin/helper"} {
		os.MkdirAll(filepath.Join(home, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(home, f), []byte("#!/bin/sh\n"), 0o755)
	}
	settings := `{"statusLine": {"type": "command", "command": "bash ~/.claude/statusline.sh"},
		"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "python3 $HOME/.claude/hooks-x/run.py --x=1"}]}]},
		"apiKeyHelper": "` + home + `/bin/helper; /usr/bin/true", "other": "~/missing.sh /etc/passwd"}`
	os.WriteFile(filepath.Join(home, ".claude/settings.json"), []byte(settings), 0o644)
	got, err := ReferencedPrograms(home, []string{filepath.Join(home, ".claude")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(home, ".claude/hooks-x/run.py"), filepath.Join(home, ".claude/statusline.sh"), filepath.Join(home, "bin/helper")}
	if strings.Join(sortedCopy(got), " ") != strings.Join(sortedCopy(want), " ") {
		t.Errorf("referencedPrograms = %q, want %q", got, want)
	}
	if got, _ := ReferencedPrograms(home, []string{filepath.Join(home, "proj")}); len(got) != 0 {
		t.Errorf("settings of a tree the jail does not show were read: %q", got)
	}
	// Too large to read whole: an error, never a silent gap.
	big := make([]byte, maxSettings+10)
	for i := range big {
		big[i] = ' '
	}
	os.WriteFile(filepath.Join(home, ".claude/settings.local.json"), big, 0o644)
	if _, err := ReferencedPrograms(home, []string{filepath.Join(home, ".claude")}); err == nil || !strings.Contains(err.Error(), "settings.local.json") {
		t.Errorf("an oversized settings file gave %v, want an error naming it", err)
	}
}

func sortedCopy(l []string) []string {
	out := append([]string{}, l...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
