package linux

import (
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// claudeViewPlan builds a plan under the claude profile with ~/.claude
// on the host (and the sign-in file when signedIn), changed by pol.
func claudeViewPlan(t *testing.T, signedIn bool, pol jail.Policy) *Plan {
	t.Helper()
	extra := map[string]PathInfo{
		"/home/u/.claude":               {Exists: true, Dir: true},
		"/home/u/.claude/settings.json": {Exists: true},
	}
	if signedIn {
		extra["/home/u/.claude/.credentials.json"] = PathInfo{Exists: true}
	}
	f := fakeFacts(extra, nil)
	pol.ProjectRoot, pol.Profiles, pol.Network.Unknown = "/home/u/proj", []string{"claude"}, "deny"
	p, err := Build(&pol, f, []string{"claude"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func opAt(p *Plan, dest string) []Op {
	var out []Op
	for _, o := range p.Ops {
		if o.Dest == dest {
			out = append(out, o)
		}
	}
	return out
}

// The directory of the sign-in file is shown as a session view in place
// of its bind: the copy lies in the view, nothing binds over the file's
// host name, the protected names are known read-only, and everything
// else mounted below comes after the view.
func TestSignInViewPlanned(t *testing.T) {
	p := claudeViewPlan(t, true, jail.Policy{AllowWrite: []string{"/home/u/.claude"}, DenyWrite: []string{"/home/u/.claude/settings.json"}})
	if len(p.SignInViews) != 1 {
		t.Fatalf("views: %+v", p.SignInViews)
	}
	v := p.SignInViews[0]
	if v.Path != "/home/u/.claude" || v.Host != "/home/u/.claude" || !v.Writable || v.Dir != "/home/u/.local/state/jail/views/s3ss10n/0" ||
		!slices.Equal(v.SignIn, []string{".credentials.json"}) || len(v.Held) != 0 {
		t.Errorf("view: %+v", v)
	}
	for _, name := range []string{"settings.json", "settings.local.json", "hooks", "plugins"} {
		if !slices.Contains(v.ReadOnly, name) {
			t.Errorf("the view does not keep %s read-only: %v", name, v.ReadOnly)
		}
	}
	if len(p.SignIn) != 1 || p.SignIn[0].Copy != v.Dir+"/.credentials.json" || p.SignIn[0].Host != "/home/u/.claude/.credentials.json" || p.SignIn[0].InPlace {
		t.Errorf("sign-in files: %+v", p.SignIn)
	}
	ops := opAt(p, "/home/u/.claude")
	if len(ops) != 1 || ops[0].Kind != "view" || ops[0].Src != v.Dir {
		t.Fatalf("ops at ~/.claude: %v, want the view alone (the bind replaced)", ops)
	}
	if line := ops[0].String(); !strings.HasPrefix(line, "bind       /home/u/.claude  # session view (sign-in tokens: placeholders inside") {
		t.Errorf("jail plan's line: %q", line)
	}
	if got := opAt(p, "/home/u/.claude/.credentials.json"); len(got) != 0 {
		t.Errorf("something is bound over the sign-in file's name: %v", got)
	}
	i := slices.IndexFunc(p.Ops, func(o Op) bool { return o.Kind == "view" })
	for j, o := range p.Ops {
		if j < i && o.Dest != "/home/u/.claude" && jail.Under(o.Dest, "/home/u/.claude") {
			t.Errorf("%v is mounted before the view, which would hide it", o)
		}
	}
	args := strings.Join(p.BwrapArgs(), " ")
	if !strings.Contains(args, "--bind "+v.Dir+" /home/u/.claude") {
		t.Errorf("bubblewrap does not bind the view: %s", args)
	}
}

// A missing sign-in file is missing in the view too, and never moved back:
// no placeholder on the host, whose name the host could rename over. It
// is a sign-in file of the plan all the same, so that a sign-in made
// inside gets placeholders.
func TestSignInViewHeld(t *testing.T) {
	p := claudeViewPlan(t, false, jail.Policy{AllowWrite: []string{"/home/u/.claude"}})
	if len(p.SignInViews) != 1 || !slices.Equal(p.SignInViews[0].Held, []string{".credentials.json"}) || len(p.SignIn) != 1 || !p.SignIn[0].Missing || !p.SignIn[0].Keep {
		t.Fatalf("views %+v, sign-in files %+v", p.SignInViews, p.SignIn)
	}
	for _, ph := range p.Placeholders {
		if strings.HasSuffix(ph.Path, ".credentials.json") {
			t.Errorf("a placeholder on the host for the missing sign-in file: %+v", ph)
		}
	}
	if ops := opAt(p, "/home/u/.claude"); len(ops) != 1 || !strings.Contains(ops[0].Why, ".credentials.json made inside stays in the session") {
		t.Errorf("ops at ~/.claude: %v", ops)
	}
}

// Under a writable home the view is added over the home's bind (which
// stays); under a read-only tree it is bound read-only; in a learning
// run (the home an overlay thrown away) there is none.
func TestSignInViewKinds(t *testing.T) {
	p := claudeViewPlan(t, true, jail.Policy{AllowWrite: []string{"/home/u"}})
	if len(opAt(p, "/home/u")) == 0 || len(p.SignInViews) != 1 || opAt(p, "/home/u/.claude")[0].Kind != "view" {
		t.Errorf("writable home: ops at ~ %v, at ~/.claude %v", opAt(p, "/home/u"), opAt(p, "/home/u/.claude"))
	}
	p = claudeViewPlan(t, true, jail.Policy{AllowRead: []string{"/home/u/.claude"}})
	if ops := opAt(p, "/home/u/.claude"); len(ops) != 1 || ops[0].Kind != "ro-view" || p.SignInViews[0].Writable {
		t.Errorf("read-only tree: %v %+v", ops, p.SignInViews)
	}
	if a := ops2args(opAt(p, "/home/u/.claude")); a != "--ro-bind "+p.SignInViews[0].Dir+" /home/u/.claude" {
		t.Errorf("read-only view args: %s", a)
	}
	// The file bound alone: its copy takes the bind's place on the
	// throwaway home, whose name no host process can rename over.
	p = claudeViewPlan(t, true, jail.Policy{AllowRead: []string{"/home/u/.claude/.credentials.json"}})
	if ops := opAt(p, "/home/u/.claude/.credentials.json"); len(p.SignInViews) != 0 || len(ops) != 1 || ops[0].Src != p.SignIn[0].Copy || p.SignIn[0].InPlace {
		t.Errorf("the sign-in file bound alone: ops %v, views %+v", ops, p.SignInViews)
	}
	p = claudeViewPlan(t, true, jail.Policy{AllowWrite: []string{"/home/u/.claude"}, Mode: "learning"})
	if len(p.SignInViews) != 0 || len(p.SignIn) != 1 || !p.SignIn[0].InPlace {
		t.Errorf("learning: views %+v, sign-in files %+v (want the host file saved in place)", p.SignInViews, p.SignIn)
	}
}

func ops2args(ops []Op) string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Args()...)
	}
	return strings.Join(out, " ")
}

// The entries' binds go right after their view's op, before anything
// mounted below it.
func TestExpandViews(t *testing.T) {
	ops := []Op{{Kind: "home", Dest: "/h"}, {Kind: "view", Src: "/s/0", Dest: "/h/.c"}, {Kind: "mask", Dest: "/h/.c/x"}}
	got := expandViews(ops, map[string][]Op{"/h/.c": {{Kind: "bind-try", Src: "/h/.c/a", Dest: "/h/.c/a"}}})
	var kinds []string
	for _, o := range got {
		kinds = append(kinds, o.Kind)
	}
	if strings.Join(kinds, " ") != "home view bind-try mask" {
		t.Errorf("expanded: %v", got)
	}
	if a := ops2args(got[2:3]); a != "--bind-try /h/.c/a /h/.c/a" {
		t.Errorf("bind-try args: %s", a)
	}
}
