package jail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/jailsh/jail/jail/jsonc"
	"github.com/jailsh/jail/proxy"
)

// Config is one layer of policy as written in a jail.json, the user's
// config.json, a --settings file, a profile, or the command line.
type Config struct {
	// Schema is the "$schema" key editors use to find jail.schema.json;
	// jail accepts it and ignores it.
	Schema string `json:"$schema,omitempty" noun:"a string"`
	// Description says what a profile is for (shown by jail profiles list).
	Description string           `json:"description,omitempty" noun:"a string"`
	Extends     []string         `json:"extends,omitempty" noun:"profile names"`
	Filesystem  FilesystemConfig `json:"filesystem,omitempty"`
	Network     NetworkConfig    `json:"network,omitempty"`
	Secrets     SecretsConfig    `json:"secrets,omitempty"`
	Command     CommandConfig    `json:"command,omitempty"`
	Env         EnvConfig        `json:"env,omitempty"`
	// AgentSandbox names the agent whose own sandbox, which cannot start
	// in the jail, jail turns off through the agent's configuration.
	AgentSandbox string `json:"agentSandbox,omitempty" noun:"an agent name"`
	// Learned records what a learning run saw; it informs, it grants nothing.
	Learned LearnedConfig `json:"learned,omitempty"`
	// AskTimeout is how many seconds (1-3600) a held request or exec waits
	// for a person's answer before it is denied; 0 is the default, 60.
	AskTimeout int `json:"askTimeout,omitempty" noun:"a number of seconds"`
	// Remote names the hosts jail --remote NAME runs on. Only the user's
	// own config may set it: a project must not pick where the user's code
	// and agent go.
	Remote map[string]RemoteHost `json:"remote,omitempty" noun:"a host object" mapnoun:"host objects"`

	// Project marks the project's own jail.json among the layers: what it
	// widens needs the user's trust.
	Project bool `json:"-"`
	// FromLearning marks a profile jail --learning wrote for the command.
	FromLearning bool `json:"-"`
	// Hash is ContentHash of the bytes the layer was parsed from: trust is
	// checked against what was parsed, not against a second read.
	Hash string `json:"-"`

	// File is the file the layer came from ("" for the command line); Dir
	// is the directory its relative paths are relative to.
	File string `json:"-"`
	Dir  string `json:"-"`
}

// FilesystemConfig lists paths and globs, relative to the config file's
// directory or to ~.
type FilesystemConfig struct {
	AllowRead  []string `json:"allowRead,omitempty" noun:"paths"`
	AllowWrite []string `json:"allowWrite,omitempty" noun:"paths"`
	DenyRead   []string `json:"denyRead,omitempty" noun:"paths"`
	DenyWrite  []string `json:"denyWrite,omitempty" noun:"paths"`
}

// NetworkConfig is the domain policy enforced by the proxy.
type NetworkConfig struct {
	Allow []string `json:"allow,omitempty" noun:"domains"`
	Deny  []string `json:"deny,omitempty" noun:"domains"`
	// Ask names the domains a connection to is held until a person
	// answers; deny beats ask, ask beats allow.
	Ask     []string          `json:"ask,omitempty" noun:"domains"`
	Unknown string            `json:"unknown,omitempty" noun:"\"deny\", \"ask\" or \"allow\""`
	Hosts   map[string]string `json:"hosts,omitempty" noun:"a host:port address" mapnoun:"host:port addresses"`
	// Passthrough names hosts whose TLS is tunnelled, not intercepted.
	Passthrough []string `json:"passthrough,omitempty" noun:"domains"`
}

// SecretsConfig binds secret environment variables to hosts and names files
// whose secret values are masked.
type SecretsConfig struct {
	Env map[string]SecretEnv `json:"env,omitempty" noun:"a list of hosts or {\"hosts\": [...], \"inject\": [...]}" mapnoun:"lists of hosts or {\"hosts\": [...], \"inject\": [...]}"`
	// Files is nil when the key is absent; a written [] decodes to an
	// empty non-nil list, so that trust can tell the two apart.
	Files []string `json:"files,omitempty" noun:"paths"`
}

// SecretEnv is one secrets.env binding, written as a list of hosts or as
// {"hosts": [...], "inject": [...]}.
type SecretEnv struct {
	// Hosts are where the real value may be sent.
	Hosts []string `json:"hosts,omitempty" noun:"hosts"`
	// Inject is where in a request to Hosts it may go: "header",
	// "header:NAME", "query", "query:KEY", "path", "body". Empty: the
	// provider's usual fields for a well-known credential, request header
	// fields for any other.
	Inject []string `json:"inject,omitempty" noun:"injection locations"`
}

