package jail

import (
	"path/filepath"

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
// gitDirs in Build): they stay writable but pinned.
var ProjectProtected = []string{
	".git/hooks/", ".git/config", ".git/info/",
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
