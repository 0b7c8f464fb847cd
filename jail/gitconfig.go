package jail

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// HooksPaths returns the directories core.hooksPath names in the
// project's .git/config and the user's ~/.gitconfig and
// ~/.config/git/config, read from the files (git is never run): an
// unjailed git runs what they hold. Relative paths are taken against the
// project, as git takes them against the work tree; "~/" against home.
// Each ends in "/".
func HooksPaths(root, home string) []string {
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
		out = append(out, filepath.Clean(v)+"/")
	}
	return Union(nil, out)
}

// gitConfigValue returns the last value of section.key in a git config
// file ("" when unset). Section and key names are case-insensitive, as in
// git; subsections, includes and escapes beyond quoting are not read.
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
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		k, v, _ := strings.Cut(line, "=")
		if cur == section && strings.ToLower(strings.TrimSpace(k)) == key {
			value = unquoteGit(strings.TrimSpace(v))
		}
	}
	return value
}

// unquoteGit drops a trailing comment and the double quotes of a git
// config value.
func unquoteGit(v string) string {
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
