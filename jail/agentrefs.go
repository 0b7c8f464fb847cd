package jail

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// agentSettings are the agents' settings files whose strings name the
// programs the agent runs: hooks, status lines, key helpers, MCP servers.
var agentSettings = []string{
	".claude/settings.json", ".claude/settings.local.json", ".gemini/settings.json",
	".cursor/mcp.json", ".config/opencode/opencode.json",
}

// maxSettings bounds how much of a settings file is read for the programs
// it names.
const maxSettings = 256 << 10

// referencedPrograms returns the files in the home that the agents'
// settings files name as programs to run (~/.claude/statusline.sh, a hook
// script): a writable home would otherwise let a jailed command rewrite
// what the unjailed agent runs next. Only settings in trees the jail shows
// are read, and only names of files that exist are returned.
func referencedPrograms(home string, shown []string) []string {
	var out []string
	for _, rel := range agentSettings {
		p := filepath.Join(home, rel)
		if !related(p, shown) {
			continue
		}
		for _, s := range settingsStrings(p) {
			for _, f := range homePaths(s, home) {
				if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
					out = append(out, f)
				}
			}
		}
	}
	return union(nil, out)
}

// settingsStrings returns every string value of a JSON file (nil when it
// cannot be read or parsed, or is too large).
func settingsStrings(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSettings+1))
	if err != nil || len(b) > maxSettings {
		return nil
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any, int)
	walk = func(v any, depth int) {
		if depth > 64 {
			return
		}
		switch t := v.(type) {
		case string:
			out = append(out, t)
		case []any:
			for _, e := range t {
				walk(e, depth+1)
			}
		case map[string]any:
			for _, e := range t {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return out
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
				if p := filepath.Join(home, rest); under(p, home) && p != home {
					out = append(out, p)
				}
			}
		}
	}
	return out
}
