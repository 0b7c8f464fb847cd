package jail

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Widening lists what a project's jail.json grants beyond what the user's
// own config and profiles give: reads or writes outside the project, more
// domains, redirected or uninspected hosts, secrets sent to more hosts or
// passed unmasked, profiles pulled in, commands allowed. Narrowing (deny
// rules) needs no trust. c's paths are as written; root is the project.
func Widening(c *Config, root, home string) []string {
	var out []string
	outside := func(key string, list []string) {
		for _, p := range list {
			abs := ExpandPath(p, c.Dir, home)
			if !under(abs, root) {
				out = append(out, fmt.Sprintf("%s %s (outside the project)", key, p))
			}
		}
	}
	outside("allowRead", c.Filesystem.AllowRead)
	outside("allowWrite", c.Filesystem.AllowWrite)
	for _, d := range c.Network.Allow {
		out = append(out, "network.allow "+d)
	}
	if c.Network.Unknown == "allow" {
		out = append(out, `network.unknown "allow" (every other domain)`)
	}
	for _, h := range sortedKeys(c.Network.Hosts) {
		out = append(out, fmt.Sprintf("network.hosts %s -> %s", h, c.Network.Hosts[h]))
	}
	for _, d := range c.Network.Passthrough {
		out = append(out, "network.passthrough "+d+" (not inspected)")
	}
	for _, n := range sortedKeys(c.Secrets.Env) {
		out = append(out, fmt.Sprintf("secrets.env %s may be sent to %v", n, c.Secrets.Env[n]))
	}
	for _, n := range c.Env.Pass {
		out = append(out, "env.pass "+n+" (its real value enters the jail)")
	}
	for _, e := range c.Extends {
		out = append(out, "extends profile "+e)
	}
	for _, a := range c.Command.Allow {
		out = append(out, "command.allow "+a)
	}
	return out
}

// trustFile records trusted project configs: path -> sha256 of content.
func trustFile(home string, getenv func(string) string) string {
	return filepath.Join(UserConfigDir(home, getenv), "trusted.json")
}

func fileHash(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func readTrust(home string, getenv func(string) string) map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(trustFile(home, getenv)); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

// IsTrusted reports whether the config file at path was trusted as it is
// now; a changed file is not.
func IsTrusted(path, home string, getenv func(string) string) bool {
	h, err := fileHash(path)
	return err == nil && readTrust(home, getenv)[path] == h
}

// Trust records the config file at path, as it is now, as trusted.
func Trust(path, home string, getenv func(string) string) error {
	h, err := fileHash(path)
	if err != nil {
		return err
	}
	m := readTrust(home, getenv)
	m[path] = h
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b, _ := json.MarshalIndent(m, "", "  ")
	tf := trustFile(home, getenv)
	if err := os.MkdirAll(filepath.Dir(tf), 0o700); err != nil {
		return err
	}
	tmp := tf + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, tf)
}
