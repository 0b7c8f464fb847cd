package darwin

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	// HardLinks are the other names, in the trees the jail shows, of
	// masked files: Seatbelt decides by path, so they are masked too.
	HardLinks []string
	// NestedGits are the .git of the repositories nested in the project:
	// the HEAD beside each is held read-only, so that the work tree
	// cannot be made to pass for a bare repository git would obey.
	NestedGits []string
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
	f.SecretKey = jail.NewSessionKey()
	f.SessionDir = filepath.Join(resolve(os.TempDir()), "jail-"+f.Session)
	f.CADir = CADir(f.Home, getenv)
	f.StateDir = resolve(jail.StateDir(f.Home, getenv))
	f.HostCAFile = hostCAFile(getenv)
	root := resolve(pol.ProjectRoot)
	for _, h := range jail.HooksPaths(root, f.Home) {
		f.HooksPaths = append(f.HooksPaths, resolve(h))
	}
	if fi, err := os.Lstat(filepath.Join(root, ".git")); err == nil && !fi.IsDir() {
		f.GitNotDir = true
	}
	programs, err := jail.ReferencedPrograms(f.Home, jail.ShownRoots(pol, f.Home))
	if err != nil {
		return nil, err
	}
	scan, err := scanProject(pol, root, f.SecretKey)
	if err != nil {
		return nil, err
	}
	f.EnvFileSecrets, f.EnvLinkTargets, f.NestedGits = scan.secrets, scan.links, scan.gits
	f.Symlinks = protectedLinks(pol, root, f, programs)
	for _, p := range programs { // the rule is on the file Seatbelt sees; the name, to refuse a link in a writable tree
		f.AgentPrograms = jail.Union(f.AgentPrograms, []string{resolve(p), p})
	}
	if f.HardLinks, err = hardLinks(maskedPaths(pol, f), scan.envFiles, shownTrees(pol, root, f.Home), f.Home); err != nil {
		return nil, err
	}
	return f, nil
}

// maskedPaths are the files and patterns the profile masks by path (the
// .env files aside), resolved: those whose other names must be found.
func maskedPaths(pol *jail.Policy, f *Facts) []string {
	var out []string
	for _, p := range append(append(jail.SystemSecrets(), macSecrets...), pol.DenyRead...) {
		out = append(out, resolvePattern(p))
	}
	for _, p := range append(jail.CredentialStores(f.Home), f.CADir, f.StateDir) {
		out = append(out, resolve(p))
	}
	return out
}

// resolvePattern is a path or pattern with the symlinks of its literal
// part resolved, as the walks see the files it names.
func resolvePattern(p string) string {
	if !jail.HasMeta(p) {
		return resolve(p)
	}
	base := jail.GlobBase(p)
	return filepath.Join(resolve(base), strings.TrimPrefix(p, base))
}

// shownTrees are the host trees the jail shows whose files could be other
// names of masked ones: the project, the literal allowed paths, and in
// learning and watch modes the whole home.
func shownTrees(pol *jail.Policy, root, home string) []string {
	out := []string{root}
	for _, p := range append(slices.Clone(pol.AllowRead), pol.AllowWrite...) {
		if !jail.HasMeta(p) {
			out = append(out, resolve(p))
		}
	}
	if pol.Mode != "" {
		out = append(out, home)
	}
	return out
}

// protectedLinks finds the symlinks at or above each protected path
// below a writable tree, the agents' programs (by the names their settings
// give) and the HEAD beside each nested .git among them.
func protectedLinks(pol *jail.Policy, root string, f *Facts, programs []string) []string {
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
	paths = append(paths, programs...)
	for _, g := range f.NestedGits {
		paths = append(paths, filepath.Join(filepath.Dir(g), "HEAD"))
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

// projectScan is what one walk of the project finds: the secret values of
// its .env files (and of secrets.files), the files those are, where .env
// symlinks lead, and the .git of the repositories nested in it.
type projectScan struct {
	secrets  []EnvFileSecret
	envFiles []string
	links    []string
	gits     []string
}

// scanProject walks the project once: the .env files are masked and their
// values become placeholders; the nested repositories are guarded.
func scanProject(pol *jail.Policy, root string, key jail.SessionKey) (projectScan, error) {
	resolved := *pol
	resolved.ProjectRoot = root // the walk sees resolved paths
	patterns := jail.SecretFiles(&resolved)
	forced := map[string]bool{}
	for n := range pol.Secrets.Env {
		forced[n] = true
	}
	var out projectScan
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory: the mask covers it by pattern anyway
		}
		if seen++; seen > maxWalk {
			return fmt.Errorf("the project has more than %d entries to search for .env files; run jail in a smaller project", maxWalk)
		}
		if d.Name() == ".git" && path != filepath.Join(root, ".git") {
			out.gits = append(out.gits, path)
		}
		if d.IsDir() || !matchAny(patterns, path) {
			return nil
		}
		out.envFiles = append(out.envFiles, path)
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(path)
			if err != nil {
				return nil // dangling: nothing to read or mask
			}
			out.links = append(out.links, target)
			out.envFiles = append(out.envFiles, target)
		}
		jail.MaskEnvFile(readLimited(path), forced, func(name, value string) (string, []jail.SecretPiece) {
			out.secrets = append(out.secrets, EnvFileSecret{File: path, Name: name, Value: value})
			ph := key.Placeholder(name, value, 0)
			return ph, []jail.SecretPiece{{Name: name, Value: value, Placeholder: ph}}
		})
		return nil
	})
	return out, err
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

// withinFold is within in any ASCII case: the default macOS volume opens
// ~/library as ~/Library.
func withinFold(p, dir string) bool {
	return within(strings.ToLower(p), strings.ToLower(dir))
}
