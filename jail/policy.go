package jail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Options are the command-line inputs that shape the policy.
type Options struct {
	Settings   string   // --settings FILE
	Profiles   []string // --profile a,b
	NoProfile  bool     // --no-profile: no profile picked from the command's name
	AllowRead  []string
	AllowWrite []string
	DenyRead   []string
	Secrets    []string // --secret VAR
	BestEffort bool
	Debug      bool
	// Mode is "learning" or "watch": the real home through a
	// throwaway overlay, the network open but logged, every access traced.
	Mode string

	AllowDomain []string // --allow-domain HOST[:PORT]
	DenyDomain  []string // --deny-domain HOST
	NoNetwork   bool     // --no-network: loopback only, no proxy
	Publish     []int    // -p PORT: the host may connect to this port in the jail
	Forward     []int    // -f PORT: the jail may reach this host localhost port
}

// Policy is the merged, resolved policy: every path is absolute (globs kept
// as patterns), every layer applied. It holds no facts about the machine.
type Policy struct {
	ProjectRoot string
	Sources     []string // the config files that contributed, lowest first
	Profiles    []string // the profiles applied, lowest first

	AllowRead, AllowWrite, DenyRead, DenyWrite []string

	Network NetworkConfig
	Secrets SecretsConfig
	Command CommandConfig
	Env     EnvConfig
	// AskTimeout is the seconds a held request or exec waits for an
	// answer: the last layer that sets askTimeout, else 0 (the default).
	AskTimeout int
	// AgentSandbox are the agents whose own sandbox jail turns off.
	AgentSandbox []string

	SecretNames []string // --secret
	BestEffort  bool
	NoNetwork   bool
	Mode        string // "", "learning" or "watch"
	Publish     []int
	Forward     []int
	// Registries are the package registry hosts of the command's toolchain,
	// read from the toolchain's own configuration (RegistryHosts).
	Registries []string
}

// UserConfigDir is jail's directory under XDG_CONFIG_HOME (or ~/.config).
func UserConfigDir(home string, getenv func(string) string) string {
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "jail")
	}
	return filepath.Join(home, ".config", "jail")
}

// FindProject walks up from cwd looking for jail.json, stopping at the git
// root or at home. It returns the jail.json found ("" if none) and the
// project root: the jail.json's directory, else the git root, else cwd.
func FindProject(cwd, home string) (configPath, root string) {
	gitRoot := ""
	for dir := cwd; ; dir = filepath.Dir(dir) {
		if dir == home && home != "" && dir != cwd {
			break
		}
		if fi, err := os.Stat(filepath.Join(dir, "jail.json")); err == nil && fi.Mode().IsRegular() && dir != home {
			configPath = filepath.Join(dir, "jail.json")
			root = dir
			break
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			gitRoot = dir
			break
		}
		if dir == "/" || dir == home {
			break
		}
	}
	switch {
	case root != "":
	case gitRoot != "":
		root = gitRoot
	default:
		root = cwd
	}
	return configPath, root
}

// LoadLayers reads the config files lowest first (user config, the
// project's jail.json, --settings) and returns them with the project root.
// Command-line flags become the last layer.
func LoadLayers(opts Options, argv []string, cwd, home string, getenv func(string) string) ([]*Config, string, error) {
	var layers []*Config
	load := func(path string, optional bool) error {
		c, err := LoadConfigFile(path, displayPath(path, cwd))
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		layers = append(layers, c)
		return nil
	}
	if err := load(filepath.Join(UserConfigDir(home, getenv), "config.json"), true); err != nil {
		return nil, "", err
	}
	userLayers := len(layers) // profiles go between the user's config and the rest
	projectConfig, root := FindProject(cwd, home)
	if projectConfig != "" {
		if err := load(projectConfig, false); err != nil {
			return nil, "", err
		}
		layers[len(layers)-1].Project = true
	}
	if opts.Settings != "" {
		p := opts.Settings
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if err := load(p, false); err != nil {
			return nil, "", err
		}
	}
	// Profiles layer between the user's config and the project's: the
	// ones asked for (or the command's own), and those config files extend.
	names := opts.Profiles
	if len(names) == 0 && !opts.NoProfile {
		if auto := AutoProfile(argv, profileExists(home, getenv)); auto != "" {
			names = []string{auto}
		}
	}
	for _, c := range layers {
		names = Union(names, c.Extends)
	}
	prof, err := loadProfiles(names, home, getenv)
	if err != nil {
		return nil, "", err
	}
	// What a learning run found for this program, unless this run is
	// itself learning or watching (it must see everything afresh).
	if lp := LearnedPath(home, getenv, argv); lp != "" && opts.Mode == "" {
		c, err := LoadConfigFile(lp, lp)
		switch {
		case err == nil:
			c.FromLearning = true
			prof = append(prof, c)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, "", fmt.Errorf("%w (the profile jail --learning wrote; fix or delete it)", err)
		}
	}
	layers = append(append(append([]*Config{}, layers[:userLayers]...), prof...), layers[userLayers:]...)
	for _, c := range layers[userLayers:] {
		if len(c.Remote) > 0 {
			return nil, "", fmt.Errorf("%s names \"remote\" hosts, which only your own config.json may name (a project or profile must not pick where your code and agent go); remove the key, or move it to %s",
				displayPath(c.File, cwd), filepath.Join(UserConfigDir(home, getenv), "config.json"))
		}
	}

	flags := &Config{Dir: cwd}
	flags.Filesystem.AllowRead = opts.AllowRead
	flags.Filesystem.AllowWrite = opts.AllowWrite
	flags.Filesystem.DenyRead = opts.DenyRead
	flags.Network.Allow = opts.AllowDomain
	flags.Network.Deny = opts.DenyDomain
	for _, d := range append(append([]string{}, opts.AllowDomain...), opts.DenyDomain...) {
		if err := checkDomain(d); err != nil {
			return nil, "", fmt.Errorf("--allow-domain/--deny-domain: %w", err)
		}
	}
	for _, fl := range []struct {
		name  string
		paths []string
	}{{"--allow-read", opts.AllowRead}, {"--allow-write", opts.AllowWrite}, {"--deny-read", opts.DenyRead}} {
		for _, p := range fl.paths {
			if err := CheckPattern(p); err != nil {
				return nil, "", fmt.Errorf("%s %q: %w", fl.name, p, err)
			}
		}
	}
	for _, p := range append(append([]int{}, opts.Publish...), opts.Forward...) {
		if p < 1 || p > 65535 {
			return nil, "", fmt.Errorf("--publish/--forward: %d is not a port (1-65535)", p)
		}
	}
	layers = append(layers, flags)
	return layers, root, nil
}

