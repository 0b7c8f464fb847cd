package jail

import (
	"github.com/jailsh/jail/proxy"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Widening lists what a project's jail.json grants beyond what the user's
// own config and profiles give; c's paths are as written and root is the
// project. Narrowing needs no trust. Every key of Config is decided here,
// and TestTrustCoversSchema fails for a key that is not:
//
//   - widen: extends; allowRead and allowWrite reaching outside the project,
//     as written or through a symlink; network.allow, network.hosts,
//     network.passthrough; network.unknown other than "deny" or "ask";
//     secrets.env binding a secret to any host, or letting it be
//     injected into a URL's query or path or a request body;
//     secrets.files whenever written, even []; command.allow; env.pass and
//     env.set of any name.
//   - need no trust: denyRead, denyWrite, network.deny, command.deny and
//     secrets.env bound to no host, or injected into header fields only,
//     narrow; network.ask, network.unknown "ask" and command.ask narrow
//     (see below); askTimeout is neutral; "$schema", description and
//     learned only inform.
//
// An ask rule holds a connection or exec until a person answers and
// denies it without an answer: nothing passes that the user did not
// accept there and then, deny rules still beat it, and what the rules
// allowed before is held now, not let through. askTimeout only says how
// long the wait is before that denial: a long one delays, a short one
// denies sooner, neither lets anything through.
// env.set needs trust for every name because what a variable does is up to
// the programs that read it, and jail cannot know them all: loader and
// interpreter options (LD_PRELOAD, NODE_OPTIONS, PYTHONPATH) run the
// project's code inside the user's tools, GIT_CONFIG_* and npm_config_*
// rewrite a tool's whole configuration, proxy, NO_PROXY and CA variables
// move where clients connect and whom they believe, and a secret's name set
// to a stranger's credential sends the user's work to the stranger's account.
func Widening(c *Config, root, home string) []string {
	var out []string
	out = append(out, filesystemWidening(c, root, home)...)
	out = append(out, networkWidening(c.Network)...)
	out = append(out, secretsWidening(c.Secrets)...)
	out = append(out, envWidening(c.Env)...)
	for _, e := range c.Extends {
		out = append(out, "extends profile "+shown(e))
	}
	for _, a := range c.Command.Allow {
		out = append(out, "command.allow "+shown(a))
	}
	for _, name := range SortedKeys(c.Remote) {
		out = append(out, "remote "+shown(name)+" (only your own config.json may name remote hosts)")
	}
	if c.AgentSandbox != "" {
		out = append(out, "agentSandbox "+shown(c.AgentSandbox)+" (turns the agent's own sandbox off)")
	}
	return out
}

// filesystemWidening lists allowRead and allowWrite entries that reach
// outside root.
func filesystemWidening(c *Config, root, home string) []string {
	var out []string
	for _, key := range []string{"allowRead", "allowWrite"} {
		list := c.Filesystem.AllowRead
		if key == "allowWrite" {
			list = c.Filesystem.AllowWrite
		}
		for _, p := range list {
			if why := escapes(ExpandPath(p, c.Dir, home), root); why != "" {
				out = append(out, fmt.Sprintf("%s %s (%s)", key, shown(p), why))
			}
		}
	}
	return out
}

// escapes says how the absolute pattern pat reaches outside root, "" when
// it does not. Lexically inside is not enough: jail acts on host paths, and
// a symlink the repository ships makes one inside the project name a place
// outside it (an allowWrite directory that does not exist yet is created
// on the host through it). For a glob, its fixed leading part must stay
// inside; its matches inside the project are not bound on their own (the
// project is bound as a whole), so the walk to find them is not made.
func escapes(pat, root string) string {
	if !Under(pat, root) {
		return "outside the project"
	}
	fixed := pat
	if HasMeta(pat) {
		fixed = GlobBase(pat)
	}
	if r := resolveExisting(fixed); !Under(r, resolveExisting(root)) {
		return "through a symlink to " + shown(r) + ", outside the project"
	}
	return ""
}

// resolveExisting resolves the symlinks of p's longest existing prefix and
// keeps the rest as written: where p is, or would be once created.
func resolveExisting(p string) string {
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		if dir == "/" || dir == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// networkWidening lists domains allowed, redirected or left uninspected.
func networkWidening(n NetworkConfig) []string {
	var out []string
	for _, d := range n.Allow {
		out = append(out, "network.allow "+d)
	}
	switch n.Unknown {
	case "", "deny", "ask":
	case "allow":
		out = append(out, `network.unknown "allow" (every other domain)`)
	default:
		out = append(out, fmt.Sprintf("network.unknown %q", n.Unknown))
	}
	for _, h := range SortedKeys(n.Hosts) {
		out = append(out, fmt.Sprintf("network.hosts %s -> %s", h, n.Hosts[h]))
	}
	for _, d := range n.Passthrough {
		out = append(out, "network.passthrough "+d+" (not inspected)")
	}
	return out
}

// secretsWidening lists secrets bound to hosts and any secrets.files list
// (it decides which files jail reads and masks). A binding counts even to
// the secret's own provider: layers' bindings are merged, so it undoes a
// user's config that sends the secret nowhere.
func secretsWidening(s SecretsConfig) []string {
	var out []string
	for _, n := range SortedKeys(s.Env) {
		b := s.Env[n]
		if len(b.Hosts) > 0 {
			out = append(out, fmt.Sprintf("secrets.env %s may be sent to %v", n, b.Hosts))
		}
		if wide := wideInject(b.Inject); len(wide) > 0 {
			out = append(out, fmt.Sprintf("secrets.env %s may be injected into %s (text the jailed process writes there, a prompt or a URL, then carries the real value)", n, strings.Join(wide, ", ")))
		}
	}
	if s.Files != nil && len(s.Files) == 0 {
		out = append(out, "secrets.files [] (the project decides which files are masked; the .env masks stay)")
	}
	for _, f := range s.Files {
		out = append(out, "secrets.files "+shown(f)+" (the project decides which files are masked; the .env masks stay)")
	}
	return out
}

// wideInject returns the injection locations that reach beyond request
// header fields: the URL's query and path and the body. A placeholder
// there is usually text (a prompt that quotes it, a logged URL), not a
// credential field, so the value would land in what the provider stores
// or shows.
func wideInject(locs []string) []string {
	var out []string
	for _, l := range locs {
		if kind, _, _ := strings.Cut(l, ":"); kind != "header" {
			out = append(out, l)
		}
	}
	return out
}

// envWidening lists every variable passed through or set.
func envWidening(e EnvConfig) []string {
	var out []string
	for _, n := range e.Pass {
		out = append(out, "env.pass "+n+" (its real value enters the jail)")
	}
	for _, n := range SortedKeys(e.Set) {
		why := "programs read it: it may change what they run or where they connect"
		if LooksSecret(n, e.Set[n]) {
			why = "replaces a secret: the tools use the project's credential"
		}
		out = append(out, fmt.Sprintf("env.set %s=%s (%s)", n, shown(clip(e.Set[n])), why))
	}
	return out
}

// shown is s as the trust prompt and the one-line refusal print it: quoted
// when it holds spaces, quotes or characters a terminal would act on, so
// that a stranger's string cannot break the line or hide what it says.
func shown(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s || s == "" || strings.ContainsAny(s, " \u00a0") {
		return q
	}
	return s
}

// Shown is s quoted as the trust prompt prints it: a path or name a
// project may have chosen.
func Shown(s string) string { return shown(s) }

// clip shortens a long value for display.
func clip(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:57]) + "..."
	}
	return s
}

// trustFile records trusted project configs: path -> sha256 of content.
func trustFile(home string, getenv func(string) string) string {
	return filepath.Join(UserConfigDir(home, getenv), "trusted.json")
}

// ContentHash is what trust records of a config file: its bytes' SHA-256.
func ContentHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func readTrust(home string, getenv func(string) string) map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(trustFile(home, getenv)); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

// IsTrusted reports whether the config layer c was trusted with the content
// it was parsed from; a changed file is not.
func IsTrusted(c *Config, home string, getenv func(string) string) bool {
	return c.Hash != "" && readTrust(home, getenv)[c.File] == c.Hash
}

// Trust records the config file at path as trusted with the content whose
// ContentHash is hash ("": the file as it is now).
func Trust(path, hash, home string, getenv func(string) string) error {
	if hash == "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hash = ContentHash(b)
	}
	m := readTrust(home, getenv)
	m[path] = hash
	b, _ := json.MarshalIndent(m, "", "  ")
	return proxy.WriteFileAtomic(trustFile(home, getenv), append(b, '\n'), 0o600)
}
