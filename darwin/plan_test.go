package darwin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/proxy"
)

// The fixed fake machine of the planner's goldens.
const (
	alice = "/Users/alice"
	app   = "/Users/alice/src/app"
)

func noEnv(string) string { return "" }

// realPolicy resolves the policy jail would for cmd run in project with
// home, through the real layers (built-in profiles, flags), and with the
// config file cfg (when not "") as the project's jail.json.
func realPolicy(t testing.TB, opts jail.Options, cmd, project, home, cfg string) *jail.Policy {
	t.Helper()
	argv := []string{cmd}
	layers, root, err := jail.LoadLayers(opts, argv, project, home, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != "" {
		c, err := jail.LoadConfigFile(cfg, "jail.json")
		if err != nil {
			t.Fatal(err)
		}
		c.Dir, c.Project = project, true
		layers = append(layers[:len(layers)-1:len(layers)-1], c, layers[len(layers)-1])
	}
	pol, err := jail.Resolve(layers, root, home, opts)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// fakeFacts are the facts of the fake machine: nothing is stat'ed.
func fakeFacts(project, home string) *Facts {
	return &Facts{
		Home: home, Cwd: project,
		SessionDir: "/private/var/folders/zz/abc/T/jail-0123456789abcdef",
		Env:        []string{"HOME=" + home, "PATH=/usr/bin:/bin", "OPENAI_API_KEY=sk-proj-" + strings.Repeat("A1b2", 10), "LANG=en_US.UTF-8"},
		Session:    "0123456789abcdef",
		SecretKey:  jail.SessionKey("fixed-key-for-goldens"),
		CADir:      CADir(home, noEnv),
		StateDir:   jail.StateDir(home, noEnv),
		HostCAFile: "/private/etc/ssl/cert.pem",
		ProxyPort:  PlanPort,
	}
}

// agentProfiles are the built-in profiles of coding agents.
var agentProfiles = []string{"aider", "amp", "claude", "codex", "copilot", "cursor-agent", "gemini", "goose", "opencode", "pi"}

func TestPlanGolden(t *testing.T) {
	type tc struct {
		opts jail.Options
		cmd  string
		cfg  string
	}
	cases := map[string]tc{
		"default": {jail.Options{NoProfile: true}, "sh", ""},
		"readme":  {jail.Options{NoProfile: true}, "sh", "testdata/readme-jail.json"},
		"globs-masks": {jail.Options{NoProfile: true,
			AllowRead:  []string{"~/.config/tool-*", "~/notes"},
			AllowWrite: []string{"~/.cache/*/jail"},
			DenyRead:   []string{"secrets/**", "**/*.pem", "~/notes/private*"},
		}, "sh", ""},
	}
	for _, a := range agentProfiles {
		cases["agent-"+a] = tc{jail.Options{Profiles: []string{a}}, a, ""}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			pol := realPolicy(t, c.opts, c.cmd, app, alice, c.cfg)
			p, err := Build(pol, fakeFacts(app, alice), []string{c.cmd})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, p.Policy, p.Profile)
			if strings.Contains(p.Profile.Text, "alice") {
				t.Error("the home's name is in the profile text")
			}
			got := append([]byte("# "+strings.ReplaceAll(p.CommandLine(), "\n", "\n# ")+"\n"), render(p.Profile)...)
			file := filepath.Join("testdata", "plan-"+name+".sb")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test ./darwin -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the planned profile:\n%s", file, lineDiff(string(want), string(got)))
			}
		})
	}
}

// TestReadmeExample keeps testdata/readme-jail.json equal to the README's
// example jail.json, so the golden shows what the README promises.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```json block")
	}
	ours, err := os.ReadFile("testdata/readme-jail.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(m[1]), bytes.TrimSpace(ours)) {
		t.Errorf("testdata/readme-jail.json differs from the README's first json block:\n%s", m[1])
	}
}

func plan(t *testing.T, pol *jail.Policy, f *Facts) *Plan {
	t.Helper()
	p, err := Build(pol, f, []string{"sh"})
	if err != nil {
		t.Fatal(err)
	}
	validate(t, p.Policy, p.Profile)
	return p
}

