package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// agent is one real agent CLI from the npm registry and the built-in
// profile named after its command.
type agent struct {
	Name    string   // the command, and the profile it picks
	Package string   // npm package
	Help    string   // printed by --help
	Dirs    []string // the profile's allowWrite directories, relative to ~
}

var agents = []agent{
	{Name: "claude", Package: "@anthropic-ai/claude-code", Help: "Usage: claude", Dirs: []string{".claude"}},
	{Name: "codex", Package: "@openai/codex", Help: "Usage: codex", Dirs: []string{".codex"}},
	{Name: "gemini", Package: "@google/gemini-cli", Help: "Usage: gemini", Dirs: []string{".gemini"}},
	{Name: "opencode", Package: "opencode-ai", Help: "opencode [project]",
		Dirs: []string{".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode"}},
	{Name: "amp", Package: "@sourcegraph/amp", Help: "Usage: amp", Dirs: []string{".config/amp", ".local/share/amp", ".cache/amp"}},
	{Name: "copilot", Package: "@github/copilot", Help: "Usage: copilot", Dirs: []string{".copilot"}},
	{Name: "pi", Package: "@mariozechner/pi-coding-agent", Help: "pi - AI coding assistant", Dirs: []string{".pi"}},
}

// agentRunTimeout bounds every jailed run of an agent.
const agentRunTimeout = 90 * time.Second

// versionRE is what a --version prints: a dotted version number.
var versionRE = regexp.MustCompile(`\b\d+\.\d+\.\d+\b`)

// agentsCache is where the agents are installed and kept between runs.
func agentsCache(t *testing.T) string { return testCache(t, "agents") }

var (
	agentsOnce sync.Once
	agentsErr  error
)

// installedAgents installs every agent's package into agentsCache with one
// npm install (skipped when all their commands are there) and returns the
// cache directory, which the jail must be allowed to read.
func installedAgents(t *testing.T) string {
	t.Helper()
	dir := agentsCache(t)
	agentsOnce.Do(func() { agentsErr = installAgents(dir) })
	if agentsErr != nil {
		t.Fatalf("installing the agent CLIs from the npm registry into %s: %v", dir, agentsErr)
	}
	return dir
}

// agentBin is the command npm put in node_modules/.bin for a.
func agentBin(dir string, a agent) string {
	return filepath.Join(dir, "node_modules/.bin", a.Name)
}

func missingAgents(dir string) []string {
	var missing []string
	for _, a := range agents {
		if fi, err := os.Stat(agentBin(dir, a)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, a.Package)
		}
	}
	return missing
}

func installAgents(dir string) error {
	if len(missingAgents(dir)) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	os.Chmod(filepath.Dir(dir), 0o755)
	// Installed beside the cache and renamed into place: a run interrupted
	// half way never leaves a partial install that looks complete.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "agents-install-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755)
	args := []string{"install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error"}
	for _, a := range agents {
		args = append(args, a.Package)
	}
	cmd := exec.Command(sandboxLookPath("npm"), args...)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	cmd.Dir = tmp
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("npm %s did not finish in 10 minutes:\n%s", strings.Join(args, " "), out)
	}
	if err != nil {
		return fmt.Errorf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if m := missingAgents(tmp); len(m) > 0 {
		return fmt.Errorf("npm install left no command for %v in %s/node_modules/.bin:\n%s", m, tmp, out)
	}
	return swapInto(tmp, dir)
}

// forEachAgent runs f, in parallel, for every agent CLI and every runner,
// each with a fresh sandbox; cache is the agents' install (installedAgents).
func forEachAgent(t *testing.T, f func(t *testing.T, s *Sandbox, a agent, cache string)) {
	t.Parallel()
	cache := installedAgents(t)
	for _, a := range agents {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			forEachRunner(t, func(t *testing.T, s *Sandbox) {
				t.Parallel()
				f(t, s, a, cache)
			})
		})
	}
}

// runAgent runs jail ARGS with a timeout; a run that times out fails the
// test.
func runAgent(t *testing.T, s *Sandbox, args ...string) Result {
	t.Helper()
	r, timedOut := jailTimeout(t, s.JailCmd(args...), "", agentRunTimeout)
	if timedOut {
		t.Fatalf("jail %s: timed out after %v:\n%s", strings.Join(args, " "), agentRunTimeout, r)
	}
	return r
}

// planHas reports whether a `jail plan` output has a line with the given
// fields (whitespace between them ignored, a trailing # comment allowed).
func planHas(plan string, fields ...string) bool {
	for _, line := range strings.Split(plan, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// profileDirs makes sure each of a's writable directories is bound into the
// jail. jail either binds a missing allowWrite directory itself (creating
// it at start) or skips it; in the second case the test creates it in the
// sandbox home, as a user who used the agent before would have it. It
// returns the directories' host paths.
func profileDirs(t *testing.T, s *Sandbox, a agent) []string {
	t.Helper()
	plan := func() string {
		r := runAgent(t, s, "plan", "--profile", a.Name, "--", "sh", "-c", "true")
		if r.Code != 0 {
			t.Fatalf("jail plan --profile %s: %s", a.Name, r)
		}
		return r.Stdout
	}
	var dirs []string
	p := plan()
	if !planHas(p, "profiles", a.Name) {
		t.Fatalf("jail plan --profile %s -- sh: no `profiles %s` line:\n%s", a.Name, a.Name, p)
	}
	created := false
	for _, d := range a.Dirs {
		host := filepath.Join(s.Home, d)
		dirs = append(dirs, host)
		if _, err := os.Stat(host); err == nil {
			t.Fatalf("control: %s exists in the fresh sandbox home", host)
		}
		if planHas(p, "bind", host) {
			t.Logf("%s: jail binds the missing ~/%s itself (created: %v)", a.Name, d, planHas(p, "creates", host, "(allowWrite, missing)"))
			continue
		}
		t.Logf("%s: jail skips the missing ~/%s; the test creates it", a.Name, d)
		if err := os.MkdirAll(host, 0o700); err != nil {
			t.Fatal(err)
		}
		s.chownUp(host)
		created = true
	}
	if created {
		p = plan()
	}
	for _, host := range dirs {
		if !planHas(p, "bind", host) {
			t.Fatalf("jail plan --profile %s: %s is not bound writable:\n%s", a.Name, host, p)
		}
	}
	return dirs
}
