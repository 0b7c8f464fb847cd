package jail

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	storeAPIKey = "sk-ant-api03-realStoreKeyRealStoreKeyRealStoreKey0123456789-AA"
	storeAccess = "realOpenAIAccessTokenRealOpenAIAccessToken0123456789"
	storeRefres = "realOpenAIRefreshTokenRealOpenAIRefreshToken0123456"
	storeOther  = "realUnknownProviderKeyRealUnknownProviderKey0123456"
)

// A keyed file's rule expands per provider id: the API key bound to the
// provider's API host, the OAuth access token to its sign-in's host, the
// refresh token to its token endpoint's body, an unknown provider's key
// to nowhere, and only the tokens of each entry's type.
func TestExpandSignInRuleKeyed(t *testing.T) {
	doc := map[string]any{
		"anthropic": map[string]any{"type": "api", "key": storeAPIKey},
		"openai":    map[string]any{"type": "oauth", "access": storeAccess, "refresh": storeRefres, "expires": json.Number("1")},
		"evil":      map[string]any{"type": "api", "key": storeOther},
		"note":      "not an entry",
	}
	rules := expandSignInRule(ruleFor(t, "opencode"), doc)
	if len(rules) != 3 {
		t.Fatalf("rules: %+v", rules)
	}
	byKey := map[string]signInRule{}
	for _, r := range rules {
		byKey[r.Key] = r
	}
	a := byKey["anthropic"]
	if len(a.Tokens) != 1 || !slices.Equal(a.Tokens[0].Path, []string{"anthropic", "key"}) || !slices.Equal(a.Tokens[0].Hosts, []string{"api.anthropic.com"}) || a.EndpointHost != "" {
		t.Errorf("anthropic: %+v", a)
	}
	o := byKey["openai"]
	if o.EndpointHost != "auth.openai.com" || o.EndpointPath != "/oauth/token" || len(o.Tokens) != 2 {
		t.Fatalf("openai: %+v", o)
	}
	for _, tok := range o.Tokens {
		want := []string{"chatgpt.com"}
		if tok.Field == "refresh_token" {
			want = []string{"auth.openai.com"}
		}
		if !slices.Equal(tok.Hosts, want) || !strings.HasSuffix(tok.Name, "_OPENAI") {
			t.Errorf("openai %s: %+v", tok.Field, tok)
		}
	}
	if e := byKey["evil"]; len(e.Tokens) != 1 || e.Tokens[0].Hosts != nil || e.EndpointHost != "" {
		t.Errorf("an unknown provider's key is bound somewhere: %+v", e)
	}
}

// Pi's file: the copy holds placeholders for every key and token, keeps
// a "!command" key and a variable's name as they are (they are no
// secret, and Pi resolves them itself), and the refresh's bookkeeping
// lands in the provider's entry.
func TestCopySignInFilePi(t *testing.T) {
	sf, key := signInFixture(t, `{"anthropic":{"type":"oauth","access":"`+testAccess+`","refresh":"`+testRefresh+`","expires":1},`+
		`"openai":{"type":"api_key","key":"`+storeOther+`"},"groq":{"type":"api_key","key":"!pass show groq"},"xai":{"type":"api_key","key":"XAI_KEY_VAR"}}`)
	sf.Rule = ruleFor(t, "pi")
	secrets, rules, err := copySignInFile(key, sf)
	if err != nil || len(secrets) != 3 || len(rules) != 4 {
		t.Fatalf("copySignInFile: %v %v %v", secrets, rules, err)
	}
	b, _ := os.ReadFile(sf.Copy)
	for _, real := range []string{testAccess, testRefresh, storeOther} {
		if strings.Contains(string(b), real) {
			t.Errorf("the copy holds a real value: %s", b)
		}
	}
	if !strings.Contains(string(b), `"!pass show groq"`) || !strings.Contains(string(b), `"XAI_KEY_VAR"`) || !strings.Contains(string(b), `"sk-ant-oat01-jail`) {
		t.Errorf("the copy: %s", b)
	}
	sf.rules = rules
	eps, states := signInEndpoints(&Plan{SignIn: []SignInFile{sf}, SecretKey: key})
	if len(eps) != 1 || eps[0].Host != "platform.claude.com" || eps[0].Carrying != "PI_AUTH_REFRESH_ANTHROPIC" {
		t.Fatalf("endpoints: %+v", eps)
	}
	newAccess := "sk-ant-oat01-newAccessTokenNewAccessTokenNewAccessToken0123-AA"
	if err := states[0].save(map[string]any{"access_token": newAccess, "refresh_token": "sk-ant-ort01-newRefreshNewRefreshNewRefreshNewRefresh-AA", "expires_in": json.Number("3600")}); err != nil {
		t.Fatal(err)
	}
	host, _ := os.ReadFile(sf.Host)
	var doc map[string]map[string]any
	if err := json.Unmarshal(host, &doc); err != nil {
		t.Fatal(err)
	}
	a := doc["anthropic"]
	if a["access"] != newAccess || a["type"] != "oauth" || a["expires"].(float64) < float64(time.Now().UnixMilli()) || doc["openai"]["key"] != storeOther {
		t.Errorf("the host file after the refresh: %s", host)
	}
}