func displayPath(path, cwd string) string {
	if rel, err := filepath.Rel(cwd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// Resolve merges layers (lowest first) into a Policy: lists are unions,
// maps are merged with later layers winning, relative paths are taken
// against each layer's own directory and ~ against home.
func Resolve(layers []*Config, root, home string, opts Options) (*Policy, error) {
	p := &Policy{ProjectRoot: root, BestEffort: opts.BestEffort, NoNetwork: opts.NoNetwork, Publish: opts.Publish, Forward: opts.Forward, Mode: opts.Mode}
	for _, c := range layers {
		if name, ok := strings.CutPrefix(c.File, "profile:"); ok {
			p.Profiles = append(p.Profiles, name)
		} else if c.File != "" {
			p.Sources = append(p.Sources, c.File)
		}
		paths := func(list []string) []string {
			out := make([]string, 0, len(list))
			for _, s := range list {
				out = append(out, ExpandPath(expandProject(s, root), c.Dir, home))
			}
			return out
		}
		p.AllowRead = Union(p.AllowRead, paths(c.Filesystem.AllowRead))
		p.AllowWrite = Union(p.AllowWrite, paths(c.Filesystem.AllowWrite))
		p.DenyRead = Union(p.DenyRead, paths(c.Filesystem.DenyRead))
		p.DenyWrite = Union(p.DenyWrite, paths(c.Filesystem.DenyWrite))
		p.Network.Allow = Union(p.Network.Allow, c.Network.Allow)
		p.Network.Deny = Union(p.Network.Deny, c.Network.Deny)
		p.Network.Ask = Union(p.Network.Ask, c.Network.Ask)
		if c.Network.Unknown != "" {
			p.Network.Unknown = c.Network.Unknown
		}
		p.Network.Hosts = mergeMap(p.Network.Hosts, c.Network.Hosts)
		p.Network.Passthrough = Union(p.Network.Passthrough, c.Network.Passthrough)
		for k, v := range c.Secrets.Env {
			if p.Secrets.Env == nil {
				p.Secrets.Env = map[string]SecretEnv{}
			}
			have := p.Secrets.Env[k]
			merged := SecretEnv{Hosts: Union(have.Hosts, v.Hosts)}
			if len(have.Inject)+len(v.Inject) > 0 {
				merged.Inject = Union(have.Inject, v.Inject)
			}
			p.Secrets.Env[k] = merged
		}
		p.Secrets.Files = Union(p.Secrets.Files, paths(c.Secrets.Files))
		p.Command.Deny = Union(p.Command.Deny, c.Command.Deny)
		p.Command.Allow = Union(p.Command.Allow, c.Command.Allow)
		p.Command.Ask = Union(p.Command.Ask, c.Command.Ask)
		if c.AskTimeout != 0 {
			p.AskTimeout = c.AskTimeout
		}
		p.Env.Pass = Union(p.Env.Pass, c.Env.Pass)
		p.Env.Set = mergeMap(p.Env.Set, c.Env.Set)
		p.AgentSandbox = sortedAgentSandbox(p.AgentSandbox, c.AgentSandbox)
	}
	p.SecretNames = Union(nil, opts.Secrets)
	if p.Mode != "" {
		// Learning and watching block nothing unknown on the network; the
		// proxy still logs every request, and deny rules still hold.
		p.Network.Unknown = "allow"
	}
	if p.Network.Unknown == "" {
		p.Network.Unknown = "deny"
	}
	return p, nil
}

// ExpandPath makes a config path absolute: "~" and "~/x" are under home,
// relative paths are under dir. Glob characters are kept.
func ExpandPath(p, dir, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case filepath.IsAbs(p):
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

func Union(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, s := range append(append([]string{}, a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func mergeMap(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ErrUnsupported marks a protection the machine lacks.
var ErrUnsupported = errors.New("unsupported")

// ExitError is a failure of jail itself (or of starting the command) that
// carries the exit code jail should end with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// RemoteHosts are the named remote hosts of the user's own config.json
// (none when it has none).
func RemoteHosts(home string, getenv func(string) string) (map[string]RemoteHost, error) {
	p := filepath.Join(UserConfigDir(home, getenv), "config.json")
	c, err := LoadConfigFile(p, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c.Remote, nil
}
