package linux

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
)

// expandSignInRule returns the rules of r for the file doc: r itself
// for a file of fixed paths. For a keyed file (r.Providers), one rule per
// key of doc that holds a token: the paths' "*" replaced by the key (a
// path of "*" alone is the key's string value itself),
// the names suffixed with it (so that each provider's refresh is told
// apart), only the tokens of the entry's "type", its API key and access
// token bound to the key's provider, its refresh token to the provider's
// token endpoint. A key jail does not know gets placeholders bound
// nowhere: the agent inside cannot use them, and nothing real leaves.
func expandSignInRule(r jail.SignInRule, doc map[string]any) []jail.SignInRule {
	if r.Providers == nil {
		r.Tokens = expandDeep(r.Tokens, doc)
		return []jail.SignInRule{r}
	}
	var out []jail.SignInRule
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		entry, isObject := doc[k].(map[string]any)
		_, isString := doc[k].(string)
		typ, _ := entry["type"].(string)
		pv := r.Providers[k]
		kr := jail.SignInRule{Profile: r.Profile, Rel: r.Rel, Format: r.Format, Key: k, EndpointHost: pv.EndpointHost, EndpointPath: pv.EndpointPath}
		for _, t := range r.Tokens {
			whole := len(t.Path) == 1 // the key's value is the token itself
			if whole && !isString || !whole && !isObject || t.Type != "" && t.Type != typ {
				continue
			}
			t.Path = append([]string{k}, t.Path[1:]...)
			t.Name += "_" + strings.ToUpper(jail.PlaceholderName(k))
			t.Hosts, t.Inject = providerDest(pv, t.Field)
			kr.Tokens = append(kr.Tokens, t)
		}
		if len(kr.Tokens) > 0 {
			out = append(out, kr)
		}
	}
	return out
}

// expandDeep replaces each token whose path ends in "**" by one token
// per string found under the path before it, at any depth (through
// objects and arrays, in key order) and not taken by an earlier token,
// named with its ordinal: for a file whose tokens sit in a subtree of
// unknown layout. The other tokens are kept.
func expandDeep(tokens []jail.SignInToken, doc map[string]any) []jail.SignInToken {
	var out []jail.SignInToken
	taken := func(path []string) bool {
		return slices.ContainsFunc(out, func(t jail.SignInToken) bool { return slices.Equal(t.Path, path) })
	}
	for _, t := range tokens {
		n := len(t.Path)
		if n == 0 || t.Path[n-1] != "**" {
			out = append(out, t)
			continue
		}
		root, ok := jsonAt(doc, t.Path[:n-1])
		if !ok {
			continue
		}
		walkStrings(root, slices.Clone(t.Path[:n-1]), func(path []string, v string) {
			if t.Shaped && jail.ShapeOf(v) == nil || taken(path) {
				return
			}
			d := t
			d.Path, d.Name = path, fmt.Sprintf("%s_%d", t.Name, len(out)+1)
			out = append(out, d)
		})
	}
	return out
}

// walkStrings calls f with the path and value of every string in v.
func walkStrings(v any, path []string, f func(path []string, v string)) {
	switch v := v.(type) {
	case string:
		f(slices.Clone(path), v)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walkStrings(v[k], append(path, k), f)
		}
	case []any:
		for i, e := range v {
			walkStrings(e, append(path, fmt.Sprint(i)), f)
		}
	}
}

