package tests

import (
	"testing"
	"time"
)

// Real sessions of Claude Code (the native binary of
// @anthropic-ai/claude-code, bin/claude.exe: its --help, the BashInput of
// sdk-tools.d.ts) in the jail against messagesSession, with an API key and
// signed in.

// claudeSessionFlags make claude run unattended: print mode, the Bash
// tool pre-approved and every other permission question answered no
// (dontAsk) so that nothing waits on a person, plain text out. Claude
// Code refuses bypassPermissions as root, so it is not used.
var claudeSessionFlags = []string{"-p", "--permission-mode", "dontAsk", "--allowedTools", "Bash", "--output-format", "text", "write the proof"}

// claudeSessionEnv bounds Claude Code's retries: a refused credential
// fails in seconds instead of minutes of back-off.
const claudeSessionEnv = "CLAUDE_CODE_MAX_RETRIES=1"

// claudeKeySession sets up s for Claude Code with a real API key in the
// environment and returns the mock and the run.
func claudeKeySession(t *testing.T, s *Sandbox) (*messagesSession, sessionRun) {
	t.Helper()
	argv, cache := claudeCode(t)
	key := realValue("ANTHROPIC_API_KEY")
	m := newMessagesSession(t, "Bash", apiKeyAuth(key))
	ca, hosts := sessionSetup(t, s, m, anthropicHost)
	s.Env = append(s.Env, "ANTHROPIC_API_KEY="+key, claudeSessionEnv)
	return m, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     append(append([]string{}, argv...), claudeSessionFlags...),
		Hosts:    hosts, CA: ca, Check: sessionDone(s),
	}
}

// claudeSignInSession sets up s for a signed-in Claude Code: no key, a
// ~/.claude/.credentials.json whose access token is valid for eight more
// hours, and a mock that accepts only that token as a bearer.
func claudeSignInSession(t *testing.T, s *Sandbox) (*messagesSession, signInTokens, sessionRun) {
	t.Helper()
	argv, cache := claudeCode(t)
	k := newSignInTokens()
	m := newMessagesSession(t, "Bash", bearerAuth(k.Access))
	ca, hosts := sessionSetup(t, s, m, anthropicHost, signInTokenHost)
	s.WriteFile(s.Home+"/.claude/.credentials.json", claudeCredentials(k.Access, k.Refresh, time.Now().Add(8*time.Hour).UnixMilli()), 0o600)
	s.Env = append(s.Env, claudeSessionEnv)
	return m, k, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     append(append([]string{}, argv...), claudeSessionFlags...),
		Hosts:    hosts, CA: ca, Check: sessionDone(s),
	}
}

func init() {
	agentSessions = append(agentSessions,
		agentSession{Name: "claude", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
			_, run := claudeKeySession(t, s)
			return run
		}},
		agentSession{Name: "claude-signin", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
			_, _, run := claudeSignInSession(t, s)
			return run
		}})
}

// runSession runs a prepared session in the jail.
func runSession(t *testing.T, s *Sandbox, run sessionRun) Result {
	t.Helper()
	return runAgent(t, s, append(append(append([]string{}, run.JailArgs...), "--"), run.Argv...)...)
}

// TestSessionClaudeCode: claude -p with ANTHROPIC_API_KEY runs the Bash
// call the model asks for: the proof lands in the project, the SSH key
// stays out of the tool result, the API sees only the real key.
func TestSessionClaudeCode(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		m, run := claudeKeySession(t, s)
		r := runSession(t, s, run)
		checkSession(t, s, r, m)
	})
}

// TestSessionClaudeCodeSignedIn: the same session signed in, with no key:
// the API sees only the real access token (the jail holds a placeholder
// in the sign-in file), which is not refreshed since it is valid.
func TestSessionClaudeCodeSignedIn(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		m, k, run := claudeSignInSession(t, s)
		r := runSession(t, s, run)
		k.noReal(t, "Claude Code's output", r.Stdout+r.Stderr)
		checkSession(t, s, r, m)
		for _, q := range m.Requests() {
			if q.Path == "/v1/oauth/token" {
				t.Errorf("a valid access token was refreshed: %s", q)
			}
		}
	})
}
