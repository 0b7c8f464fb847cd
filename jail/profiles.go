package jail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jailsh/jail/profiles"
)

// commandProfiles maps the names commands are run by to the profile that
// applies automatically ("jail -- claude" uses claude).
var commandProfiles = map[string]string{
	"npm": "node", "npx": "node", "node": "node", "pnpm": "node", "yarn": "node", "bun": "node", "bunx": "node", "pnpx": "node", "corepack": "node",
	"python": "python", "python3": "python", "pip": "python", "pip3": "python", "uv": "python", "uvx": "python", "pipx": "python",
	"go": "go", "cargo": "rust", "rustc": "rust", "rustup": "rust",
	"java": "java", "javac": "java", "mvn": "java", "gradle": "java",
	"ruby": "ruby", "gem": "ruby", "bundle": "ruby", "bundler": "ruby",
	"git": "git", "gh": "git", "glab": "git",
}

// npmAgents are agents run through npx by their package name.
var npmAgents = map[string]string{
	"@anthropic-ai/claude-code": "claude", "@openai/codex": "codex", "@google/gemini-cli": "gemini",
	"opencode-ai": "opencode", "@sourcegraph/amp": "amp", "@github/copilot": "copilot",
}

// AutoProfile names the profile a command gets when none is asked for:
// the command's own name when a profile has it, its toolchain's, or the
// agent an npx/bunx/pnpx line runs.
func AutoProfile(argv []string, exists func(string) bool) string {
	if len(argv) == 0 {
		return ""
	}
	base := filepath.Base(argv[0])
	if base == "npx" || base == "bunx" || base == "pnpx" {
		for _, a := range argv[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			pkg := a
			if i := strings.LastIndexByte(pkg, '@'); i > 0 {
				pkg = pkg[:i] // a version: @scope/name@1.2.3
			}
			if p, ok := npmAgents[pkg]; ok {
				return p
			}
			break
		}
	}
	if exists(base) {
		return base
	}
	return commandProfiles[base]
}

// profileSource tells where a profile comes from.
type profileSource struct {
	Name, Path string // Path is "" for a built-in
}

// userProfileDir holds the user's own profiles, which override built-ins.
func userProfileDir(home string, getenv func(string) string) string {
	return filepath.Join(UserConfigDir(home, getenv), "profiles")
}

// ProfileNames lists the built-in and user profiles, sorted.
func ProfileNames(home string, getenv func(string) string) []profileSource {
	byName := map[string]profileSource{}
	entries, _ := fs.ReadDir(profiles.FS, ".")
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			byName[n] = profileSource{Name: n}
		}
	}
	dir := userProfileDir(home, getenv)
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() {
				byName[n] = profileSource{Name: n, Path: filepath.Join(dir, e.Name())}
			}
		}
	}
	var out []profileSource
	for _, n := range SortedKeys(byName) {
		out = append(out, byName[n])
	}
	return out
}

// LoadProfile reads a profile: the user's of that name, else the
// built-in. Paths in a built-in profile are relative to the home.
func LoadProfile(name, home string, getenv func(string) string) (*Config, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("profile name %q is not valid", name)
	}
	user := filepath.Join(userProfileDir(home, getenv), name+".json")
	if _, err := os.Stat(user); err == nil {
		c, err := LoadConfigFile(user, user)
		if err != nil {
			return nil, err
		}
		c.File = "profile:" + name // its paths stay relative to its own directory
		return c, nil
	}
	data, err := fs.ReadFile(profiles.FS, name+".json")
	if err != nil {
		var names []string
		for _, p := range ProfileNames(home, getenv) {
			names = append(names, p.Name)
		}
		return nil, fmt.Errorf("unknown profile %q; the profiles are: %s", name, strings.Join(names, ", "))
	}
	c, err := ParseConfig(data, "profile "+name)
	if err != nil {
		return nil, err
	}
	c.File, c.Dir = "profile:"+name, home
	return c, nil
}

// loadProfiles loads the named profiles and, depth first, those they
// extend, each once, lowest first.
func loadProfiles(names []string, home string, getenv func(string) string) ([]*Config, error) {
	var out []*Config
	seen := map[string]bool{}
	var load func(name string, depth int) error
	load = func(name string, depth int) error {
		if seen[name] {
			return nil
		}
		if depth > 16 {
			return errors.New("profiles extend each other too deeply (a cycle?)")
		}
		seen[name] = true
		c, err := LoadProfile(name, home, getenv)
		if err != nil {
			return err
		}
		for _, e := range c.Extends {
			if err := load(e, depth+1); err != nil {
				return err
			}
		}
		c.Extends = nil // loaded
		out = append(out, c)
		return nil
	}
	for _, n := range names {
		if err := load(n, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// profileExists reports whether a profile of that name can be loaded: one
// look-up per name asked about, not a listing of the user's profiles.
func profileExists(home string, getenv func(string) string) func(string) bool {
	return func(n string) bool {
		if n == "" || strings.ContainsAny(n, "/\\") || strings.HasPrefix(n, ".") {
			return false
		}
		if _, err := fs.Stat(profiles.FS, n+".json"); err == nil {
			return true
		}
		_, err := os.Stat(filepath.Join(userProfileDir(home, getenv), n+".json"))
		return err == nil
	}
}
