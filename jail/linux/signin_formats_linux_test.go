package linux

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
)

func signInJWT(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT","kid":"k1"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte(strings.Repeat("real-signature", 16)))
}

func ruleFor(t *testing.T, profile string) jail.SignInRule {
	t.Helper()
	for _, r := range jail.SignInRules {
		if r.Profile == profile {
			return r
		}
	}
	t.Fatalf("no sign-in rule for %s", profile)
	return jail.SignInRule{}
}

// A Codex JWT's placeholder keeps the header and claims Codex reads and
// swaps the signature, so that nothing of the real signature shows; a
// Gemini JWT's shows nothing of the token at all.
func TestSignInPlaceholderShapes(t *testing.T) {
	key := jail.SessionKey("test-key")
	idTok := signInJWT(`{"email":"a@example.test","https://api.openai.com/auth":{"chatgpt_plan_type":"plus","chatgpt_account_id":"acc-1"}}`)
	sig := idTok[strings.LastIndex(idTok, ".")+1:]
	ph := jail.SignInPlaceholder(key, ruleFor(t, "codex"), "CODEX_OAUTH_ID_TOKEN", idTok, 0)
	head := idTok[:strings.LastIndex(idTok, ".")]
	if !strings.HasPrefix(ph, head+".jail") || strings.Contains(ph, sig) || len(ph) != len(head)+1+43 || strings.Trim(ph, jail.B64URL+".") != "" {
		t.Errorf("codex id token placeholder %q: want the real header and claims, then .jail and 39 random base64url bytes", ph)
	}
	if again := jail.SignInPlaceholder(key, ruleFor(t, "codex"), "CODEX_OAUTH_ID_TOKEN", idTok, 1); again == ph {
		t.Errorf("a minted placeholder (ordinal 1) equals the file's own: %q", again)
	}
	if ph := jail.SignInPlaceholder(key, ruleFor(t, "codex"), "CODEX_OAUTH_REFRESH_TOKEN", "rt_opaque0123456789abcdef", 0); !strings.HasPrefix(ph, "jail-secret-CODEX_OAUTH_REFRESH_TOKEN-") {
		t.Errorf("an opaque codex token's placeholder is %q, want the generic one", ph)
	}
	gph := jail.SignInPlaceholder(key, ruleFor(t, "gemini"), "GEMINI_OAUTH_ID_TOKEN", idTok, 0)
	if strings.Contains(gph, head) || !strings.Contains(gph[strings.LastIndex(gph, "."):], "jail") {
		t.Errorf("gemini id token placeholder %q: want a JWT that shows nothing of the real one", gph)
	}
}

// After a refresh the host file gets each format's own bookkeeping: the
// expiry from expires_in, Codex's last_refresh; other fields are kept.
func TestSignInMetaSave(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	doc := map[string]any{"refresh_token": "r", "expiry_date": json.Number("1")}
	signInMeta(jail.SignInRule{Format: "gemini"}, doc, map[string]any{"expires_in": json.Number("3599"), "scope": "a b", "token_type": "Bearer"}, now)
	if doc["expiry_date"] != json.Number("1800003599000") || doc["scope"] != "a b" || doc["token_type"] != "Bearer" || doc["refresh_token"] != "r" {
		t.Errorf("gemini meta: %v", doc)
	}
	doc = map[string]any{"last_refresh": "2020-01-01T00:00:00Z", "OPENAI_API_KEY": nil}
	signInMeta(jail.SignInRule{Format: "codex"}, doc, map[string]any{"access_token": "x"}, now)
	if doc["last_refresh"] != "2027-01-15T08:00:00Z" {
		t.Errorf("codex last_refresh: %v", doc["last_refresh"])
	}
	if _, ok := doc["OPENAI_API_KEY"]; !ok {
		t.Errorf("codex meta dropped a field: %v", doc)
	}
}

