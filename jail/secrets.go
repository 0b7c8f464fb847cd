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

// providerInject is where in a request each well-known credential goes:
// the fields its clients send it in (Authorization carries Bearer, token
// and Basic credentials; git sends a token as a Basic password). A
// placeholder anywhere else (a prompt, a query string, another header)
// reaches the provider as it is.
var providerInject = map[string][]string{
	"ANTHROPIC_API_KEY":       {"header:x-api-key", "header:Authorization"},
	"CLAUDE_CODE_OAUTH_TOKEN": {"header:Authorization"},
	"OPENAI_API_KEY":          {"header:Authorization"},
	"GEMINI_API_KEY":          {"header:x-goog-api-key", "query:key"},
	"GOOGLE_API_KEY":          {"header:x-goog-api-key", "query:key"},
	"GITHUB_TOKEN":            {"header:Authorization"},
	"GH_TOKEN":                {"header:Authorization"},
}

// SecretBinding says where a secret's real value may be sent.
type SecretBinding struct {
	Name   string
	Hosts  []string // empty: nowhere
	Inject []string // where in a request; empty: any request header field
}

// Bindings returns where each named secret may be injected (secretHosts,
// secretInject).
func Bindings(names []string, pol *Policy) []SecretBinding {
	var out []SecretBinding
	for _, n := range Union(nil, names) {
		out = append(out, SecretBinding{Name: n, Hosts: SecretHosts(n, pol.Secrets.Env), Inject: SecretInject(n, pol.Secrets.Env)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SecretHosts is where the secret name may be injected: secrets.env from
// the policy wins over the built-in provider bindings.
func SecretHosts(name string, env map[string]SecretEnv) []string {
	if b, ok := env[name]; ok {
		return b.Hosts
	}
	return providerHosts[name]
}

// SecretInject is where in a request the secret name may be injected:
// secrets.env's "inject" when written, else the provider's fields, else
// (nil) any request header field. Body, path and query injection happen
// only when a binding asks for them.
func SecretInject(name string, env map[string]SecretEnv) []string {
	if b := env[name]; len(b.Inject) > 0 {
		return b.Inject
	}
	return providerInject[name]
}
