package jail

import (
	"encoding/json"
	"errors"
	goparser "go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

func claudeRule(t *testing.T) AgentFileRule {
	t.Helper()
	for _, a := range AgentFileRules {
		if a.Rel == ".claude.json" {
			return a
		}
	}
	t.Fatal("no rule for ~/.claude.json")
	return AgentFileRule{}
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
