package jail

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// trustCase sets one key of a project config; widens is what Widening must
// report for it ("" when it must report nothing).
type trustCase struct {
	set    func(c *Config, root, home string)
	widens string
}

// trustDecision is the decision for one schema key: why it widens or needs
// no trust, and cases that hold Widening to it.
type trustDecision struct {
	why   string
	cases []trustCase
}

func narrows(set func(c *Config, root, home string)) trustCase { return trustCase{set: set} }

func widens(want string, set func(c *Config, root, home string)) trustCase {
	return trustCase{set: set, widens: want}
}

// trustDecisions has an entry for every key of the schema, leaves only.
// A key added to Config and jail.schema.json without an entry here fails
// TestTrustCoversSchema: whoever adds it decides whether it needs trust.
var trustDecisions = map[string]trustDecision{
	"$schema": {"informational: editors read it, jail ignores it", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Schema = "https://jail.invalid/jail.schema.json" }),
	}},
	"description": {"informational: shown by jail profiles list", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Description = "allow everything" }),
	}},
	"extends": {"widens: a profile grants paths, domains and secrets", []trustCase{
		widens("extends profile node", func(c *Config, _, _ string) { c.Extends = []string{"node"} }),
	}},
	"filesystem.allowRead": {"widens outside the project, as written or through a symlink; inside, the project is readable anyway", []trustCase{
		widens("allowRead ~/.aws (outside the project)", func(c *Config, _, _ string) { c.Filesystem.AllowRead = []string{"~/.aws"} }),
		widens("allowRead ../ (outside the project)", func(c *Config, _, _ string) { c.Filesystem.AllowRead = []string{"../"} }),
		widens("allowRead home-link (through a symlink to", func(c *Config, _, _ string) { c.Filesystem.AllowRead = []string{"home-link"} }),
		widens("allowRead home-link/** (through a symlink to", func(c *Config, _, _ string) { c.Filesystem.AllowRead = []string{"home-link/**"} }),
		narrows(func(c *Config, _, _ string) { c.Filesystem.AllowRead = []string{"src", ".", ".env", "*"} }),
	}},
	"filesystem.allowWrite": {"widens outside the project, as written or through a symlink; inside, the project is writable anyway and deny beats allow", []trustCase{
		widens("allowWrite /tmp/out (outside the project)", func(c *Config, _, _ string) { c.Filesystem.AllowWrite = []string{"/tmp/out"} }),
		widens("allowWrite home-link/.config/autostart (through a symlink to", func(c *Config, _, _ string) {
			c.Filesystem.AllowWrite = []string{"home-link/.config/autostart"}
		}),
		narrows(func(c *Config, _, _ string) {
			c.Filesystem.AllowWrite = []string{".", ".git/hooks", "jail.json", ".env"}
		}),
	}},
	"filesystem.denyRead": {"narrows: masks more", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Filesystem.DenyRead = []string{"/etc", "~/.ssh", ".env", "/"} }),
	}},
	"filesystem.denyWrite": {"narrows: makes more read-only", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Filesystem.DenyWrite = []string{".", "/tmp"} }),
	}},
	"network.allow": {"widens: more domains", []trustCase{
		widens("network.allow evil.example", func(c *Config, _, _ string) { c.Network.Allow = []string{"evil.example"} }),
	}},
	"network.ask": {"narrows: a held connection passes only when the person answering allows it, deny beats ask, and what allow let through is held", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Network.Ask = []string{"*.example", "10.1.2.3", "evil.example:22"} }),
	}},
	"command.ask": {"narrows: a held exec runs only when the person answering approves it, and deny beats ask", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Command.Ask = []string{"git push", "bash"} }),
	}},
	"askTimeout": {"neutral: how long a held request waits before it is denied; no length lets anything through", []trustCase{
		narrows(func(c *Config, _, _ string) { c.AskTimeout = 3600 }),
		narrows(func(c *Config, _, _ string) { c.AskTimeout = 1 }),
	}},
	"network.deny": {"narrows: fewer domains", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Network.Deny = []string{"*.example"} }),
	}},
	"network.unknown": {`widens when "allow" (every domain) or a value trust does not know; "deny" narrows; "ask" lets nothing through that the person at the terminal did not allow`, []trustCase{
		widens(`network.unknown "allow"`, func(c *Config, _, _ string) { c.Network.Unknown = "allow" }),
		widens(`network.unknown "open"`, func(c *Config, _, _ string) { c.Network.Unknown = "open" }),
		narrows(func(c *Config, _, _ string) { c.Network.Unknown = "deny" }),
		narrows(func(c *Config, _, _ string) { c.Network.Unknown = "ask" }),
	}},
	"network.hosts": {"widens: a host's traffic, and the secrets bound to it, go elsewhere", []trustCase{
		widens("network.hosts api.anthropic.com -> 127.0.0.1:9", func(c *Config, _, _ string) {
			c.Network.Hosts = map[string]string{"api.anthropic.com": "127.0.0.1:9"}
		}),
	}},
	"network.passthrough": {"widens: traffic the proxy does not inspect", []trustCase{
		widens("network.passthrough api.github.com (not inspected)", func(c *Config, _, _ string) { c.Network.Passthrough = []string{"api.github.com"} }),
	}},
	"secrets.env.*.hosts": {"widens when it binds a secret to any host (bindings merge over the user's); bound to no host it only masks", []trustCase{
		widens("secrets.env GITHUB_TOKEN may be sent to [evil.example]", func(c *Config, _, _ string) {
			c.Secrets.Env = map[string]SecretEnv{"GITHUB_TOKEN": {Hosts: []string{"evil.example"}}}
		}),
		widens("secrets.env GITHUB_TOKEN may be sent to [github.com]", func(c *Config, _, _ string) {
			c.Secrets.Env = map[string]SecretEnv{"GITHUB_TOKEN": {Hosts: []string{"github.com"}}}
		}),
		narrows(func(c *Config, _, _ string) { c.Secrets.Env = map[string]SecretEnv{"DB_PASSWORD": {Hosts: []string{}}} }),
	}},
	"secrets.env.*.inject": {"widens when it lets a value into a URL's query or path or a body: a placeholder there is text the jailed process wrote (a prompt, a logged URL), which would then carry the real value to what the provider stores or shows; header fields, to hosts already bound, need no trust", []trustCase{
		widens("secrets.env ANTHROPIC_API_KEY may be injected into body", func(c *Config, _, _ string) {
			c.Secrets.Env = map[string]SecretEnv{"ANTHROPIC_API_KEY": {Inject: []string{"header:x-api-key", "body"}}}
		}),
		widens("secrets.env GEMINI_API_KEY may be injected into query:key, path", func(c *Config, _, _ string) {
			c.Secrets.Env = map[string]SecretEnv{"GEMINI_API_KEY": {Inject: []string{"query:key", "path"}}}
		}),
		widens("secrets.env K may be injected into query", func(c *Config, _, _ string) {
			c.Secrets.Env = map[string]SecretEnv{"K": {Inject: []string{"query"}}}
		}),
		narrows(func(c *Config, _, _ string) {
			c.Secrets.Env = map[string]SecretEnv{"K": {Inject: []string{"header", "header:Authorization"}}}
		}),
	}},
	"secrets.files": {"widens whenever written: the project decides which files jail reads and masks (the .env defaults stay)", []trustCase{
		widens("secrets.files []", func(c *Config, _, _ string) { c.Secrets.Files = []string{} }),
		widens("secrets.files nothing", func(c *Config, _, _ string) { c.Secrets.Files = []string{"nothing"} }),
	}},
	"command.deny": {"narrows: fewer commands", []trustCase{
		narrows(func(c *Config, _, _ string) { c.Command.Deny = []string{"git push", "npm publish"} }),
	}},
	"command.allow": {"widens: exceptions to the user's command.deny", []trustCase{
		widens(`command.allow "git push"`, func(c *Config, _, _ string) { c.Command.Allow = []string{"git push"} }),
	}},
	"env.pass": {"widens: a real value enters the jail unmasked, whatever the name (a value can look secret)", []trustCase{
		widens("env.pass GITHUB_TOKEN", func(c *Config, _, _ string) { c.Env.Pass = []string{"GITHUB_TOKEN"} }),
		widens("env.pass PLAIN", func(c *Config, _, _ string) { c.Env.Pass = []string{"PLAIN"} }),
	}},
	"env.set": {"widens for every name: the programs that read a variable decide what it does", []trustCase{
		widens("env.set ANTHROPIC_API_KEY=sk-ant-stranger (replaces a secret", func(c *Config, _, _ string) {
			c.Env.Set = map[string]string{"ANTHROPIC_API_KEY": "sk-ant-stranger"}
		}),
		widens("env.set LD_PRELOAD=./x.so", func(c *Config, _, _ string) { c.Env.Set = map[string]string{"LD_PRELOAD": "./x.so"} }),
		widens("env.set NO_PROXY=*", func(c *Config, _, _ string) { c.Env.Set = map[string]string{"NO_PROXY": "*"} }),
		widens("env.set CI=1", func(c *Config, _, _ string) { c.Env.Set = map[string]string{"CI": "1"} }),
	}},
	"agentSandbox": {"widens: it turns off a confinement the user may have chosen for the agent, inside the jail's", []trustCase{
		widens("agentSandbox codex (turns the agent's own sandbox off)", func(c *Config, _, _ string) { c.AgentSandbox = "codex" }),
	}},
	"remote.*.host": {"refused in a project (LoadLayers), and reported should one get that far: it picks where the code and agent go", []trustCase{
		widens("remote box", func(c *Config, _, _ string) { c.Remote = map[string]RemoteHost{"box": {Host: "evil.example.test"}} }),
	}},
	"remote.*.user": {"refused in a project, as remote.*.host", []trustCase{
		widens("remote box", func(c *Config, _, _ string) { c.Remote = map[string]RemoteHost{"box": {User: "evil"}} }),
	}},
	"remote.*.port": {"refused in a project, as remote.*.host", []trustCase{
		widens("remote box", func(c *Config, _, _ string) { c.Remote = map[string]RemoteHost{"box": {Port: 2222}} }),
	}},
	"remote.*.dir": {"refused in a project, as remote.*.host", []trustCase{
		widens("remote box", func(c *Config, _, _ string) { c.Remote = map[string]RemoteHost{"box": {Dir: "~/x"}} }),
	}},
	"learned.command":    {"informational: what a learning run saw", []trustCase{narrows(func(c *Config, _, _ string) { c.Learned.Command = "npm test" })}},
	"learned.tracer":     {"informational: what a learning run saw", []trustCase{narrows(func(c *Config, _, _ string) { c.Learned.Tracer = "ebpf" })}},
	"learned.programs":   {"informational: what a learning run saw", []trustCase{narrows(func(c *Config, _, _ string) { c.Learned.Programs = []string{"/usr/bin/node"} })}},
	"learned.keptDenied": {"informational: what a learning run saw", []trustCase{narrows(func(c *Config, _, _ string) { c.Learned.KeptDenied = []string{"~/.ssh"} })}},
}

