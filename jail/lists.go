package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/jailsh/jail/jail/credstores"
)

// The lists below are built from the planner's own tables, so that what
// `jail check --verbose` prints is what every jail masks or protects.

// CredentialStores returns the credential stores in home that every jail
// masks, even when a policy makes a parent directory visible; globs are
// expanded when the jail starts.
func CredentialStores(home string) []string { return joinEach(home, HomeDeny) }

// ProtectedProjectPaths returns the paths in the project at root that stay
// read-only inside the writable project, because a later, unjailed program
// would run what they hold: those held even when missing, then those held
// when present.
func ProtectedProjectPaths(root string) []string {
	return joinEach(root, append(append([]string{".git"}, ProjectProtected...), ProjectProtectedPresent...))
}

// ProtectedHomePaths returns the paths in home that stay read-only
// whenever a policy makes them writable: startup files, caches, and the
// agents' files that declare commands.
func ProtectedHomePaths(home string) []string {
	return joinEach(home, append(append([]string{}, HomeProtected...), AgentCommandRel...))
}

// SystemSecrets returns the host files every jail masks although the
// system directories holding them are visible.
func SystemSecrets() []string { return append([]string(nil), systemDeny...) }

// joinEach joins each relative path of list to dir (a directory's
// trailing "/" is dropped).
func joinEach(dir string, list []string) []string {
	out := make([]string, 0, len(list))
	for _, rel := range list {
		out = append(out, filepath.Join(dir, rel))
	}
	return out
}

// systemDeny are host files that must stay unreadable even though /etc is
// visible; they matter when jail runs as root.
var systemDeny = credstores.System

// HomeDeny are the credential stores of the home, relative to it (a
// directory entry ends in "/"); they stay masked in every mode, even when
// a policy makes a parent directory visible.
var HomeDeny = credstores.Home

// ProjectProtected are paths that stay read-only inside the writable project
// because a later, unjailed program would execute or obey what they
// contain, without asking, as soon as they exist. An entry ending in "/" is
// a directory. Those missing at start are created on the host as
// placeholders while the jail runs, bound read-only, and removed
// afterwards. The .git directories themselves are handled apart (see
// guardGit in the Linux planner): they stay writable but pinned.
var ProjectProtected = []string{
	".git/hooks/", ".git/config", ".git/config.worktree", ".git/info/",
	".git/modules/*/hooks", ".git/modules/*/config", ".git/modules/*/modules/*/hooks", ".git/modules/*/modules/*/config",
	".git/worktrees/*",
	".vscode/", ".idea/", ".devcontainer/", ".devcontainer.json", ".envrc",
	".claude/settings.json", ".claude/settings.local.json", ".claude/commands/", ".claude/agents/",
	".claude/hooks/", ".claude/skills/", ".mcp.json",
	".gemini/", ".cursor/", ".codex/", ".windsurf/", ".zed/", ".continue/", "opencode.json", "opencode.jsonc", ".opencode/",
	".npmrc", ".yarnrc", ".yarnrc.yml", "bunfig.toml", ".cargo/config", ".cargo/config.toml",
	"**/jail.json",
}

// ProjectProtectedPresent are read-only when they exist at start. A new
// one needs a step outside the jail before anything runs it, so no
// placeholder holds its place: hook managers' configs act only through a
// hook already in .git/hooks (or core.hooksPath), mise asks before it
// trusts a new config, a new jail.json that widens needs trust, a new
// uv.toml runs nothing, and git takes a new .gitmodules up only when told.
var ProjectProtectedPresent = []string{
	".gitmodules", ".husky/", ".pre-commit-config.yaml", ".overcommit.yml",
	"lefthook.yml", "lefthook.yaml", "lefthook.toml", "lefthook.json", ".lefthook.yml", ".lefthook.yaml", ".lefthook.toml", ".lefthook.json",
	"lefthook-local.yml", "lefthook-local.yaml", "lefthook-local.toml", "lefthook-local.json", ".lefthook-local.yml", ".lefthook-local.yaml",
	".lefthook/", ".lefthook-local/", "mise.toml", ".mise.toml", "uv.toml", "jail.json",
}

