package jail

import (
	"strings"
	"testing"

	"github.com/jailsh/jail/proxy"
)

// TestBindingsInject: a well-known credential goes into its provider's
// fields, any other into header fields (nil), and a written "inject"
// replaces either; every default location is one the proxy accepts.
func TestBindingsInject(t *testing.T) {
	pol := &Policy{Secrets: SecretsConfig{Env: map[string]SecretEnv{
		"MY_API_KEY":     {Hosts: []string{"api.bound.test"}},
		"OPENAI_API_KEY": {Hosts: []string{"proxy.corp.test"}},
		"FORM_SECRET":    {Hosts: []string{"auth.bound.test"}, Inject: []string{"body", "header:X-Form"}},
	}}}
	got := Bindings([]string{"ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GH_TOKEN", "OPENAI_API_KEY", "MY_API_KEY", "FORM_SECRET"}, pol)
	want := map[string]string{
		"ANTHROPIC_API_KEY": "header:x-api-key,header:Authorization",
		"GEMINI_API_KEY":    "header:x-goog-api-key,query:key",
		"GH_TOKEN":          "header:Authorization",
		"OPENAI_API_KEY":    "header:Authorization", // rebound, still its fields
		"MY_API_KEY":        "",
		"FORM_SECRET":       "body,header:X-Form",
	}
	for _, b := range got {
		if strings.Join(b.Inject, ",") != want[b.Name] {
			t.Errorf("%s injects into %v, want %q", b.Name, b.Inject, want[b.Name])
		}
	}
	for name, locs := range providerInject {
		for _, l := range locs {
			if err := proxy.CheckLocation(l); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, ok := providerHosts[name]; !ok {
			t.Errorf("%s has locations but no hosts", name)
		}
	}
}

// TestParseSecretEnvForms: both forms of a binding parse to the same
// hosts; a bad location or key is an error at its position.
func TestParseSecretEnvForms(t *testing.T) {
	c, err := ParseConfig([]byte(`{"secrets": {"env": {"A": ["a.test"], "B": {"hosts": ["b.test"], "inject": ["query:key", "body"]}}}}`), "jail.json")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := c.Secrets.Env["A"], c.Secrets.Env["B"]; strings.Join(a.Hosts, ",") != "a.test" || a.Inject != nil ||
		strings.Join(b.Hosts, ",") != "b.test" || strings.Join(b.Inject, ",") != "query:key,body" {
		t.Errorf("parsed %+v", c.Secrets.Env)
	}
	for doc, want := range map[string]string{
		`{"secrets": {"env": {"B": {"hosts": ["b.test"], "inject": ["cookie"]}}}}`: `jail.json:1:60: secrets.env B: "cookie" is not an injection location (use header`,
		`{"secrets": {"env": {"B": {"host": ["b.test"]}}}}`:                        `jail.json:1:28: unknown key "host" in "B"; expected one of hosts, inject`,
		`{"secrets": {"env": {"B": {"inject": "body"}}}}`:                          `jail.json:1:38: "inject" must be a list of injection locations, got a string`,
	} {
		_, err := ParseConfig([]byte(doc), "jail.json")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}
