package darwin

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/proxy"
)

// PlanPort is the proxy port `jail plan` writes into the profile: the real
// one is the port the proxy's listener gets when jail runs.
const PlanPort = 3128

// gitGuards are the parts of every .git in the project (its own and nested
// clones') that an unjailed git obeys: hooks, config, info and commondir.
var gitGuards = []string{"**/.git/hooks", "**/.git/config", "**/.git/info", "**/.git/commondir"}

// macSecrets are macOS's root-only secrets under /private/etc, masked
// beside the Linux list (which a root run on macOS may hold copies of).
var macSecrets = []string{"/private/etc/master.passwd", "/private/etc/kcpassword"}

// Plan is one jail on macOS: the Seatbelt profile, the environment, the
// command, and what the runner needs for the proxy.
type Plan struct {
	Argv    []string
	Cwd     string
	Session string
	Policy  Policy  // what Generate turned into Profile
	Profile Profile // the profile and its -D parameters
	Env     []string
	// Placeholders are the variables whose values became placeholders, the
	// .env files' among them.
	Placeholders []string
	Secrets      []proxy.Secret `json:"-"` // the values the proxy swaps back: never printed
	NoNetwork    bool
	Rules        jail.NetworkConfig
	DenyCommands []string // command rules the proxy enforces on the wire
	SessionDir   string   // host: this session's directory
	TempDir      string   // host: the jail's private TMPDIR, in SessionDir
	Bundle       string   // host: the CA bundle, in SessionDir
	HostCAFile   string   // host: the system CAs copied into Bundle
	CADir        string
	StateDir     string
	Notes        []string
}

// Build plans a jail from a resolved policy and the facts of the machine.
// It is pure; every path in the facts is already resolved through
// symlinks, as Seatbelt matches resolved paths.
func Build(pol *jail.Policy, f *Facts, argv []string) (*Plan, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command given; usage: jail [flags] [--] CMD [ARGS...] or jail -c 'STRING'")
	}
	root := MacPath(pol.ProjectRoot)
	home := MacPath(f.Home)
	if root == "/" || within(home, root) {
		return nil, fmt.Errorf("refusing to use %s as the project root: it contains your home directory; run jail from inside a project directory (or put a jail.json there)", root)
	}
	for _, d := range []struct{ what, path string }{{"project directory", root}, {"home directory", home}} {
		if jail.HasMeta(d.path) {
			return nil, fmt.Errorf("the %s %s has a glob character (*, ? or [) in its name, so jail cannot tell the paths under it from patterns; rename it or run jail from a directory without them", d.what, d.path)
		}
	}
	if !pol.NoNetwork && !validPort(f.ProxyPort) {
		return nil, fmt.Errorf("planning the macOS jail: proxy port %d out of range; pass the proxy listener's port", f.ProxyPort)
	}
	p := &Plan{
		Argv: argv, Cwd: MacPath(f.Cwd), Session: f.Session, NoNetwork: pol.NoNetwork,
		SessionDir: f.SessionDir, CADir: f.CADir, StateDir: f.StateDir, HostCAFile: f.HostCAFile,
	}
	if !within(p.Cwd, root) {
		p.Cwd = root
	}
	p.TempDir = filepath.Join(p.SessionDir, "tmp")
	p.Bundle = filepath.Join(p.SessionDir, "ca.pem")
	p.Policy = Policy{Project: root, Home: home}
	if err := p.files(pol, f); err != nil {
		return nil, err
	}
	if !pol.NoNetwork {
		p.network(pol, f.ProxyPort)
	}
	p.environment(pol, f)
	prof, err := Generate(p.Policy)
	if err != nil {
		return nil, err
	}
	p.Profile = prof
	return p, nil
}