// HomeProtected are read-only whenever a policy makes them writable: shell
// startup files, what is on PATH, git's and ssh's configuration, and jail's
// own, and the caches and settings an unjailed toolchain takes as they are
// (poisonableCaches). Missing ones inside a writable tree get
// placeholders, as in the project.
var HomeProtected = append([]string{
	".ssh/", ".gitconfig", ".config/git/", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases",
	".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".config/fish/", ".inputrc", ".xprofile", ".xsession",
	".xinitrc", ".pam_environment", ".config/environment.d/", ".config/autostart/", ".config/systemd/",
	".local/bin/", "bin/", ".config/jail/",
	// Editors, terminals and debuggers run what their startup files say.
	".vimrc", ".vim/", ".config/nvim/", ".emacs", ".emacs.d/", ".tmux.conf", ".config/tmux/", ".screenrc",
	".gdbinit", ".ipython/", ".vscode/extensions/", ".config/Code/User/",
}, poisonableCaches...)

// NestedGit finds the .git of repositories inside the project (nested
// clones, submodule checkouts): each is guarded like the project's own.
const NestedGit = "**/.git"

// SystemPaths are bound read-only when they exist; symlinks (merged /usr)
// are recreated as symlinks.
var SystemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys/devices/system/cpu"}

// SystemDirs are the system paths every jail may read: what a learning run
// reads there needs no profile.
func SystemDirs() []string { return append([]string(nil), SystemPaths...) }

// ReadOnlyHome are the home paths every jail keeps read-only, whatever a
// policy says: a learning run never proposes writing them.
func ReadOnlyHome(home string) []string {
	out := make([]string, 0, len(HomeProtected))
	for _, rel := range HomeProtected {
		out = append(out, filepath.Join(home, rel))
	}
	return append(out, AgentCommandPaths(home)...)
}

// agentStartFile is a file an agent writes into its read-only project
// directory when it starts, as it would unjailed, and the content it
// writes there.
type agentStartFile struct{ Path, Content string }

// AgentStartFiles: OpenCode ends a run when it cannot write
// .opencode/.gitignore, and writes nothing when one is there.
var AgentStartFiles = []agentStartFile{
	{".opencode/.gitignore", "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"},
}

// Interest lists the literal paths to stat and the glob patterns to expand
// for a policy; Gather uses it and so does a test that checks Build asks
// only about what it was told.
func Interest(pol *Policy, home string) (paths, patterns []string) {
	add := func(list ...string) {
		for _, p := range list {
			if HasMeta(p) {
				patterns = append(patterns, p)
			} else {
				paths = append(paths, p)
			}
		}
	}
	add(SystemPaths...)
	add(systemDeny...)
	add("/etc/resolv.conf")
	add(pol.ProjectRoot, home)
	// Home paths matter only where the jail shows the home: a path in or
	// above a tree it binds. Start-up stats none of the rest.
	shown := ShownRoots(pol, home)
	inHome := func(list ...string) {
		for _, p := range list {
			if related(p, shown) {
				add(p)
			}
		}
	}
	for _, p := range HomeDeny {
		inHome(filepath.Join(home, p))
	}
	for _, p := range HomeProtected {
		inHome(WithParents(filepath.Join(home, p), home)...)
	}
	inHome(agentInterest(home)...)
	inHome(signInInterest(home)...)
	for _, p := range append(append([]string{}, ProjectProtected...), ProjectProtectedPresent...) {
		add(WithParents(filepath.Join(pol.ProjectRoot, p), pol.ProjectRoot)...)
	}
	for _, sf := range AgentStartFiles {
		add(filepath.Join(pol.ProjectRoot, sf.Path))
	}
	add(filepath.Join(pol.ProjectRoot, ".git", "info", "exclude"))
	add(filepath.Join(pol.ProjectRoot, ".git"), filepath.Join(pol.ProjectRoot, NestedGit))
	add(filepath.Join(pol.ProjectRoot, ".git", "commondir"), filepath.Join(pol.ProjectRoot, "HEAD"))
	add(SecretFiles(pol)...)
	add(pol.AllowRead...)
	add(pol.AllowWrite...)
	add(pol.DenyRead...)
	add(pol.DenyWrite...)
	return Union(nil, paths), Union(nil, patterns)
}

