package profiles

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

// lineup is the set of built-in profiles jail ships, no more, no less.
var lineup = []string{
	"claude", "codex", "gemini", "opencode", "aider", "cursor-agent", "goose", "amp", "copilot", "pi",
	"node", "python", "go", "rust", "java", "ruby", "git",
}

// agents are the lineup's coding agents; the rest are toolchains.
var agents = lineup[:10]

// known lists the keys a profile may use, per object. The strict parser in
// package jail is the authority; this catches typos in this package alone.
var known = map[string][]string{
	"":           {"description", "extends", "filesystem", "network", "secrets", "command", "env", "agentSandbox"},
	"filesystem": {"allowRead", "allowWrite", "denyRead", "denyWrite"},
	"network":    {"allow", "deny", "unknown", "hosts", "passthrough"},
	"secrets":    {"env", "files"},
	"command":    {"deny", "allow"},
	"env":        {"pass", "set"},
}

// forbiddenHosts are package registries' host names. Profiles never name
// them: jail resolves registries from the toolchain's own configuration.
// They are assembled from parts so that this file does not contain them.
func forbiddenHosts() []string {
	return []string{
		"registry." + "npmjs.org",
		"registry.yarnpkg" + ".com",
		"registry.npmjs" + ".com",
		"pypi" + ".org",
		"pypi" + ".python.org",
		"files.python" + "hosted.org",
		"proxy." + "golang.org",
		"sum." + "golang.org",
		"index.golang" + ".org",
		"crates" + ".io",
		"static.crates" + ".io",
		"index.crates" + ".io",
		"rubygems" + ".org",
		"index.rubygems" + ".org",
		"repo1.maven" + ".org",
		"repo.maven.apache" + ".org",
		"plugins.gradle" + ".org",
		"services.gradle" + ".org",
	}
}

// profile is one parsed profile with its raw bytes.
type profile struct {
	name string
	raw  []byte
	doc  map[string]any
}

func load(t *testing.T) []profile {
	t.Helper()
	files, err := fs.Glob(FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []profile
	for _, f := range files {
		raw, err := fs.ReadFile(FS, f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Errorf("%s: not JSON: %v", f, err)
			continue
		}
		out = append(out, profile{name: strings.TrimSuffix(f, ".json"), raw: raw, doc: doc})
	}
	return out
}

// object returns a sub-object of a profile (nil when absent).
func (p profile) object(key string) map[string]any {
	m, _ := p.doc[key].(map[string]any)
	return m
}

// list returns the strings at section.key (nil when absent).
func (p profile) list(section, key string) []string {
	var out []string
	items, _ := p.object(section)[key].([]any)
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

func TestLineup(t *testing.T) {
	var names []string
	for _, p := range load(t) {
		names = append(names, p.name)
	}
	want := slices.Clone(lineup)
	sort.Strings(want)
	sort.Strings(names)
	if !slices.Equal(names, want) {
		t.Errorf("profiles are %v, want exactly %v", names, want)
	}
}

func TestShape(t *testing.T) {
	for _, p := range load(t) {
		desc, _ := p.doc["description"].(string)
		if strings.TrimSpace(desc) == "" {
			t.Errorf("%s: no \"description\"", p.name)
		}
		if strings.ContainsAny(desc, "\r\n") {
			t.Errorf("%s: the description must be one line", p.name)
		}
		for key, v := range p.doc {
			if !slices.Contains(known[""], key) {
				t.Errorf("%s: unknown top-level key %q", p.name, key)
				continue
			}
			sub, ok := known[key]
			if !ok {
				continue
			}
			m, ok := v.(map[string]any)
			if !ok {
				t.Errorf("%s: %q must be an object", p.name, key)
				continue
			}
			for k, val := range m {
				if !slices.Contains(sub, k) {
					t.Errorf("%s: unknown key %q in %q", p.name, k, key)
				}
				checkStrings(t, p.name+": "+key+"."+k, val)
			}
		}
		if ext, ok := p.doc["extends"]; ok {
			checkStrings(t, p.name+": extends", ext)
		}
	}
}

// checkStrings accepts a string, a list of strings, or an object whose
// values are strings or lists of strings, none of them empty.
func checkStrings(t *testing.T, where string, v any) {
	t.Helper()
	switch v := v.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			t.Errorf("%s: empty string", where)
		}
	case []any:
		if len(v) == 0 {
			t.Errorf("%s: empty list (leave the key out)", where)
		}
		for _, it := range v {
			if s, ok := it.(string); !ok || strings.TrimSpace(s) == "" {
				t.Errorf("%s: %v is not a non-empty string", where, it)
			}
		}
	case map[string]any:
		for k, val := range v {
			if _, isMap := val.(map[string]any); isMap {
				t.Errorf("%s.%s: nested too deeply", where, k)
				continue
			}
			checkStrings(t, where+"."+k, val)
		}
	default:
		t.Errorf("%s: %T is not a string, a list or an object", where, v)
	}
}

