package linux

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/control"
)

// The decision log says how a held connection was answered (the rule)
// and by whom (the reason); whatever is not a person's allow denies.
func TestVerdictOf(t *testing.T) {
	for _, c := range []struct {
		a            control.Answer
		allow        bool
		rule, reason string
	}{
		{control.Answer{Allow: true, Scope: control.ScopeOnce, By: "jail approve"}, true, "ask once", "jail approve"},
		{control.Answer{Allow: true, Scope: control.ScopeProject, By: "dashboard"}, true, "ask project", "dashboard"},
		{control.Answer{Allow: false, Scope: control.ScopeSession, By: "jail reject"}, false, "ask session", "jail reject"},
		{control.Answer{Allow: true, By: "timeout"}, false, "ask timeout", "no answer in time"},
		{control.Answer{By: "ended"}, false, "ask ended", "the session ended"},
		{control.Answer{By: "limit"}, false, "ask limit", "too many requests held"},
	} {
		v := verdictOf(c.a)
		if v.Allow != c.allow || v.Rule != c.rule || v.Reason != c.reason {
			t.Errorf("verdictOf(%+v) = %+v, want %v %q %q", c.a, v, c.allow, c.rule, c.reason)
		}
	}
}

// A run has live control when it has a proxy of its own or a supervisor;
// only a proxy gives it live rules.
func TestStartControl(t *testing.T) {
	if startControl(&Plan{Session: "s"}, false) != nil {
		t.Fatal("a run with neither a proxy nor a supervisor got a Hub")
	}
	if startControl(&Plan{Session: "s", Net: &NetPlan{External: "/x"}}, false) != nil {
		t.Fatal("a run whose proxy runs elsewhere got a Hub of its own")
	}
	cp := startControl(&Plan{Session: "s", Net: &NetPlan{}}, false)
	if cp == nil {
		t.Fatal("a run with a proxy got no Hub")
	}
	defer cp.close()
	if err := cp.addRule(true, "x.example.test"); err == nil {
		t.Fatal("a live rule was taken before the proxy is up")
	}
	if st := cp.hub.Status(); st.Policy.Unknown != "deny" || st.Policy.NoNetwork || st.ID != "s" {
		t.Fatalf("status %+v", st)
	}
}

// A policy that asks a person is refused when its control socket cannot
// be served (no one could answer); any other run goes on, warned.
func TestListenFailsClosedWhenAsking(t *testing.T) {
	x := t.TempDir()
	os.WriteFile(filepath.Join(x, "jail"), []byte("not a directory\n"), 0o600)
	t.Setenv("XDG_RUNTIME_DIR", x)
	for _, c := range []struct {
		plan *Plan
		fail bool
	}{
		{&Plan{Session: "s1", Net: &NetPlan{}}, false},
		{&Plan{Session: "s2", Net: &NetPlan{}, CommandAsk: []string{"git push"}}, true},
		{&Plan{Session: "s3", Net: &NetPlan{Rules: jail.NetworkConfig{Unknown: "ask"}}}, true},
	} {
		var stderr bytes.Buffer
		cp := startControl(c.plan, false)
		err := cp.listen(c.plan, &stderr)
		cp.close()
		if (err != nil) != c.fail {
			t.Errorf("%s: listen = %v, want failure %v", c.plan.Session, err, c.fail)
		}
		if warned := strings.Contains(stderr.String(), "live control is off"); warned == c.fail || strings.Count(stderr.String(), "\n") > 1 {
			t.Errorf("%s: stderr %q", c.plan.Session, stderr.String())
		}
	}
}
