package tests

import (
	"net/http"
	"testing"
)

// A real Pi session (@mariozechner/pi-coding-agent) in the jail, against a
// local TLS mock of the Anthropic Messages API. What Pi sends was read
// from the package: pi-ai/dist/providers/anthropic.js (the Anthropic SDK,
// the key from ANTHROPIC_API_KEY in x-api-key, streaming /v1/messages,
// tools as Messages API tool_use blocks), pi-ai/dist/env-api-keys.js (the
// variable), pi-ai/dist/models.generated.js (the model and its base URL
// https://api.anthropic.com), pi-coding-agent/dist/core/tools/bash.js (the
// tool "bash" with a "command" argument) and pi-coding-agent/dist/main.js
// (-p prints the answer and exits; --offline skips its startup network
// calls; --no-session keeps no session file).

// piKey is the real Anthropic key the session hands to jail.
const piKey = "sk-ant-api03-piSession0123456789abcdefABCDEF-realkey"

// piArgs are Pi's flags for an unattended run: print mode, the Anthropic
// provider and one of its models, only the bash tool, nothing Pi would
// fetch at start, no session file.
func piArgs(bin string) []string {
	return []string{bin, "-p", "--offline", "--no-session", "--provider", "anthropic", "--model", "claude-sonnet-4-5",
		"--thinking", "off", "--tools", "bash", "write the proof"}
}

// piMock is a Messages API that answers only the real key in x-api-key
// (any other gets the API's 401): a bash call running sessionProofCmd,
// then sessionFinal once its result is back.
func piMock(realKey string, results *reqLog[string]) func(w http.ResponseWriter, r *http.Request, body []byte) {
	authorized := func(r *http.Request) bool { return r.Header.Get("x-api-key") == realKey }
	return toolTurnsMock(authorized, "bash", map[string]string{"command": sessionProofCmd}, results)
}

// piSession prepares one Pi session in s: the mock, its CA trusted on
// jail's host side, api.anthropic.com mapped to it, the real key in
// jail's environment.
func piSession(t *testing.T, s *Sandbox, results *reqLog[string]) (*echoServer, sessionRun) {
	t.Helper()
	cache := installedAgents(t)
	mock := newSessionMock(t, secretsPKI, piMock(piKey, results))
	ca := trustCA(t, s, secretsPKI.get(t), "pi-bundle.pem")
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": map[string]string{anthropicHost: mock.Addr()}}})
	s.Env = append(s.Env, "ANTHROPIC_API_KEY="+piKey)
	return mock, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     piArgs(agentBin(cache, agentNamed(t, "pi"))),
		Hosts:    map[string]string{anthropicHost: mock.Addr()},
		CA:       ca,
		Check:    sessionOutputCheck(s),
	}
}

func init() {
	agentSessions = append(agentSessions, agentSession{Name: "pi", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		var results reqLog[string]
		_, run := piSession(t, s, &results)
		return run
	}})
}

// TestSessionPi: jail -- pi -p runs the bash call the model asks for: the
// proof lands in the host project, the key read fails, the mock sees the
// real key only (the placeholder never leaves the jail), Pi prints the
// final text. Control: the mock refuses a placeholder-shaped key.
func TestSessionPi(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		var results reqLog[string]
		mock, run := piSession(t, s, &results)
		r := runAgent(t, s, append(append(run.JailArgs, "--"), run.Argv...)...)
		checkToolSession(t, s, "pi", r, results.Requests(), mock)
		if n := len(mock.At("/v1/messages")); n < 2 {
			t.Errorf("pi: %d Messages API requests, want the tool call's turn and the final one:\n%s", n, mock.dump())
		}
		mockRefuses(t, mock, http.MethodPost, "/v1/messages", map[string]string{"x-api-key": "sk-ant-api03-jailNotTheRealKey0123456789"}, "{}")
	})
}

// TestPiProfilePlants: a shell under the pi profile cannot leave behind
// what Pi, run later outside the jail, would act on (read from
// pi-coding-agent/dist/config.js, core/settings-manager.js,
// utils/shell.js, core/package-manager.js): settings.json (shellPath and
// shellCommandPrefix run with every bash call, packages are loaded as
// extensions), models.json (a provider's baseUrl, where the key goes),
// bin (put first on PATH of every command Pi runs), git (installed
// packages' code), extensions, skills, prompts, SYSTEM.md and
// APPEND_SYSTEM.md (what the model is told).
func TestPiProfilePlants(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		plantsRefused(t, s, "pi", []string{".pi/agent/settings.json"}, []string{
			".pi/agent/settings.json", ".pi/agent/models.json", ".pi/agent/bin/git", ".pi/agent/tools/rg",
			".pi/agent/git/example.test/evil/index.ts", ".pi/agent/extensions/evil.ts", ".pi/agent/skills/evil/SKILL.md",
			".pi/agent/prompts/evil.md", ".pi/agent/SYSTEM.md", ".pi/agent/APPEND_SYSTEM.md",
		}, ".pi/agent/sessions/jail-test-control")
	})
}