func want(t *testing.T, p *Plan, op, path string, allowed bool) {
	t.Helper()
	if got := evaluate(t, p.Profile, op, path); got != allowed {
		t.Errorf("%s %s: allowed=%v, want %v", op, path, got, allowed)
	}
}

// TestPlanEnvFilesMasked: a .env anywhere in the project, existing or not
// yet, is neither readable nor writable, and its secret values reach the
// command as placeholders that the proxy swaps back.
func TestPlanEnvFilesMasked(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", app, alice, "")
	f := fakeFacts(app, alice)
	f.EnvFileSecrets = []EnvFileSecret{{File: app + "/.env", Name: "STRIPE_SECRET_KEY", Value: "sk_live_" + strings.Repeat("x9", 12)}}
	p := plan(t, pol, f)
	for _, path := range []string{app + "/.env", app + "/api/.env", app + "/a/b/.env.production", app + "/.envrc.d/x", app + "/.envs/prod/key"} {
		want(t, p, "file-read-data", path, false)
		want(t, p, "file-write-create", path, false)
	}
	want(t, p, "file-read-data", app+"/api/main.go", true)
	var ph string
	for _, kv := range p.Env {
		if v, ok := strings.CutPrefix(kv, "STRIPE_SECRET_KEY="); ok {
			ph = v
		}
		if strings.Contains(kv, "x9x9x9x9") || strings.Contains(kv, "A1b2A1b2") {
			t.Errorf("a secret value reaches the environment: %s", kv)
		}
	}
	if ph == "" || !slices.ContainsFunc(p.Secrets, func(s proxySecret) bool { return s.Placeholder == ph && strings.HasPrefix(s.Value, "sk_live_") }) {
		t.Errorf("the .env secret is not offered as a placeholder the proxy knows: env %q, secrets %d", ph, len(p.Secrets))
	}
	if !slices.ContainsFunc(p.Secrets, func(s proxySecret) bool {
		return s.Name == "OPENAI_API_KEY" && strings.HasPrefix(s.Value, "sk-proj-A1b2")
	}) {
		t.Error("the environment's secret is not handed to the proxy")
	}
}

// TestPlanEnvLinkTarget: a .env symlink's target is masked too, since
// Seatbelt checks the path a link resolves to.
func TestPlanEnvLinkTarget(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", app, alice, "")
	f := fakeFacts(app, alice)
	f.EnvLinkTargets = []string{app + "/config/prod-values"}
	p := plan(t, pol, f)
	want(t, p, "file-read-data", app+"/config/prod-values", false)
	want(t, p, "file-read-data", app+"/config/other", true)
}

// TestPlanProtectedMissing: protected paths that do not exist are still
// read-only (a rule is a string match), in the project and in a writable
// home tree, and git's own files in nested clones too.
func TestPlanProtectedMissing(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true, AllowWrite: []string{"~"}}, "sh", app, alice, "")
	p := plan(t, pol, fakeFacts(app, alice))
	for _, path := range []string{
		app + "/.git/hooks/pre-commit", app + "/.git/config", app + "/.vscode/settings.json", app + "/.envrc",
		app + "/.claude/settings.json", app + "/.mcp.json", app + "/vendor/lib/.git/hooks/post-checkout",
		app + "/deep/x/jail.json", app + "/HEAD", alice + "/.zshrc", alice + "/.gitconfig", alice + "/.config/jail/config.json",
	} {
		want(t, p, "file-write-create", path, false)
		want(t, p, "file-write-data", path, false)
	}
	want(t, p, "file-write-create", app+"/.git/objects/ab/cdef", true)
	want(t, p, "file-write-create", app+"/src/new.go", true)
	want(t, p, "file-write-unlink", app+"/.git", false)
}

// TestPlanAgentCommandFiles: with Claude Code's profile, its state
// directory is writable, but the files declaring commands the unjailed
// agent runs later (settings, hooks, ~/.claude.json's MCP servers) are not.
func TestPlanAgentCommandFiles(t *testing.T) {
	pol := realPolicy(t, jail.Options{Profiles: []string{"claude"}}, "claude", app, alice, "")
	p := plan(t, pol, fakeFacts(app, alice))
	want(t, p, "file-write-create", alice+"/.claude/projects/x.jsonl", true)
	for _, path := range []string{alice + "/.claude.json", alice + "/.claude/settings.json", alice + "/.claude/hooks/h.sh", alice + "/.claude/commands/c.md"} {
		want(t, p, "file-write-data", path, false)
	}
}

