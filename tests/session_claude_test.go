package tests

import (
	"regexp"
	"strings"
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
func claudeKeySession(t *testing.T, s *Sandbox) (*messagesSession, sessionRun, string) {
	t.Helper()
	argv, cache := claudeCode(t)
	key := realValue("ANTHROPIC_API_KEY")
	m := newMessagesSession(t, "Bash", apiKeyAuth(key))
	m.command += "; echo \"key=$ANTHROPIC_API_KEY\""
	ca, hosts := sessionSetup(t, s, m, anthropicHost)
	s.Env = append(s.Env, "ANTHROPIC_API_KEY="+key, claudeSessionEnv)
	return m, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     append(append([]string{}, argv...), claudeSessionFlags...),
		Hosts:    hosts, CA: ca, Check: sessionDone(s),
	}, key
}

// claudeSignInSession sets up s for a signed-in Claude Code: no key, a
// ~/.claude/.credentials.json whose access token is valid for eight more
// hours, and a mock that accepts only that token as a bearer.
func claudeSignInSession(t *testing.T, s *Sandbox) (*messagesSession, signInTokens, sessionRun) {
	t.Helper()
	argv, cache := claudeCode(t)
	k := newSignInTokens()
	m := newMessagesSession(t, "Bash", bearerAuth(k.Access))
	m.command += `; grep -o '"accessToken":"[^"]*"' ~/.claude/.credentials.json`
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
			_, run, _ := claudeKeySession(t, s)
			return run
		}},
		agentSession{Name: "claude-signin", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
			_, _, run := claudeSignInSession(t, s)
			return run
		}})
}

// keyOnlyPlaceholder fails unless the tool result shows the key's
// placeholder, never the key: the model asked the tool to print it.
func keyOnlyPlaceholder(t *testing.T, m *messagesSession, key string) {
	t.Helper()
	results := m.toolResults()
	got := regexp.MustCompile(`key=([A-Za-z0-9._-]*)`).FindStringSubmatch(results)
	if strings.Contains(results, key) || got == nil || !placeholderRE("ANTHROPIC_API_KEY").MatchString(got[1]) {
		t.Errorf("the tool printed ANTHROPIC_API_KEY as %v, want its placeholder and never the key: %s", got, results)
	}
}

// runSession runs a prepared session in the jail.
func runSession(t *testing.T, s *Sandbox, run sessionRun) Result {
	t.Helper()
	return runAgent(t, s, append(append(append([]string{}, run.JailArgs...), "--"), run.Argv...)...)
}

// TestSessionClaudeCode: claude -p with ANTHROPIC_API_KEY runs the Bash
// call the model asks for: the proof lands in the project, the SSH key
// and the key (which the call prints) stay out of the tool result, the
// API sees only the real key.
func TestSessionClaudeCode(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		m, run, key := claudeKeySession(t, s)
		r := runSession(t, s, run)
		checkSession(t, s, r, m, key)
		keyOnlyPlaceholder(t, m, key)
	})
}

// TestSessionClaudeCodeSignedIn: the same session signed in, with no key:
// the API sees only the real access token, the Bash call that prints the
// sign-in file's access token shows its placeholder (which goes back to
// the model as it is), which is not refreshed since it is valid, and the
// host's sign-in file stays as it was.
func TestSessionClaudeCodeSignedIn(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		m, k, run := claudeSignInSession(t, s)
		creds := s.Home + "/.claude/.credentials.json"
		before := hostFile(t, creds)
		r := runSession(t, s, run)
		k.noReal(t, "Claude Code's output", r.Stdout+r.Stderr)
		checkSession(t, s, r, m, k.Access)
		k.noReal(t, "the tool result (the model asked for the sign-in file's access token)", m.toolResults())
		if !regexp.MustCompile(`"accessToken":"sk-ant-oat01-jail`).MatchString(m.toolResults()) {
			t.Errorf("the access token the tool read from the sign-in file is not a placeholder: %s", m.toolResults())
		}
		for _, q := range m.Requests() {
			k.noReal(t, "a request to the provider, but for the access token in Authorization", strings.ReplaceAll(q.String(), "Bearer "+k.Access, ""))
			if q.Path == "/v1/oauth/token" {
				t.Errorf("a valid access token was refreshed: %s", q)
			}
		}
		hostUnchanged(t, creds, before)
	})
}
