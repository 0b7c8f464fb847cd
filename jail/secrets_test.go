package jail

import (
	"strings"
	"testing"
)

func TestMaskEnvFile(t *testing.T) {
	in := strings.Join([]string{
		"# comment stays",
		"PLAIN=hello",
		"OPENAI_API_KEY=sk-real-openai",
		`export GITHUB_TOKEN="ghp_realtoken"`,
		"  DB_PASSWORD='p@ss word' # trailing",
		"MY_KEY=abc123",
		"EMPTY_TOKEN=",
		"not a line",
		"WEIRD=ghp_0123456789abcdefghij",
		"CRLF_SECRET=x\r",
		"",
	}, "\n")
	got, found := MaskEnvFile([]byte(in), map[string]bool{"MY_KEY": true}, func(name, value string) (string, []SecretPiece) {
		return "PH(" + name + ")", []SecretPiece{{Name: name, Value: value, Placeholder: "PH(" + name + ")"}}
	})
	want := strings.Join([]string{
		"# comment stays",
		"PLAIN=hello",
		"OPENAI_API_KEY=PH(OPENAI_API_KEY)",
		`export GITHUB_TOKEN="PH(GITHUB_TOKEN)"`,
		"  DB_PASSWORD='PH(DB_PASSWORD)' # trailing",
		"MY_KEY=PH(MY_KEY)",
		"EMPTY_TOKEN=",
		"not a line",
		"WEIRD=PH(WEIRD)",
		"CRLF_SECRET=PH(CRLF_SECRET)\r",
		"",
	}, "\n")
	if string(got) != want {
		t.Errorf("masked:\n%s\nwant:\n%s", got, want)
	}
	values := map[string]string{}
	for _, f := range found {
		values[f.Name] = f.Value
	}
	for name, v := range map[string]string{"OPENAI_API_KEY": "sk-real-openai", "GITHUB_TOKEN": "ghp_realtoken", "DB_PASSWORD": "p@ss word", "MY_KEY": "abc123", "WEIRD": "ghp_0123456789abcdefghij", "CRLF_SECRET": "x"} {
		if values[name] != v {
			t.Errorf("found %s = %q, want %q", name, values[name], v)
		}
	}
	if len(found) != 6 {
		t.Errorf("found %d secrets, want 6: %v", len(found), found)
	}
}

func TestBindings(t *testing.T) {
	pol := &Policy{Secrets: SecretsConfig{Env: map[string]SecretEnv{"MY_API_KEY": {Hosts: []string{"api.bound.test"}}, "OPENAI_API_KEY": {Hosts: []string{"proxy.corp.test"}}}}}
	got := Bindings([]string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MY_API_KEY", "LONELY_TOKEN"}, pol)
	want := map[string]string{"ANTHROPIC_API_KEY": "api.anthropic.com", "OPENAI_API_KEY": "proxy.corp.test", "MY_API_KEY": "api.bound.test", "LONELY_TOKEN": ""}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for _, b := range got {
		if strings.Join(b.Hosts, ",") != want[b.Name] {
			t.Errorf("%s -> %v, want %q", b.Name, b.Hosts, want[b.Name])
		}
	}
}
