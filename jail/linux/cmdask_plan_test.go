package linux

import (
	"errors"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestCommandAskNeedsNotification: without seccomp user notification
// nothing can hold an exec, so command.ask refuses the run (exit 125 with
// one line) unless --best-effort, which drops the rules and says so.
func TestCommandAskNeedsNotification(t *testing.T) {
	was := execAsk
	execAsk = true
	defer func() { execAsk = was }()
	for _, bestEffort := range []bool{false, true} {
		pol := &jail.Policy{ProjectRoot: "/home/u/proj", BestEffort: bestEffort, Command: jail.CommandConfig{Ask: []string{"git push"}}}
		b := &builder{pol: pol, f: &Facts{SeccompNotify: false}, p: &Plan{}}
		err := b.commandRules()
		if !bestEffort {
			if !errors.Is(err, jail.ErrUnsupported) || !strings.Contains(err.Error(), "command.ask") || !strings.Contains(err.Error(), "seccomp user notification") || strings.Contains(err.Error(), "\n") {
				t.Errorf("without notification: %v, want one ErrUnsupported line about command.ask", err)
			}
			continue
		}
		if err != nil || len(b.p.CommandAsk) != 0 || len(b.p.GaveUp) != 1 || !strings.Contains(b.p.GaveUp[0], "git push") {
			t.Errorf("best effort: err=%v CommandAsk=%v GaveUp=%v", err, b.p.CommandAsk, b.p.GaveUp)
		}
	}
	pol := &jail.Policy{ProjectRoot: "/home/u/proj", Command: jail.CommandConfig{Ask: []string{"git push"}}}
	b := &builder{pol: pol, f: &Facts{SeccompNotify: true}, p: &Plan{}}
	if err := b.commandRules(); err != nil || len(b.p.CommandAsk) != 1 {
		t.Errorf("with notification: err=%v CommandAsk=%v", err, b.p.CommandAsk)
	}
}
