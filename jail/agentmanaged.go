package jail

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// An administrator's managed settings sit above every flag jail can pass:
// Claude Code's managed settings, Codex's requirements and managed config.
// When they insist on the agent's own sandbox, that sandbox still cannot
// start inside the jail, and every shell command the agent runs fails
// while the agent carries on. jail reads them (it runs nothing) and
// refuses such a run with the setting to change.

// managedRoot is where the system's managed settings are read from: "/"
// but in tests.
var managedRoot = "/"

// maxManagedFile bounds a managed settings file read.
const maxManagedFile = 1 << 20

// ManagedSandboxRefusal returns why the named agent's managed settings
// keep its own sandbox on, as a one-line error, or nil.
func ManagedSandboxRefusal(agent string) error {
	var file, why string
	switch agent {
	case "claude":
		file, why = claudeManagedSandbox()
	case "codex":
		file, why = codexManagedSandbox()
	}
	if file == "" {
		return nil
	}
	return fmt.Errorf("%s: %s, above the flags jail passes, and that sandbox cannot start inside the jail (no new namespaces there), so every command the agent runs would fail; change it there for jailed runs, or run the agent outside jail", file, why)
}

// claudeManagedDir is Claude Code's managed settings directory on Linux.
const claudeManagedDir = "/etc/claude-code"

// claudeManagedSandbox returns the managed settings file that turns
// Claude Code's sandbox on, and how: managed-settings.json, then the
// drop-ins of managed-settings.d in name order, the last to set
// sandbox.enabled winning, as Claude Code merges them.
func claudeManagedSandbox() (file, why string) {
	dir := filepath.Join(managedRoot, claudeManagedDir)
	files := []string{filepath.Join(dir, "managed-settings.json")}
	drop, _ := filepath.Glob(filepath.Join(dir, "managed-settings.d", "*.json"))
	sort.Strings(drop)
	files = append(files, drop...)
	enabled := false
	for _, f := range files {
		var s struct {
			Sandbox *struct {
				Enabled *bool `json:"enabled"`
			} `json:"sandbox"`
		}
		b, err := ReadBounded(f, maxManagedFile)
		if err != nil || json.Unmarshal(b, &s) != nil || s.Sandbox == nil || s.Sandbox.Enabled == nil {
			continue
		}
		if enabled = *s.Sandbox.Enabled; enabled {
			file = strings.TrimPrefix(f, strings.TrimSuffix(managedRoot, "/"))
		}
	}
	if !enabled {
		return "", ""
	}
	return file, "Claude Code's managed settings turn its own sandbox on (sandbox.enabled true)"
}

// codexManagedDir is where Codex reads its system requirements and
// managed config.
const codexManagedDir = "/etc/codex"

var (
	codexAllowedModesRE = regexp.MustCompile(`(?m)^\s*allowed_sandbox_modes\s*=\s*\[([^\]]*)\]`)
	codexSandboxModeRE  = regexp.MustCompile(`(?m)^\s*sandbox_mode\s*=\s*["']([^"']*)["']`)
)

// codexManagedSandbox returns the Codex file that rules out full access,
// and how: requirements.toml's allowed_sandbox_modes without
// "danger-full-access", or a managed_config.toml sandbox_mode other than
// it.
func codexManagedSandbox() (file, why string) {
	req := filepath.Join(codexManagedDir, "requirements.toml")
	if b, err := ReadBounded(filepath.Join(managedRoot, req), maxManagedFile); err == nil {
		if m := codexAllowedModesRE.FindSubmatch(b); m != nil && !strings.Contains(string(m[1]), "danger-full-access") {
			return req, "Codex's requirements allow only the sandbox modes [" + strings.TrimSpace(string(m[1])) + "]"
		}
	}
	managed := filepath.Join(codexManagedDir, "managed_config.toml")
	if b, err := ReadBounded(filepath.Join(managedRoot, managed), maxManagedFile); err == nil {
		for _, m := range codexSandboxModeRE.FindAllSubmatch(b, -1) {
			if string(m[1]) != "danger-full-access" {
				return managed, fmt.Sprintf("Codex's managed config sets sandbox_mode %q", m[1])
			}
		}
	}
	return "", ""
}
