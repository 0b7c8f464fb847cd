package linux

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jailsh/jail/jail"
)

// A browser sign-in ends with the provider sending the browser to a
// callback on localhost, where the agent's login server waits. Inside the
// jail that server listens on the jail's own loopback, which the host's
// browser cannot reach; for an agent whose callback port is fixed, jail
// publishes it for the login command alone. The tokens the login then
// exchanges come back as placeholders, and reach the host's sign-in file
// only with the person's yes.

// signInCallback is an agent's browser sign-in: the subcommand that runs
// it, the flags that choose another way (a device code, a key on stdin),
// and its fixed callback port.
type signInCallback struct {
	agent, pkg string
	command    string
	valueFlags []string // the agent's flags before the subcommand that take a value
	otherWays  []string
	port       int
}

// signInCallbacks are read from the agents' CLIs: `codex login` starts its
// login server on localhost:1455 unless --device-auth, --with-api-key or
// --with-access-token picks another way.
var signInCallbacks = []signInCallback{
	{agent: "codex", pkg: "@openai/codex", command: "login",
		valueFlags: []string{"-c", "--config", "-m", "--model", "-p", "--profile", "-C", "--cd", "-s", "--sandbox", "-a", "--ask-for-approval", "-i", "--image", "--enable", "--disable", "--remote"},
		otherWays:  []string{"--device-auth", "--with-api-key", "--with-access-token", "--api-key"}, port: 1455},
}

// planSignInCallback publishes the callback port of a browser sign-in the
// command line runs, and returns the plan's line for it ("" for none).
func planSignInCallback(pol *jail.Policy, argv []string) string {
	for _, cb := range signInCallbacks {
		i := jail.AgentIndex(argv, cb.agent, cb.pkg)
		if i < 0 || !slices.Contains(pol.AgentSandbox, cb.agent) || !runsSubcommand(argv[i+1:], cb) {
			continue
		}
		if !slices.Contains(pol.Publish, cb.port) {
			pol.Publish = append(pol.Publish, cb.port)
		}
		return fmt.Sprintf("sign-in callback: %s %s listens on localhost:%d, published for the host's browser", cb.agent, cb.command, cb.port)
	}
	return ""
}

// runsSubcommand reports whether args run cb's subcommand (the first word
// that is neither a flag nor a flag's value) without any of the flags that
// choose another way.
func runsSubcommand(args []string, cb signInCallback) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return false
		}
		if strings.HasPrefix(a, "-") {
			if slices.Contains(cb.valueFlags, a) {
				i++
			}
			continue
		}
		if a != cb.command {
			return false
		}
		for _, b := range args[i+1:] {
			if slices.Contains(cb.otherWays, strings.SplitN(b, "=", 2)[0]) || b == "status" {
				return false
			}
		}
		return true
	}
	return false
}