// TestPlanCredentialStores: with the whole home readable, its credential
// stores and jail's own CA and log stay masked.
func TestPlanCredentialStores(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true, AllowRead: []string{"~"}}, "sh", app, alice, "")
	p := plan(t, pol, fakeFacts(app, alice))
	for _, path := range []string{
		alice + "/.ssh/id_ed25519", alice + "/.aws/credentials", alice + "/.config/gh/hosts.yml", alice + "/.netrc",
		alice + "/.gnupg/private-keys-v1.d/k", alice + "/Library/Application Support/jail/ca/ca-key.pem",
		alice + "/.local/state/jail/decisions.jsonl", "/private/etc/sudoers",
	} {
		want(t, p, "file-read-data", path, false)
	}
	want(t, p, "file-read-data", alice+"/notes.txt", true)
}

// TestPlanHostileProjectName: a project directory whose name would close
// an SBPL string and open a rule leaves no byte in the profile text; one
// with a newline is refused, so nothing runs.
func TestPlanHostileProjectName(t *testing.T) {
	evil := alice + `/src/x")(allow default)(" ;y`
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", evil, alice, "")
	p := plan(t, pol, fakeFacts(evil, alice))
	assertNoPathParts(t, p.Policy, p.Profile.Text)
	if strings.Contains(p.Profile.Text, "allow default") || strings.Contains(p.Profile.Text, ";y") {
		t.Error("the project's name reached the profile text")
	}
	if !slices.Contains(p.Profile.Params, Param{"PROJECT_0", evil}) {
		t.Error("the project is not passed as a parameter")
	}
	glob := alice + "/src/[x]"
	pol = realPolicy(t, jail.Options{NoProfile: true}, "sh", glob, alice, "")
	if _, err := Build(pol, fakeFacts(glob, alice), []string{"sh"}); err == nil || !strings.Contains(err.Error(), "glob character") {
		t.Errorf("a project whose name reads as a pattern (its .env masks would miss) was planned: %v", err)
	}
	nl := alice + "/src/x\n(allow default)"
	pol = realPolicy(t, jail.Options{NoProfile: true}, "sh", nl, alice, "")
	if p, err := Build(pol, fakeFacts(nl, alice), []string{"sh"}); err == nil {
		t.Errorf("a project name with a newline was planned: %q", p.Profile.Text)
	}
}

// outbound lists the remote filters of the profile's outbound rules.
func outbound(t *testing.T, p *Plan) []string {
	forms, err := parseSexp(p.Profile.Text)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range forms[2:] {
		if f.head() == "allow" && slices.ContainsFunc(f.list[1:], func(n node) bool { return n.atom == "network-outbound" || n.atom == "network*" }) {
			for _, n := range f.list[1:] {
				if n.isList {
					out = append(out, render1(n))
				} else if n.atom == "network*" {
					out = append(out, "network*")
				}
			}
			if len(f.list) == 2 {
				out = append(out, "(unfiltered)")
			}
		}
	}
	return out
}

