package jail

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlanCodexSandbox: the override goes right after the codex program,
// however it is started, and a command line asking for Codex's own sandbox
// is refused with the flag to drop.
func TestPlanCodexSandbox(t *testing.T) {
	for _, tt := range []struct {
		argv, want []string
	}{
		{[]string{"codex", "exec", "hi"}, []string{"codex", "-c", codexFullAccess, "exec", "hi"}},
		{[]string{"/usr/local/bin/codex"}, []string{"/usr/local/bin/codex", "-c", codexFullAccess}},
		{[]string{"npx", "-y", "@openai/codex@0.171.0", "exec", "x"}, []string{"npx", "-y", "@openai/codex@0.171.0", "-c", codexFullAccess, "exec", "x"}},
		{[]string{"codex", "exec", "-s", "danger-full-access", "--", "--full-auto"}, []string{"codex", "-c", codexFullAccess, "exec", "-s", "danger-full-access", "--", "--full-auto"}},
		{[]string{"codex", "-c", "model=o3", "exec"}, []string{"codex", "-c", codexFullAccess, "-c", "model=o3", "exec"}},
	} {
		got, line, err := planCodexSandbox(tt.argv, nil)
		if err != nil || !slices.Equal(got, tt.want) || line != codexSummary {
			t.Errorf("planCodexSandbox(%q) = %q, %q, %v; want %q", tt.argv, got, line, err, tt.want)
		}
	}
	for _, argv := range [][]string{
		{"codex", "exec", "--full-auto", "x"},
		{"codex", "-s", "workspace-write", "exec"},
		{"codex", "exec", "--sandbox=read-only"},
		{"codex", "exec", "-sworkspace-write"},
		{"codex", "-c", `sandbox_mode="workspace-write"`, "exec"},
		{"codex", "--config", "profiles.fast.sandbox_mode='read-only'"},
		{"codex", "--config=sandbox_mode=workspace-write"},
	} {
		_, _, err := planCodexSandbox(argv, nil)
		if err == nil || !strings.Contains(err.Error(), "cannot start inside the jail") || !strings.Contains(err.Error(), "; drop ") {
			t.Errorf("planCodexSandbox(%q) = %v, want a refusal with the fix", argv, err)
		}
	}
	got, line, err := planCodexSandbox([]string{"bash", "-c", "codex exec hi"}, nil)
	if err != nil || !slices.Equal(got, []string{"bash", "-c", "codex exec hi"}) || !strings.Contains(line, "run jail -- codex") {
		t.Errorf("codex run by a shell: %q %q %v; want the command unchanged and a line saying so", got, line, err)
	}
}

// TestPlanClaudeSandbox: --settings turning the sandbox off goes right
// after the claude program; a --settings of the user's is left alone and
// the line says what to keep in it.
func TestPlanClaudeSandbox(t *testing.T) {
	got, line, err := planClaudeSandbox([]string{"/opt/bin/claude", "-p", "hi"}, nil)
	if err != nil || !slices.Equal(got, []string{"/opt/bin/claude", "--settings", claudeSandboxOff, "-p", "hi"}) || line != claudeSummary {
		t.Errorf("claude -p hi: %q %q %v", got, line, err)
	}
	got, _, _ = planClaudeSandbox([]string{"npx", "@anthropic-ai/claude-code", "-p", "hi"}, nil)
	if !slices.Equal(got, []string{"npx", "@anthropic-ai/claude-code", "--settings", claudeSandboxOff, "-p", "hi"}) {
		t.Errorf("npx claude: %q", got)
	}
	for _, argv := range [][]string{{"claude", "--settings", "s.json", "-p", "x"}, {"claude", "--settings={}"}} {
		got, line, _ = planClaudeSandbox(argv, nil)
		if !slices.Equal(got, argv) || !strings.Contains(line, "keep sandbox.enabled false") {
			t.Errorf("%q: %q %q", argv, got, line)
		}
	}
}

