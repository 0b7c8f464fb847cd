package tests

import (
	"net/http"
	"strings"
	"testing"
)

// A real Codex CLI session inside the jail with an API key: codex exec
// against the local Responses API mock, over the WebSocket transport the
// jail's proxy carries.

// codexSessionArgv is codex exec as an unattended run uses it, read from
// `codex exec --help` of the installed package:
// --dangerously-bypass-approvals-and-sandbox runs every command without
// asking and without Codex's own sandbox (meant for environments
// sandboxed from outside, as the jail is), --color never keeps escape
// codes out of the output.
func codexSessionArgv(codex string) []string {
	return []string{codex, "exec", "--dangerously-bypass-approvals-and-sandbox", "--color", "never",
		"write proof.txt, then read my SSH key"}
}

// codexSession sets up one session in s: the mock for a fresh real key,
// given to jail as CODEX_API_KEY (the variable codex exec sends as its
// bearer token), the OpenAI API host mapped to the mock, its CA trusted.
func codexSession(t *testing.T, s *Sandbox) (sessionRun, *codexMock) {
	t.Helper()
	cache := installedAgents(t)
	key := randomAPIKey("sk-proj-")
	mock := newCodexMock(t, key, shellSessionCmd, shellSessionFinal)
	ca := trustCA(t, s, openaiPKI.get(t), "openai-bundle.pem")
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": mock.hosts()}})
	s.Env = append(s.Env, "CODEX_API_KEY="+key)
	run := sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     codexSessionArgv(sessionAgentBin(cache, "codex")),
		Hosts:    mock.hosts(),
		CA:       ca,
		Check:    func(out string) error { return shellSessionDone(s, out) },
	}
	return run, mock
}

func init() {
	agentSessions = append(agentSessions, agentSession{Name: "codex", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		run, _ := codexSession(t, s)
		return run
	}})
}

// TestSessionCodex: a real codex exec session in the jail, as root and as
// an unprivileged user. The model (the mock) asks for
// shellSessionCmd: proof.txt lands in the host project, the SSH key read
// fails and its content never reaches the model, the API sees only the
// real key (never its placeholder, which it would refuse with a 401), and
// the ChatGPT host, where Codex sends the key too, never gets it; codex
// exits 0 and prints the final answer. Every turn goes over the
// WebSocket, through the jail's proxy, with no fall back to HTTP.
func TestSessionCodex(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		run, mock := codexSession(t, s)
		if code := refusedStatus(mock.handle, "/v1/responses", "Authorization", "Bearer sk-proj-jail"+uniq()+uniq()); code != http.StatusUnauthorized {
			t.Fatalf("control: the mock answers a placeholder key with %d, want 401", code)
		}
		r := runAgent(t, s, append(append(run.JailArgs, "--"), run.Argv...)...)
		t.Logf("codex exec in the jail took %.1f s", r.Took.Seconds())
		checkShellSession(t, s, r, mock.toolOutputs(), mock.Requests(), func(q seen) bool {
			return q.Header.Get("Authorization") == "Bearer "+mock.key
		})
		if n := mock.webSocketTurns(); n < 2 || len(mock.At("/v1/responses")) == 0 {
			t.Errorf("want both turns over the WebSocket to /v1/responses, got %d:\n%s", n, mock.dump())
		}
		for _, q := range mock.Requests() {
			if q.Path == "/v1/responses" && q.Method == http.MethodPost {
				t.Errorf("codex fell back to HTTP: the WebSocket did not carry the session:\n%s", mock.dump())
			}
			if strings.HasPrefix(q.Host, chatgptHost) && q.has(mock.key) {
				t.Errorf("the key, bound to %s, reached %s: %s", openaiHost, chatgptHost, q)
			}
		}
	})
}