// Codex's whole refresh: the file's tokens become placeholders, the
// answer's real tokens reach the host file with a fresh last_refresh and
// the other fields kept, and a placeholder in an answer is never saved.
func TestSignInCodexSave(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "auth.json")
	access, refresh := signInJWT(`{"exp":1}`), "rt_realRefreshToken0123456789"
	os.WriteFile(host, []byte(`{"OPENAI_API_KEY":null,"tokens":{"id_token":"`+signInJWT(`{"email":"a@example.test"}`)+`","access_token":"`+access+`","refresh_token":"`+refresh+`","account_id":"acc-1"},"last_refresh":"2020-01-01T00:00:00Z"}`), 0o600)
	sf := jail.SignInFile{Path: host, Host: host, Copy: filepath.Join(dir, "run", "s", "signin-0.json"), Rule: ruleFor(t, "codex")}
	key := jail.SessionKey("k")
	secrets, _, err := copySignInFile(key, sf)
	if err != nil || len(secrets) != 3 {
		t.Fatalf("copySignInFile: %v %v", secrets, err)
	}
	eps, _ := signInEndpoints(&Plan{SignIn: []jail.SignInFile{sf}, SecretKey: key})
	if len(eps) != 1 || eps[0].Host != "auth.openai.com" || eps[0].Carrying != "CODEX_OAUTH_REFRESH_TOKEN" || len(eps[0].Tokens) != 3 {
		t.Fatalf("endpoints: %+v", eps)
	}
	newAccess := signInJWT(`{"exp":2}`)
	if err := eps[0].Save(map[string]any{"access_token": newAccess, "refresh_token": "rt_new", "id_token": signInJWT(`{"email":"b@example.test"}`)}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(host)
	var got struct {
		Tokens      map[string]string `json:"tokens"`
		LastRefresh string            `json:"last_refresh"`
	}
	json.Unmarshal(b, &got)
	lr, _ := time.Parse(time.RFC3339Nano, got.LastRefresh)
	if got.Tokens["access_token"] != newAccess || got.Tokens["refresh_token"] != "rt_new" || got.Tokens["account_id"] != "acc-1" || time.Since(lr) > time.Minute {
		t.Errorf("host file after save: %s", b)
	}
	ph := eps[0].Mint("access_token", signInJWT(`{"exp":3}`))
	if err := eps[0].Save(map[string]any{"access_token": ph}); err == nil {
		t.Errorf("a minted placeholder was saved as the access token")
	}
}

// The API key a ChatGPT sign-in exchanged its id token for is a
// placeholder too, bound to the API, and no refresh answer replaces it.
func TestSignInCodexAPIKey(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "auth.json")
	key := "sk-proj-realKeyFromTheSignIn0123456789abcdefABCDEF"
	os.WriteFile(host, []byte(`{"OPENAI_API_KEY":"`+key+`","tokens":{"refresh_token":"rt_real0123456789"}}`), 0o600)
	sf := jail.SignInFile{Path: host, Host: host, Copy: filepath.Join(dir, "run", "s", "signin-0.json"), Rule: ruleFor(t, "codex")}
	secrets, _, err := copySignInFile(jail.SessionKey("k"), sf)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, s := range secrets {
		if s.Value == key {
			found = strings.HasPrefix(s.Placeholder, "sk-proj-jail") && len(s.Hosts) == 1 && s.Hosts[0] == "api.openai.com"
		}
	}
	b, _ := os.ReadFile(sf.Copy)
	if !found || strings.Contains(string(b), key) {
		t.Errorf("the sign-in's API key: secrets %+v, copy %s; want a sk-proj-jail placeholder bound to api.openai.com", secrets, b)
	}
	eps, _ := signInEndpoints(&Plan{SignIn: []jail.SignInFile{sf}, SecretKey: "k"})
	for field := range eps[0].Tokens {
		if field == "" || field == "OPENAI_API_KEY" {
			t.Errorf("the token endpoint's answer may replace %q", field)
		}
	}
}
