package jail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// AgentCommandRel are the files and directories in the home in which
// coding agents declare commands they run later, outside any jail when
// the user runs them unjailed: hooks, MCP servers, plugins, extensions,
// custom tools and commands, status lines, credential helpers, and the
// rules and policies that widen what an agent runs without asking. Like
// the shell rc files, they stay read-only whatever layer (built-in or
// user profile, learned profile, project jail.json) makes their parent
// writable.
//
// Some of them the agents also rewrite to save a setting (Codex its
// config.toml, Gemini CLI its settings.json and trustedFolders.json,
// Claude Code its settings.json): inside, saving fails, as under the
// built-in profiles, since their command-bearing keys are too many and too
// nested to merge back safely.
//
// Not listed, because the agent must write them as it runs: ~/.claude.json
// (shown inside as a session copy whose command-bearing keys never reach
// the host, see agentFiles), and the Codex skills Codex installs at start.
// OpenCode's plugin dependencies (~/.config/opencode/node_modules and its
// package.json), which OpenCode installs itself from the npm registry, are
// listed: code there runs in every later OpenCode, and its profile does not
// reach the registry, so the install never succeeds inside anyway.
var AgentCommandRel = []string{
	// Claude Code
	".claude/settings.json", ".claude/settings.local.json", ".claude/hooks/", ".claude/plugins/",
	".claude/local/",                      // the claude an older install's alias runs
	".claude/CLAUDE.md", ".claude/rules/", // instructions every later session follows, unjailed too
	".claude/commands/", ".claude/agents/", ".claude/skills/",
	".claude/backups/", // copies of ~/.claude.json Claude Code tells the user to restore
	// OpenAI Codex
	".codex/config.toml", ".codex/rules/", ".codex/AGENTS.md", ".codex/hooks.json", ".codex/hooks/", ".codex/plugins/",
	".codex/AGENTS.override.md",                                            // read before AGENTS.md
	".codex/.env",                                                          // loaded into Codex's environment at start: proxies, LD_PRELOAD
	".codex/*.config.toml",                                                 // codex --profile NAME's config; a new one is named after exit
	".codex/packages/", ".codex/bin/", ".codex/versions/", ".codex/tools/", // a standalone install's codex and its tools
	// Gemini CLI
	".gemini/settings.json", ".gemini/GEMINI.md", ".gemini/extensions/", ".gemini/commands/", ".gemini/policies/",
	".gemini/trustedFolders.json", ".gemini/trusted_hooks.json", ".gemini/.env", ".gemini/bin/",
	".gemini/agents/", ".gemini/skills/", // subagents declare MCP servers; skills
	".gemini/acknowledgments/", ".gemini/policy_integrity.json", // project agents and policies the user approved
	".gemini/history/*/.git", // checkpoints' shadow repositories: git obeys their config (filters, aliases) outside; a new one is named after exit
	// OpenCode
	".config/opencode/opencode.json", ".config/opencode/opencode.jsonc", ".config/opencode/config.json",
	".config/opencode/plugin/", ".config/opencode/plugins/", ".config/opencode/tool/", ".config/opencode/tools/",
	".config/opencode/command/", ".config/opencode/commands/", ".config/opencode/agent/", ".config/opencode/agents/",
	".config/opencode/node_modules/", ".config/opencode/package.json", ".config/opencode/bun.lock",
	".config/opencode/mode/", ".config/opencode/modes/", // agents too, with their permissions
	".config/opencode/skill/", ".config/opencode/skills/", ".config/opencode/AGENTS.md",
	// Others with a built-in profile
	".config/amp/settings.json", ".config/amp/settings.jsonc", // read when settings.json is missing
	".config/amp/plugins/", ".config/amp/skills/", // plugin code Amp runs; skills
	".copilot/hooks/", ".copilot/mcp-config.json", ".copilot/lsp-config.json", ".copilot/installed-plugins/",
	".copilot/settings.json", ".copilot/extensions/", ".copilot/permissions-config.json", // hooks, commands, loaded code, approvals
	".copilot/agents/", ".copilot/skills/", ".copilot/copilot-instructions.md",
	".copilot/pkg/", // newer versions of itself, run in its place
	".cursor/mcp.json", ".cursor/hooks.json", ".cursor/hooks/", ".cursor/extensions/", ".cursor/cli-config.json",
	".config/goose/config.yaml", ".config/goose/permission.yaml",
	".pi/agent/extensions/", ".pi/agent/mcp.json",
	".pi/agent/settings.json", ".pi/agent/models.json", // shellPath, shellCommandPrefix, packages; providers' baseUrl
	".pi/agent/bin/", ".pi/agent/tools/", ".pi/agent/git/", // first on every command's PATH; installed packages
	".pi/agent/skills/", ".pi/agent/prompts/", ".pi/agent/SYSTEM.md", ".pi/agent/APPEND_SYSTEM.md",
	".pi/agent/AGENTS.md", ".pi/agent/AGENTS.MD", ".pi/agent/CLAUDE.md", ".pi/agent/CLAUDE.MD", // in every system prompt
	".aider.conf.yml",
}

