package jail

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// An agent's own sandbox (bubblewrap, Landlock or a container) needs new
// namespaces, which the jail forbids so that nothing inside can build a
// view of the system the jail did not plan. Left on, it fails inside: Codex
// and Claude Code run every shell command into "No permissions to create
// new namespace" and still exit 0. An agent profile's agentSandbox key names the agent
// whose sandbox jail turns off through the agent's own configuration, so
// that the agent relies on the jail, and says so in jail plan and check.

// agentSandboxes are the agents agentSandbox may name, with what jail does
// about each one's sandbox.
var agentSandboxes = map[string]agentSandboxer{
	"codex":   {summary: codexSummary, plan: planCodexSandbox},
	"gemini":  {summary: geminiSummary, plan: planGeminiSandbox},
	"claude":  {summary: claudeSummary, plan: planClaudeSandbox},
	"copilot": {summary: copilotSummary, plan: planCopilotSandbox},
}

const (
	codexSummary   = "codex relies on the jail (sandbox_mode=danger-full-access)"
	geminiSummary  = "gemini relies on the jail (GEMINI_SANDBOX=false)"
	claudeSummary  = "claude relies on the jail (--settings sandbox.enabled=false)"
	copilotSummary = "copilot relies on the jail (--no-sandbox)"
)

// agentSandboxer is one agent's handling: a summary for jail check, and
// plan, which rewrites the command line and adds variables for it.
type agentSandboxer struct {
	summary string
	plan    func(argv []string, vars map[string]string) ([]string, string, error)
}

// AgentSandboxNames lists the agents agentSandbox may name, sorted.
func AgentSandboxNames() []string { return SortedKeys(agentSandboxes) }

// AgentSandboxSummary says what jail does about the named agent's own
// sandbox ("" for an agent it does not know).
func AgentSandboxSummary(name string) string { return agentSandboxes[name].summary }

// AgentIndex is the index in argv of the agent's own program: argv[0]
// named prog, or the package an npx, bunx or pnpx line runs; -1 when the
// command runs the agent some other way.
func AgentIndex(argv []string, prog, pkg string) int {
	if len(argv) == 0 {
		return -1
	}
	switch filepath.Base(argv[0]) {
	case prog:
		return 0
	case "npx", "bunx", "pnpx":
		for i, a := range argv[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			if j := strings.LastIndexByte(a, '@'); j > 0 {
				a = a[:j]
			}
			if a == pkg {
				return i + 1
			}
			return -1
		}
	}
	return -1
}

// codexFullAccess is the -c override that turns Codex's sandbox off: the
// session flags layer sits above Codex's user and profile config files.
const codexFullAccess = `sandbox_mode="danger-full-access"`

// planCodexSandbox passes -c sandbox_mode="danger-full-access" right after
// the codex program, where every subcommand reads it, and refuses flags
// that would ask for Codex's own sandbox again.
func planCodexSandbox(argv []string, _ map[string]string) ([]string, string, error) {
	i := AgentIndex(argv, "codex", "@openai/codex")
	if i < 0 {
		return argv, "codex: not run as the command itself; a codex started inside uses its own sandbox, which cannot start in the jail (run jail -- codex ...)", nil
	}
	if bad := codexSandboxFlag(argv[i+1:]); bad != "" {
		return nil, "", fmt.Errorf("codex %s asks for Codex's own sandbox, which cannot start inside the jail (no new namespaces there); drop %s: the jail is the sandbox", bad, bad)
	}
	out := append(append(append([]string{}, argv[:i+1]...), "-c", codexFullAccess), argv[i+1:]...)
	return out, codexSummary, nil
}

// codexSandboxFlag returns the first argument that selects a Codex sandbox
// other than full access ("" when none does): -s/--sandbox, --full-auto,
// or a -c/--config sandbox_mode override. Arguments after "--" are the
// prompt's.
func codexSandboxFlag(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch {
		case a == "--":
			return ""
		case a == "--full-auto":
			return a
		case a == "-s" || a == "--sandbox":
			if next != "danger-full-access" {
				return a + " " + next
			}
			i++
		case strings.HasPrefix(a, "--sandbox="), strings.HasPrefix(a, "-s") && len(a) > 2 && a[2] != '-':
			v := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(a, "--sandbox="), "-s"), "=")
			if v != "danger-full-access" {
				return a
			}
		case a == "-c" || a == "--config":
			if codexSandboxOverride(next) {
				return a + " " + next
			}
			i++
		case strings.HasPrefix(a, "--config="):
			if codexSandboxOverride(strings.TrimPrefix(a, "--config=")) {
				return a
			}
		}
	}
	return ""
}

// codexSandboxOverride reports whether a -c KEY=VALUE sets sandbox_mode (at
// the top or in a profile) to anything but full access.
func codexSandboxOverride(kv string) bool {
	k, v, _ := strings.Cut(kv, "=")
	k = strings.TrimSpace(k)
	if k != "sandbox_mode" && !strings.HasSuffix(k, ".sandbox_mode") {
		return false
	}
	return strings.Trim(strings.TrimSpace(v), `"'`) != "danger-full-access"
}

