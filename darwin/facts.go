package darwin

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jailsh/jail/jail"
)

// Facts are what the macOS planner knows of the machine. Gather fills them
// on the Mac; tests give them. Every path is resolved through symlinks.
type Facts struct {
	Home, Cwd  string
	SessionDir string // host: this session's private directory, not yet created
	Env        []string
	Session    string
	SecretKey  jail.SessionKey
	CADir      string // host: the per-user CA
	StateDir   string // host: the decision log
	HostCAFile string // host: the system CA bundle ("" for none)
	ProxyPort  int    // the proxy listener's port (PlanPort for `jail plan`)
	// HooksPaths are the directories git's core.hooksPath names for the
	// project and the user; AgentPrograms the files in the home the
	// agents' settings name as programs to run. Both stay read-only.
	HooksPaths    []string
	AgentPrograms []string
	// GitNotDir: the project's .git is a file or a link (a worktree's
	// gitdir pointer), which is then read-only whole.
	GitNotDir bool
	// EnvFileSecrets are the secret values found in the project's .env
	// files, which the jail cannot read: they are offered as placeholders.
	EnvFileSecrets []EnvFileSecret
	// Symlinks are the symlinks at or above a protected path inside a
	// writable tree (the project, allowWrite): such a path is refused.
	Symlinks []string
	// EnvLinkTargets are the files .env symlinks lead to: Seatbelt checks
	// the resolved path, so the target is masked too.
	EnvLinkTargets []string
	// HardLinks are the other names, in the shown trees, of denied files
	// with more than one hard link: masked like the files themselves.
	HardLinks []string
}

// EnvFileSecret is one secret assignment of a .env file.
type EnvFileSecret struct {
	File, Name, Value string
}

// maxWalk bounds how many entries the .env search visits in the project.
const maxWalk = 1_000_000

// maxEnvFile is the largest .env file read.
const maxEnvFile = 1 << 20

// Gather collects the facts for a policy on this machine.
func Gather(pol *jail.Policy, home, cwd string, getenv func(string) string) (*Facts, error) {
	f := &Facts{Home: resolve(home), Cwd: resolve(cwd), Env: os.Environ(), Session: randomHex(8)}
	f.SecretKey = jail.SessionKey(randomHex(32))
	f.SessionDir = filepath.Join(resolve(os.TempDir()), "jail-"+f.Session)
	f.CADir = CADir(f.Home, getenv)
	f.StateDir = resolve(jail.StateDir(f.Home, getenv))
	f.HostCAFile = hostCAFile(getenv)
	root := resolve(pol.ProjectRoot)
	f.HooksPaths = hooksPaths(root, f.Home)
	if fi, err := os.Lstat(filepath.Join(root, ".git")); err == nil && !fi.IsDir() {
		f.GitNotDir = true
	}
	f.Symlinks = protectedLinks(pol, root, f)
	var err error
	if f.EnvFileSecrets, f.EnvLinkTargets, err = envFileSecrets(pol, root, f.SecretKey); err != nil {
		return nil, err
	}
	if f.HardLinks, err = hardLinks(pol, root, f); err != nil {
		return nil, err
	}
	return f, nil
}