// AgentCommandPaths are the agents' command-bearing home paths under home
// (an entry of the list ending in "/" is a directory; one with glob
// characters holds its matches at start and names new ones after exit),
// kept read-only by the planner whatever makes their parent writable.
func AgentCommandPaths(home string) []string {
	out := make([]string, 0, len(AgentCommandRel))
	for _, rel := range AgentCommandRel {
		out = append(out, filepath.Join(home, rel))
	}
	return out
}

// AgentFileRule is a home file an agent rewrites as it runs (so it cannot be
// read-only) but in which some keys declare commands or widen what the
// agent may run.
type AgentFileRule struct {
	Rel    string // relative to the home
	Format string // only "json"
	// Protected keys keep their host value (or their absence) at any
	// depth, whatever the jailed run wrote.
	Protected []string
	// Split are the objects merged member by member rather than as a
	// whole, as dotted paths where * is any member (projects.*: every
	// project's keys one by one).
	Split []string
}

// claudeProtected are the keys of ~/.claude.json (and of Claude Code's
// settings, which it also accepts there) that run a program, approve one,
// or widen what runs without asking: MCP servers and their approvals,
// hooks, status lines and helper scripts, environment variables (BASH_ENV,
// ANTHROPIC_BASE_URL…), permission rules and tool allow lists, folder
// trust (which lets a project's own hooks and servers run), plugins and
// marketplaces, and the API key requests are sent with.
var claudeProtected = []string{
	"mcpServers", "enabledMcpjsonServers", "disabledMcpjsonServers", "enableAllProjectMcpServers",
	"hooks", "statusLine", "subagentStatusLine", "fileSuggestion",
	"apiKeyHelper", "proxyAuthHelper", "awsAuthRefresh", "awsCredentialExport", "gcpAuthRefresh", "otelHeadersHelper",
	"env", "permissions", "allowedTools", "bypassPermissionsModeAccepted",
	"hasTrustDialogAccepted", "hasClaudeMdExternalIncludesApproved",
	"enabledPlugins", "extraKnownMarketplaces", "pluginConfigs", "sshConfigs", "primaryApiKey",
}

// AgentFileRules are the files shown inside as a session copy whenever the
// plan makes them visible and writable, whichever layer does.
//
// Claude Code rewrites ~/.claude.json by writing a temporary file beside
// it (beside the symlink's target when it is a symlink) and renaming it
// over. Where the file sits on its own in the throwaway home (a bind of
// that file alone, or missing there), the jail gets a private session
// directory, bound read-write at /run/jail/agent-N, holding the copy, and
// the home holds a symlink to it: the rename happens inside that
// directory and its result is what jail merges back, whatever path the
// agent wrote it through. A missing host file stays missing inside (the
// agent starts as on a first run) and is created by the merge. A program
// that renames its own file over the symlink writes into the throwaway
// home: it runs, and its file goes with the home. Elsewhere (the file
// inside a visible tree, such as a writable home) the copy is bound over
// the file; a rename over it fails with EBUSY and Claude Code writes the
// file in place instead.
//
// Before the command starts, jail copies the host file into the session
// directory; the jail reads and writes only the copy. After the command
// exits, jail merges the copy into the host file three
// ways: the keys the run changed since the copy was taken (at the top
// level, and one by one inside each object Split names, such as each
// project's under "projects") are applied to the host file's current
// content, so that what the host wrote meanwhile stays; protected keys
// keep the host's value, or its absence, at any depth, and a value holding
// one (all of "projects", one project) stays as the host has it when the
// run removes it or writes a value of another type in its place. The
// merge runs under Claude Code's own lock and replaces the host file
// atomically, with its mode, only if it changes. A copy that is not valid
// JSON, nests deeper than maxJSONDepth, or is no longer a regular file
// (a symlink, a FIFO) is not merged (one warning); a
// jail killed before the merge leaves the host file as it was, and the
// copy is dropped.
var AgentFileRules = []AgentFileRule{
	{Rel: ".claude.json", Format: "json", Protected: claudeProtected, Split: []string{"projects", "projects.*"}},
}

