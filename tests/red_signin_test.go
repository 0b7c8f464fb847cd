package tests

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A jailed command holds the refresh token's placeholder (it is in the
// session copy of the sign-in file). Sent along with a sign-in of the
// command's own account (an authorization code exchanged at the token
// endpoint, which ignores the extra field as a real provider does), it
// gets the real refresh token injected into the request; the answer is
// the other account's tokens, and must not be saved into the host's
// sign-in file as if it were a refresh of the person's own: without a
// person's yes, the host file stays as it was. The placeholder rides in
// refresh_token beside another grant, then in a field of no meaning.
func TestRedSignInLoginRidesRefresh(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newSignInTokens()
		api := newSignInServer(t, messagesMock(k))
		oauth := newSignInServer(t, loginTokenMock(k))
		trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{anthropicHost, signInTokenHost},
			"hosts": map[string]string{anthropicHost: api.addr, signInTokenHost: oauth.addr},
		}})
		hostFile := s.Home + "/.claude/.credentials.json"
		s.WriteFile(hostFile, claudeCredentials(k.Access, k.Refresh, time.Now().Add(time.Hour).UnixMilli()), 0o600)
		before, _ := os.ReadFile(hostFile)
		for _, body := range []string{
			`{"grant_type":"authorization_code","code":"` + signInLoginCode + `","refresh_token":"'"$ph"'"}`,
			`{"grant_type":"authorization_code","code":"` + signInLoginCode + `","state":"'"$ph"'"}`,
		} {
			script := `ph=$(sed -n 's/.*"refreshToken":"\([^"]*\)".*/\1/p' ~/.claude/.credentials.json)
case "$ph" in sk-ant-ort01-jail*) ;; *) echo "no placeholder: $ph"; exit 3;; esac
curl -s -H 'Content-Type: application/json' -d '` + body + `' https://` + signInTokenHost + `/v1/oauth/token; echo`
			r := s.Jail("--profile", "claude", "--", "sh", "-c", script)
			k.noReal(t, "the answer inside", r.Stdout+r.Stderr)
			if r.Code != 0 || !strings.Contains(r.Stdout, `"access_token":"sk-ant-oat01-jail`) {
				t.Fatalf("control: the exchange inside did not get the other account's tokens as placeholders:\n%s\ntoken endpoint saw: %v", r, oauth.requests())
			}
			if len(oauth.matching(regexp.MustCompile(regexp.QuoteMeta(k.Refresh)))) == 0 {
				t.Fatalf("control: the real refresh token was not injected into the exchange:\n%v", oauth.requests())
			}
			if after, _ := os.ReadFile(hostFile); string(after) != string(before) {
				t.Fatalf("a sign-in of another account, sent with the refresh token's placeholder, was saved into the host file without a yes:\n%s\n%s", after, r)
			}
		}
	})
}

// A token endpoint whose router ignores a trailing slash and the case of
// the path (as Express routes by default) answers a refresh sent to
// /v1/oauth/token/ or /V1/OAuth/Token as it does at /v1/oauth/token. The
// jailed command sends the refresh token's placeholder there (its real
// value is injected into any body to the endpoint's host): the answer's
// new tokens must still reach it as placeholders, never the real ones.
func TestRedSignInTokenPathVariants(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newSignInTokens()
		refresh := oauthTokenMock(k)
		api := newSignInServer(t, messagesMock(k))
		oauth := newSignInServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			r.URL.Path = strings.ToLower(strings.TrimRight(r.URL.Path, "/"))
			refresh(w, r, body)
		})
		trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{anthropicHost, signInTokenHost},
			"hosts": map[string]string{anthropicHost: api.addr, signInTokenHost: oauth.addr},
		}})
		s.WriteFile(s.Home+"/.claude/.credentials.json", claudeCredentials(k.Access, k.Refresh, time.Now().Add(-time.Hour).UnixMilli()), 0o600)
		for _, path := range []string{"/v1/oauth/token/", "/V1/OAuth/Token", "/v1/oauth/token//"} {
			script := `ph=$(sed -n 's/.*"refreshToken":"\([^"]*\)".*/\1/p' ~/.claude/.credentials.json)
curl -s -H 'Content-Type: application/json' -d '{"grant_type":"refresh_token","refresh_token":"'"$ph"'"}' https://` + signInTokenHost + path + `; echo`
			r := s.Jail("--profile", "claude", "--", "sh", "-c", script)
			if !strings.Contains(r.Stdout, "access_token") {
				t.Fatalf("control: the refresh at %s got no tokens:\n%s\ntoken endpoint saw: %v", path, r, oauth.requests())
			}
			k.noReal(t, "the answer to a refresh at "+path, r.Stdout+r.Stderr)
		}
	})
}
