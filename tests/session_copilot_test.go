package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A real GitHub Copilot CLI session (@github/copilot) in the jail, against
// local TLS mocks of the GitHub API and the Copilot API. The CLI's HTTP
// client lives in its native runtime (prebuilds/linux-x64/runtime.node,
// which the package's copilot binary unpacks into ~/.cache/copilot/pkg);
// what it sends was learned from that runtime's strings and its debug log
// (--log-level debug), one request at a time:
//   - GET api.github.com/copilot_internal/user with "Bearer <token>" (the
//     token from COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN, as the
//     CLI's cli-main.js lists them): the user, its plan and endpoints.api,
//     the Copilot API's base URL; no token exchange follows, the GitHub
//     token itself is the Copilot API's bearer;
//   - GET api.githubcopilot.com/models: the catalog; a model's
//     supported_endpoints picks its wire: "/v1/messages" is the Anthropic
//     Messages API, streamed, with the CLI's tools (the shell one is
//     "bash", with "command" and "description" required);
//   - POST telemetry.individual.githubcopilot.com/telemetry (endpoints
//     .telemetry), and side calls (managed settings, team customizations,
//     the CLI's release list) that may fail.
// Flags for an unattended run: -p (one prompt, then exit),
// --allow-all-tools (no confirmation; required with -p), --allow-all-paths
// (the CLI's own path check off, so that the jail is what refuses a
// path), --model (an explicit model instead of Auto), -s (the answer
// only), --disable-builtin-mcps (no GitHub MCP server).

// The hosts the CLI dials in a session.
const (
	githubAPIHost  = "api.github.com"
	copilotAPIHost = "api.githubcopilot.com"
	copilotTelHost = "telemetry.individual.githubcopilot.com"
)

var copilotHosts = []string{githubAPIHost, copilotAPIHost, copilotTelHost}

// copilotPKI is a CA and a leaf for copilotHosts.
var copilotPKI = &lazyPKI{what: "Copilot mock PKI", caName: "jail copilot session tests CA", names: copilotHosts}

// copilotToken is the real GitHub token the session hands to jail.
const copilotToken = "gho_copilotSession0123456789abcdefABCDEF"

// copilotModel is the catalog's one model, on the Messages API wire.
const copilotModel = "claude-sonnet-4.5"

func copilotArgs(bin string) []string {
	return []string{bin, "-p", "write the proof", "--model", copilotModel, "--allow-all-tools", "--allow-all-paths", "-s", "--disable-builtin-mcps"}
}

// copilotMock answers the three hosts, only for "Bearer <token>"; any
// other credential gets GitHub's 401 ("Bad credentials") on the GitHub
// API and the Messages API's 401 on the Copilot API.
func copilotMock(token string, results *reqLog[string]) func(w http.ResponseWriter, r *http.Request, body []byte) {
	// The CLI writes the scheme as "Bearer", "bearer" or "token".
	authorized := func(r *http.Request) bool {
		a := r.Header.Get("Authorization")
		return strings.EqualFold(a, "bearer "+token) || a == "token "+token
	}
	messages := toolTurnsMock(authorized, "bash", map[string]string{"command": sessionProofCmd, "description": "write the proof"}, results)
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Host == copilotTelHost:
			w.Write([]byte(`{}`))
		case r.Host == copilotAPIHost && r.URL.Path == "/v1/messages":
			messages(w, r, body)
		case !authorized(r):
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`))
		case r.Host == githubAPIHost && r.URL.Path == "/copilot_internal/user":
			json.NewEncoder(w).Encode(copilotUser())
		case r.Host == copilotAPIHost && r.URL.Path == "/models":
			json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{copilotCatalogModel()}})
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"message":"Not Found","status":"404"}`))
		}
	}
}

// copilotUser is what /copilot_internal/user says: a signed-in user with
// chat and the endpoints the CLI takes its hosts from.
func copilotUser() map[string]any {
	return map[string]any{
		"login": "octo", "copilot_plan": "individual", "chat_enabled": true, "access_type_sku": "free_limited_copilot",
		"analytics_tracking_id": "jail-test", "assigned_date": "2025-01-01T00:00:00Z", "can_signup_for_limited": false,
		"copilotignore_enabled": false, "codex_agent_enabled": false, "organization_list": []any{}, "restricted_telemetry": true,
		"endpoints": map[string]string{"api": "https://" + copilotAPIHost, "telemetry": "https://" + copilotTelHost},
	}
}

func copilotCatalogModel() map[string]any {
	return map[string]any{
		"id": copilotModel, "object": "model", "name": "Claude Sonnet 4.5", "vendor": "Anthropic", "version": copilotModel,
		"preview": false, "model_picker_enabled": true, "supported_endpoints": []string{"/v1/messages"},
		"policy":  map[string]string{"state": "enabled", "terms": ""},
		"billing": map[string]any{"is_premium": false, "multiplier": 0},
		"capabilities": map[string]any{"family": copilotModel, "object": "model_capabilities", "type": "chat", "tokenizer": "o200k_base",
			"limits":   map[string]int{"max_context_window_tokens": 128000, "max_output_tokens": 16384, "max_prompt_tokens": 128000},
			"supports": map[string]bool{"streaming": true, "tool_calls": true, "parallel_tool_calls": true, "vision": false}},
	}
}