// files maps the policy's paths: reads, writes, masks and protections.
func (p *Plan) files(pol *jail.Policy, f *Facts) error {
	root, home := p.Policy.Project, p.Policy.Home
	var err error
	if p.Policy.Write, p.Policy.WriteGlobs, err = split(pol.AllowWrite); err != nil {
		return fmt.Errorf("allowWrite: %w", err)
	}
	p.Policy.Write = append(p.Policy.Write, MacPath(p.TempDir))
	if p.Policy.Read, p.Policy.ReadGlobs, err = split(pol.AllowRead); err != nil {
		return fmt.Errorf("allowRead: %w", err)
	}
	if !pol.NoNetwork {
		p.Policy.Read = append(p.Policy.Read, MacPath(p.Bundle))
	}
	readRoots := append(append([]string{root}, p.Policy.Read...), p.Policy.Write...)
	writeRoots := append([]string{root}, p.Policy.Write...)
	for _, g := range p.Policy.ReadGlobs {
		readRoots = append(readRoots, g.base())
	}
	for _, g := range p.Policy.WriteGlobs {
		readRoots, writeRoots = append(readRoots, g.base()), append(writeRoots, g.base())
	}

	masks := append(append(jail.SystemSecrets(), macSecrets...), pol.DenyRead...)
	masks = append(masks, MacPath(p.CADir), MacPath(p.StateDir))
	masks = append(masks, related(jail.CredentialStores(home), readRoots)...)
	masks = append(masks, jail.SecretFiles(pol)...)
	masks = append(masks, f.EnvLinkTargets...)
	masks = append(masks, f.HardLinks...)
	if p.Policy.DenyRead, p.Policy.DenyGlobs, err = split(masks); err != nil {
		return fmt.Errorf("denyRead: %w", err)
	}

	protected := slices.DeleteFunc(jail.ProtectedProjectPaths(root), func(s string) bool { return s == filepath.Join(root, ".git") })
	for _, g := range gitGuards {
		protected = append(protected, filepath.Join(root, g))
	}
	protected = append(protected, filepath.Join(root, "HEAD"))
	for _, g := range f.NestedGits {
		protected = append(protected, filepath.Join(filepath.Dir(MacPath(g)), "HEAD"))
	}
	if f.GitNotDir {
		protected = append(protected, filepath.Join(root, ".git"))
	}
	p.Policy.NoCreate = []string{filepath.Join(root, ".git")}
	protected = append(protected, jail.ProtectedHomePaths(home)...)
	for _, rel := range homeStartup {
		protected = append(protected, filepath.Join(home, rel))
	}
	// The files an agent rewrites as it runs but in which some keys declare
	// commands the unjailed agent runs later (~/.claude.json's MCP servers
	// and hooks): on Linux the jail writes a session copy merged back
	// without those keys; nothing can be mounted over a file on macOS, so
	// they stay read-only there.
	for _, r := range jail.AgentFileRules {
		protected = append(protected, filepath.Join(home, r.Rel))
	}
	protected = append(protected, f.HooksPaths...)
	protected = append(protected, f.AgentPrograms...)
	protected = append(protected, pol.DenyWrite...)
	if p.Policy.Protected, p.Policy.ProtectedGlobs, err = split(related(protected, writeRoots)); err != nil {
		return fmt.Errorf("protected paths: %w", err)
	}
	return linkedProtection(p.Policy.Protected, f.Symlinks)
}

// linkedProtection refuses a protected path reached through a symlink in a
// writable tree: Seatbelt checks the path the link resolves to, which the
// rule on the name does not cover, and the link could be replaced.
func linkedProtection(protected, links []string) error {
	for _, l := range links {
		for _, pp := range protected {
			if within(pp, MacPath(l)) {
				return fmt.Errorf("%s is a symlink inside a writable tree, so %s cannot be kept read-only (the link could be replaced from inside the jail); make it a real file or directory, or remove it", l, pp)
			}
		}
	}
	return nil
}

// network allows the proxy port and the policy's published and forwarded
// ports, and keeps the rules the in-process proxy enforces.
func (p *Plan) network(pol *jail.Policy, port int) {
	p.Policy.ProxyPort = port
	p.Policy.Published = slices.Clone(pol.Publish)
	p.Policy.Forward = slices.Clone(pol.Forward)
	p.Rules = pol.Network
	p.Rules.Allow = append(slices.Clone(p.Rules.Allow), pol.Registries...)
	// No exec supervisor here can hold an asked command for a person: a
	// push or publish it would have asked about is refused on the wire.
	p.DenyCommands = jail.WireCommands(pol.Command, true)
	if len(pol.Command.Deny) > 0 {
		p.Notes = append(p.Notes, "command.deny is not checked at exec on macOS; git push and npm publish are still refused on the wire")
	}
	if len(pol.Command.Ask) > 0 {
		p.Notes = append(p.Notes, "command.ask is not checked at exec on macOS: "+strings.Join(pol.Command.Ask, ", ")+" run without a question, except that an asked git push or npm publish is refused on the wire")
	}
}

// proxyVars point clients at the proxy (HTTP and SOCKS on one port) and
// at the CA bundle.
func (p *Plan) proxyVars() map[string]string {
	vars := map[string]string{"TMPDIR": p.TempDir}
	if p.NoNetwork {
		return vars
	}
	addr := fmt.Sprintf("127.0.0.1:%d", p.Policy.ProxyPort)
	for k, v := range map[string]string{
		"HTTP_PROXY": "http://" + addr, "HTTPS_PROXY": "http://" + addr, "ALL_PROXY": "socks5h://" + addr,
		"NO_PROXY": "localhost,127.0.0.1,::1",
	} {
		vars[k], vars[strings.ToLower(k)] = v, v
	}
	for _, k := range jail.CAVars {
		vars[k] = p.Bundle
	}
	return vars
}