// TestPlanNetwork: only the proxy's port (and forwarded host ports) is
// reachable; with --no-network there is no outbound rule at all and no
// proxy variable.
func TestPlanNetwork(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true, Publish: []int{8080}}, "sh", app, alice, "")
	p := plan(t, pol, fakeFacts(app, alice))
	if got := outbound(t, p); !slices.Equal(got, []string{`(remote tcp "localhost:3128")`}) {
		t.Errorf("outbound rules: %v, want the proxy port alone", got)
	}
	if !slices.Contains(p.Env, "HTTPS_PROXY=http://127.0.0.1:3128") || !slices.Contains(p.Env, "all_proxy=socks5h://127.0.0.1:3128") {
		t.Errorf("proxy variables missing: %v", p.Env)
	}
	if !slices.Contains(p.Env, "SSL_CERT_FILE="+p.Bundle) || !slices.Contains(p.Policy.Read, p.Bundle) {
		t.Error("the CA bundle is not named or not readable")
	}
	want(t, p, "file-write-data", p.Bundle, false)

	pol = realPolicy(t, jail.Options{NoProfile: true, Forward: []int{5432}}, "sh", app, alice, "")
	p = plan(t, pol, fakeFacts(app, alice))
	if got := outbound(t, p); !slices.Equal(got, []string{`(remote tcp "localhost:3128")`, `(remote tcp "localhost:5432")`}) {
		t.Errorf("outbound rules with a forwarded port: %v", got)
	}

	pol = realPolicy(t, jail.Options{NoProfile: true, NoNetwork: true, Forward: []int{5432}, Publish: []int{8080}}, "sh", app, alice, "")
	f := fakeFacts(app, alice)
	f.ProxyPort = 0
	p = plan(t, pol, f)
	if got := outbound(t, p); len(got) != 0 || strings.Contains(p.Profile.Text, "network") {
		t.Errorf("--no-network: network rules %v in the profile", got)
	}
	for _, kv := range p.Env {
		if strings.Contains(strings.ToLower(kv), "_proxy=") || strings.HasPrefix(kv, "SSL_CERT_FILE=") {
			t.Errorf("--no-network: %s in the environment", kv)
		}
	}
}

// TestPlanNeedsPort: without a proxy port the plan is refused rather than
// written with a port nothing listens on.
func TestPlanNeedsPort(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", app, alice, "")
	f := fakeFacts(app, alice)
	f.ProxyPort = 0
	if _, err := Build(pol, f, []string{"sh"}); err == nil || !strings.Contains(err.Error(), "proxy port") {
		t.Errorf("got %v, want a proxy port error", err)
	}
	if _, err := Build(pol, fakeFacts(app, alice), nil); err == nil {
		t.Error("an empty command was planned")
	}
	pol = realPolicy(t, jail.Options{NoProfile: true}, "sh", "/Users", alice, "")
	if _, err := Build(pol, fakeFacts("/Users", alice), []string{"sh"}); err == nil || !strings.Contains(err.Error(), "contains your home") {
		t.Errorf("a project holding the home: %v", err)
	}
}

// TestCommandLineQuoting: every -D value, whatever it holds, comes back
// byte for byte when a shell reads the printed line.
func TestCommandLineQuoting(t *testing.T) {
	evil := alice + "/src/it's $(touch pwned) `x` \"q\" a\\b"
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", evil, alice, "")
	p := plan(t, pol, fakeFacts(evil, alice))
	line := p.CommandLine()
	dir := t.TempDir()
	script := "PROFILE=unused; set -- " + strings.TrimPrefix(line, SandboxExec+" ") + "\nprintf '%s\\0' \"$@\"\n"
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh could not read the printed line: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	wantArgs := p.Profile.Args(p.Argv)
	i := slices.Index(wantArgs, "-p")
	wantArgs[i+1] = "unused"
	if !slices.Equal(got, wantArgs) {
		t.Errorf("the shell read other arguments than the plan's:\n got %q\nwant %q", got, wantArgs)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("reading the printed line ran a command")
	}
}

type proxySecret = proxy.Secret

// TestPlanProtectedSymlink: a protected path reached through a symlink in
// the project (a cloned .vscode -> vs) is refused, since the rule on the
// name would not cover the link's target; Gather finds the link on disk.
func TestPlanProtectedSymlink(t *testing.T) {
	dir := t.TempDir()
	home, project := filepath.Join(dir, "home"), filepath.Join(dir, "home", "src", "app")
	os.MkdirAll(filepath.Join(project, "vs"), 0o755)
	if err := os.Symlink("vs", filepath.Join(project, ".vscode")); err != nil {
		t.Fatal(err)
	}
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", project, home, "")
	f, err := Gather(pol, home, project, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	f.ProxyPort = PlanPort
	if _, err := Build(pol, f, []string{"sh"}); err == nil || !strings.Contains(err.Error(), ".vscode is a symlink") {
		t.Errorf("a symlinked .vscode was planned: %v", err)
	}
}