// planGeminiSandbox sets GEMINI_SANDBOX=false, which Gemini CLI reads over
// its settings' tools.sandbox, so no container or sandbox-exec is
// attempted. Its --sandbox flag would set the variable back to true: a
// command line with it is refused.
func planGeminiSandbox(argv []string, vars map[string]string) ([]string, string, error) {
	if i := AgentIndex(argv, "gemini", "@google/gemini-cli"); i >= 0 {
		for _, a := range argv[i+1:] {
			if a == "--" {
				break
			}
			if a == "-s" || a == "--sandbox" || strings.HasPrefix(a, "--sandbox=") && a != "--sandbox=false" {
				return nil, "", fmt.Errorf("gemini %s asks for Gemini CLI's own sandbox, which cannot start inside the jail (no new namespaces or containers there); drop %s: the jail is the sandbox", a, a)
			}
		}
	}
	vars["GEMINI_SANDBOX"] = "false"
	return argv, geminiSummary, nil
}

// claudeSandboxOff is the --settings value that turns Claude Code's sandbox
// off: command-line settings sit above the user's, the project's and the
// local settings files (only managed settings are above them).
const claudeSandboxOff = `{"sandbox":{"enabled":false}}`

// planClaudeSandbox passes --settings with sandbox.enabled false right
// after the claude program. Claude Code checks only that bwrap and socat
// are installed, so a sandbox.enabled setting would otherwise send every
// Bash command into a bubblewrap that cannot start. A --settings of the
// user's own would replace jail's: it is left alone, and the plan says so.
func planClaudeSandbox(argv []string, _ map[string]string) ([]string, string, error) {
	i := AgentIndex(argv, "claude", "@anthropic-ai/claude-code")
	if i < 0 {
		return argv, "claude: not run as the command itself; a claude started inside with sandbox.enabled set runs its Bash commands into a sandbox that cannot start in the jail (run jail -- claude ...)", nil
	}
	for _, a := range argv[i+1:] {
		if a == "--" {
			break
		}
		if a == "--settings" || strings.HasPrefix(a, "--settings=") {
			return argv, "claude: --settings on the command line replaces the one jail passes; keep sandbox.enabled false in it: Claude Code's sandbox cannot start in the jail", nil
		}
	}
	out := append(append(append([]string{}, argv[:i+1]...), "--settings", claudeSandboxOff), argv[i+1:]...)
	return out, claudeSummary, nil
}

// planCopilotSandbox passes --no-sandbox right after the copilot program:
// Copilot CLI's sandbox (its --sandbox flag or sandbox.enabled setting)
// runs each shell command in a bubblewrap that cannot start in the jail.
// A --sandbox of the command line is refused.
func planCopilotSandbox(argv []string, _ map[string]string) ([]string, string, error) {
	i := AgentIndex(argv, "copilot", "@github/copilot")
	if i < 0 {
		return argv, "copilot: not run as the command itself; a copilot started inside with its sandbox on runs its shell commands into a sandbox that cannot start in the jail (run jail -- copilot ...)", nil
	}
	for _, a := range argv[i+1:] {
		if a == "--" {
			break
		}
		if a == "--sandbox" || strings.HasPrefix(a, "--sandbox=") {
			return nil, "", fmt.Errorf("copilot %s asks for Copilot CLI's own sandbox, which cannot start inside the jail (no new namespaces there); drop %s: the jail is the sandbox", a, a)
		}
	}
	out := append(append(append([]string{}, argv[:i+1]...), "--no-sandbox"), argv[i+1:]...)
	return out, copilotSummary, nil
}

// sortedAgentSandbox is the union of the layers' agentSandbox names.
func sortedAgentSandbox(have []string, name string) []string {
	if name == "" {
		return have
	}
	out := Union(have, []string{name})
	sort.Strings(out)
	return out
}

// ApplyAgentSandboxes applies each agentSandbox of the policy to a command
// line: it may gain the agent's own flags, jailVars (returned, made when
// nil) the agent's variables (set after env.set, so a layer cannot undo
// them), and lines says what each did, for jail plan. A command line that
// asks the agent for its own sandbox is refused: it could not start.
func ApplyAgentSandboxes(pol *Policy, argv []string, jailVars map[string]string) (out, lines []string, vars map[string]string, err error) {
	if jailVars == nil {
		jailVars = map[string]string{}
	}
	for _, name := range pol.AgentSandbox {
		a, ok := agentSandboxes[name]
		if !ok {
			return nil, nil, nil, fmt.Errorf("agentSandbox %q is not an agent jail knows; use one of %s", name, strings.Join(AgentSandboxNames(), ", "))
		}
		if err := ManagedSandboxRefusal(name); err != nil {
			return nil, nil, nil, err
		}
		var line string
		argv, line, err = a.plan(argv, jailVars)
		if err != nil {
			return nil, nil, nil, err
		}
		lines = append(lines, line)
	}
	return argv, lines, jailVars, nil
}
