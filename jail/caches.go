package jail

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// poisonableCaches are home paths (relative to the home) whose content an
// unjailed tool later runs, loads or builds from without checking it against
// anything the jail cannot forge. Each stays read-only in every jail, like
// the shell's startup files, whatever a policy makes writable; the built-in
// profiles give the jail caches of its own instead, one set per project
// (~/.cache/jail/{project}, through the toolchain's variable: GOCACHE,
// PIP_CACHE_DIR…), which persist between the project's jailed runs and
// which no unjailed tool reads.
//
// No cache is shared. npm's _cacache checks what it returns against the
// integrity recorded in its own index, but the index is in the cache too:
// a jailed process can write a package listing (marked fresh) and a
// matching tarball whose install script an unjailed `npm install` then
// runs. Go's module cache is listed as well: go checks go.sum against the .ziphash file beside a cached
// zip, not the zip nor the extracted tree (only go mod verify re-hashes
// them), and the read-only file modes go gives the tree stop no process of
// the same user (less so under GOFLAGS=-modcacherw).
var poisonableCaches = []string{
	// Go: compiled packages and cached test results are reused by their
	// action hash; modules and downloaded toolchains as explained above;
	// installed commands; `go env -w` settings (GOFLAGS=-toolexec=…).
	".cache/go-build/", "go/pkg/mod/", "go/bin/", ".config/go/",
	// Maven and Gradle: jars are not checked at use; the wrapper runs the
	// distribution it finds; settings, ~/.mavenrc (sourced by mvn),
	// gradle.properties and init scripts shape every build.
	".m2/repository/", ".m2/wrapper/", ".m2/settings.xml", ".mavenrc", ".gradle/",
	// Python: a cached wheel is installed without asking the index again;
	// pipx and uv keep the environments of the tools they run; user
	// site-packages (usercustomize.py runs at every start), installed
	// commands, pyenv's Pythons; pip and uv settings name the index.
	".cache/pip/", ".cache/uv/", ".cache/pipx/", ".local/pipx/", ".local/share/pipx/", ".local/share/uv/",
	".local/lib/", ".local/bin/", ".pyenv/", ".config/pip/", ".pip/", ".config/uv/",
	// Rust: extracted crate sources and git checkouts are not re-checked,
	// nor is the index cache whose checksums new lockfiles take; installed
	// commands; cargo's settings (build.rustc-wrapper runs a program);
	// rustup's toolchains.
	".cargo/registry/", ".cargo/git/", ".cargo/bin/", ".cargo/config.toml", ".cargo/config", ".rustup/",
	// Node: npm's cache (listings and tarballs, with the index that
	// vouches for them); yarn and bun copy what their caches hold without
	// re-checking it, pnpm only when a file's time says it changed (a time the same
	// user can set back); node-gyp compiles addons against its cached headers; installed
	// runtimes; ~/.yarnrc.yml (yarnPath runs a script) and bunfig.toml
	// (preload scripts).
	".npm/", ".cache/yarn/", ".yarn/", ".bun/", ".local/share/pnpm/", ".cache/pnpm/", ".cache/node-gyp/", ".nvm/", ".volta/", ".local/share/fnm/",
	".yarnrc", ".yarnrc.yml", ".bunfig.toml",
	// Ruby: user gems and their commands, the marshalled spec cache,
	// Bundler's settings and cache.
	".gem/", ".local/share/gem/", ".bundle/", ".gemrc", ".rbenv/",
	// Tools that run what they cached: pre-commit's hook environments (on
	// every git commit), the browsers Playwright and Puppeteer start, the
	// objects ccache, sccache and Bazel hand back by key, Torch Hub's code,
	// Deno's remote modules (checked only against a lockfile), mise's
	// runtimes.
	".cache/pre-commit/", ".cache/ms-playwright/", ".cache/puppeteer/", ".cache/ccache/", ".ccache/", ".cache/sccache/",
	".cache/bazel/", ".cache/torch/", ".cache/deno/", ".local/share/mise/",
}

// ReadOnlyCaches are the absolute paths of poisonableCaches under home.
func ReadOnlyCaches(home string) []string {
	out := make([]string, 0, len(poisonableCaches))
	for _, rel := range poisonableCaches {
		out = append(out, filepath.Join(home, rel))
	}
	return out
}

// WritableBelow returns the writable paths that lie strictly below a
// literal protected path: a policy that opens part of a protected tree
// (allowWrite ~/.cargo/registry/src) gets that part read-only, as it would
// get the whole tree.
func WritableBelow(writable, protected []string) []string {
	var out []string
	for _, w := range writable {
		for _, p := range protected {
			p = strings.TrimSuffix(p, "/") // a directory's mark
			if !HasMeta(p) && w != p && Under(w, p) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// ProjectToken, in a config's paths and env.set values, stands for
// ProjectKey of the project being jailed: the built-in profiles keep each
// project's caches apart (~/.cache/jail/{project}/go-build), so that a
// hostile project's jailed build cannot plant compiled code, a wheel or a
// crate that another project's jailed build then takes up and the user runs.
const ProjectToken = "{project}"

// ProjectKey names a project's directory of jail caches: the root's base
// name, for the reader, and a hash of the whole root, so that no two roots
// share one.
func ProjectKey(root string) string {
	sum := sha256.Sum256([]byte(root))
	name := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, filepath.Base(root))
	if len(name) > 32 {
		name = name[:32]
	}
	return name + "-" + hex.EncodeToString(sum[:6])
}

// expandProject replaces ProjectToken in s with the project's key.
func expandProject(s, root string) string {
	if !strings.Contains(s, ProjectToken) {
		return s
	}
	return strings.ReplaceAll(s, ProjectToken, ProjectKey(root))
}
