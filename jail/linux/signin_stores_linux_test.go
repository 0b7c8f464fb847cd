package linux

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
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
	byKey := map[string]jail.SignInRule{}
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
	sf.Rules = rules
	eps, states := signInEndpoints(&Plan{SignIn: []jail.SignInFile{sf}, SecretKey: key})
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

const storeGitHub = "gho_realCopilotTokenRealCopilotToken0123"

// Copilot's config.json is JSON with comments ("//" inside a string is
// not one); every string under copilotTokens, whatever its layout, and a
// GitHub token anywhere else become placeholders; the other settings are
// kept.
func TestCopySignInFileCopilot(t *testing.T) {
	sf, key := signInFixture(t, "// User settings belong in settings.json.\n/* managed\n automatically */\n{\n"+
		`  "firstLaunchAt": "2026-01-01T00:00:00.000Z", "url": "https://github.com//x",`+"\n"+
		`  "copilotTokens": {"https://github.com:octo": "`+storeGitHub+`", "list": [{"t": "opaqueTokenOfUnknownShape0123456789"}]},`+"\n"+
		`  "loggedInUsers": [{"host": "https://github.com", "login": "octo", "token": "ghu_realUserToServerTokenReal0123456789"}]`+"\n}\n")
	sf.Rule = ruleFor(t, "copilot")
	secrets, _, err := copySignInFile(key, sf)
	if err != nil || len(secrets) != 3 {
		t.Fatalf("copySignInFile: %v %v", secrets, err)
	}
	b, _ := os.ReadFile(sf.Copy)
	for _, real := range []string{storeGitHub, "opaqueTokenOfUnknownShape0123456789", "ghu_realUserToServerTokenReal0123456789"} {
		if strings.Contains(string(b), real) {
			t.Errorf("the copy holds %s: %s", real, b)
		}
	}
	if !strings.Contains(string(b), `"https://github.com//x"`) || !strings.Contains(string(b), `"login":"octo"`) || !strings.Contains(string(b), `"gho_jail`) {
		t.Errorf("the copy: %s", b)
	}
	for _, s := range secrets {
		if !slices.Equal(s.Hosts, jail.CopilotHosts) || strings.Contains(s.Value, "jail") {
			t.Errorf("secret %s: %+v", s.Name, s)
		}
	}
}

// Amp's secrets file: its default server's API key is bound to
// ampcode.com, a secret for another server to nowhere.
func TestCopySignInFileAmp(t *testing.T) {
	sf, key := signInFixture(t, `{"apiKey@https://ampcode.com/":"sgamp_user_realAmpKey0123456789","apiKey@https://amp.evil.example/":"sgamp_user_otherKey0123456789"}`)
	sf.Rule = ruleFor(t, "amp")
	secrets, _, err := copySignInFile(key, sf)
	if err != nil || len(secrets) != 2 {
		t.Fatalf("copySignInFile: %v %v", secrets, err)
	}
	b, _ := os.ReadFile(sf.Copy)
	if strings.Contains(string(b), "realAmpKey") || strings.Contains(string(b), "otherKey") {
		t.Errorf("the copy: %s", b)
	}
	for _, s := range secrets {
		want := []string(nil)
		if s.Value == "sgamp_user_realAmpKey0123456789" {
			want = []string{"ampcode.com"}
		}
		if !slices.Equal(s.Hosts, want) {
			t.Errorf("secret %s goes to %v, want %v", s.Name, s.Hosts, want)
		}
	}
}

// Comments go, strings that look like them stay; an unterminated block
// comment runs to the end.
func TestStripJSONC(t *testing.T) {
	in := "// a\n{\"u\": \"http://x/*y*/\", /* b\n c */ \"q\": \"\\\"//\"} /* open"
	var m map[string]string
	if err := json.Unmarshal(stripJSONC([]byte(in)), &m); err != nil || m["u"] != "http://x/*y*/" || m["q"] != `"//` {
		t.Errorf("stripJSONC: %q %v %v", stripJSONC([]byte(in)), m, err)
	}
}

// A keyed file's refresh sets the provider's expires from expires_in,
// an hour when the answer has none (OpenCode's default).
func TestKeyedTokenMeta(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	doc := map[string]any{"openai": map[string]any{"expires": json.Number("1")}}
	signInMeta(jail.SignInRule{Format: "opencode", Key: "openai"}, doc, map[string]any{}, now)
	if got := doc["openai"].(map[string]any)["expires"]; got != json.Number("1800003600000") {
		t.Errorf("expires without expires_in: %v", got)
	}
	signInMeta(jail.SignInRule{Format: "pi", Key: "openai"}, doc, map[string]any{"expires_in": json.Number("60")}, now)
	if got := doc["openai"].(map[string]any)["expires"]; got != json.Number("1800000060000") {
		t.Errorf("expires: %v", got)
	}
}
