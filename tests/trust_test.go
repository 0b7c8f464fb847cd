package tests

import (
	"os"
	"strings"
	"testing"
)

// TestUntrustedWideningRefused: a project jail.json from a stranger may
// narrow the jail freely, but what it widens needs `jail trust`; without a
// terminal an untrusted widening is exit 125 and nothing runs. A changed
// file needs trust again.
func TestUntrustedWideningRefused(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.NoAutoTrust = true
		marker := s.Project + "/ran"
		// Narrowing only: runs without trust.
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": [".env"]}, "command": {"deny": ["git push"]}}`, 0o644)
		if r := s.Sh("touch ran"); r.Code != 0 {
			t.Fatalf("a narrowing-only jail.json needs no trust:\n%s", r)
		}
		os.Remove(marker)
		// Widening: refused, one line naming jail trust, the command never ran.
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"allowRead": ["~/.aws"]}, "network": {"allow": ["evil.example"]}}`, 0o644)
		r := s.Sh("touch ran")
		if r.Code != 125 || !strings.Contains(r.Stderr, "jail trust") || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
			t.Fatalf("untrusted widening: want exit 125 and one line naming jail trust:\n%s", r)
		}
		for _, w := range []string{"allowRead ~/.aws (outside the project)", "network.allow evil.example"} {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("the refusal does not name %q:\n%s", w, r.Stderr)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the command ran although the widening was not trusted")
		}
		// jail trust, then it runs.
		if tr := s.Jail("trust"); tr.Code != 0 {
			t.Fatalf("jail trust:\n%s", tr)
		}
		if r := s.Sh("touch ran"); r.Code != 0 {
			t.Fatalf("after jail trust the command must run:\n%s", r)
		}
		os.Remove(marker)
		// A changed file asks again.
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"allowRead": ["~/.aws"]}, "network": {"allow": ["evil.example", "more.example"]}}`, 0o644)
		if r := s.Sh("touch ran"); r.Code != 125 {
			t.Fatalf("a changed jail.json must need trust again:\n%s", r)
		}
		// The trust record cannot be changed from inside the jail.
		if tr := s.Jail("trust"); tr.Code != 0 {
			t.Fatalf("jail trust:\n%s", tr)
		}
		record := s.Home + "/.config/jail/trusted.json"
		before, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		// By default the home is a throwaway; with the home writable, and
		// in learning mode (the real home through an overlay), it is not.
		for _, flags := range [][]string{nil, {"--allow-write", "~"}, {"--learning"}} {
			r := s.Jail(append(flags, "--", "sh", "-c", `mkdir -p ~/.config/jail; echo '{}' > ~/.config/jail/trusted.json; rm -f ~/.config/jail/trusted.json; true`)...)
			if r.Code != 0 {
				t.Fatalf("the attempt did not run (flags %v):\n%s", flags, r)
			}
			if after, _ := os.ReadFile(record); string(after) != string(before) {
				t.Fatalf("the jailed command (flags %v) changed the trust record:\n%s\n%s", flags, after, r)
			}
		}
	})
}