func TestNoRegistryHosts(t *testing.T) {
	for _, p := range load(t) {
		text := strings.ToLower(string(p.raw))
		for _, h := range forbiddenHosts() {
			if strings.Contains(text, h) {
				t.Errorf("%s names the package registry %s; registries are resolved from the toolchain's configuration", p.name, h)
			}
		}
	}
}

// TestPaths checks that every path is under the home, and that no profile
// makes the home, a whole XDG root or a delayed-escape path writable.
func TestPaths(t *testing.T) {
	tooWide := []string{"~", "~/.config", "~/.local", "~/.local/share", "~/.local/state", "~/.local/bin", "~/.cache"}
	protected := []string{
		"~/.ssh", "~/.gnupg", "~/.aws", "~/.gitconfig", "~/.config/git", "~/.config/jail", "~/.config/fish",
		"~/.bashrc", "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.zshrc", "~/.zshenv", "~/.zprofile", "~/.zlogin",
		"~/.netrc", "~/.git-credentials", "~/.npmrc", "~/.pypirc", "~/.local/share/keyrings",
		// Caches an unjailed build runs from unchecked: the jail gets its own.
		"~/.cache/go-build", "~/go/pkg/mod", "~/go/bin", "~/.m2/repository", "~/.gradle/caches", "~/.gradle/wrapper",
		"~/.cache/pip", "~/.cache/uv", "~/.cargo/registry/src", "~/.cargo/git/checkouts", "~/.rustup",
	}
	for _, p := range load(t) {
		for _, key := range known["filesystem"] {
			for _, s := range p.list("filesystem", key) {
				if !strings.HasPrefix(s, "~/") || path.Clean(s) != s || strings.Contains(s, "/../") {
					t.Errorf("%s: %s %q must be a clean path under ~/", p.name, key, s)
				}
			}
		}
		for _, w := range p.list("filesystem", "allowWrite") {
			if slices.Contains(tooWide, w) {
				t.Errorf("%s: allowWrite %q is far too wide", p.name, w)
			}
			for _, pr := range protected {
				if under(pr, w) || under(w, pr) {
					t.Errorf("%s: allowWrite %q would make %s writable", p.name, w, pr)
				}
			}
		}
		for _, r := range p.list("filesystem", "allowRead") {
			for _, pr := range protected[:3] {
				if under(pr, r) {
					t.Errorf("%s: allowRead %q exposes %s", p.name, r, pr)
				}
			}
		}
		// A deny rule only means something inside what the profile opens.
		opened := append(p.list("filesystem", "allowRead"), p.list("filesystem", "allowWrite")...)
		for _, key := range []string{"denyRead", "denyWrite"} {
			for _, d := range p.list("filesystem", key) {
				if !slices.ContainsFunc(opened, func(o string) bool { return under(d, o) && d != o }) {
					t.Errorf("%s: %s %q is not inside anything the profile allows", p.name, key, d)
				}
			}
		}
	}
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// TestNetwork checks that no profile opens the network wholesale or passes
// a secret through unmasked, and that every secret binding points at a host
// the same profile allows (a binding elsewhere could never be used).
func TestNetwork(t *testing.T) {
	for _, p := range load(t) {
		if _, ok := p.object("network")["unknown"]; ok {
			t.Errorf("%s: a profile must not set network.unknown", p.name)
		}
		if _, ok := p.object("env")["pass"]; ok {
			t.Errorf("%s: a profile must not pass variables through unmasked", p.name)
		}
		allow := p.list("network", "allow")
		for _, a := range allow {
			if strings.Contains(a, "/") || strings.HasPrefix(a, "*") && !strings.HasPrefix(a, "*.") {
				t.Errorf("%s: %q is not a domain rule", p.name, a)
			}
		}
		env, _ := p.object("secrets")["env"].(map[string]any)
		for name, hosts := range env {
			list, _ := hosts.([]any)
			for _, h := range list {
				host, _ := h.(string)
				if !slices.ContainsFunc(allow, func(rule string) bool { return covers(rule, host) }) {
					t.Errorf("%s: %s is bound to %s, which network.allow does not allow", p.name, name, host)
				}
			}
		}
	}
}

// covers reports whether a domain rule allows every host a secret binding
// names: the same rule, or a wildcard over it ("*.x" covers "a.x" and
// "*.a.x" but not the bare "x", as in the proxy).
func covers(rule, host string) bool {
	if rule == host {
		return true
	}
	suffix, ok := strings.CutPrefix(rule, "*.")
	if !ok {
		return false
	}
	return strings.HasSuffix(strings.TrimPrefix(host, "*."), "."+suffix) ||
		strings.HasPrefix(host, "*.") && strings.TrimPrefix(host, "*.") == suffix
}

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		rule, host string
		want       bool
	}{
		{"api.x.test", "api.x.test", true},
		{"*.x.test", "api.x.test", true},
		{"*.x.test", "*.x.test", true},
		{"*.x.test", "*.a.x.test", true},
		{"*.x.test", "x.test", false},
		{"x.test", "*.x.test", false},
		{"x.test", "api.x.test", false},
		{"*.x.test", "evilx.test", false},
	} {
		if got := covers(c.rule, c.host); got != c.want {
			t.Errorf("covers(%q, %q) = %v, want %v", c.rule, c.host, got, c.want)
		}
	}
}

