package jail

import (
	"encoding/json"
	"errors"
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func claudeRule(t *testing.T) agentFile {
	t.Helper()
	for _, a := range agentFiles {
		if a.Rel == ".claude.json" {
			return a
		}
	}
	t.Fatal("no rule for ~/.claude.json")
	return agentFile{}
}

// TestMergeAgentJSON: what a jailed run wrote into ~/.claude.json (ours,
// changed from base) applied to the host file as it is now (theirs).
func TestMergeAgentJSON(t *testing.T) {
	tests := []struct {
		name               string
		base, ours, theirs string
		want               string // "" with changed false: theirs unchanged
		err                string
	}{
		{name: "nothing changed inside", base: `{"a":1}`, ours: `{"a":1}`, theirs: `{"a":2}`},
		{name: "same content, other spacing", base: `{"a":1}`, ours: "{\n  \"a\": 1\n}\n", theirs: `{"a":2}`},
		{
			name: "harmless key changed inside, host key added meanwhile",
			base: `{"numStartups":3}`, ours: `{"numStartups":5,"tipsHistory":{"x":1}}`, theirs: `{"numStartups":3,"theme":"light"}`,
			want: `{"numStartups":5,"theme":"light","tipsHistory":{"x":1}}`,
		},
		{
			name: "top-level mcpServers added inside",
			base: `{"a":1}`, ours: `{"a":1,"mcpServers":{"x":{"command":"sh"}},"n":2}`, theirs: `{"a":1}`,
			want: `{"a":1,"n":2}`,
		},
		{
			name: "top-level mcpServers added inside, nothing else",
			base: `{"a":1}`, ours: `{"a":1,"mcpServers":{"x":{"command":"sh"}}}`, theirs: `{"a":1}`,
		},
		{
			name: "mcpServers changed and removed inside: the host's stay",
			base: `{"mcpServers":{"h":{"command":"ok"}},"hooks":{"a":1}}`, ours: `{"mcpServers":{"h":{"command":"evil"}},"n":1}`,
			theirs: `{"mcpServers":{"h":{"command":"ok"}},"hooks":{"a":1}}`,
			want:   `{"mcpServers":{"h":{"command":"ok"}},"hooks":{"a":1},"n":1}`,
		},
		{
			name: "every command key added inside",
			base: `{}`,
			ours: `{"enabledMcpjsonServers":["x"],"disabledMcpjsonServers":[],"enableAllProjectMcpServers":true,"hooks":{},"statusLine":{"command":"x"},` +
				`"apiKeyHelper":"x","awsAuthRefresh":"x","awsCredentialExport":"x","otelHeadersHelper":"x","gcpAuthRefresh":"x","env":{"BASH_ENV":"/tmp/x"},` +
				`"permissions":{"allow":["Bash(*)"]},"allowedTools":["Bash"],"primaryApiKey":"sk-other","ok":1}`,
			theirs: `{}`,
			want:   `{"ok":1}`,
		},
		{
			name:   "new project: its data kept, its servers, tools and trust dropped",
			base:   `{"projects":{}}`,
			ours:   `{"projects":{"/p":{"history":[1],"mcpServers":{"x":{"command":"sh"}},"allowedTools":["Bash(*)"],"hasTrustDialogAccepted":true,"enabledMcpjsonServers":["evil"]}}}`,
			theirs: `{"projects":{}}`,
			want:   `{"projects":{"/p":{"history":[1]}}}`,
		},
		{
			name:   "deep mcpServers under projects changed inside, host changed another project meanwhile",
			base:   `{"projects":{"/p":{"mcpServers":{},"lastCost":1},"/q":{"lastCost":1}}}`,
			ours:   `{"projects":{"/p":{"mcpServers":{"x":{"command":"sh"}},"lastCost":2},"/q":{"lastCost":1}}}`,
			theirs: `{"projects":{"/p":{"mcpServers":{},"lastCost":1},"/q":{"lastCost":7}}}`,
			want:   `{"projects":{"/p":{"mcpServers":{},"lastCost":2},"/q":{"lastCost":7}}}`,
		},
		{
			name: "project removed inside",
			base: `{"projects":{"/p":{"a":1},"/q":{"a":1}}}`, ours: `{"projects":{"/q":{"a":1}}}`,
			theirs: `{"projects":{"/p":{"a":1},"/q":{"a":1}}}`,
			want:   `{"projects":{"/q":{"a":1}}}`,
		},
		{
			name: "a protected key nested in a new value is dropped",
			base: `{}`, ours: `{"x":{"y":{"mcpServers":{"e":{"command":"sh"}},"ok":true}},"list":[{"hooks":{"a":1},"v":1}]}`, theirs: `{}`,
			want: `{"x":{"y":{"ok":true}},"list":[{"v":1}]}`,
		},
		{
			name: "a protected key nested in a changed value keeps the host's",
			base: `{"x":{"mcpServers":{"h":1},"v":1}}`, ours: `{"x":{"mcpServers":{"e":2},"v":2}}`, theirs: `{"x":{"mcpServers":{"h":1},"v":1}}`,
			want: `{"x":{"mcpServers":{"h":1},"v":2}}`,
		},
		{
			name: "harmless key removed inside",
			base: `{"a":1,"b":2}`, ours: `{"a":1}`, theirs: `{"a":1,"b":2,"c":3}`,
			want: `{"a":1,"c":3}`,
		},
		{
			name: "host removed a key the run did not touch",
			base: `{"a":1,"b":2}`, ours: `{"a":5,"b":2}`, theirs: `{"a":1}`,
			want: `{"a":5}`,
		},
		{
			name: "the run removed the whole file's content",
			base: `{"a":1,"mcpServers":{"h":1}}`, ours: `{}`, theirs: `{"a":1,"mcpServers":{"h":1}}`,
			want: `{"mcpServers":{"h":1}}`,
		},
		{
			name: "invalid base: all of ours is new",
			base: ``, ours: `{"a":1,"mcpServers":{"x":1}}`, theirs: `{"b":2}`,
			want: `{"b":2,"a":1}`,
		},
		{
			name: "projects removed inside: the host's projects stay",
			base: hostProjects, ours: `{"numStartups":4}`, theirs: hostProjects,
			want: `{"numStartups":4,"projects":` + hostProjectsValue + `}`,
		},
		{
			name: "projects replaced by a number inside",
			base: hostProjects, ours: `{"numStartups":3,"projects":0}`, theirs: hostProjects,
		},
		{
			name: "projects replaced by an array inside",
			base: hostProjects, ours: `{"numStartups":3,"projects":[]}`, theirs: hostProjects,
		},
		{
			name: "projects replaced by null inside",
			base: hostProjects, ours: `{"numStartups":3,"projects":null}`, theirs: hostProjects,
		},
		{
			name: "a project holding mcpServers removed inside, another changed",
			base: hostProjects, ours: `{"numStartups":3,"projects":{"/q":{"lastCost":9}}}`, theirs: hostProjects,
			want: `{"numStartups":3,"projects":{"/p":{"mcpServers":{"mine":{"command":"my-server"}},"allowedTools":["Read"],"hasTrustDialogAccepted":true,"history":[1]},"/q":{"lastCost":9}}}`,
		},
		{
			name: "a project replaced by a string inside",
			base: hostProjects, ours: `{"numStartups":3,"projects":{"/p":"gone","/q":{"lastCost":1}}}`, theirs: hostProjects,
		},
		{
			name: "a project's history changed, its allowedTools removed inside",
			base: hostProjects, ours: `{"numStartups":3,"projects":{"/p":{"history":[1,2]},"/q":{"lastCost":1}}}`, theirs: hostProjects,
			want: `{"numStartups":3,"projects":{"/p":{"mcpServers":{"mine":{"command":"my-server"}},"allowedTools":["Read"],"hasTrustDialogAccepted":true,"history":[1,2]},"/q":{"lastCost":1}}}`,
		},
		{
			name:   "a nested value holding hooks removed or retyped inside",
			base:   `{"x":{"keep":{"hooks":{"a":1}},"v":1},"y":{"hooks":{"b":1}},"l":[{"env":{"A":"1"}},{"v":1}]}`,
			ours:   `{"x":{"v":2},"y":"str","l":[{"v":2}]}`,
			theirs: `{"x":{"keep":{"hooks":{"a":1}},"v":1},"y":{"hooks":{"b":1}},"l":[{"env":{"A":"1"}},{"v":1}]}`,
			want:   `{"x":{"v":2,"keep":{"hooks":{"a":1}}},"y":{"hooks":{"b":1}},"l":[{"env":{"A":"1"}},{"v":1}]}`,
		},
		{
			name: "harmless top-level key removed inside still reaches the host",
			base: `{"tipsHistory":{"t":1},"projects":{"/p":{"mcpServers":{"h":1}}}}`, ours: `{"projects":{"/p":{"mcpServers":{"h":1}}}}`,
			theirs: `{"tipsHistory":{"t":1},"projects":{"/p":{"mcpServers":{"h":1}}}}`,
			want:   `{"projects":{"/p":{"mcpServers":{"h":1}}}}`,
		},
		{
			name: "harmless project removed inside still reaches the host",
			base: hostProjects, ours: `{"numStartups":3,"projects":{"/p":` + hostProjectP + `}}`, theirs: hostProjects,
			want: `{"numStartups":3,"projects":{"/p":` + hostProjectP + `}}`,
		},
		{
			name: "harmless value retyped inside still reaches the host",
			base: `{"tipsHistory":{"t":1}}`, ours: `{"tipsHistory":0}`, theirs: `{"tipsHistory":{"t":1}}`,
			want: `{"tipsHistory":0}`,
		},
		{name: "invalid JSON inside", base: `{"a":1}`, ours: `{"a":2,`, theirs: `{"a":1}`, err: "left it invalid"},
		{name: "truncated inside", base: `{"a":1}`, ours: ``, theirs: `{"a":1}`, err: "left it invalid"},
		{name: "not an object inside", base: `{"a":1}`, ours: `[1]`, theirs: `{"a":1}`, err: "left it invalid"},
		{name: "trailing data inside", base: `{"a":1}`, ours: `{"a":2} {"mcpServers":{}}`, theirs: `{"a":1}`, err: "left it invalid"},
		{name: "host file not JSON", base: `{"a":1}`, ours: `{"a":2}`, theirs: `nope`, err: "host file"},
	}
	rule := claudeRule(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := MergeAgentJSON([]byte(tt.base), []byte(tt.ours), []byte(tt.theirs), rule)
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrNotMerged) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want ErrNotMerged with %q", err, tt.err)
				}
				if string(got) != tt.theirs || changed {
					t.Errorf("on error the host content must come back as it was: got %q (changed %v)", got, changed)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if changed || string(got) != tt.theirs {
					t.Errorf("want the host content unchanged, got %q (changed %v)", got, changed)
				}
				return
			}
			if !changed {
				t.Fatalf("changed = false, want %s", tt.want)
			}
			g, err := parseObject(got)
			if err != nil {
				t.Fatalf("merged output is not a JSON object: %v\n%s", err, got)
			}
			w, _ := parseObject([]byte(tt.want))
			if !equalValues(g, w) {
				t.Errorf("got  %s\nwant %s", compact(g), tt.want)
			}
			if compact(g) != tt.want {
				t.Errorf("member order: got %s, want %s", compact(g), tt.want)
			}
		})
	}
}