// TestTrustCoversSchema walks every key of Config and of jail.schema.json
// and holds Widening to the decision recorded for it: each widening case
// is reported, each narrowing or informational one is not, and each case
// sets its own key and nothing else.
func TestTrustCoversSchema(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range configKeys(reflect.TypeOf(Config{}), "") {
		keys[k] = true
	}
	for _, k := range schemaLeafKeys(t) {
		if !keys[k] {
			t.Errorf("jail.schema.json has %q, Config does not", k)
		}
		keys[k] = true
	}
	for _, k := range SortedKeys(keys) {
		if _, ok := trustDecisions[k]; !ok {
			t.Errorf("schema key %q has no trust decision: add it to trustDecisions (does it widen the jail? then Widening must report it)", k)
		}
	}
	for _, k := range SortedKeys(trustDecisions) {
		if !keys[k] {
			t.Errorf("trustDecisions has %q, which is no schema key", k)
		}
	}

	home := t.TempDir()
	root := filepath.Join(home, "proj")
	if err := os.MkdirAll(filepath.Join(root, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, filepath.Join(root, "home-link")); err != nil {
		t.Fatal(err)
	}
	if w := Widening(&Config{Dir: root}, root, home); len(w) != 0 {
		t.Fatalf("an empty config widens: %v", w)
	}
	for _, k := range SortedKeys(trustDecisions) {
		d := trustDecisions[k]
		if d.why == "" || len(d.cases) == 0 {
			t.Errorf("%s: a decision needs a reason and at least one case", k)
		}
		for i, tc := range d.cases {
			c := &Config{Dir: root}
			tc.set(c, root, home)
			if only := setOnly(c, k); only != "" {
				t.Errorf("%s case %d: %s", k, i, only)
			}
			got := Widening(c, root, home)
			switch {
			case tc.widens == "" && len(got) != 0:
				t.Errorf("%s case %d (%s) needs no trust, but Widening reports %q", k, i, d.why, got)
			case tc.widens != "" && !hasPrefixIn(got, tc.widens):
				t.Errorf("%s case %d (%s): Widening must report %q, got %q", k, i, d.why, tc.widens, got)
			}
		}
	}
}

// configKeys lists Config's keys by their json names, dotted, leaves only.
func configKeys(typ reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, configKeys(f.Type, prefix+name+".")...)
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			// A map of objects: each member's keys, under "*".
			out = append(out, configKeys(f.Type.Elem(), prefix+name+".*.")...)
		default:
			out = append(out, prefix+name)
		}
	}
	return out
}