// TestAgents checks that agents stand alone (composition is by --profile
// a,b) and that each binds at least one credential to its provider.
func TestAgents(t *testing.T) {
	byName := map[string]profile{}
	for _, p := range load(t) {
		byName[p.name] = p
	}
	for _, a := range agents {
		p, ok := byName[a]
		if !ok {
			continue // TestLineup reports it
		}
		if _, ok := p.doc["extends"]; ok {
			t.Errorf("%s: an agent profile extends nothing", a)
		}
		if len(p.list("network", "allow")) == 0 {
			t.Errorf("%s: an agent needs its API hosts", a)
		}
		if len(p.object("secrets")) == 0 {
			t.Errorf("%s: an agent binds its credentials to its provider", a)
		}
		if len(p.list("filesystem", "allowWrite")) == 0 {
			t.Errorf("%s: an agent keeps its state somewhere", a)
		}
	}
	for _, p := range byName {
		ext, _ := p.doc["extends"].([]any)
		for _, x := range ext {
			e, _ := x.(string)
			if _, ok := byName[e]; !ok || e == p.name {
				t.Errorf("%s extends %q, which is not another built-in profile", p.name, e)
			}
		}
	}
}

// TestNoConflicts checks that no profile denies a path another opens, so
// that any two compose without one silently undoing the other.
func TestNoConflicts(t *testing.T) {
	ps := load(t)
	for _, a := range ps {
		for _, b := range ps {
			if a.name == b.name {
				continue
			}
			for _, key := range []string{"allowRead", "allowWrite"} {
				for _, o := range a.list("filesystem", key) {
					for _, dk := range []string{"denyRead", "denyWrite"} {
						for _, d := range b.list("filesystem", dk) {
							if under(o, d) {
								t.Errorf("%s %s %q is undone by %s %s %q", a.name, key, o, b.name, dk, d)
							}
						}
					}
				}
			}
		}
	}
}

// TestFormatted keeps the files readable: two-space indentation as
// json.Indent would leave it for objects, and a final newline.
func TestFormatted(t *testing.T) {
	for _, p := range load(t) {
		if !bytes.HasSuffix(p.raw, []byte("}\n")) {
			t.Errorf("%s: must end with a newline after the closing brace", p.name)
		}
		if bytes.Contains(p.raw, []byte("\t")) {
			t.Errorf("%s: indent with spaces", p.name)
		}
	}
}