// CommandConfig lists command prefixes such as "git push".
type CommandConfig struct {
	Deny  []string `json:"deny,omitempty" noun:"commands"`
	Allow []string `json:"allow,omitempty" noun:"commands"`
	// Ask are the commands whose execs wait for a person's approval.
	Ask []string `json:"ask,omitempty" noun:"commands"`
}

// EnvConfig passes host variables through unmasked and sets others.
type EnvConfig struct {
	Pass []string          `json:"pass,omitempty" noun:"variable names"`
	Set  map[string]string `json:"set,omitempty" noun:"a string" mapnoun:"strings"`
}

// LearnedConfig is the record a learning run leaves in the profile it
// writes (jail --learning): for the reader, never for enforcement.
type LearnedConfig struct {
	Command    string   `json:"command,omitempty" noun:"a string"`
	Tracer     string   `json:"tracer,omitempty" noun:"a string"`
	Programs   []string `json:"programs,omitempty" noun:"paths"`
	KeptDenied []string `json:"keptDenied,omitempty" noun:"strings"`
}

// RemoteHost is one named remote host: where jail --remote NAME connects
// and where the project goes there.
type RemoteHost struct {
	Host string `json:"host,omitempty" noun:"a host name or ssh alias"`
	User string `json:"user,omitempty" noun:"a user name"`
	Port int    `json:"port,omitempty" noun:"a port number"`
	// Dir is the project's directory on the host; {project} is replaced
	// by the project's key, ~/ is the remote user's home.
	Dir string `json:"dir,omitempty" noun:"a path"`
}

// ConfigError is a problem in a config file, with its position.
type ConfigError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *ConfigError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// MaxAskTimeout is the longest askTimeout, in seconds: an hour.
const MaxAskTimeout = 3600

// maxConfigSize bounds what jail reads as a config file.
const maxConfigSize = 4 << 20

// LoadConfigFile reads and validates one config file. display is the name
// used in error messages (usually the path relative to the working directory).
func LoadConfigFile(path, display string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", display, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", display, err)
	}
	if len(data) > maxConfigSize {
		return nil, &ConfigError{File: display, Msg: "file is larger than 4 MiB; is this really a jail config?"}
	}
	c, err := ParseConfig(data, display)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(path)
	c.Hash = ContentHash(data)
	c.File = abs
	c.Dir = filepath.Dir(abs)
	return c, nil
}