// schemaLeafKeys lists the schema's keys the same way: an object with
// properties is walked into, anything else is a leaf.
func schemaLeafKeys(t *testing.T) []string {
	var root map[string]any
	if err := json.Unmarshal(Schema, &root); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(s map[string]any, prefix string)
	walk = func(s map[string]any, prefix string) {
		props, _ := s["properties"].(map[string]any)
		for name, sub := range props {
			sub, _ := sub.(map[string]any)
			if _, nested := sub["properties"]; nested {
				walk(sub, prefix+name+".")
			} else if obj := memberObject(sub); obj != nil {
				walk(obj, prefix+name+".*.")
			} else {
				out = append(out, prefix+name)
			}
		}
	}
	walk(root, "")
	sort.Strings(out)
	return out
}

// memberObject is the object schema of a map's members when they are
// objects with properties (one branch of an anyOf, when they have two
// forms), or nil.
func memberObject(s map[string]any) map[string]any {
	ap, _ := s["additionalProperties"].(map[string]any)
	if ap == nil {
		return nil
	}
	branches, _ := ap["anyOf"].([]any)
	for _, b := range append(branches, ap) {
		if b, _ := b.(map[string]any); b["type"] == "object" && b["properties"] != nil {
			return b
		}
	}
	return nil
}