// hostProjects is a host file whose projects hold command keys: the
// user's own MCP server, tool allow list and folder trust under /p.
const (
	hostProjectP      = `{"mcpServers":{"mine":{"command":"my-server"}},"allowedTools":["Read"],"hasTrustDialogAccepted":true,"history":[1]}`
	hostProjectsValue = `{"/p":` + hostProjectP + `,"/q":{"lastCost":1}}`
	hostProjects      = `{"numStartups":3,"projects":` + hostProjectsValue + `}`
)

// TestMergeAgentJSONTooDeep: a copy (or host file) nested far deeper than
// any agent writes is refused with an error, not a crash, and nothing is
// merged.
func TestMergeAgentJSONTooDeep(t *testing.T) {
	const n = 100000
	deep := `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	deepObj := `{"a":` + strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) + `}`
	atLimit := `{"a":` + strings.Repeat("[", maxJSONDepth-1) + strings.Repeat("]", maxJSONDepth-1) + `}`
	rule := claudeRule(t)
	for _, tt := range []struct{ name, base, ours, theirs, err string }{
		{"deep array inside", `{"a":1}`, deep, `{"a":1}`, "left it invalid"},
		{"deep object inside", `{"a":1}`, deepObj, `{"a":1}`, "left it invalid"},
		{"just past the limit inside", `{"a":1}`, `{"a":[` + atLimit[5:] + `]}`, `{"a":1}`, "left it invalid"},
		{"deep host file", `{"a":1}`, `{"a":2}`, deep, "host file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := MergeAgentJSON([]byte(tt.base), []byte(tt.ours), []byte(tt.theirs), rule)
			if err == nil || !errors.Is(err, ErrNotMerged) || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "nested deeper") {
				t.Fatalf("err = %v, want ErrNotMerged with %q and the nesting named", err, tt.err)
			}
			if changed || string(got) != tt.theirs {
				t.Errorf("the host content must come back unchanged (changed %v)", changed)
			}
		})
	}
	t.Run("at the limit: merged", func(t *testing.T) {
		got, changed, err := MergeAgentJSON([]byte(`{"a":1}`), []byte(atLimit), []byte(`{"a":1}`), rule)
		if err != nil || !changed {
			t.Fatalf("a copy nested %d levels: changed %v, err %v; want it merged", maxJSONDepth, changed, err)
		}
		if o, err := parseObject(got); err != nil || !equalValues(o, mustParse(t, atLimit)) {
			t.Errorf("merged output %v: %.80s", err, got)
		}
	})
}

func mustParse(t *testing.T, s string) *object {
	t.Helper()
	o, err := parseObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// compact renders a value on one line, members in order.
func compact(v any) string {
	var b strings.Builder
	switch x := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k) + ":" + compact(x.vals[k]))
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(compact(e))
		}
		b.WriteByte(']')
	case string:
		b.WriteString(strconv.Quote(x))
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	default:
		b.WriteString("null")
	}
	return b.String()
}

// TestMergeAgentJSONFormat: the merged file is written as Claude Code
// writes it (two-space indent, members in the host's order, numbers and
// non-ASCII text as they were).
func TestMergeAgentJSONFormat(t *testing.T) {
	base := `{"numStartups": 3, "projects": {"/p": {"a": 1}}}`
	ours := `{"numStartups": 4, "projects": {"/p": {"a": 1}}}`
	theirs := `{"userID": "é<>&", "numStartups": 3, "big": 12345678901234567890, "e": [], "o": {}, "projects": {"/p": {"a": 1}}}`
	got, changed, err := MergeAgentJSON([]byte(base), []byte(ours), []byte(theirs), claudeRule(t))
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	want := `{
  "userID": "é<>&",
  "numStartups": 4,
  "big": 12345678901234567890,
  "e": [],
  "o": {},
  "projects": {
    "/p": {
      "a": 1
    }
  }
}
`
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

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
		pol   Policy
		extra map[string]PathInfo
		mode  string // "" (no session copy), "copy" (bound over the file), "dir" (private directory)
		host  string
	}{
		{name: "allowWrite the file", pol: Policy{AllowWrite: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}, mode: "dir", host: claudeJSON},
		{name: "allowWrite the home", pol: Policy{AllowWrite: []string{"/home/u"}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}, mode: "copy", host: claudeJSON},
		{
			name: "a symlink, allowWrite the file", pol: Policy{AllowWrite: []string{claudeJSON}},
			extra: map[string]PathInfo{claudeJSON: {Exists: true, Link: "dots/claude.json", Resolved: "/home/u/dots/claude.json"}},
			mode:  "dir", host: "/home/u/dots/claude.json",
		},
		{name: "missing, allowWrite the file", pol: Policy{AllowWrite: []string{claudeJSON}}, mode: "dir", host: claudeJSON},
		{name: "missing, allowWrite the home", pol: Policy{AllowWrite: []string{"/home/u"}}},
		{name: "read-only", pol: Policy{AllowRead: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "denyWrite", pol: Policy{AllowWrite: []string{claudeJSON}, DenyWrite: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "denyWrite, missing", pol: Policy{AllowWrite: []string{claudeJSON}, DenyWrite: []string{claudeJSON}}},
		{name: "denyWrite the home, missing", pol: Policy{AllowWrite: []string{claudeJSON}, DenyWrite: []string{"/home/u"}}},
		{name: "denyRead a pattern, missing", pol: Policy{AllowWrite: []string{claudeJSON}, DenyRead: []string{"/home/u/.claude*"}}},
		{name: "denyRead", pol: Policy{AllowWrite: []string{claudeJSON}, DenyRead: []string{claudeJSON}}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "learning: the overlay throws it away", pol: Policy{Mode: "learning"}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
		{name: "learning, missing", pol: Policy{Mode: "learning", AllowWrite: []string{claudeJSON}}},
		{name: "not visible", pol: Policy{}, extra: map[string]PathInfo{claudeJSON: {Exists: true}}},
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
	pol := Policy{ProjectRoot: "/home/u/proj", AllowWrite: []string{"/home/u/.claude", "/home/u/.codex"}}
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
	paths, patterns := Interest(&pol, "/home/u")
	asked := " " + strings.Join(append(paths, patterns...), " ") + " "
	for _, want := range AgentCommandPaths("/home/u") {
		shown := strings.HasPrefix(want, "/home/u/.claude/") || strings.HasPrefix(want, "/home/u/.codex/")
		if got := strings.Contains(asked, " "+want+" "); got != shown {
			t.Errorf("Interest asks about %s: %v, want %v", want, got, shown)
		}
	}
	pol.AllowWrite = append(pol.AllowWrite, "/home/u/.claude.json")
	paths, _ = Interest(&pol, "/home/u")
	if !strings.Contains(" "+strings.Join(paths, " ")+" ", " /home/u/.claude.json ") {
		t.Errorf("Interest does not ask about a writable ~/.claude.json")
	}
}

// TestAgentHomeIsPure: the list, the table and the merge touch no kernel.
func TestAgentHomeIsPure(t *testing.T) {
	f, err := goparser.ParseFile(token.NewFileSet(), "agenthome.go", nil, goparser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "os" || p == "os/exec" || p == "syscall" || p == "golang.org/x/sys/unix" {
			t.Errorf("agenthome.go imports %s; only agenthome_linux.go touches files", p)
		}
	}
}
