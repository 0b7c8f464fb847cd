package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The real agent CLIs (Claude Code, Codex, Gemini CLI, OpenCode), installed
// from the npm registry and cached between runs, run in the jail with the
// profile named after their command and the deny-by-default filesystem.

// 1. `jail -- <agent> --version` and `--help` exit 0 with the automatic
// profile. The agents live outside the home, so the cache is allowed to
// be read; the network is whatever the profile allows (no agent needs it
// to answer --version or --help).
func TestAgentsVersionAndHelp(t *testing.T) {
	forEachAgent(t, func(t *testing.T, s *Sandbox, a agent, cache string) {
		bin := agentBin(cache, a)
		plan := runAgent(t, s, "plan", "--allow-read", cache, "--", bin)
		if plan.Code != 0 || !planHas(plan.Stdout, "profiles", a.Name) {
			t.Fatalf("jail plan --allow-read %s -- %s: want the %s profile picked from the command's name (`profiles %s`):\n%s", cache, bin, a.Name, a.Name, plan)
		}
		v := runAgent(t, s, "--allow-read", cache, "--", bin, "--version")
		if v.Code != 0 || !versionRE.MatchString(v.Stdout+v.Stderr) { // pi prints it on stderr when stdin is no terminal
			t.Errorf("jail -- %s --version: want exit 0 and a version:\n%s", a.Name, v)
		} else {
			t.Logf("%s --version in the jail: %s (%v)", a.Name, strings.TrimSpace(v.Stdout), v.Took.Round(1e6))
		}
		h := runAgent(t, s, "--allow-read", cache, "--", bin, "--help")
		if h.Code != 0 || !strings.Contains(h.Stdout+h.Stderr, a.Help) { // opencode prints its help on stderr
			t.Errorf("jail -- %s --help: want exit 0 and %q printed (stdout or stderr):\n%s", a.Name, a.Help, h)
		}
		if strings.Contains(v.Stdout+v.Stderr+h.Stdout+h.Stderr, SSHKeySecret) {
			t.Errorf("%s printed the host's SSH key", a.Name)
		}
	})
}

// 2. Each agent's config directory persists between two runs under its
// profile, on the host; the rest of the home is throwaway; and the agent's
// shell tool (a shell under the agent's profile) cannot read ~/.ssh.
func TestAgentsConfigPersistsSSHUnreadable(t *testing.T) {
	forEachAgent(t, func(t *testing.T, s *Sandbox, a agent, _ string) {
		dirs := profileDirs(t, s, a)
		marker := "jail-test-marker-" + a.Name
		var write, read []string
		for _, d := range dirs {
			write = append(write, "echo "+marker+" > "+d+"/jail-test-marker")
			read = append(read, "cat "+d+"/jail-test-marker")
		}
		write = append(write, "echo outside > ~/jail-test-outside")
		r := runAgent(t, s, "--profile", a.Name, "--", "sh", "-c", "set -e; "+strings.Join(write, "; "))
		if r.Code != 0 {
			t.Fatalf("first run, writing a marker into %v: want exit 0:\n%s", a.Dirs, r)
		}
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, "jail-test-marker")); err != nil || strings.TrimSpace(string(b)) != marker {
				t.Errorf("after the first run the host's %s/jail-test-marker holds %q (%v), want %q", d, b, err, marker)
			}
		}
		if _, err := os.Stat(filepath.Join(s.Home, "jail-test-outside")); err == nil {
			t.Errorf("~/jail-test-outside, outside the profile's directories, reached the host home")
		}
		r = runAgent(t, s, "--profile", a.Name, "--", "sh", "-c", "set -e; "+strings.Join(read, "; "))
		if r.Code != 0 || strings.Count(r.Stdout, marker) != len(dirs) {
			t.Errorf("second run, reading the markers back from %v: want exit 0 and %q %d times:\n%s", a.Dirs, marker, len(dirs), r)
		}

		// The agent's shell tool: a shell under the agent's profile.
		key := filepath.Join(s.Home, ".ssh/id_ed25519")
		if b, err := os.ReadFile(key); err != nil || !strings.Contains(string(b), SSHKeySecret) {
			t.Fatalf("control: the host key %s is not there (%v)", key, err)
		}
		r = runAgent(t, s, "--profile", a.Name, "--", "sh", "-c", "cat ~/.ssh/id_ed25519; cat "+key+"; cat ~/.ssh/id_rsa; ls -la ~/.ssh")
		if r.Code == 0 || strings.Contains(r.Stdout+r.Stderr, SSHKeySecret) {
			t.Errorf("under the %s profile the shell read ~/.ssh (want a failure and no key):\n%s", a.Name, r)
		}
	})
}