// copilotSession prepares one Copilot CLI session in s: the mock for the
// three hosts, its CA trusted on jail's host side, the hosts mapped to it,
// the real token in jail's environment.
func copilotSession(t *testing.T, s *Sandbox, results *reqLog[string]) (*echoServer, sessionRun) {
	t.Helper()
	cache := installedAgents(t)
	mock := newSessionMock(t, copilotPKI, copilotMock(copilotToken, results))
	ca := trustCA(t, s, copilotPKI.get(t), "copilot-bundle.pem")
	hosts := map[string]string{}
	for _, h := range copilotHosts {
		hosts[h] = mock.Addr()
	}
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": hosts}})
	s.Env = append(s.Env, "COPILOT_GITHUB_TOKEN="+copilotToken)
	return mock, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     copilotArgs(agentBin(cache, agentNamed(t, "copilot"))),
		Hosts:    hosts,
		CA:       ca,
		Check:    sessionOutputCheck(s),
	}
}

func init() {
	agentSessions = append(agentSessions, agentSession{Name: "copilot", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		var results reqLog[string]
		_, run := copilotSession(t, s, &results)
		return run
	}})
}

// TestSessionCopilot: jail -- copilot -p runs the bash call the model asks
// for: the proof lands in the host project, the key read fails, the mocks
// see the real token only (the placeholder never leaves the jail), and the
// CLI prints the final text. Control: the mocks refuse a placeholder-shaped
// token. The CLI's unpacked runtime in ~/.cache/copilot/pkg, which the
// CLI outside the jail loads and runs, cannot be planted from inside: the
// session's unpacking stays in the throwaway home.
func TestSessionCopilot(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		var results reqLog[string]
		mock, run := copilotSession(t, s, &results)
		// As the CLI left it on the host after its first run: read-only
		// from then on, and the CLI runs without rewriting it.
		config := "// User settings belong in settings.json.\n// This file is managed automatically.\n{\n  \"firstLaunchAt\": \"2026-01-01T00:00:00.000Z\"\n}\n"
		s.WriteFile(filepath.Join(s.Home, ".copilot/config.json"), config, 0o600)
		r := runAgent(t, s, append(append(run.JailArgs, "--"), run.Argv...)...)
		checkToolSession(t, s, "copilot", r, results.Requests(), mock)
		if b, _ := os.ReadFile(filepath.Join(s.Home, ".copilot/config.json")); string(b) != config {
			t.Errorf("copilot: the session changed the host's ~/.copilot/config.json (trusted folders, tool approvals):\n%s", b)
		}
		if n := len(mock.At("/v1/messages")); n < 2 {
			t.Errorf("copilot: %d Messages API requests, want the tool call's turn and the final one:\n%s", n, mock.dump())
		}
		hostAbsent(t, filepath.Join(s.Home, ".cache/copilot"))

		plant := runAgent(t, s, "--profile", "copilot", "--", "sh", "-c",
			"mkdir -p ~/.cache/copilot/pkg && echo planted > ~/.cache/copilot/pkg/index.js; cat ~/.cache/copilot/pkg/index.js")
		if plant.Code != 0 || !strings.Contains(plant.Stdout, "planted") {
			t.Errorf("control: inside, the throwaway home takes the write:\n%s", plant)
		}
		hostAbsent(t, filepath.Join(s.Home, ".cache/copilot"))
		if _, err := os.Stat(filepath.Join(s.Home, ".copilot")); err != nil {
			t.Errorf("copilot: ~/.copilot, its state directory, did not persist on the host: %v", err)
		}

		mockRefuses(t, mock, http.MethodGet, "/copilot_internal/user", map[string]string{"Host": githubAPIHost, "Authorization": "Bearer gho_jailNotTheRealToken0123456789abcdefAB"}, "")
		mockRefuses(t, mock, http.MethodPost, "/v1/messages", map[string]string{"Host": copilotAPIHost, "Authorization": "Bearer gho_jailNotTheRealToken0123456789abcdefAB"}, "{}")
	})
}

// TestCopilotProfilePlants: a shell under the copilot profile cannot
// leave behind what the Copilot CLI, run later outside the jail, would
// act on (the files its cli-main.js names in the Copilot home):
// settings.json (hooks, a status line command, a telemetry headers
// program), config.json once the CLI has written it (trusted folders,
// tool approvals, allowed directories), extensions (code the CLI loads),
// permissions-config.json (tools approved without asking), hooks,
// mcp-config.json, lsp-config.json, installed-plugins, and the agents,
// skills and copilot-instructions.md the model is given.
func TestCopilotProfilePlants(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		plantsRefused(t, s, "copilot", []string{".copilot/settings.json", ".copilot/config.json"}, []string{
			".copilot/settings.json", ".copilot/config.json", ".copilot/extensions/evil/extension.mjs",
			".copilot/permissions-config.json", ".copilot/hooks/evil.json", ".copilot/mcp-config.json", ".copilot/lsp-config.json",
			".copilot/installed-plugins/evil/plugin.json", ".copilot/agents/evil.agent.md", ".copilot/skills/evil/SKILL.md",
			".copilot/copilot-instructions.md",
		}, ".copilot/session-state/jail-test-control")
	})
}
