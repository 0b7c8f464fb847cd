package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentSandboxRows: jail check has a row per agent profile; a user
// profile that replaces the built-in codex one without agentSandbox is
// marked with the fix, one that extends the built-in keeps it.
func TestAgentSandboxRows(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	dir := filepath.Join(home, ".config", "jail", "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("codex", `{"network": {"allow": ["api.openai.com"]}}`)
	write("gemini", `{"extends": ["claude"], "agentSandbox": "gemini"}`)
	rows := map[string]string{}
	oks := map[string]bool{}
	addAgentSandboxes(func(ok, required bool, name, detail string) {
		if required {
			t.Errorf("%s: an agent's sandbox row must not stop the jail from running", name)
		}
		rows[name], oks[name] = detail, ok
	})
	if !oks["claude sandbox"] || !strings.Contains(rows["claude sandbox"], "claude relies on the jail") {
		t.Errorf("claude row: %v %q", oks["claude sandbox"], rows["claude sandbox"])
	}
	if !oks["gemini sandbox"] || !strings.Contains(rows["gemini sandbox"], "GEMINI_SANDBOX=false") {
		t.Errorf("gemini row: %v %q", oks["gemini sandbox"], rows["gemini sandbox"])
	}
	want := filepath.Join(dir, "codex.json") + ` does not turn codex's own sandbox off, which cannot start inside the jail; fix: add "agentSandbox": "codex" to it`
	if oks["codex sandbox"] || rows["codex sandbox"] != want {
		t.Errorf("codex row: %v %q, want the fix %q", oks["codex sandbox"], rows["codex sandbox"], want)
	}
	write("codex", `{"extends": ["git"]}`)
	write("git", `{"agentSandbox": "codex"}`)
	addAgentSandboxes(func(ok, _ bool, name, detail string) { rows[name], oks[name] = detail, ok })
	if !oks["codex sandbox"] {
		t.Errorf("a codex profile extending one with agentSandbox codex: %q", rows["codex sandbox"])
	}
}
