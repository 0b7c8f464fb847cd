package linux

import (
	"slices"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestSignInCallbackPublished: `codex login` publishes Codex's fixed
// callback port for the host's browser; another subcommand, a device-code
// or stdin login, or a policy without the codex agent publishes nothing.
func TestSignInCallbackPublished(t *testing.T) {
	for _, tt := range []struct {
		argv  []string
		agent []string
		want  bool
	}{
		{[]string{"codex", "login"}, []string{"codex"}, true},
		{[]string{"npx", "-y", "@openai/codex", "-c", "x=1", "login"}, []string{"codex"}, true},
		{[]string{"codex", "--cd", "/x", "login"}, []string{"codex"}, true},
		{[]string{"codex", "--unknown", "x", "login"}, []string{"codex"}, false},
		{[]string{"codex", "login", "--device-auth"}, []string{"codex"}, false},
		{[]string{"codex", "login", "--with-api-key"}, []string{"codex"}, false},
		{[]string{"codex", "login", "status"}, []string{"codex"}, false},
		{[]string{"codex", "exec", "login"}, []string{"codex"}, false},
		{[]string{"codex", "login"}, nil, false},
	} {
		pol := &jail.Policy{AgentSandbox: tt.agent}
		line := planSignInCallback(pol, tt.argv)
		if got := slices.Contains(pol.Publish, 1455); got != tt.want || (line != "") != tt.want {
			t.Errorf("%q with agents %v: published %v (%q), want %v", tt.argv, tt.agent, got, line, tt.want)
		}
	}
}
