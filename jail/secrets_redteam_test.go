package jail

import (
	"strings"
	"testing"
)

// TestPlanEnvRepeatedValue: a secret's value copied under an innocent
// name, whole or inside a longer value, reaches the jail as the secret's
// placeholder; env.pass still passes what it names as it is.
func TestPlanEnvRepeatedValue(t *testing.T) {
	pol := &Policy{Env: EnvConfig{Pass: []string{"PASSED"}}}
	const plainKey = "no-shape-at-all-0123456789"
	host := []string{
		"BACKUP=" + plainKey, // before the secret, in host order
		"MY_API_KEY=" + plainKey,
		"CURL_FLAGS=-H x-api-key:" + plainKey + " -s",
		"DB=postgres://app:hunter2hunter2@db/app",
		"DB_COPY=pw=hunter2hunter2;",
		"PASSED=" + plainKey,
		"SHORT=abc",
	}
	// DB is no secret by name, but its password is one by value (a URL
	// with a password).
	ep := PlanEnv(host, pol, "KEY", "S", nil)
	env := map[string]string{}
	for _, kv := range ep.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	ph := env["MY_API_KEY"]
	if ph == plainKey || !strings.Contains(ph, "jail") {
		t.Fatalf("control: MY_API_KEY inside is %q", ph)
	}
	for name, want := range map[string]string{
		"BACKUP":     ph,
		"CURL_FLAGS": "-H x-api-key:" + ph + " -s",
		"PASSED":     plainKey,
		"SHORT":      "abc",
	} {
		if env[name] != want {
			t.Errorf("%s inside is %q, want %q", name, env[name], want)
		}
	}
	if strings.Contains(env["DB_COPY"], "hunter2hunter2") || !strings.Contains(env["DB_COPY"], "jail-secret-DB-") {
		t.Errorf("DB_COPY inside is %q: the URL's password copied elsewhere must be its placeholder", env["DB_COPY"])
	}
}

// TestMaskRepeatedLongestFirst: when one secret's value contains
// another's, the longer is replaced whole, so no tail of it is left.
func TestMaskRepeatedLongestFirst(t *testing.T) {
	pieces := []SecretPiece{
		{Value: "short-secret", Placeholder: "jail-secret-A-xxxxxxxxxxxx"},
		{Value: "short-secret-and-more", Placeholder: "jail-secret-B-yyyyyyyyyyyy"},
	}
	if got := MaskRepeated("v=short-secret-and-more", pieces); got != "v=jail-secret-B-yyyyyyyyyyyy" {
		t.Errorf("got %q", got)
	}
}

// TestMaskEnvFileEvasions: .env spellings an attacker planting a file,
// or a careless user, might write; each secret's value is masked.
func TestMaskEnvFileEvasions(t *testing.T) {
	lines := []string{
		"export GITHUB_TOKEN=ghp_0123456789abcdefghij0123456789abcdef",
		"export\tMY_API_KEY=tab-separated-export-value",
		"  my_api_key = 'lower-case-name-value' # comment",
		"STRIPE_SECRET_KEY=\"  spaced-inside-quotes  \"",
		"DB_PASSWORD=crlf-line-value\r",
		"api_token2=digits-in-name-value",
		"STRIPE_SECRET_KEY_LIVE_2=qualified-name-value",
		"INNOCENT=ghp_0123456789abcdefghij0123456789abcdef",
		"PLAIN=1\rMY_PASSWORD=lone-cr-value-1\r",                                                             // a lone CR ends a line for dotenv
		"PRIVATE_KEY=`-----BEGIN RSA PRIVATE KEY-----\nMIIEbacktickbody0123\n-----END RSA PRIVATE KEY-----`", // node's backtick quotes
		"stripe.secret-key=dotted-name-value",                                                                // node's [\w.-]+ names
		"RUBY_TOKEN: ruby-colon-value",
		"# rotated: the old token was glpat-commentedOutToken0123 and still works", // ruby's NAME: value
	}
	secrets := []string{
		"ghp_0123456789abcdefghij0123456789abcdef", "tab-separated-export-value", "lower-case-name-value",
		"spaced-inside-quotes", "crlf-line-value", "digits-in-name-value", "qualified-name-value",
		"lone-cr-value-1", "MIIEbacktickbody0123", "dotted-name-value", "ruby-colon-value", "glpat-commentedOutToken0123",
	}
	content := strings.Join(lines, "\n") + "\n"
	phs := NewPlaceholders("K")
	masked, found := MaskEnvFile([]byte(content), nil, phs.Mask)
	for _, s := range secrets {
		if strings.Contains(string(masked), s) {
			t.Errorf("%q is left in the masked file:\n%s", s, masked)
		}
	}
	if !strings.Contains(string(masked), "PLAIN=1\r") || !strings.Contains(string(masked), "RUBY_TOKEN: jail-secret-") {
		t.Errorf("the layout is not kept:\n%q", masked)
	}
	if len(found) != len(lines) {
		t.Errorf("found %d secrets, want %d: %+v", len(found), len(lines), found)
	}
}

// TestEmbeddedSecrets: credentials inside longer values under innocent
// names are masked where they stand, the rest kept; a value the policy
// names is masked whole all the same.
func TestEmbeddedSecrets(t *testing.T) {
	const gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	const glpat = "glpat-abcdefghij0123456789"
	for _, c := range []struct {
		name, value string
		secrets     []string // what must not be left
		kept        []string // what must be
	}{
		{"CURL_FLAGS", "-H 'Authorization: Bearer " + gh + "' -s", []string{gh}, []string{"-H 'Authorization: Bearer ", "' -s"}},
		{"REMOTE", "https://" + gh + "@git.example.test/o/r.git", []string{gh}, []string{"https://", "@git.example.test/o/r.git"}},
		{"PIP_EXTRA_INDEX_URL", "https://u:Pw0rdPw0rd@a.example.test/simple https://u:Pw0rdPw0rd@b.example.test/simple", []string{"Pw0rdPw0rd"}, []string{"https://u:", "@a.example.test/simple https://u:", "@b.example.test/simple"}},
		{"NOTE", "tokens " + gh + ", " + glpat + ".", []string{gh, glpat}, []string{"tokens ", ", ", "."}},
	} {
		if !LooksSecret(c.name, c.value) {
			t.Errorf("%s=%q is not taken for a secret", c.name, c.value)
			continue
		}
		masked, pieces := NewPlaceholders("K").Mask(c.name, c.value)
		for _, s := range c.secrets {
			if strings.Contains(masked, s) {
				t.Errorf("%s: %q is left in %q", c.name, s, masked)
			}
		}
		for _, k := range c.kept {
			if !strings.Contains(masked, k) {
				t.Errorf("%s: %q is lost from %q", c.name, k, masked)
			}
		}
		if len(pieces) != len(c.secrets) {
			t.Errorf("%s: pieces %+v, want one per secret %v", c.name, pieces, c.secrets)
		}
	}
	masked, _ := NewPlaceholders("K", "FORCED").Mask("FORCED", "user=bob pass=hunter2 "+gh)
	if strings.Contains(masked, "hunter2") || strings.Contains(masked, "bob") {
		t.Errorf("a value the policy names is masked only in part: %q", masked)
	}
	for _, v := range []string{"/usr/local/bin:/usr/bin", "xterm-256color", "en_US.UTF-8", "https://user@example.test/", "--color=auto -l"} {
		if LooksSecret("SOME_VAR", v) {
			t.Errorf("LooksSecret(SOME_VAR, %q) = true: not a secret", v)
		}
	}
}