// environment builds the command's environment as on Linux (secrets become
// placeholders) and adds the .env files' secret values as placeholders:
// the files themselves are unreadable inside, since nothing can be
// mounted over a file on macOS. The proxy's secrets are derived with the
// session's placeholders exactly as the Linux jail derives them, so a
// value and its placeholder are found the same way on both.
func (p *Plan) environment(pol *jail.Policy, f *Facts) {
	ep := jail.PlanEnv(f.Env, pol, f.SecretKey, f.Session, p.proxyVars())
	p.Env, p.Placeholders = ep.Env, ep.Placeholders
	phs := jail.NewPlaceholders(f.SecretKey, ep.Whole...)
	host := envMap(f.Env)
	for _, b := range jail.Bindings(ep.Placeholders, pol) {
		if v := host[b.Name]; v != "" {
			_, pieces := phs.Mask(b.Name, v)
			p.addSecrets(pieces, b)
		}
	}
	inside := envMap(ep.Env)
	for _, s := range f.EnvFileSecrets {
		if _, set := inside[s.Name]; set || s.Value == "" {
			continue // the environment's value wins, as dotenv loaders keep it
		}
		masked, pieces := phs.Mask(s.Name, s.Value)
		inside[s.Name] = masked
		p.Env = append(p.Env, s.Name+"="+masked)
		p.Placeholders = append(p.Placeholders, s.Name)
		p.addSecrets(pieces, jail.Bindings([]string{s.Name}, pol)[0])
	}
	slices.Sort(p.Env)
	slices.Sort(p.Placeholders)
}

// addSecrets adds the proxy's secrets for the pieces of one variable.
func (p *Plan) addSecrets(pieces []jail.SecretPiece, b jail.SecretBinding) {
	for _, pc := range pieces {
		p.Secrets = append(p.Secrets, proxy.Secret{Name: pc.Name, Placeholder: pc.Placeholder, Value: pc.Value, Hosts: b.Hosts, Inject: b.Inject})
	}
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		}
	}
	return m
}

// split maps paths to macOS's resolved form and sorts literal paths from
// globs (a literal directory and the pattern below it).
func split(paths []string) ([]string, []Glob, error) {
	var lit []string
	var globs []Glob
	for _, raw := range paths {
		pth := MacPath(raw)
		if !jail.HasMeta(pth) {
			lit = append(lit, pth)
			continue
		}
		if err := jail.CheckPattern(pth); err != nil {
			return nil, nil, err
		}
		base := jail.GlobBase(pth)
		rel := strings.TrimPrefix(strings.TrimPrefix(pth, base), "/")
		globs = append(globs, Glob{Dir: base, Pattern: rel})
	}
	return lit, globs, nil
}

// MacPath is p as Seatbelt sees it: cleaned, and with the root symlinks
// /etc, /tmp and /var resolved into /private, as macOS resolves them.
func MacPath(p string) string {
	if p == "" {
		return ""
	}
	p = filepath.Clean(p)
	for _, l := range []string{"/etc", "/tmp", "/var"} {
		if p == l || strings.HasPrefix(p, l+"/") {
			return "/private" + p
		}
	}
	return p
}

// related keeps the paths in or above one of roots (a glob by its literal
// base): only there can a mask or a protection change anything.
// Names compare in any ASCII case, as the default macOS volume opens
// ~/library as ~/Library.
func related(paths, roots []string) []string {
	lower := make([]string, len(roots))
	for i, r := range roots {
		lower[i] = strings.ToLower(r)
	}
	var out []string
	for _, pth := range paths {
		b := MacPath(pth)
		if jail.HasMeta(b) {
			b = jail.GlobBase(b)
		}
		lb := strings.ToLower(b)
		for _, lr := range lower {
			if within(lb, lr) || within(lr, lb) {
				out = append(out, pth)
				break
			}
		}
	}
	return out
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	dir = strings.TrimSuffix(dir, "/")
	return p == dir || dir == "" || (len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir))
}

// CommandLine is the plan's sandbox-exec command line for review, every
// argument shell-quoted: one group per line (sandbox-exec, each -D
// parameter, then the profile and the command), each line but the last
// ending in " \", so that the whole is still one shell command. The
// profile, passed with -p, stands as "$PROFILE".
func (p *Plan) CommandLine() string {
	groups := []string{SandboxExec}
	for _, prm := range p.Profile.Params {
		groups = append(groups, "-D "+printable(prm.Name+"="+prm.Value))
	}
	last := []string{"-p", `"$PROFILE"`, "--"}
	for _, a := range p.Argv {
		last = append(last, printable(a))
	}
	groups = append(groups, strings.Join(last, " "))
	return strings.Join(groups, " \\\n  ")
}

// printable is an argument shell-quoted and escaped for the terminal, so
// that a newline or an escape sequence in it can neither print a line of
// its own (a forged "# note:") nor act on the terminal.
func printable(arg string) string { return jail.Escaped(jail.ShellQuote(arg)) }
