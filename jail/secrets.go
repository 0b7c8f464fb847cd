package jail

import (
	"sort"
)

// providerHosts bind the well-known credentials to their providers' API
// hosts: the proxy injects them there and nowhere else. Other secrets need
// a "secrets.env" binding.
var providerHosts = map[string][]string{
	"ANTHROPIC_API_KEY":       {"api.anthropic.com"},
	"CLAUDE_CODE_OAUTH_TOKEN": {"api.anthropic.com"},
	"OPENAI_API_KEY":          {"api.openai.com"},
	"GEMINI_API_KEY":          {"generativelanguage.googleapis.com"},
	"GOOGLE_API_KEY":          {"generativelanguage.googleapis.com"},
	"GITHUB_TOKEN":            {"api.github.com", "github.com"},
	"GH_TOKEN":                {"api.github.com", "github.com"},
}

// SecretBinding says where a secret's real value may be sent.
type SecretBinding struct {
	Name  string
	Hosts []string // empty: nowhere
}

// Bindings returns where each named secret may be injected (secretHosts).
func Bindings(names []string, pol *Policy) []SecretBinding {
	var out []SecretBinding
	for _, n := range union(nil, names) {
		out = append(out, SecretBinding{Name: n, Hosts: secretHosts(n, pol.Secrets.Env)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// secretHosts is where the secret name may be injected: secrets.env from
// the policy wins over the built-in provider bindings.
func secretHosts(name string, env map[string][]string) []string {
	if hosts, ok := env[name]; ok {
		return hosts
	}
	return providerHosts[name]
}