// setOnly says what is wrong when c, apart from Dir, sets anything but
// the key at path.
func setOnly(c *Config, path string) string {
	v := reflect.ValueOf(c).Elem()
	field, ok := fieldAt(v, path)
	if !ok {
		return "no such field"
	}
	if field.IsZero() {
		return "the case does not set its key"
	}
	cp := *c
	cp.Dir = ""
	f, _ := fieldAt(reflect.ValueOf(&cp).Elem(), path)
	f.Set(reflect.Zero(f.Type()))
	if !reflect.ValueOf(cp).IsZero() {
		return "the case sets other keys too"
	}
	if _, member, ok := strings.Cut(path, ".*."); ok {
		// Under a map of objects: each member sets that key only.
		for _, k := range field.MapKeys() {
			m := reflect.New(field.Type().Elem()).Elem()
			m.Set(field.MapIndex(k))
			if sub, ok := fieldAt(m, member); !ok || sub.IsZero() {
				return "a member does not set " + member
			} else {
				sub.Set(reflect.Zero(sub.Type()))
			}
			if !m.IsZero() {
				return "a member sets other keys than " + member
			}
		}
	}
	return ""
}

// fieldAt finds the field of a Config value at a dotted json key path.
func fieldAt(v reflect.Value, path string) (reflect.Value, bool) {
	for _, name := range strings.Split(path, ".") {
		if v.Kind() == reflect.Map {
			return v, true // the map holds the members' keys
		}
		found := false
		for i := 0; i < v.NumField(); i++ {
			if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); tag == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return v, false
		}
	}
	return v, true
}

func hasPrefixIn(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
