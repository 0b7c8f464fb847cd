package linux

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestPlanAgentFiles: ~/.claude.json, writable in the plan, is shown as a
// session copy: on its own in the throwaway home (bound by itself, or
// missing where allowWrite names it) as a symlink into a private
// directory bound read-write, so that a rename beside it works; inside a
// visible tree, as a copy bound over it. Read-only, masked, missing
// elsewhere or thrown away, it is not.
func TestPlanAgentFiles(t *testing.T) {
	claudeJSON := "/home/u/.claude.json"
	session := "/run/user/1000/jail/s3ss10n"
	tests := []struct {
		name  string
		pol   jail.Policy
		extra map[string]PathInfo
		mode  string // "" (no session copy), "copy" (bound over the file), "dir" (private directory)
		host  string
	}{
		{name: "allowWrite the file", pol: jail.Policy{AllowWrite: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}, mode: "dir", host: claudeJSON},
		{name: "allowWrite the home", pol: jail.Policy{AllowWrite: []string{"/home/u"}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}, mode: "copy", host: claudeJSON},
		{
			name: "a symlink, allowWrite the file", pol: jail.Policy{AllowWrite: []string{claudeJSON}},
			extra: map[string]PathInfo{claudeJSON: {Exists: true, Link: "dots/claude.json", Resolved: "/home/u/dots/claude.json"}},
			mode:  "dir", host: "/home/u/dots/claude.json",
		},
		{name: "missing, allowWrite the file", pol: jail.Policy{AllowWrite: []string{claudeJSON}}, mode: "dir", host: claudeJSON},
		{name: "missing, allowWrite the home", pol: jail.Policy{AllowWrite: []string{"/home/u"}}},
		{name: "read-only", pol: jail.Policy{AllowRead: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "denyWrite", pol: jail.Policy{AllowWrite: []string{claudeJSON}, DenyWrite: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "denyWrite, missing", pol: jail.Policy{AllowWrite: []string{claudeJSON}, DenyWrite: []string{claudeJSON}}},
		{name: "denyWrite the home, missing", pol: jail.Policy{AllowWrite: []string{claudeJSON}, DenyWrite: []string{"/home/u"}}},
		{name: "denyRead a pattern, missing", pol: jail.Policy{AllowWrite: []string{claudeJSON}, DenyRead: []string{"/home/u/.claude*"}}},
		{name: "denyRead", pol: jail.Policy{AllowWrite: []string{claudeJSON}, DenyRead: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "learning: the overlay throws it away", pol: jail.Policy{Mode: "learning"}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "learning, missing", pol: jail.Policy{Mode: "learning", AllowWrite: []string{claudeJSON}}},
		{name: "not visible", pol: jail.Policy{}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.pol.ProjectRoot = "/home/u/proj"
			p, err := Build(&tt.pol, fakeFacts(tt.extra, nil), []string{"claude"})
			if err != nil {
				t.Fatal(err)
			}
			if (len(p.AgentFiles) > 0) != (tt.mode != "") {
				t.Fatalf("agent files %+v; want mode %q\n%s", p.AgentFiles, tt.mode, p)
			}
			if tt.mode == "" {
				return
			}
			a := p.AgentFiles[0]
			if a.Path != claudeJSON || a.Host != tt.host || a.Missing != (tt.extra[claudeJSON] == PathInfo{}) {
				t.Errorf("agent file %+v; want it seen at %s, merged into %s", a, claudeJSON, tt.host)
			}
			if a.Missing && strings.Contains(p.String(), "does not exist") {
				t.Errorf("the plan says the missing file is skipped, yet shows it:\n%s", p)
			}
			if tt.mode == "copy" {
				checkCopyBound(t, p, a, session)
			} else {
				checkPrivateDir(t, p, a, session)
			}
		})
	}
}

// checkCopyBound: the copy sits in the session directory and is bound
// last, over the allowWrite bind.
func checkCopyBound(t *testing.T, p *Plan, a AgentFile, session string) {
	t.Helper()
	last := p.Ops[len(p.Ops)-1]
	if a.Dir != "" || filepath.Dir(a.Copy) != session || last != (Op{Kind: "bind", Src: a.Copy, Dest: a.Path, Why: last.Why}) {
		t.Errorf("agent file %+v, last op %v; want the copy in %s bound last at %s", a, last, session, a.Path)
	}
}

// checkPrivateDir: the private directory is bound read-write (mount and
// Landlock) at /run/jail/agent-0, the file is a symlink into it, and no
// bind is left at the file (bubblewrap could not make the symlink there).
func checkPrivateDir(t *testing.T, p *Plan, a AgentFile, session string) {
	t.Helper()
	if a.Dir != session+"/agent-0" || a.Inside != "/run/jail/agent-0" || a.Copy != a.Dir+"/.claude.json" {
		t.Errorf("agent file %+v; want its copy in %s/agent-0, seen at /run/jail/agent-0", a, session)
	}
	var bound, linked bool
	for _, op := range p.Ops {
		switch {
		case op.Kind == "bind" && op.Src == a.Dir && op.Dest == a.Inside:
			bound = true
		case op.Kind == "symlink" && op.Dest == a.Path:
			linked = op.Src == a.Inside+"/.claude.json"
		case op.Dest == a.Path:
			t.Errorf("op %v at the file besides its symlink:\n%s", op, p)
		}
	}
	writable := false
	for _, r := range p.Landlock {
		writable = writable || (r.Path == a.Inside && r.Access == "write" && !r.File)
	}
	if !bound || !linked || !writable {
		t.Errorf("private directory bound %v, symlink %v, Landlock write %v; want all\n%s", bound, linked, writable, p)
	}
}

// TestAgentCommandPathsReadOnly: a layer that makes ~/.claude writable
// with no denyWrite (a learned profile, a trusted jail.json) still gets
// the agent's command files bound read-only; missing ones are held by
// placeholders.
func TestAgentCommandPathsReadOnly(t *testing.T) {
	extra := map[string]PathInfo{
		"/home/u/.claude": {Exists: true, Dir: true}, "/home/u/.claude/settings.json": {Exists: true},
		"/home/u/.claude/hooks": {Exists: true, Dir: true}, "/home/u/.codex": {Exists: true, Dir: true},
		"/home/u/.codex/config.toml": {Exists: true},
	}
	pol := jail.Policy{ProjectRoot: "/home/u/proj", AllowWrite: []string{"/home/u/.claude", "/home/u/.codex"}}
	p, err := Build(&pol, fakeFacts(extra, nil), []string{"claude"})
	if err != nil {
		t.Fatal(err)
	}
	ro := map[string]bool{}
	for _, op := range p.Ops {
		if op.Kind == "ro-bind" {
			ro[op.Dest] = true
		}
	}
	for _, m := range p.Mounts {
		ro[m.Path] = ro[m.Path] || m.ReadOnly
	}
	for _, want := range []string{"/home/u/.claude/settings.json", "/home/u/.claude/hooks", "/home/u/.codex/config.toml"} {
		if !ro[want] {
			t.Errorf("%s is not bound read-only:\n%s", want, p)
		}
	}
	held := map[string]bool{}
	for _, ph := range p.Placeholders {
		held[ph.Path] = ph.Dir
	}
	for want, dir := range map[string]bool{"/home/u/.claude/plugins": true, "/home/u/.claude/settings.local.json": false, "/home/u/.codex/rules": true} {
		if d, ok := held[want]; !ok || d != dir || !ro[want] {
			t.Errorf("missing %s is not held by a placeholder (directory %v) bound read-only:\n%s", want, dir, p)
		}
	}
	for ph := range held {
		if strings.HasPrefix(ph, "/home/u/.gemini") {
			t.Errorf("a placeholder in a tree the jail does not show: %s", ph)
		}
	}
	// Interest asks about the agent paths of the trees the jail shows,
	// and about no others: start-up stats only what can matter.
	paths, patterns := jail.Interest(&pol, "/home/u")
	asked := " " + strings.Join(append(paths, patterns...), " ") + " "
	for _, want := range jail.AgentCommandPaths("/home/u") {
		shown := strings.HasPrefix(want, "/home/u/.claude/") || strings.HasPrefix(want, "/home/u/.codex/")
		if got := strings.Contains(asked, " "+want+" "); got != shown {
			t.Errorf("Interest asks about %s: %v, want %v", want, got, shown)
		}
	}
	pol.AllowWrite = append(pol.AllowWrite, "/home/u/.claude.json")
	paths, _ = jail.Interest(&pol, "/home/u")
	if !strings.Contains(" "+strings.Join(paths, " ")+" ", " /home/u/.claude.json ") {
		t.Errorf("Interest does not ask about a writable ~/.claude.json")
	}
}
