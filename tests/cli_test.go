package tests

import (
	"strings"
	"testing"
)

// TestCheck: on this machine every protection the strict jail needs is
// present, so check names each and exits 0.
func TestCheck(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		r := s.Jail("check")
		if r.Code != 0 {
			t.Fatalf("jail check failed on a machine with every protection:\n%s", r)
		}
		for _, want := range []string{"ok    bubblewrap", "ok    user namespaces", "ok    Landlock          ABI ", "ok    seccomp", "eBPF (learning)", "the default (strict) jail runs"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("jail check output lacks %q:\n%s", want, r.Stdout)
			}
		}
	})
}

// TestPlanPrintsWithoutRunning: plan shows every layer and runs nothing.
func TestPlanPrintsWithoutRunning(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.Env = append(s.Env, "OPENAI_API_KEY="+EnvSecret)
		r := s.Jail("plan", "--", "sh", "-c", "touch ran")
		if r.Code != 0 {
			t.Fatalf("jail plan failed:\n%s", r)
		}
		for _, want := range []string{"project     " + s.Project, "bind       " + s.Project, "landlock (ABI", "seccomp (native", "ptrace -> EPERM", "placeholders: OPENAI_API_KEY", "bwrap --unshare-user"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("plan lacks %q:\n%s", want, r.Stdout)
			}
		}
		if strings.Contains(r.Stdout, EnvSecret) {
			t.Errorf("plan prints a secret value:\n%s", r.Stdout)
		}
		if s.Sh("test -e ran && echo RAN").Stdout == "RAN\n" {
			t.Errorf("jail plan ran the command")
		}
	})
}

func TestVersionAndUsage(t *testing.T) {
	s := NewSandbox(t, runners(t)[0])
	if r := s.Jail("--version"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "jail ") {
		t.Errorf("--version:\n%s", r)
	}
	if r := s.Jail(); r.Code != 125 || !strings.Contains(r.Stderr, "no command given") {
		t.Errorf("no command: want 125 and a usage line:\n%s", r)
	}
	if r := s.Jail("--no-such-flag", "true"); r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Errorf("unknown flag: want 125 and one line:\n%s", r)
	}
	// jail refuses to make the whole home the project.
	if r := s.JailIn(s.Home, "", "--", "true"); r.Code != 125 || !strings.Contains(r.Stderr, "refusing to use") {
		t.Errorf("home as project root: want 125:\n%s", r)
	}
}