// ShownRoots are the host trees a policy shows: the project, the allowed
// paths (a glob by its fixed part), and in learning and watch modes the
// whole home.
func ShownRoots(pol *Policy, home string) []string {
	roots := []string{pol.ProjectRoot}
	if pol.Mode != "" {
		roots = append(roots, home)
	}
	for _, p := range append(append([]string{}, pol.AllowRead...), pol.AllowWrite...) {
		if HasMeta(p) {
			p = GlobBase(p)
		}
		roots = append(roots, p)
	}
	return roots
}

// related reports whether p is in or above one of roots.
func related(p string, roots []string) bool {
	for _, r := range roots {
		if Under(p, r) || Under(r, p) {
			return true
		}
	}
	return false
}

// JoinRel joins a list entry to its base, keeping the trailing "/" that
// marks a directory.
func JoinRel(base, rel string) string {
	p := filepath.Join(base, rel)
	if strings.HasSuffix(rel, "/") {
		p += "/"
	}
	return p
}

// WithParents is path and the directories between top and it; guarding
// a path needs to know which of them exist.
func WithParents(path, top string) []string {
	if HasMeta(path) {
		return []string{path}
	}
	return append(ParentsBelow(path, top), path)
}

// ParentsBelow lists the directories strictly between top and path,
// outermost first.
func ParentsBelow(path, top string) []string {
	var out []string
	for d := filepath.Dir(path); d != top && Under(d, top); d = filepath.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

// DeniedPatterns are the paths and globs the jail masks: the system and
// home credential stores, the policy's denyRead, and jail's own CA key and
// decision log, wherever XDG puts them.
func DeniedPatterns(pol *Policy, home, caDir, stateDir string) []string {
	out := append([]string{}, systemDeny...)
	for _, rel := range HomeDeny {
		out = append(out, filepath.Join(home, rel))
	}
	out = append(out, pol.DenyRead...)
	for _, d := range []string{caDir, stateDir} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// CoveredBy reports whether p lies strictly below one of the set's paths.
func CoveredBy(p string, set map[string]bool) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if set[d] {
			return true
		}
		if d == "/" || d == "." {
			return false
		}
	}
}

// CAVars are the variables toolchains read for extra or replacement CA
// bundles; all name the bundle bound at CABundlePath (see trustOp).
var CAVars = []string{
	"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
	"PIP_CERT", "DENO_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "NIX_SSL_CERT_FILE", "HEX_CACERTS_PATH",
	"npm_config_cafile", "BUNDLE_SSL_CA_CERT", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
}

// SecretFiles are the absolute glob patterns of files whose secret values
// are masked: .env, .env* and .envs/ anywhere in the project, always, and
// what secrets.files adds. A config can add masks, never remove these.
func SecretFiles(pol *Policy) []string {
	var out []string
	for _, p := range defaultSecretFiles {
		out = append(out, filepath.Join(pol.ProjectRoot, p))
	}
	return Union(out, pol.Secrets.Files)
}

// HomeDir returns the user's home: $HOME when it is absolute, else the
// password database's.
func HomeDir() (string, error) {
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Clean(h), nil
	}
	h, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(h) {
		return "", errors.New("cannot tell your home directory; set HOME to an absolute path")
	}
	return h, nil
}

// StateDir is where jail keeps its decision log: $XDG_STATE_HOME/jail,
// else ~/.local/state/jail.
func StateDir(home string, getenv func(string) string) string {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "jail")
	}
	return filepath.Join(home, ".local", "state", "jail")
}
