package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
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
// the path (as Express routes by default) answers a request sent to
// /v1/oauth/token/ or /V1/OAuth/Token as it does at /v1/oauth/token. The
// jailed command sends the refresh token's placeholder there, hoping for
// the new tokens in an answer the proxy does not read: the real refresh
// token is injected at the endpoint's own path only, so it never leaves
// for a variant, the provider refuses the placeholder, and no token of
// the person's comes back; the host file stays as it was.
func TestRedSignInTokenPathVariants(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newSignInTokens()
		api := newSignInServer(t, messagesMock(k))
		refresh := oauthTokenMock(k)
		oauth := newSignInServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			r.URL.Path = strings.ToLower(strings.TrimRight(r.URL.Path, "/"))
			refresh(w, r, body)
		})
		trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{anthropicHost, signInTokenHost},
			"hosts": map[string]string{anthropicHost: api.addr, signInTokenHost: oauth.addr},
		}})
		hostPath := s.Home + "/.claude/.credentials.json"
		for _, path := range []string{"/v1/oauth/token/", "/V1/OAuth/Token", "/v1/oauth/token//"} {
			s.WriteFile(hostPath, claudeCredentials(k.Access, k.Refresh, time.Now().Add(-time.Hour).UnixMilli()), 0o600)
			before := hostFile(t, hostPath)
			script := `ph=$(sed -n 's/.*"refreshToken":"\([^"]*\)".*/\1/p' ~/.claude/.credentials.json)
curl -s -H 'Content-Type: application/json' -d '{"grant_type":"refresh_token","refresh_token":"'"$ph"'"}' https://` + signInTokenHost + path + `; echo`
			r := s.Jail("--profile", "claude", "--", "sh", "-c", script)
			if len(oauth.requests()) == 0 {
				t.Fatalf("control: nothing reached the token endpoint's host at %s:\n%s", path, r)
			}
			k.noReal(t, "the answer to a refresh at "+path, r.Stdout+r.Stderr)
			if got := oauth.matching(regexp.MustCompile(regexp.QuoteMeta(k.Refresh))); len(got) > 0 {
				t.Errorf("the real refresh token was sent to %s: %v", path, got)
			}
			if after := hostFile(t, hostPath); after != before {
				t.Errorf("an answer at %s was saved into the host file:\n%s", path, after)
			}
		}
	})
}

// claudeAPIKeyPath is where Claude Code makes an API key with its OAuth
// access token (API_KEY_URL in the claude-code-linux-x64 package's
// claude binary: a POST with "Authorization: Bearer" whose answer's
// raw_key it keeps).
const claudeAPIKeyPath = "/api/oauth/claude_cli/create_api_key"

// The access token's placeholder is injected into any request to the API
// host, so a jailed command can have the provider make a new, lasting API
// key of the person's (the OAuth endpoint Claude Code itself uses for
// it): the key must reach the jail as a placeholder only, which still
// works at the API.
func TestRedSignInClaudeAPIKeyMade(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newSignInTokens()
		apiKey := "sk-ant-api03-" + strings.Repeat("madeWithTheOAuthToken", 4) + "-AA"
		api := newSignInServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "application/json")
			switch path := strings.TrimRight(r.URL.Path, "/"); { // a router that ignores a trailing slash
			case r.Method == http.MethodPost && path == claudeAPIKeyPath && r.Header.Get("Authorization") == "Bearer "+k.Access:
				fmt.Fprintf(w, `{"raw_key":%q}`, apiKey)
			case path == "/v1/models" && r.Header.Get("x-api-key") == apiKey:
				fmt.Fprintln(w, `{"data":[],"mock":"key accepted"}`)
			default:
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintln(w, `{"type":"error","error":{"type":"authentication_error"}}`)
			}
		})
		trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{anthropicHost},
			"hosts": map[string]string{anthropicHost: api.addr},
		}})
		s.WriteFile(s.Home+"/.claude/.credentials.json", claudeCredentials(k.Access, k.Refresh, time.Now().Add(time.Hour).UnixMilli()), 0o600)
		for _, path := range []string{claudeAPIKeyPath, claudeAPIKeyPath + "/"} {
			r := s.Jail("--profile", "claude", "--", "sh", "-c", `ph=$(sed -n 's/.*"accessToken":"\([^"]*\)".*/\1/p' ~/.claude/.credentials.json)
out=$(curl -s -X POST -H "Authorization: Bearer $ph" https://`+anthropicHost+path+`); echo "$out"
key=$(echo "$out" | sed -n 's/.*"raw_key":"\([^"]*\)".*/\1/p')
echo "@@USE $(curl -s -H "x-api-key: $key" https://`+anthropicHost+`/v1/models)"`)
			if !strings.Contains(r.Stdout, `"raw_key"`) {
				t.Fatalf("control: no API key was made at %s:\n%s\nthe API saw: %v", path, r, api.paths())
			}
			if strings.Contains(r.Stdout+r.Stderr, apiKey) {
				t.Errorf("the real API key made with the person's access token reached the jail (at %s):\n%s", path, r)
			}
			if !strings.Contains(r.Stdout, "@@USE {\"data\":[],\"mock\":\"key accepted\"}") {
				t.Errorf("the API key made inside, as a placeholder, does not work at the API (at %s):\n%s", path, r)
			}
		}
	})
}

