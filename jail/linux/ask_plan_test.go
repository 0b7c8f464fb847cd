package linux

import (
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
)

// TestPlanAskRules: the network ask rules reach the proxy's rules and the
// plan shows them with the timeout; command.ask is refused while the exec
// supervisor cannot hold an exec, so that asked commands never run
// unasked, and shown with its timeout once it can.
func TestPlanAskRules(t *testing.T) {
	pol := &jail.Policy{ProjectRoot: "/home/u/proj", AskTimeout: 5,
		Network: jail.NetworkConfig{Ask: []string{"*.example.org"}, Unknown: "ask"}}
	p, err := Build(pol, fakeFacts(nil, nil), []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Net.Rules.Ask; len(got) != 1 || got[0] != "*.example.org" || p.Net.Rules.Unknown != "ask" {
		t.Errorf("proxy rules %+v, want ask *.example.org and unknown ask", p.Net.Rules)
	}
	if p.AskTimeout != 5*time.Second {
		t.Errorf("AskTimeout = %v, want 5s", p.AskTimeout)
	}
	s := p.String()
	for _, want := range []string{"  ask:     *.example.org\n", "  unknown: ask\n", "ask timeout 5s:"} {
		if !strings.Contains(s, want) {
			t.Errorf("plan lacks %q:\n%s", want, s)
		}
	}

	cmd := &jail.Policy{ProjectRoot: "/home/u/proj", Command: jail.CommandConfig{Ask: []string{"git push"}}}
	was := execAsk
	defer func() { execAsk = was }()
	execAsk = false
	if _, err := Build(cmd, fakeFacts(nil, nil), []string{"true"}); err == nil || !strings.Contains(err.Error(), "command.ask is not enforced at exec yet") {
		t.Fatalf("command.ask without an exec supervisor that asks: got %v, want a refusal", err)
	}
	execAsk = true
	p, err = Build(cmd, fakeFacts(nil, nil), []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	s = p.String()
	for _, want := range []string{"  ask:   git push (held until a person answers)\n", "ask timeout 1m0s:"} {
		if !strings.Contains(s, want) {
			t.Errorf("plan lacks %q:\n%s", want, s)
		}
	}
	f := fakeFacts(nil, nil)
	f.SeccompNotify = false
	if _, err := Build(cmd, f, []string{"true"}); err == nil || !strings.Contains(err.Error(), "command.ask needs seccomp user notification") {
		t.Errorf("command.ask without seccomp user notification: got %v, want a refusal", err)
	}
}
