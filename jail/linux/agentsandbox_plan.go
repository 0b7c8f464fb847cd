package linux

import (
	"github.com/jailsh/jail/jail"
)

// planAgentSandbox applies each agentSandbox of the policy to the plan:
// the command line may gain the agent's own flags, jailVars (returned,
// made when nil) the agent's variables, and p.AgentSandbox a line each
// for jail plan.
func planAgentSandbox(p *Plan, pol *jail.Policy, jailVars map[string]string) (map[string]string, error) {
	argv, lines, jailVars, err := jail.ApplyAgentSandboxes(pol, p.Argv, jailVars)
	if err != nil {
		return nil, err
	}
	p.Argv = argv
	p.AgentSandbox = append(p.AgentSandbox, lines...)
	return jailVars, nil
}