// A jailed command that made a sign-in of its own account asks a yes/no
// question of its own and exits without reading the answer: the person's
// "y", typed while it ran, waits in the terminal's input. jail's question
// whether to keep the sign-in must not take that typed-ahead line for the
// person's answer to it.
func TestRedSignInKeepTypeAhead(t *testing.T) {
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
		s.autoTrust(s.Project)
		tm := NewTerm(t, s)
		script := loginScript + "; echo 'Overwrite the build cache? [y/N]'; sleep 2"
		tm.Type(tm.Jail("--profile claude -- sh -c " + shellQuote(script)))
		tm.WaitLine(`Overwrite the build cache\? \[y/N\]`)
		tm.Type("y")
		tm.WaitLine(`jail: a sign-in was made inside the jail, for .*\. Keep it in .*\.credentials\.json, for later runs in and outside jail\? \[y/N\].*`)
		time.Sleep(time.Second)
		if after, _ := os.ReadFile(hostFile); string(after) != string(before) {
			t.Errorf("a \"y\" typed to the jailed command before jail asked kept the jailed command's sign-in in the host file:\n%s", after)
		}
		tm.Type("n")
		tm.WaitPrompt("jail after the question")
		if after, _ := os.ReadFile(hostFile); string(after) != string(before) {
			t.Errorf("answered no, the host file changed:\n%s", after)
		}
	})
}