// ParseConfig parses and validates a config document. Unknown keys, wrong
// types and invalid values are errors that carry file:line:column.
func ParseConfig(data []byte, display string) (*Config, error) {
	root, err := jsonc.Parse(data)
	if err != nil {
		var se *jsonc.SyntaxError
		if errors.As(err, &se) {
			line, col := jsonc.LineCol(data, se.Off)
			return nil, &ConfigError{File: display, Line: line, Col: col, Msg: se.Msg}
		}
		return nil, err
	}
	d := decoder{data: data, file: display}
	var c Config
	if err := d.decode(root, reflect.ValueOf(&c).Elem(), "", "a config object"); err != nil {
		return nil, err
	}
	if err := d.validate(root, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

type decoder struct {
	data []byte
	file string
}

func (d *decoder) errAt(off int, format string, args ...any) error {
	line, col := jsonc.LineCol(d.data, off)
	return &ConfigError{File: d.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// decode fills v from n. name is the key being decoded (for messages) and
// noun says what the value holds ("paths", "domains").
func (d *decoder) decode(n *jsonc.Node, v reflect.Value, name, noun string) error {
	what := "the config"
	if name != "" {
		what = fmt.Sprintf("%q", name)
	}
	switch v.Kind() {
	case reflect.Struct:
		if se, ok := v.Addr().Interface().(*SecretEnv); ok && n.Kind != jsonc.Object {
			// The short form: a list of hosts.
			if n.Kind != jsonc.Array {
				return d.errAt(n.Start, "%s must be %s, got %s", what, noun, n.Kind)
			}
			return d.decode(n, reflect.ValueOf(&se.Hosts).Elem(), name, "hosts")
		}
		if n.Kind != jsonc.Object {
			return d.errAt(n.Start, "%s must be an object, got %s", what, n.Kind)
		}
		t := v.Type()
		fields := map[string]int{}
		for i := 0; i < t.NumField(); i++ {
			if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag != "-" {
				fields[tag] = i
			}
		}
		for _, m := range n.Members {
			i, ok := fields[m.Key]
			if !ok {
				return d.errAt(m.KeyOff, "unknown key %q%s%s", m.Key, in(name), suggest(m.Key, fields))
			}
			f := t.Field(i)
			noun := f.Tag.Get("noun")
			if f.Type.Kind() == reflect.Map {
				noun += "|" + f.Tag.Get("mapnoun")
			}
			if err := d.decode(m.Value, v.Field(i), m.Key, noun); err != nil {
				return err
			}
		}
	case reflect.Int:
		i, err := strconv.Atoi(n.Str)
		if n.Kind != jsonc.Number || err != nil {
			return d.errAt(n.Start, "%s must be %s, got %s", what, noun, n.Kind)
		}
		v.SetInt(int64(i))
	case reflect.String:
		if n.Kind != jsonc.String {
			return d.errAt(n.Start, "%s must be %s, got %s", what, noun, n.Kind)
		}
		v.SetString(n.Str)
	case reflect.Slice:
		if n.Kind != jsonc.Array {
			return d.errAt(n.Start, "%s must be a list of %s, got %s", what, noun, n.Kind)
		}
		out := make([]string, 0, len(n.Items)) // non-nil even for []: the key was written
		for _, it := range n.Items {
			if it.Kind != jsonc.String {
				return d.errAt(it.Start, "%s must be a list of %s, got %s in the list", what, noun, it.Kind)
			}
			if strings.TrimSpace(it.Str) == "" {
				return d.errAt(it.Start, "%s has an empty entry", what)
			}
			if strings.ContainsRune(it.Str, 0) {
				return d.errAt(it.Start, "%s has an entry with a NUL byte", what)
			}
			out = append(out, it.Str)
		}
		v.Set(reflect.ValueOf(out))
	case reflect.Map:
		noun, plural, _ := strings.Cut(noun, "|")
		if n.Kind != jsonc.Object {
			return d.errAt(n.Start, "%s must be an object mapping names to %s, got %s", what, plural, n.Kind)
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Members))
		for _, mem := range n.Members {
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(mem.Value, ev, mem.Key, noun); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(mem.Key), ev)
		}
		v.Set(m)
	}
	return nil
}

func in(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" in %q", name)
}

func suggest(key string, fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for f := range fields {
		if strings.EqualFold(f, key) || strings.EqualFold(strings.ReplaceAll(f, "_", ""), strings.ReplaceAll(key, "_", "")) {
			return fmt.Sprintf(" (did you mean %q?)", f)
		}
		names = append(names, f)
	}
	sort.Strings(names)
	return fmt.Sprintf("; expected one of %s", strings.Join(names, ", "))
}

// lookup returns the node at a key path, or the deepest node found on the
// way, for positioning validation errors.
func lookup(n *jsonc.Node, keys ...string) *jsonc.Node {
	for _, k := range keys {
		next := find(n, k)
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

// find returns the node at a key path, nil when a key is missing.
func find(n *jsonc.Node, keys ...string) *jsonc.Node {
	for _, k := range keys {
		var next *jsonc.Node
		for _, m := range n.Members {
			if m.Key == k {
				next = m.Value
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// validate checks values whose type is right but whose content is not,
// walking the document so that errors name the first bad entry in it.
func (d *decoder) validate(root *jsonc.Node, c *Config) error {
	if _, ok := agentSandboxes[c.AgentSandbox]; c.AgentSandbox != "" && !ok {
		return d.errAt(lookup(root, "agentSandbox").Start, `"agentSandbox" must be one of %s, got %q`, strings.Join(AgentSandboxNames(), ", "), c.AgentSandbox)
	}
	switch c.Network.Unknown {
	case "", "deny", "ask", "allow":
	default:
		return d.errAt(lookup(root, "network", "unknown").Start, `"unknown" must be "deny", "ask" or "allow", got %q`, c.Network.Unknown)
	}
	if n := find(root, "askTimeout"); n != nil && (c.AskTimeout < 1 || c.AskTimeout > MaxAskTimeout) {
		return d.errAt(n.Start, `"askTimeout" must be a number of seconds from 1 to %d, got %s`, MaxAskTimeout, n.Str)
	}
	items := func(keys ...string) []*jsonc.Node {
		if n := find(root, keys...); n != nil {
			return n.Items
		}
		return nil
	}
	members := func(keys ...string) []jsonc.Member {
		if n := find(root, keys...); n != nil {
			return n.Members
		}
		return nil
	}
	// A path pattern the matcher cannot honour exactly would mask or
	// protect less than it says: refuse it here, with its position.
	for _, key := range [][2]string{{"filesystem", "allowRead"}, {"filesystem", "allowWrite"}, {"filesystem", "denyRead"}, {"filesystem", "denyWrite"}, {"secrets", "files"}} {
		for _, it := range items(key[:]...) {
			if err := CheckPattern(it.Str); err != nil {
				return d.errAt(it.Start, "%q entry %q: %v", key[1], it.Str, err)
			}
		}
	}
	for _, it := range items("extends") {
		if strings.ContainsAny(it.Str, "/\\") {
			return d.errAt(it.Start, "profile name %q must not contain a slash", it.Str)
		}
	}
	for _, key := range []string{"allow", "deny", "ask", "passthrough"} {
		for _, it := range items("network", key) {
			if err := checkDomain(it.Str); err != nil {
				return d.errAt(it.Start, "%v", err)
			}
		}
	}
	for _, m := range members("network", "hosts") {
		if err := checkDomain(m.Key); err != nil || strings.Contains(m.Key, "*") {
			return d.errAt(m.KeyOff, "%q in \"hosts\" must be a plain host name", m.Key)
		}
		if err := checkDomain(m.Value.Str); err != nil || !strings.Contains(m.Value.Str, ":") {
			return d.errAt(m.Value.Start, "%q must map to host:port, got %q", m.Key, m.Value.Str)
		}
	}
	for _, m := range members("secrets", "env") {
		if err := d.validateSecretEnv(m); err != nil {
			return err
		}
	}
	for _, m := range members("remote") {
		if err := d.validateRemote(m); err != nil {
			return err
		}
	}
	for _, it := range items("env", "pass") {
		if !validEnvName(it.Str) {
			return d.errAt(it.Start, "%q is not a variable name", it.Str)
		}
	}
	for _, m := range members("env", "set") {
		if !validEnvName(m.Key) {
			return d.errAt(m.KeyOff, "%q is not a variable name", m.Key)
		}
		if strings.ContainsRune(m.Value.Str, 0) {
			return d.errAt(m.Value.Start, "the value of %q has a NUL byte", m.Key)
		}
	}
	return nil
}

// validateSecretEnv checks one secrets.env binding: a variable name, host
// names, and places in a request the proxy knows.
func (d *decoder) validateSecretEnv(m jsonc.Member) error {
	if !validEnvName(m.Key) {
		return d.errAt(m.KeyOff, "%q is not a variable name", m.Key)
	}
	hosts := m.Value
	if m.Value.Kind == jsonc.Object {
		hosts = find(m.Value, "hosts")
		if inject := find(m.Value, "inject"); inject != nil {
			for _, it := range inject.Items {
				if err := proxy.CheckLocation(it.Str); err != nil {
					return d.errAt(it.Start, "secrets.env %s: %v", m.Key, err)
				}
			}
		}
	}
	if hosts == nil {
		return nil
	}
	for _, it := range hosts.Items {
		if err := checkDomain(it.Str); err != nil {
			return d.errAt(it.Start, "%v", err)
		}
	}
	return nil
}

// validateRemote checks one named remote host: a name and a host that
// cannot be taken for an ssh option, a port in range.
func (d *decoder) validateRemote(m jsonc.Member) error {
	if !validRemoteWord(m.Key) {
		return d.errAt(m.KeyOff, "remote host name %q must be letters, digits, '.', '_' or '-'", m.Key)
	}
	for _, key := range []string{"host", "user"} {
		if n := find(m.Value, key); n != nil && !validRemoteWord(n.Str) {
			return d.errAt(n.Start, "remote %s: %q %q must be letters, digits, '.', '_' or '-', not starting with '-'", m.Key, key, n.Str)
		}
	}
	if find(m.Value, "host") == nil {
		return d.errAt(m.KeyOff, "remote %s needs a \"host\"", m.Key)
	}
	if n := find(m.Value, "port"); n != nil {
		if p, err := strconv.Atoi(n.Str); err != nil || p < 1 || p > 65535 {
			return d.errAt(n.Start, "remote %s: \"port\" must be 1-65535, got %s", m.Key, n.Str)
		}
	}
	if n := find(m.Value, "dir"); n != nil && (strings.ContainsRune(n.Str, 0) || n.Str == "") {
		return d.errAt(n.Start, "remote %s: \"dir\" must be a path", m.Key)
	}
	return nil
}

// validRemoteWord is a host, user or alias name that ssh cannot read as
// an option or anything but a name.
func validRemoteWord(s string) bool {
	if s == "" || s[0] == '-' || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func checkDomain(dom string) error {
	host := dom
	if i := strings.LastIndexByte(dom, ':'); i >= 0 && !strings.HasSuffix(dom, "]") {
		host = dom[:i]
		port, err := strconv.Atoi(dom[i+1:])
		if err != nil || port < 1 || port > 65535 || strings.Trim(dom[i+1:], "0123456789") != "" {
			return fmt.Errorf("%q has an invalid port (use name, *.name or name:port)", dom)
		}
	}
	host = strings.TrimPrefix(host, "*.")
	if host == "" || strings.ContainsAny(host, " /*?@") || strings.IndexFunc(host, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("%q is not a domain (use name, *.name or name:port)", dom)
	}
	return nil
}
