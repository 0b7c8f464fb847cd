package linux

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// The session key stays in the host process: not in `jail plan`'s text,
// not in the plan as JSON, not in the jailed command's environment.
func TestSessionKeyNeverPrinted(t *testing.T) {
	const key = "the-session-key-7f3a9c"
	f := fakeFacts(nil, nil)
	f.SecretKey = key
	pol := jail.Policy{ProjectRoot: "/home/u/proj"}
	p, err := Build(&pol, f, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(p)
	if strings.Contains(p.String(), key) || strings.Contains(string(js), key) || strings.Contains(strings.Join(p.Env.Env, "\n"), key) {
		t.Errorf("the session key shows in the plan, its JSON or the jail's environment")
	}
	if !strings.Contains(strings.Join(p.Env.Env, "\n"), "MY_SERVICE_TOKEN=jail-secret-MY_SERVICE_TOKEN-") {
		t.Errorf("control: the plan's environment holds no placeholder:\n%s", strings.Join(p.Env.Env, "\n"))
	}
}
