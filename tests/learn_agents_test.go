package tests

import (
	"strings"
	"testing"
)

// Learning real agent CLIs from the npm registry: the run works under the
// learning view with the runner's tracer, the profile it writes proposes
// nothing of jail's own, no credential store and not the home itself, it
// keeps the agent's own directory when the agent wrote there, and a plain
// run that uses the learned profile (and no --allow-read flag any more:
// the learned profile carries it) still works.
func TestLearningRealAgents(t *testing.T) {
	forEachAgent(t, func(t *testing.T, s *Sandbox, a agent, cache string) {
		bin := agentBin(cache, a)
		r := runAgent(t, s, "--learning", "--allow-read", cache, "--", bin, "--version")
		if r.Code != 0 || !versionRE.MatchString(r.Stdout+r.Stderr) {
			t.Fatalf("jail --learning -- %s --version: want exit 0 and a version:\n%s", a.Name, r)
		}
		checkStartLine(t, r, "learning", runnerTracer(s))
		l := readLearned(t, learnedPath(s, a.Name), r)
		if l.Learned.Tracer != runnerTracer(s) || l.Learned.Command != a.Name {
			t.Errorf("learned record %+v: want command %s, tracer %s", l.Learned, a.Name, runnerTracer(s))
		}
		for _, p := range append(append([]string{}, l.Filesystem.AllowRead...), l.Filesystem.AllowWrite...) {
			switch {
			case p == "~" || p == s.Home || p == "/" || p == "~/.config" || p == "~/.cache" || p == "~/.local/share":
				t.Errorf("%s: the learned profile proposes %s, a whole tree:\n%s", a.Name, p, l.raw)
			case strings.HasPrefix(p, "/run/jail") || strings.HasPrefix(p, "/proc") || strings.HasPrefix(p, "/tmp"):
				t.Errorf("%s: the learned profile proposes jail's or a private path %s:\n%s", a.Name, p, l.raw)
			case secretPath(p):
				t.Errorf("%s: the learned profile proposes the credential store %s:\n%s", a.Name, p, l.raw)
			}
		}
		if !contains(l.Filesystem.AllowRead, cache) {
			t.Errorf("%s: the agent ran from %s, which the learned profile does not carry (allowRead %v)", a.Name, cache, l.Filesystem.AllowRead)
		}
		if !hasProgram(l.Learned.Programs, a.Name) {
			t.Errorf("%s: programs %v lack the agent", a.Name, l.Learned.Programs)
		}
		noSecret(t, r, a.Name+" learning run", SSHKeySecret, AWSSecret)

		again := runAgent(t, s, "--", bin, "--version")
		if again.Code != 0 || !versionRE.MatchString(again.Stdout+again.Stderr) || !strings.Contains(again.Stderr, "using learned profile") {
			t.Errorf("jail -- %s --version under the learned profile, without --allow-read: want exit 0, a version and the learned profile named:\n%s", a.Name, again)
		}
	})
}
