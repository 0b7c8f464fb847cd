package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/jailsh/jail/jail"
)

// addAgentSandboxes adds a row per agent profile saying how the agent's
// own sandbox, which cannot start inside the jail, is handled: a user
// profile that replaces the built-in one without agentSandbox leaves the
// agent failing its commands inside, and is shown with the fix.
func addAgentSandboxes(add func(ok, required bool, name, detail string)) {
	home, _ := os.UserHomeDir()
	for _, name := range jail.AgentSandboxNames() {
		row := name + " sandbox"
		c, err := jail.LoadProfile(name, home, os.Getenv)
		if err != nil {
			add(false, false, row, fmt.Sprintf("profile %s: %v; fix the profile file", name, err))
			continue
		}
		if got := profileAgentSandbox(c, home, 0); got == name {
			if err := jail.ManagedSandboxRefusal(name); err != nil {
				add(false, false, row, err.Error())
				continue
			}
			add(true, false, row, jail.AgentSandboxSummary(name))
			continue
		}
		file := filepath.Join(jail.UserConfigDir(home, os.Getenv), "profiles", name+".json")
		add(false, false, row, fmt.Sprintf("%s does not turn %s's own sandbox off, which cannot start inside the jail; fix: add \"agentSandbox\": %q to it", file, name, name))
	}
}

// profileAgentSandbox is the agentSandbox a profile sets itself or through
// the profiles it extends, at most a few levels deep.
func profileAgentSandbox(c *jail.Config, home string, depth int) string {
	if c.AgentSandbox != "" || depth > 8 {
		return c.AgentSandbox
	}
	for _, e := range c.Extends {
		if base, err := jail.LoadProfile(e, home, os.Getenv); err == nil {
			if got := profileAgentSandbox(base, home, depth+1); got != "" {
				return got
			}
		}
	}
	return ""
}
