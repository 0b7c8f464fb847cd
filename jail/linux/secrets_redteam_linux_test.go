package linux

import (
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestEmbeddedPlaceholdersAgree: the placeholders the jail's environment
// shows for credentials found inside longer values, and for copies of a
// secret's value, are the ones the proxy is given, each with the value it
// stands for, so that what the jail sends is what the proxy replaces.
func TestEmbeddedPlaceholdersAgree(t *testing.T) {
	const gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	host := []string{
		"CURL_FLAGS=-H 'Authorization: Bearer " + gh + "' -s",
		"PIP_EXTRA_INDEX_URL=https://u:Pw0rdPw0rd@a.example.test/simple https://u:Pw0rdPw0rd@b.example.test/simple",
		"MY_API_KEY=plain-value-0123456789",
		"COPY=plain-value-0123456789",
	}
	pol := &jail.Policy{}
	ep := jail.PlanEnv(host, pol, "KEY", "S", nil)
	plan := &Plan{SecretKey: "KEY", Env: ep, Secrets: jail.Bindings(ep.Placeholders, pol)}
	get := func(n string) string {
		for _, kv := range host {
			if k, v, _ := strings.Cut(kv, "="); k == n {
				return v
			}
		}
		return ""
	}
	secrets, err := prepareSecrets(plan, get)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(ep.Env, "\n")
	want := map[string]string{gh: "CURL_FLAGS", "Pw0rdPw0rd": "PIP_EXTRA_INDEX_URL", "plain-value-0123456789": "MY_API_KEY"}
	for _, s := range secrets {
		if want[s.Value] != s.Name {
			t.Errorf("unexpected secret %s=%q", s.Name, s.Value)
		}
		delete(want, s.Value)
		if !strings.Contains(env, s.Placeholder) {
			t.Errorf("the proxy's placeholder %s of %s is not in the jail's environment:\n%s", s.Placeholder, s.Name, env)
		}
	}
	if len(want) != 0 {
		t.Errorf("the proxy lacks secrets %v", want)
	}
	for _, v := range []string{gh, "Pw0rdPw0rd", "plain-value-0123456789"} {
		if strings.Contains(env, v) {
			t.Errorf("%q is in the jail's environment:\n%s", v, env)
		}
	}
}
