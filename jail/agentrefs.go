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
var agentSettings = []string{
	".claude/settings.json", ".claude/settings.local.json", ".gemini/settings.json",
	".cursor/mcp.json", ".config/opencode/opencode.json",
}

// maxSettings bounds how much of a settings file is read for the programs
// it names.
const maxSettings = 4 << 20

// referencedPrograms returns the files in the home that the agents'
// settings files name as programs to run (~/.claude/statusline.sh, a hook
// script): a writable home would otherwise let a jailed command rewrite
// what the unjailed agent runs next. Only settings in trees the jail shows
// are read, and only names of files that exist are returned. A settings
// file too large to read whole is an error: what it names would go
// unprotected.
func referencedPrograms(home string, shown []string) ([]string, error) {
	var out []string
	for _, rel := range agentSettings {
		p := filepath.Join(home, rel)
		if !related(p, shown) {
			continue
		}
		strs, err := settingsStrings(p)
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
	return union(nil, out), nil
}

// settingsStrings returns every string value of a JSON file: none when it
// is missing or not JSON (the agent runs nothing from it then either), an
// error when it is larger than jail reads.
func settingsStrings(path string) ([]string, error) {
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
		return nil, nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			out = append(out, t)
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
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
				if p := filepath.Join(home, rest); under(p, home) && p != home {
					out = append(out, p)
				}
			}
		}
	}
	return out
}
