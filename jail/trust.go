package jail

import (
	"github.com/jailsh/jail/proxy"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// ContentHash is what trust records of a config file: its bytes' SHA-256.
func ContentHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func readTrust(home string, getenv func(string) string) map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(trustFile(home, getenv)); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

// IsTrusted reports whether the config layer c was trusted with the content
// it was parsed from; a changed file is not.
func IsTrusted(c *Config, home string, getenv func(string) string) bool {
	return c.Hash != "" && readTrust(home, getenv)[c.File] == c.Hash
}

// Trust records the config file at path as trusted with the content whose
// ContentHash is hash ("": the file as it is now).
func Trust(path, hash, home string, getenv func(string) string) error {
	if hash == "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hash = ContentHash(b)
	}
	m := readTrust(home, getenv)
	m[path] = hash
	b, _ := json.MarshalIndent(m, "", "  ")
	return proxy.WriteFileAtomic(trustFile(home, getenv), append(b, '\n'), 0o600)
}
