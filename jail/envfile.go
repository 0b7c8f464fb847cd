package jail

import (
	"bytes"
	"strings"
)

// defaultSecretFiles are always masked; secrets.files adds to them.
var defaultSecretFiles = []string{"**/.env", "**/.env.*"}

// MaskEnvFile rewrites a .env file's content so that every value that
// looks like a secret (or whose name is in forced) becomes mask(name,
// value) (the value's placeholder, or for a URL the URL with its password
// replaced); everything else, comments and layout included, is kept. It
// returns the new content and the secrets it replaced.
func MaskEnvFile(content []byte, forced map[string]bool, mask func(name, value string) (string, SecretPiece)) ([]byte, []SecretPiece) {
	var out bytes.Buffer
	var found []SecretPiece
	lines := bytes.SplitAfter(content, []byte("\n"))
	for _, raw := range lines {
		line := string(raw)
		body := strings.TrimRight(line, "\r\n")
		eol := line[len(body):]
		trimmed := strings.TrimLeft(body, " \t")
		indent := body[:len(body)-len(trimmed)]
		export := ""
		if rest, ok := strings.CutPrefix(trimmed, "export "); ok {
			export, trimmed = "export ", strings.TrimLeft(rest, " \t")
		}
		name, value, ok := strings.Cut(trimmed, "=")
		name = strings.TrimSpace(name)
		if !ok || strings.HasPrefix(trimmed, "#") || !validEnvName(name) {
			out.WriteString(line)
			continue
		}
		// Split off quotes and a trailing comment to find the bare value.
		v := strings.TrimSpace(value)
		quote, comment := "", ""
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
			if end := strings.IndexByte(v[1:], v[0]); end >= 0 {
				quote, comment, v = v[:1], v[end+2:], v[1:end+1]
			}
		} else if i := strings.Index(v, " #"); i >= 0 {
			v, comment = v[:i], v[i:]
		}
		if v == "" || !(forced[name] || LooksSecret(name, v)) {
			out.WriteString(line)
			continue
		}
		masked, piece := mask(name, v)
		found = append(found, piece)
		out.WriteString(indent + export + name + "=" + quote + masked + quote + comment + eol)
	}
	return out.Bytes(), found
}