// ErrNotMerged marks an agent file copy jail did not merge back.
var ErrNotMerged = errors.New("not merged")

// MergeAgentJSON merges what a jailed run changed in an agent file (ours,
// from base, the content the copy started with) into the host file's
// current content (theirs). It returns theirs unchanged (and false) when
// the run changed nothing that may reach the host. Invalid JSON inside, or
// a host file that is no longer a JSON object, is an error and nothing is
// merged.
func MergeAgentJSON(base, ours, theirs []byte, rule AgentFileRule) ([]byte, bool, error) {
	if bytes.Equal(base, ours) {
		return theirs, false, nil
	}
	o, err := parseObject(ours)
	if err != nil {
		return theirs, false, fmt.Errorf("%w: the jailed run left it invalid (%v)", ErrNotMerged, err)
	}
	t, err := parseObject(theirs)
	if err != nil {
		return theirs, false, fmt.Errorf("%w: the host file is not a JSON object (%v)", ErrNotMerged, err)
	}
	b, err := parseObject(base)
	if err != nil {
		b = &object{} // it was not valid when the jail started: all of ours is new
	}
	m := merger{protected: set(rule.Protected), split: rule.Split}
	merged := m.merge(b, o, t, nil)
	if equalValues(merged, t) {
		return theirs, false, nil
	}
	var out bytes.Buffer
	writeValue(&out, merged, "")
	out.WriteByte('\n')
	return out.Bytes(), true, nil
}

