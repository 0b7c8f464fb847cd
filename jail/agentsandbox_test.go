package jail

import (
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