// jsonAt returns the value at path in doc, through objects and arrays
// (a key an index).
func jsonAt(doc map[string]any, path []string) (any, bool) {
	var cur any = doc
	for _, k := range path {
		switch c := cur.(type) {
		case map[string]any:
			var ok bool
			if cur, ok = c[k]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// signInJSON is the JSON of a sign-in file of format: Copilot's is JSON
// with comments.
func signInJSON(format string, raw []byte) []byte {
	if format == "copilot" {
		return stripJSONC(raw)
	}
	return raw
}

// stripJSONC returns b, a JSON document with // and /* */ comments, with
// each comment replaced by spaces (newlines kept): JSON to decode.
func stripJSONC(b []byte) []byte {
	out := slices.Clone(b)
	inString, escaped := false, false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			j := i + 2
			for j < len(out) && !(out[j] == '*' && j+1 < len(out) && out[j+1] == '/') {
				j++
			}
			end := min(j+2, len(out))
			for ; i < end; i++ {
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
			i--
		}
	}
	return out
}

// providerDest is where a keyed file's token of field goes for pv.
func providerDest(pv jail.SignInProvider, field string) (hosts, inject []string) {
	switch {
	case field == "refresh_token" && pv.EndpointHost != "":
		return []string{pv.EndpointHost}, []string{"body"}
	case field == "refresh_token":
		return nil, []string{"body"}
	case field == "access_token" && pv.AccessHosts != nil:
		return pv.AccessHosts, pv.AccessInject
	}
	return pv.Hosts, pv.Inject
}

// signInSecret reports whether a token's value in a file of format is a
// secret: Pi's "!command" keys and names of variables stand for a key
// and are left as they are.
func signInSecret(format, v string) bool {
	if format != "pi" {
		return true
	}
	return !strings.HasPrefix(v, "!") && strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != ""
}

// signInMeta updates, after a refresh, the fields of a sign-in file that
// its CLI keeps beside the tokens (their expiry, the time of the
// refresh), as the CLI itself does, so that the next run outside the jail
// takes the new tokens as fresh.
func signInMeta(r jail.SignInRule, doc, answer map[string]any, now time.Time) {
	switch r.Format {
	case "claude":
		claudeTokenMeta(doc, answer, now)
	case "codex":
		codexTokenMeta(doc, now)
	case "gemini":
		geminiTokenMeta(doc, answer, now)
	case "opencode", "pi":
		keyedTokenMeta(doc, r.Key, answer, now)
	}
}

// keyedTokenMeta sets the key's "expires" (ms) from a token answer's
// expires_in (s), 3600 when it has none, as OpenCode and Pi do.
func keyedTokenMeta(doc map[string]any, key string, answer map[string]any, now time.Time) {
	e, _ := doc[key].(map[string]any)
	if e == nil {
		return
	}
	if _, ok := answer["expires_in"].(json.Number); !ok {
		answer = map[string]any{"expires_in": json.Number("3600")}
	}
	if ms, ok := expiresAtMillis(answer, now); ok {
		e["expires"] = ms
	}
}

// claudeTokenMeta sets claudeAiOauth's expiresAt (ms) and scopes from a
// token answer's expires_in (s) and scope, as Claude Code itself does.
func claudeTokenMeta(doc, answer map[string]any, now time.Time) {
	o, _ := doc["claudeAiOauth"].(map[string]any)
	if o == nil {
		return
	}
	if ms, ok := expiresAtMillis(answer, now); ok {
		o["expiresAt"] = ms
	}
	if sc, ok := answer["scope"].(string); ok && sc != "" {
		o["scopes"] = strings.Fields(sc)
	}
}

// codexTokenMeta sets last_refresh, which Codex compares with its
// refresh interval, to now in the RFC 3339 form Codex writes (UTC,
// fractional seconds).
func codexTokenMeta(doc map[string]any, now time.Time) {
	doc["last_refresh"] = now.UTC().Format(time.RFC3339Nano)
}

// geminiTokenMeta sets expiry_date (ms), scope and token_type from a
// token answer, as google-auth-library does with the credentials it
// hands Gemini CLI to save.
func geminiTokenMeta(doc, answer map[string]any, now time.Time) {
	if ms, ok := expiresAtMillis(answer, now); ok {
		doc["expiry_date"] = ms
	}
	for _, f := range []string{"scope", "token_type"} {
		if v, ok := answer[f].(string); ok && v != "" {
			doc[f] = v
		}
	}
}

// expiresAtMillis is the answer's expires_in (s) from now, in Unix
// milliseconds.
func expiresAtMillis(answer map[string]any, now time.Time) (json.Number, bool) {
	n, ok := answer["expires_in"].(json.Number)
	if !ok {
		return "", false
	}
	s, err := n.Int64()
	if err != nil {
		return "", false
	}
	return json.Number(fmt.Sprint(now.UnixMilli() + s*1000)), true
}