// A jailed command spends the session's budget of minted tokens on
// sign-ins of its own (each answer's tokens become new secrets), then
// lets the agent refresh the person's sign-in. The provider rotates the
// refresh token (the old one no longer works), so the host file must
// keep the new one even when no placeholder can be minted for it any
// more: else the person's sign-in on the host is lost.
func TestRedSignInMintBudgetKeepsRefresh(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newSignInTokens()
		var mu sync.Mutex
		valid := map[string]bool{k.Refresh: true}
		api := newSignInServer(t, messagesMock(k))
		oauth := newSignInServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			var req struct{ GrantType, Code, RefreshToken string }
			json.Unmarshal(body, &struct {
				G *string `json:"grant_type"`
				C *string `json:"code"`
				R *string `json:"refresh_token"`
			}{&req.GrantType, &req.Code, &req.RefreshToken})
			w.Header().Set("Content-Type", "application/json")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case req.GrantType == "authorization_code" && req.Code == signInLoginCode:
				id := strings.Repeat(uniq(), 4)
				fmt.Fprintf(w, `{"access_token":"sk-ant-oat01-own%s-AA","refresh_token":"sk-ant-ort01-own%s-AA","expires_in":28800}`, id, id)
			case req.GrantType == "refresh_token" && valid[req.RefreshToken]:
				delete(valid, req.RefreshToken) // rotated: the old refresh token is spent
				valid[k.NewRefresh] = true
				fmt.Fprintf(w, `{"access_token":%q,"refresh_token":%q,"expires_in":28800}`, k.NewAccess, k.NewRefresh)
			default:
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintln(w, `{"error":"invalid_grant"}`)
			}
		})
		trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{anthropicHost, signInTokenHost},
			"hosts": map[string]string{anthropicHost: api.addr, signInTokenHost: oauth.addr},
		}})
		hostPath := s.Home + "/.claude/.credentials.json"
		s.WriteFile(hostPath, claudeCredentials(k.Access, k.Refresh, time.Now().Add(-time.Hour).UnixMilli()), 0o600)
		r := s.Jail("--profile", "claude", "--", "sh", "-c", `
for i in $(seq 520); do
  echo 'url = "https://`+signInTokenHost+`/v1/oauth/token"'
  echo 'header = "Content-Type: application/json"'
  echo 'data = "{\"grant_type\":\"authorization_code\",\"code\":\"`+signInLoginCode+`\"}"'
  echo 'output = /dev/null'
  echo 'next'
done > /tmp/many
curl -s -K /tmp/many
ph=$(sed -n 's/.*"refreshToken":"\([^"]*\)".*/\1/p' ~/.claude/.credentials.json)
echo "@@REFRESH $(curl -s -H 'Content-Type: application/json' -d '{"grant_type":"refresh_token","refresh_token":"'"$ph"'"}' https://`+signInTokenHost+`/v1/oauth/token)"`)
		k.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, "@@REFRESH") || len(oauth.requests()) < 500 {
			t.Fatalf("control: the jailed command did not make its sign-ins and the refresh (%d requests):\n%s", len(oauth.requests()), r)
		}
		mu.Lock()
		defer mu.Unlock()
		if valid[k.Refresh] {
			t.Fatalf("control: the person's refresh token was never used:\n%s", r)
		}
		if got := credsTokens(hostFile(t, hostPath)); !valid[got["refreshToken"]] {
			t.Errorf("after the provider rotated the person's refresh token, the host file holds a spent one (%v), the new one lost:\n%s", got, r)
		}
	})
}

// codexLoginScript is what `codex login` does once the browser handed it
// the code (exchange_code_for_tokens, then obtain_api_key, whose form
// fields are read from the strings of the installed package's native
// binary, @openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex):
// the code is exchanged for the tokens, then the new id token for an API
// key at the same endpoint.
const codexLoginScript = `out=$(curl -s -d 'grant_type=authorization_code&code=` + signInLoginCode + `&redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback&client_id=` + codexClientID + `&code_verifier=v' https://` + codexAuthHost + `/oauth/token)
echo "@@LOGIN $out"
id=$(echo "$out" | sed -n 's/.*"id_token":"\([^"]*\)".*/\1/p')
echo "@@KEY $(curl -s -d "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&client_id=` + codexClientID + `&requested_token=openai-api-key&subject_token=$id&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid_token" https://` + codexAuthHost + `/oauth/token)"`