// protectedLinks finds the symlinks at or above each protected path
// below a writable tree.
func protectedLinks(pol *jail.Policy, root string, f *Facts) []string {
	writable := []string{root}
	for _, w := range pol.AllowWrite {
		if !jail.HasMeta(w) {
			writable = append(writable, resolve(w))
		}
	}
	paths := append(jail.ProtectedProjectPaths(root), jail.ProtectedHomePaths(f.Home)...)
	paths = append(append(paths, f.HooksPaths...), filepath.Join(root, "HEAD"))
	for _, rel := range homeStartup {
		paths = append(paths, filepath.Join(f.Home, rel))
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if jail.HasMeta(p) {
			p = jail.GlobBase(p)
		}
		for _, w := range writable {
			if !withinFold(p, w) {
				continue
			}
			for d := p; !strings.EqualFold(d, w) && withinFold(d, w) && !seen[d]; d = filepath.Dir(d) {
				seen[d] = true
				if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// CADir is where the per-user CA lives on macOS: under XDG_CONFIG_HOME
// when it is set, as on Linux, else in ~/Library/Application Support/jail.
func CADir(home string, getenv func(string) string) string {
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return resolve(filepath.Join(jail.UserConfigDir(home, getenv), "ca"))
	}
	return filepath.Join(home, "Library", "Application Support", "jail", "ca")
}

// hostCAFile is the CA file the host's clients trust: SSL_CERT_FILE when
// set, else macOS's bundle of the system roots.
func hostCAFile(getenv func(string) string) string {
	if p := getenv("SSL_CERT_FILE"); p != "" {
		return p
	}
	if _, err := os.Stat("/private/etc/ssl/cert.pem"); err == nil {
		return "/private/etc/ssl/cert.pem"
	}
	return ""
}

// resolve is p with its symlinks resolved as far as it exists.
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return MacPath(p)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// envFileSecrets reads the secret values of the project's .env files (and
// of secrets.files): the files are masked, the values become placeholders.
func envFileSecrets(pol *jail.Policy, root string, key jail.SessionKey) ([]EnvFileSecret, []string, error) {
	patterns := []string{}
	for _, p := range secretFilePatterns {
		patterns = append(patterns, filepath.Join(root, p))
	}
	patterns = append(patterns, pol.Secrets.Files...)
	forced := map[string]bool{}
	for n := range pol.Secrets.Env {
		forced[n] = true
	}
	var out []EnvFileSecret
	var links []string
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory: the mask covers it by pattern anyway
		}
		if seen++; seen > maxWalk {
			return fmt.Errorf("the project has more than %d entries to search for .env files; run jail in a smaller project", maxWalk)
		}
		if d.IsDir() || !matchAny(patterns, path) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(path)
			if err != nil {
				return nil // dangling: nothing to read or mask
			}
			links = append(links, target)
		}
		content := readLimited(path)
		jail.MaskEnvFile(content, forced, func(name, value string) (string, []jail.SecretPiece) {
			out = append(out, EnvFileSecret{File: path, Name: name, Value: value})
			ph := key.Placeholder(name, value, 0)
			return ph, []jail.SecretPiece{{Name: name, Value: value, Placeholder: ph}}
		})
		return nil
	})
	return out, links, err
}

// matchAny matches in any ASCII case, as the default macOS volume opens
// .ENV as .env.
func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if jail.MatchPath(strings.ToLower(pat), strings.ToLower(p)) {
			return true
		}
	}
	return false
}

func readLimited(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxEnvFile))
	return b
}

// hooksPaths are the directories core.hooksPath names in the project's
// .git/config, ~/.gitconfig and ~/.config/git/config, read from the files
// (git is never run). Relative paths are the project's, "~/" the home's.
func hooksPaths(root, home string) []string {
	var out []string
	for _, cfg := range []string{filepath.Join(root, ".git", "config"), filepath.Join(home, ".gitconfig"), filepath.Join(home, ".config", "git", "config")} {
		v := gitConfigValue(cfg, "core", "hookspath")
		switch {
		case v == "":
			continue
		case v == "~" || strings.HasPrefix(v, "~/"):
			v = filepath.Join(home, strings.TrimPrefix(v, "~"))
		case !filepath.IsAbs(v):
			v = filepath.Join(root, v)
		}
		out = append(out, resolve(filepath.Clean(v)))
	}
	return out
}

// gitConfigValue is the last value of section.key in a git config file,
// case-insensitive, quotes and trailing comments dropped.
func gitConfigValue(path, section, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var cur, value string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				continue
			}
			cur = strings.ToLower(strings.TrimSpace(line[1:end]))
			if line = strings.TrimSpace(line[end+1:]); line == "" {
				continue
			}
		}
		k, v, _ := strings.Cut(line, "=")
		if cur == section && strings.ToLower(strings.TrimSpace(k)) == key {
			value = gitUnquote(strings.TrimSpace(v))
		}
	}
	return value
}

func gitUnquote(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