func set(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

type merger struct {
	protected map[string]bool
	split     []string
}

// merge applies to theirs the members base and ours disagree on; path is
// where the objects sit in the file.
func (m merger) merge(base, ours, theirs *object, path []string) *object {
	out := theirs.clone()
	for _, k := range append(ours.keysNotIn(nil), base.keysNotIn(ours)...) {
		if m.protected[k] {
			continue
		}
		bv, inBase := base.get(k)
		ov, inOurs := ours.get(k)
		if inBase == inOurs && equalValues(bv, ov) {
			continue // not changed inside: the host's value stays
		}
		tv, inTheirs := theirs.get(k)
		if !inOurs {
			if !inTheirs || !m.holdsProtected(tv) {
				out.del(k)
			}
			continue
		}
		sub := append(append([]string{}, path...), k)
		if oo, ok := ov.(*object); ok && m.splits(sub) {
			bo, _ := bv.(*object)
			to, _ := tv.(*object)
			out.put(k, m.merge(bo.orEmpty(), oo, to.orEmpty(), sub))
			continue
		}
		out.put(k, m.keepProtected(ov, tv))
	}
	return out
}

// splits reports whether the object at path is merged member by member.
func (m merger) splits(path []string) bool {
	for _, s := range m.split {
		parts := strings.Split(s, ".")
		if len(parts) != len(path) {
			continue
		}
		match := true
		for i, p := range parts {
			if p != "*" && p != path[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// keepProtected is a value written inside with every protected key, at
// any depth, replaced by the host's value at the same place (or dropped
// where the host has none). Where the host's value holds protected keys,
// the run cannot take them away by removing it, nor by writing a value of
// another JSON type (or, for an array, of another length) in its place:
// the host's value stays.
func (m merger) keepProtected(in, host any) any {
	if !sameShape(in, host) && m.holdsProtected(host) {
		return host
	}
	switch v := in.(type) {
	case *object:
		h, _ := host.(*object)
		out := &object{}
		for _, k := range v.keys {
			hv, inHost := h.get(k)
			switch {
			case !m.protected[k]:
				out.put(k, m.keepProtected(v.vals[k], hv))
			case inHost:
				out.put(k, hv)
			}
		}
		for _, k := range h.keysNotIn(v) {
			if m.protected[k] || m.holdsProtected(h.vals[k]) {
				out.put(k, h.vals[k])
			}
		}
		return out
	case []any:
		h, _ := host.([]any)
		out := make([]any, len(v))
		for i, e := range v {
			var he any
			if i < len(h) {
				he = h[i]
			}
			out[i] = m.keepProtected(e, he)
		}
		return out
	}
	return in
}

// holdsProtected reports whether v has a protected key at any depth.
func (m merger) holdsProtected(v any) bool {
	switch x := v.(type) {
	case *object:
		for _, k := range x.keys {
			if m.protected[k] || m.holdsProtected(x.vals[k]) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if m.holdsProtected(e) {
				return true
			}
		}
	}
	return false
}

// sameShape reports whether a and b are of the same JSON type, and of the
// same length if both are arrays: an array's elements merge one by one
// only where they line up.
func sameShape(a, b any) bool {
	switch x := a.(type) {
	case *object:
		_, ok := b.(*object)
		return ok
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y)
	case string:
		_, ok := b.(string)
		return ok
	case json.Number:
		_, ok := b.(json.Number)
		return ok
	case bool:
		_, ok := b.(bool)
		return ok
	}
	return a == nil && b == nil
}

// object is a JSON object that keeps the order of its members, so that a
// merged file differs from the host's only where the merge changed it.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) put(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

func (o *object) clone() *object {
	out := &object{keys: append([]string{}, o.keys...), vals: make(map[string]any, len(o.vals))}
	for k, v := range o.vals {
		out.vals[k] = v
	}
	return out
}

func (o *object) orEmpty() *object {
	if o == nil {
		return &object{}
	}
	return o
}

// keysNotIn are o's keys, in order, that other lacks.
func (o *object) keysNotIn(other *object) []string {
	if o == nil {
		return nil
	}
	var out []string
	for _, k := range o.keys {
		if _, ok := other.get(k); !ok {
			out = append(out, k)
		}
	}
	return out
}

// equalValues compares two decoded JSON values; member order does not
// matter, numbers compare as written.
func equalValues(a, b any) bool {
	switch x := a.(type) {
	case *object:
		y, ok := b.(*object)
		if !ok || len(x.vals) != len(y.vals) {
			return false
		}
		for k, v := range x.vals {
			if w, ok := y.vals[k]; !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// maxJSONDepth bounds how deeply the objects and arrays of an agent file
// may nest. Claude Code's own files nest a few levels; a file nested
// deeper was written to exhaust jail's stack as it merges, and is refused.
const maxJSONDepth = 512

// errTooDeep is a document nested beyond maxJSONDepth.
var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxJSONDepth)

// parseObject decodes a JSON document that must be an object, nested at
// most maxJSONDepth levels.
func parseObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the top-level value")
	}
	o, ok := v.(*object)
	if !ok {
		return nil, errors.New("not an object")
	}
	return o, nil
}

// decodeValue decodes the next value, depth levels down from the top.
func decodeValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		if depth++; depth > maxJSONDepth {
			return nil, errTooDeep
		}
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec, depth)
			if err != nil {
				return nil, err
			}
			o.put(kt.(string), v) // a repeated key keeps the last value, as JSON.parse does
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	}
	return tok, nil
}

// writeValue writes v indented by two spaces, as JSON.stringify(v, null, 2)
// does.
func writeValue(b *bytes.Buffer, v any, indent string) {
	inner := indent + "  "
	switch x := v.(type) {
	case *object:
		if len(x.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, k := range x.keys {
			b.WriteString(inner)
			writeString(b, k)
			b.WriteString(": ")
			writeValue(b, x.vals[k], inner)
			if i < len(x.keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range x {
			b.WriteString(inner)
			writeValue(b, e, inner)
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	case string:
		writeString(b, x)
	case json.Number:
		b.WriteString(x.String())
	case bool:
		fmt.Fprint(b, x)
	default:
		b.WriteString("null")
	}
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)           // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// agentInterest are the agent paths the planner needs facts about.
func agentInterest(home string) []string {
	out := AgentCommandPaths(home)
	for _, a := range AgentFileRules {
		out = append(out, filepath.Join(home, a.Rel))
	}
	return out
}
