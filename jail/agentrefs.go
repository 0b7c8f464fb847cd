package jail

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// agentSettings are the agents' settings files whose strings name the
// programs the agent runs: hooks, status lines, key helpers, MCP servers.
// A name with glob characters stands for every file it matches. A file
// that is not JSON (JSONC, TOML, YAML) is read as text, word by word.
var agentSettings = []string{
	".claude/settings.json", ".claude/settings.local.json", ".claude.json", ".gemini/settings.json",
	".cursor/mcp.json", ".cursor/hooks.json", ".cursor/cli-config.json",
	".config/opencode/opencode.json", ".config/opencode/opencode.jsonc", ".config/opencode/config.json",
	".codex/config.toml", ".codex/*.config.toml", ".codex/hooks.json",
	".copilot/mcp-config.json", ".copilot/lsp-config.json", ".copilot/config.json", ".copilot/settings.json",
	".config/amp/settings.json", ".config/amp/settings.jsonc",
	".pi/agent/settings.json", ".pi/agent/mcp.json",
	".config/goose/config.yaml", ".aider.conf.yml",
}

// settingsFiles are the host files of agentSettings entry rel.
func settingsFiles(home, rel string) []string {
	p := filepath.Join(home, rel)
	if !HasMeta(rel) {
		return []string{p}
	}
	m, _ := filepath.Glob(p)
	return m
}

// maxSettings bounds how much of a settings file is read for the programs
// it names: as much as an agent file jail merges back may hold, so that a
// jailed run that grows ~/.claude.json cannot keep the next jail from
// starting.
const maxSettings = 64 << 20

// ReferencedPrograms returns the files in the home that the agents'
// settings files name as programs to run (~/.claude/statusline.sh, a hook
// script): a writable home would otherwise let a jailed command rewrite
// what the unjailed agent runs next. Only settings in trees the jail shows
// are read, and only names of files that exist are returned. A settings
// file too large to read whole is an error: what it names would go
// unprotected.
func ReferencedPrograms(home string, shown []string) ([]string, error) {
	var out []string
	for _, rel := range agentSettings {
		for _, p := range settingsFiles(home, rel) {
			if !related(p, shown) {
				continue
			}
			strs, err := settingsStrings(p, keptKeys(rel))
			if err != nil {
				return nil, err
			}
			for _, s := range strs {
				for _, f := range homePaths(s, home) {
					if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
						out = append(out, f)
					}
				}
			}
		}
	}
	return Union(nil, out), nil
}

// keptKeys are the keys of agent file rel that keep the host's value
// whatever a jailed run writes (nil for a settings file jail keeps
// read-only as a whole): only what they hold was written by the user, the
// rest may have been by a jailed run, which must not make files read-only
// at will (~/.claude.json itself, a sign-in file).
func keptKeys(rel string) map[string]bool {
	for _, a := range AgentFileRules {
		if a.Rel == rel {
			return set(a.Protected)
		}
	}
	return nil
}

// settingsStrings returns every string value of a JSON file (with kept
// set, only those held at any depth by a kept key), or the whole text of
// a file that is not JSON (JSONC, TOML, YAML: its words are looked at one
// by one): none when it is missing, an error when it is larger than jail
// reads.
func settingsStrings(path string, kept map[string]bool) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSettings+1))
	if err == nil && len(b) > maxSettings {
		err = fmt.Errorf("larger than %d KiB", maxSettings>>10)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s for the programs it names: %w; shorten it, or keep the jail from writing its directory", path, err)
	}
	var v any
	if json.Unmarshal(b, &v) != nil { // nesting is bounded by the decoder
		if kept != nil {
			return nil, nil // an agent file that is not JSON runs nothing
		}
		return []string{string(b)}, nil
	}
	var out []string
	var walk func(v any, in bool)
	walk = func(v any, in bool) {
		switch t := v.(type) {
		case string:
			if in {
				out = append(out, t)
			}
		case []any:
			for _, e := range t {
				walk(e, in)
			}
		case map[string]any:
			for k, e := range t {
				walk(e, in || kept[k])
			}
		}
	}
	walk(v, kept == nil)
	return out, nil
}

// homePaths are the words of a command string that name a path in the
// home: "~/x", "$HOME/x", "${HOME}/x" or the home's own path.
func homePaths(s, home string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '"' || r == '\'' || r == ';' || r == '&' || r == '|' || r == '(' || r == ')' || r == '='
	}) {
		for _, prefix := range []string{"~/", "$HOME/", "${HOME}/", home + "/"} {
			if rest, ok := strings.CutPrefix(w, prefix); ok && rest != "" {
				if p := filepath.Join(home, rest); Under(p, home) && p != home {
					out = append(out, p)
				}
			}
		}
	}
	return out
}
