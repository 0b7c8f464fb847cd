package tests

import (
	"testing"
)

// A real session of OpenCode (the compiled binary of opencode-ai,
// bin/opencode.exe: `opencode run --help`, its bash tool's schema and its
// anthropic provider, @ai-sdk/anthropic) in the jail against
// messagesSession, with ANTHROPIC_API_KEY.
//
// What the binary does at start, read from its bundled code:
//   - models: its ModelsDev service reads ~/.cache/opencode/models.json,
//     else a models list built into the binary, and fetches
//     https://models.opencode.ai/api.json only in the background
//     (OPENCODE_MODELS_URL moves it, OPENCODE_DISABLE_MODELS_FETCH=1 stops
//     it). The profile allows that host; here it does not resolve, the
//     fetch fails in the background and the built-in list serves: nothing
//     to mock, nothing to configure.
//   - config directories: Config.ensureGitignore writes a .gitignore into
//     every .opencode directory from the project up, and a failure there
//     ends the run ("Unexpected error ... FileSystem.writeFile"). The jail
//     holds the project's .opencode/ read-only, with OpenCode's own
//     .gitignore in it when it has none, so the session starts in a fresh
//     project as it is.
//   - plugins: it installs @opencode-ai/plugin into each writable config
//     directory without one from the npm registry, which the profile does
//     not allow: the proxy refuses it, and the run goes on once npm gives
//     up (a second or more of every session).

// opencodeSessionFlags make `opencode run` run unattended: one message,
// a model of its built-in models list (the anthropic provider), and
// --auto, which approves the permission questions (the bash tool reading
// outside the project) that would otherwise be refused.
var opencodeSessionFlags = []string{"run", "--model", "anthropic/claude-sonnet-4-5", "--auto", "write the proof"}

// opencodeSession sets up s for OpenCode with a real API key in the
// environment and returns the mock and the run.
func opencodeSession(t *testing.T, s *Sandbox) (*messagesSession, sessionRun, string) {
	t.Helper()
	cache := installedAgents(t)
	var bin string
	for _, a := range agents {
		if a.Name == "opencode" {
			bin = agentBin(cache, a)
		}
	}
	key := realValue("ANTHROPIC_API_KEY")
	m := newMessagesSession(t, "bash", apiKeyAuth(key))
	m.command += "; echo \"key=$ANTHROPIC_API_KEY\""
	ca, hosts := sessionSetup(t, s, m, anthropicHost)
	s.Env = append(s.Env, "ANTHROPIC_API_KEY="+key)
	return m, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     append([]string{bin}, opencodeSessionFlags...),
		Hosts:    hosts, CA: ca, Check: sessionDone(s),
	}, key
}

func init() {
	agentSessions = append(agentSessions, agentSession{Name: "opencode", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		_, run, _ := opencodeSession(t, s)
		return run
	}})
}

// TestSessionOpenCode: opencode run with ANTHROPIC_API_KEY runs the bash
// call the model asks for: the proof lands in the project, the SSH key
// and the key (which the call prints) stay out of the tool result, the
// API sees only the real key.
func TestSessionOpenCode(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		m, run, key := opencodeSession(t, s)
		r := runSession(t, s, run)
		checkSession(t, s, r, m, key)
		keyOnlyPlaceholder(t, m, key)
	})
}