// Signed out on the host, the person signs Codex in inside the jail and
// says yes to keeping it: Codex's login also exchanges the new id token
// for an API key at the token endpoint, and that answer (an access token
// only) must not be what the host file keeps instead of the sign-in's
// tokens: the host file gets the sign-in's id, access and refresh tokens.
func TestRedSignInCodexLoginKept(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newCodexTokens()
		apiKey := "sk-proj-" + strings.Repeat(uniq(), 5)
		auth := newSignInMock(t, codexSignInPKI, func(w http.ResponseWriter, r *http.Request, body []byte) {
			form, _ := url.ParseQuery(string(body))
			w.Header().Set("Content-Type", "application/json")
			switch {
			case form.Get("grant_type") == "authorization_code" && form.Get("code") == signInLoginCode:
				fmt.Fprintf(w, `{"id_token":%q,"access_token":%q,"refresh_token":%q}`, k.ID, k.Access, k.Refresh)
			case strings.HasSuffix(form.Get("grant_type"), ":token-exchange") && form.Get("subject_token") == k.ID:
				fmt.Fprintf(w, `{"access_token":%q}`, apiKey)
			default:
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintln(w, `{"error":"invalid_grant"}`)
			}
		})
		trustCA(t, s, codexSignInPKI.get(t), "codex-signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": map[string]string{codexAuthHost: auth.addr}}})
		s.WriteFile(s.Home+"/.codex/history.jsonl", "", 0o600) // ~/.codex is there, signed out
		hostPath := s.Home + "/.codex/auth.json"
		s.autoTrust(s.Project)
		tm := NewTerm(t, s)
		tm.Type(tm.Jail("--profile codex -- sh -c " + shellQuote(codexLoginScript)))
		tm.WaitLine(`jail: a sign-in was made inside the jail, for .*\. Keep it in .*auth\.json, for later runs in and outside jail\? \[y/N\].*`)
		tm.Type("y")
		tm.WaitPrompt("jail after the question")
		if !strings.Contains(tm.Screen(), `@@KEY {"access_token":"sk-proj-jail`) {
			t.Fatalf("control: the id token was not exchanged for an API key inside (a placeholder):\n%s\nthe endpoint saw: %v", tm.Screen(), auth.requests())
		}
		doc, raw := hostJSON(t, hostPath)
		if jsonAt(doc, "tokens", "refresh_token") != k.Refresh || jsonAt(doc, "tokens", "id_token") != k.ID || jsonAt(doc, "tokens", "access_token") != k.Access {
			t.Errorf("answered yes, the host file does not hold the sign-in's tokens:\n%s", raw)
		}
	})
}

// The person signs Claude Code in inside the jail; a jailed command then
// makes a sign-in of another account (its own code exchanged at the same
// endpoint). Only one answer can be kept, and the last would be the
// other account's: with two sign-ins made inside, jail keeps none and
// asks nothing, and the host file stays as it was.
func TestRedSignInTwoSignIns(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newSignInTokens()
		other := newSignInTokens()
		const otherCode = "code-of-the-jailed-command-own-account"
		person := loginTokenMock(k)
		api := newSignInServer(t, messagesMock(k))
		oauth := newSignInServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			if strings.Contains(string(body), otherCode) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"access_token":%q,"refresh_token":%q,"expires_in":28800,"account":{"email_address":"person@examp1e.test"}}`, other.NewAccess, other.NewRefresh)
				return
			}
			person(w, r, body)
		})
		trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{anthropicHost, signInTokenHost},
			"hosts": map[string]string{anthropicHost: api.addr, signInTokenHost: oauth.addr},
		}})
		hostPath := s.Home + "/.claude/.credentials.json"
		s.WriteFile(hostPath, claudeCredentials(k.Access, k.Refresh, time.Now().Add(time.Hour).UnixMilli()), 0o600)
		before, _ := os.ReadFile(hostPath)
		s.autoTrust(s.Project)
		tm := NewTerm(t, s)
		script := loginScript + "; " + strings.ReplaceAll(loginScript, signInLoginCode, otherCode) + "; echo @@BOTH-DONE"
		tm.Type(tm.Jail("--profile claude -- sh -c " + shellQuote(script)))
		tm.WaitLine(`@@BOTH-DONE`)
		time.Sleep(500 * time.Millisecond)
		if strings.Contains(tm.Screen(), "Keep it in") {
			tm.Type("y") // the person, who signed in, says yes
		}
		tm.WaitPrompt("jail after the command")
		if strings.Count(tm.Screen(), `"access_token":"sk-ant-oat01-jail`) != 2 {
			t.Fatalf("control: the two sign-ins inside did not both get their tokens as placeholders:\n%s\nthe endpoint saw: %v", tm.Screen(), oauth.requests())
		}
		if after, _ := os.ReadFile(hostPath); string(after) != string(before) {
			t.Errorf("with two sign-ins made inside, one was kept in the host file:\n%s", after)
		}
	})
}
