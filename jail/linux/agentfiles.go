package linux

import (
	"fmt"
	"path/filepath"

	"github.com/jailsh/jail/jail"
)

// agentPrivateDirs are the directories in the home where an agent keeps
// state for one session only that its later runs still execute: Claude
// Code sources every ~/.claude/session-env/SESSION/*-hook-N.sh before
// each Bash command of that session, and resuming a session (--continue,
// --resume) keeps its ID. The agent must write there as it runs, so
// wherever the jail may write them they are a private empty directory,
// thrown away after exit.
var agentPrivateDirs = []string{".claude/session-env"}

// AgentFile is one agent file of a plan: the jail sees Copy at Path, and
// jail merges Copy into Host after the command exits.
type AgentFile struct {
	Path string // where the jail sees the file
	Host string // the host file merged into (symlinks resolved)
	Copy string // host path of the session copy
	// Dir, when set, is the private session directory holding Copy, bound
	// read-write inside at Inside; Path is then a symlink to the copy
	// there, so that a rename beside it works.
	Dir    string
	Inside string
	// Missing is a host file that did not exist when the jail started:
	// nothing is copied in, and the merge creates it.
	Missing bool
	Rule    jail.AgentFileRule
}

// agentSpot is where the jail sees an agent file (Dest), the host file
// behind it (Host), whether the file lies alone in the throwaway home
// (bound by itself or missing there, so a symlink may take its place),
// and whether it is missing on the host.
type agentSpot struct {
	Dest, Host     string
	Alone, Missing bool
}

// agentStateDir is where the jail sees the private directory of agent
// file n.
func agentStateDir(n int) string { return fmt.Sprintf("/run/jail/agent-%d", n) }

// planAgentFiles returns the agent files of a plan and the binds that show
// their copies. where tells, for a host path, where the jail sees it and
// whether the jail may write it there (visible or missing in the throwaway
// home, writable, neither read-only nor masked, not thrown away).
func planAgentFiles(home, sessionDir string, where func(string) (agentSpot, bool)) ([]AgentFile, []Op) {
	var files []AgentFile
	var ops []Op
	for _, rule := range jail.AgentFileRules {
		spot, ok := where(filepath.Join(home, rule.Rel))
		if !ok {
			continue
		}
		n := len(files)
		a := AgentFile{Path: spot.Dest, Host: spot.Host, Missing: spot.Missing, Rule: rule}
		if spot.Alone {
			a.Dir = filepath.Join(sessionDir, fmt.Sprintf("agent-%d", n))
			a.Inside = agentStateDir(n)
			a.Copy = filepath.Join(a.Dir, filepath.Base(rule.Rel))
			ops = append(ops,
				Op{Kind: "bind", Src: a.Dir, Dest: a.Inside, Why: "agent state: private, merged back after exit, command keys kept from the host"},
				Op{Kind: "symlink", Src: filepath.Join(a.Inside, filepath.Base(rule.Rel)), Dest: a.Path, Why: "agent state: rewritten by rename in its private directory"})
		} else {
			a.Copy = filepath.Join(sessionDir, fmt.Sprintf("agent-%d%s", n, filepath.Ext(rule.Rel)))
			ops = append(ops, Op{Kind: "bind", Src: a.Copy, Dest: a.Path, Why: "session copy: merged back after exit, command keys kept from the host"})
		}
		files = append(files, a)
	}
	return files, ops
}