// TestPlanGeminiSandbox: Gemini's --sandbox flag, which would set the
// variable back, is refused with the fix; its prompt after -- is not.
func TestPlanGeminiSandbox(t *testing.T) {
	for _, argv := range [][]string{{"gemini", "-s", "-p", "x"}, {"gemini", "--sandbox"}, {"npx", "@google/gemini-cli", "--sandbox=docker"}} {
		_, _, err := planGeminiSandbox(argv, map[string]string{})
		if err == nil || !strings.Contains(err.Error(), "cannot start inside the jail") || !strings.Contains(err.Error(), "; drop ") {
			t.Errorf("%q: %v, want a refusal with the fix", argv, err)
		}
	}
	vars := map[string]string{}
	if _, _, err := planGeminiSandbox([]string{"gemini", "-p", "x", "--", "-s"}, vars); err != nil || vars["GEMINI_SANDBOX"] != "false" {
		t.Errorf("gemini -p x -- -s: %v %v", err, vars)
	}
}

// TestAgentSandboxKey: the key takes a known agent only, and layers merge
// into a sorted union.
func TestAgentSandboxKey(t *testing.T) {
	if _, err := ParseConfig([]byte(`{"agentSandbox": "docker"}`), "jail.json"); err == nil || !strings.Contains(err.Error(), `"agentSandbox" must be one of claude, codex, copilot, gemini, got "docker"`) {
		t.Errorf("unknown agent: %v", err)
	}
	c, err := ParseConfig([]byte(`{"agentSandbox": "codex"}`), "jail.json")
	if err != nil || c.AgentSandbox != "codex" {
		t.Fatalf("%+v %v", c, err)
	}
	pol, err := Resolve([]*Config{{AgentSandbox: "gemini"}, c, {AgentSandbox: "codex"}}, "/p", "/h", Options{})
	if err != nil || !slices.Equal(pol.AgentSandbox, []string{"codex", "gemini"}) {
		t.Errorf("merged %q %v", pol.AgentSandbox, err)
	}
}

// TestPlanCopilotSandbox: --no-sandbox goes right after the copilot
// program; a --sandbox of the command line is refused with the fix.
func TestPlanCopilotSandbox(t *testing.T) {
	got, line, err := planCopilotSandbox([]string{"copilot", "-p", "hi"}, nil)
	if err != nil || !slices.Equal(got, []string{"copilot", "--no-sandbox", "-p", "hi"}) || line != copilotSummary {
		t.Errorf("planCopilotSandbox = %q, %q, %v", got, line, err)
	}
	for _, argv := range [][]string{{"copilot", "--sandbox", "-p", "x"}, {"copilot", "--sandbox=true"}} {
		if _, _, err := planCopilotSandbox(argv, nil); err == nil || !strings.Contains(err.Error(), "; drop --sandbox") {
			t.Errorf("planCopilotSandbox(%q) = %v, want a refusal with the fix", argv, err)
		}
	}
}

// TestApplyAgentSandboxes: every agent of the policy gets its line; Gemini's
// variable is among jail's own, which env.set cannot undo, even with no
// network (no jail variables before).
func TestApplyAgentSandboxes(t *testing.T) {
	claudeLine := "claude: not run as the command itself; a claude started inside with sandbox.enabled set runs its Bash commands into a sandbox that cannot start in the jail (run jail -- claude ...)"
	pol := &Policy{AgentSandbox: []string{"claude", "gemini"}}
	argv, lines, vars, err := ApplyAgentSandboxes(pol, []string{"gemini", "-p", "hi"}, nil)
	if err != nil || vars["GEMINI_SANDBOX"] != "false" {
		t.Fatalf("vars %v, err %v", vars, err)
	}
	if len(lines) != 2 || lines[0] != claudeLine || lines[1] != geminiSummary {
		t.Errorf("lines %q", lines)
	}
	if !slices.Equal(argv, []string{"gemini", "-p", "hi"}) {
		t.Errorf("gemini's command line changed: %q", argv)
	}
	if _, _, _, err := ApplyAgentSandboxes(&Policy{AgentSandbox: []string{"nope"}}, argv, nil); err == nil {
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
			_, _, _, err := ApplyAgentSandboxes(&Policy{AgentSandbox: []string{tt.agent}}, []string{tt.agent, "exec"}, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "change it there")):
				t.Errorf("got %v, want a refusal naming %q and the fix", err, tt.want)
			}
		})
	}
}
