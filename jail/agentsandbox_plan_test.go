package jail

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlanAgentSandbox: every agent of the policy gets its line; Gemini's
// variable is among jail's own, which env.set cannot undo, even with no
// network (no jail variables before).
func TestPlanAgentSandbox(t *testing.T) {
	p := &Plan{Argv: []string{"gemini", "-p", "hi"}}
	claudeLine := "claude: not run as the command itself; a claude started inside with sandbox.enabled set runs its Bash commands into a sandbox that cannot start in the jail (run jail -- claude ...)"
	pol := &Policy{AgentSandbox: []string{"claude", "gemini"}}
	vars, err := planAgentSandbox(p, pol, nil)
	if err != nil || vars["GEMINI_SANDBOX"] != "false" {
		t.Fatalf("vars %v, err %v", vars, err)
	}
	if len(p.AgentSandbox) != 2 || p.AgentSandbox[0] != claudeLine || p.AgentSandbox[1] != geminiSummary {
		t.Errorf("lines %q", p.AgentSandbox)
	}
	if !slices.Equal(p.Argv, []string{"gemini", "-p", "hi"}) {
		t.Errorf("gemini's command line changed: %q", p.Argv)
	}
	if _, err := planAgentSandbox(p, &Policy{AgentSandbox: []string{"nope"}}, nil); err == nil {
		t.Error("an unknown agent is accepted")
	}
}

// TestManagedSandboxRefused: managed settings that keep an agent's own
// sandbox on, above every flag jail passes, refuse the run with the file
// and the setting; settings that leave it off, or say nothing, do not.
func TestManagedSandboxRefused(t *testing.T) {
	write := func(t *testing.T, root, rel, body string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		agent, name string
		files       map[string]string
		want        string // "" for no refusal
	}{
		{"claude", "none", nil, ""},
		{"claude", "on", map[string]string{"etc/claude-code/managed-settings.json": `{"sandbox":{"enabled":true}}`}, "/etc/claude-code/managed-settings.json: Claude Code's managed settings turn its own sandbox on"},
		{"claude", "off", map[string]string{"etc/claude-code/managed-settings.json": `{"sandbox":{"enabled":false}}`}, ""},
		{"claude", "drop-in on", map[string]string{"etc/claude-code/managed-settings.json": `{"sandbox":{"enabled":false}}`, "etc/claude-code/managed-settings.d/50-sandbox.json": `{"sandbox":{"enabled":true}}`}, "managed-settings.d/50-sandbox.json"},
		{"claude", "drop-in off last", map[string]string{"etc/claude-code/managed-settings.d/10.json": `{"sandbox":{"enabled":true}}`, "etc/claude-code/managed-settings.d/20.json": `{"sandbox":{"enabled":false}}`}, ""},
		{"codex", "none", nil, ""},
		{"codex", "requirements", map[string]string{"etc/codex/requirements.toml": "allowed_sandbox_modes = [\"read-only\", \"workspace-write\"]\n"}, "/etc/codex/requirements.toml: Codex's requirements allow only the sandbox modes"},
		{"codex", "requirements allow it", map[string]string{"etc/codex/requirements.toml": "allowed_sandbox_modes = [\"read-only\", \"danger-full-access\"]\n"}, ""},
		{"codex", "managed", map[string]string{"etc/codex/managed_config.toml": "sandbox_mode = 'workspace-write'\n"}, `/etc/codex/managed_config.toml: Codex's managed config sets sandbox_mode "workspace-write"`},
		{"codex", "managed full", map[string]string{"etc/codex/managed_config.toml": "sandbox_mode = \"danger-full-access\"\n"}, ""},
	} {
		t.Run(tt.agent+" "+tt.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, body := range tt.files {
				write(t, root, rel, body)
			}
			old := managedRoot
			managedRoot = root
			defer func() { managedRoot = old }()
			p := &Plan{Argv: []string{tt.agent, "exec"}}
			_, err := planAgentSandbox(p, &Policy{AgentSandbox: []string{tt.agent}}, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "change it there")):
				t.Errorf("got %v, want a refusal naming %q and the fix", err, tt.want)
			}
		})
	}
}
