package main

import (
	"slices"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestSSHEnvDropsSecrets: the environment of a session's ssh has no
// variable the jailed command sees as a placeholder (recognised by name,
// or named secret by the policy), and keeps what ssh itself needs.
func TestSSHEnvDropsSecrets(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-not-a-real-key-0123456789abcdef")
	t.Setenv("MY_PLAIN_NAME", "custom-value-1")
	t.Setenv("SSH_AUTH_SOCK", "/run/user/1000/agent.sock")
	t.Setenv("TERM", "xterm-256color")
	pol := &jail.Policy{SecretNames: []string{"MY_PLAIN_NAME"}}
	env := sshEnv(pol)
	for _, kv := range env {
		if kv == "ANTHROPIC_API_KEY=sk-ant-api03-not-a-real-key-0123456789abcdef" || kv == "MY_PLAIN_NAME=custom-value-1" {
			t.Errorf("ssh's environment holds the secret %s", kv)
		}
	}
	for _, kv := range []string{"SSH_AUTH_SOCK=/run/user/1000/agent.sock", "TERM=xterm-256color"} {
		if !slices.Contains(env, kv) {
			t.Errorf("ssh's environment lacks %s", kv)
		}
	}
}
