package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDarwinPlan runs `jail plan --platform darwin -- sh` in a project
// whose jail.json, .env and name an attacker chose, and checks what a Mac
// would run: the fixed sandbox-exec line, the project as a -D parameter
// that a shell reads back byte for byte, deny default first, and no byte
// of the project's path, nor the .env's value, in the profile text.
func TestDarwinPlan(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(filepath.Join(s.Project, "api", ".env"), "STRIPE_SECRET_KEY=sk_live_darwinplanvalue0123456789\n", 0o600)
		s.WriteFile(filepath.Join(s.Project, "jail.json"), `{"filesystem": {"denyRead": ["secrets/**"]}}`, 0o644)
		r := s.Jail("plan", "--platform", "darwin", "--", "sh")
		if r.Code != 0 {
			t.Fatalf("jail plan --platform darwin failed:\n%s", r)
		}
		head, profile, ok := strings.Cut(r.Stdout, "\n# profile:\n")
		if !ok {
			t.Fatalf("no profile section:\n%s", r.Stdout)
		}
		// The command line is one argument group per line, each line but
		// the last ending in " \\": still one shell command.
		var lines []string
		for _, l := range strings.Split(head, "\n") {
			if strings.HasPrefix(l, "/usr/bin/sandbox-exec ") || len(lines) > 0 && strings.HasSuffix(lines[len(lines)-1], " \\") {
				lines = append(lines, l)
			}
		}
		line := strings.Join(lines, "\n")
		if len(lines) < 3 || lines[0] != `/usr/bin/sandbox-exec \` || !strings.HasSuffix(line, "\n  "+`-p "$PROFILE" -- sh`) {
			t.Fatalf("no sandbox-exec command line, one group a line, ending in the command:\n%s", head)
		}
		for _, l := range lines[1 : len(lines)-1] {
			if !strings.HasPrefix(l, "  -D ") {
				t.Errorf("a parameter line is not one -D group: %q", l)
			}
		}
		if !strings.HasPrefix(profile, "(version 1)\n(deny default)\n") {
			t.Errorf("the profile does not start with deny default:\n%.200s", profile)
		}
		if strings.Contains(profile, "/") {
			t.Errorf("a path byte sequence is in the profile text")
		}
		if base := filepath.Base(s.Base); strings.Contains(profile, base) {
			t.Errorf("%q, part of the project's path, is in the profile text", base)
		}
		for _, leak := range []string{"darwinplanvalue", "sk_live_"} {
			if strings.Contains(r.Stdout, leak) {
				t.Errorf("the .env value %q is in the printed plan", leak)
			}
		}
		if !strings.Contains(head, "# secrets passed as placeholders: ") || !strings.Contains(head, "STRIPE_SECRET_KEY") {
			t.Errorf("the .env secret is not named as a placeholder:\n%s", head)
		}
		// A shell reads the parameters back as the plan means them.
		out, err := exec.Command("/bin/sh", "-c", "PROFILE=x; set -- "+strings.TrimPrefix(line, "/usr/bin/sandbox-exec ")+`; for a; do printf '%s\n' "$a"; done`).Output()
		if err != nil {
			t.Fatalf("sh cannot read the printed line: %v", err)
		}
		project := "/private" + s.Project // the test's project is under /tmp, which macOS resolves to /private/tmp
		if !strings.HasPrefix(s.Project, "/tmp/") {
			project = s.Project
		}
		for _, want := range []string{"PROJECT_0=" + project, "MASKRE_0="} {
			if !strings.Contains(string(out), "\n"+want) {
				t.Errorf("parameter %s missing from the line:\n%s", want, out)
			}
		}
	})
}

// TestDarwinPlanRefusals: an unknown platform and running a macOS jail off
// macOS are refused with one line and exit 125, and nothing runs.
func TestDarwinPlanRefusals(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		marker := filepath.Join(s.Project, "ran")
		for _, args := range [][]string{
			{"--platform", "windows", "--", "touch", marker},
			{"--platform", "darwin", "--", "touch", marker},
			{"--platform", "darwin", "--learning", "--", "touch", marker},
		} {
			r := s.Jail(args...)
			if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.HasPrefix(r.Stderr, "jail: ") {
				t.Errorf("jail %v: want exit 125 and one line, got\n%s", args, r)
			}
		}
		if out, err := exec.Command("test", "-e", marker).CombinedOutput(); err == nil {
			t.Errorf("a refused run still ran the command: %s", out)
		}
	})
}
