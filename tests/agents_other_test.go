package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// otherAgent is an agent CLI with a built-in profile that no npm package
// installs: the test runs it when the machine has it.
type otherAgent struct {
	Name    string // the command, and the profile it picks
	Install string // how a user installs it
}

var otherAgents = []otherAgent{
	{Name: "aider", Install: "pipx install aider-chat (or uv tool install aider-chat)"},
	{Name: "goose", Install: "the download_cli.sh script of github.com/block/goose's stable release"},
	{Name: "cursor-agent", Install: "the install script at cursor.com/install"},
}

// TestAgentsOtherVersion: `jail -- <agent> --version` exits 0 with a
// version under the profile named after the command, for each agent
// installed outside the npm registry. The command is looked up on the
// host's PATH; the directories it lives in (as named and as resolved) are
// allowed to be read. Without the command there is nothing to run: the
// test says so and how to install it.
func TestAgentsOtherVersion(t *testing.T) {
	t.Parallel()
	for _, a := range otherAgents {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			bin, err := exec.LookPath(a.Name)
			if err != nil {
				t.Skipf("%s is not installed on this machine (not on PATH); install it with %s", a.Name, a.Install)
			}
			real, err := filepath.EvalSymlinks(bin)
			if err != nil {
				t.Fatalf("resolving %s: %v", bin, err)
			}
			forEachRunner(t, func(t *testing.T, s *Sandbox) {
				t.Parallel()
				args := []string{"--allow-read", filepath.Dir(bin), "--allow-read", filepath.Dir(filepath.Dir(real)), "--", bin}
				plan := runAgent(t, s, append([]string{"plan"}, args...)...)
				if plan.Code != 0 || !planHas(plan.Stdout, "profiles", a.Name) {
					t.Fatalf("jail plan -- %s: want the %s profile picked from the command's name:\n%s", bin, a.Name, plan)
				}
				v := runAgent(t, s, append(args, "--version")...)
				if v.Code != 0 || !versionRE.MatchString(v.Stdout+v.Stderr) {
					t.Errorf("jail -- %s --version: want exit 0 and a version:\n%s", a.Name, v)
				}
				if strings.Contains(v.Stdout+v.Stderr, SSHKeySecret) {
					t.Errorf("%s printed the host's SSH key", a.Name)
				}
				t.Logf("%s --version in the jail: %s", a.Name, strings.TrimSpace(v.Stdout+v.Stderr))
			})
		})
	}
}
