package darwin

import (
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestPlanAskRules: a policy with ask rules is planned; the network ones
// go to the in-process proxy as on Linux, and command.ask, which macOS
// cannot hold at exec, is named among what the run lacks, and an asked
// git push is refused on the wire instead.
func TestPlanAskRules(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", app, alice, "")
	pol.Network.Ask = []string{"*.example.org"}
	pol.Network.Unknown = "ask"
	pol.Command.Ask = []string{"git push"}
	pol.AskTimeout = 5
	p := plan(t, pol, fakeFacts(app, alice))
	if !slices.Equal(p.Rules.Ask, []string{"*.example.org"}) || p.Rules.Unknown != "ask" {
		t.Errorf("proxy rules %+v, want the ask rules", p.Rules)
	}
	if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "command.ask is not checked at exec on macOS") }) {
		t.Errorf("notes %q do not say command.ask is not checked", p.Notes)
	}
	// Nothing can ask at exec: the asked push is refused on the wire.
	if !slices.Equal(p.DenyCommands, []string{"git push"}) {
		t.Errorf("wire-refused commands %q, want the asked git push", p.DenyCommands)
	}
}
