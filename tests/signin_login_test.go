package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// signInLoginCode is the authorization code a person's browser hands the
// agent after a sign-in; the mock token endpoint exchanges only it.
const signInLoginCode = "mock-authorization-code-from-the-browser"

// loginTokenMock answers an authorization-code exchange for
// signInLoginCode with k's new tokens and the account, and everything
// else as oauthTokenMock does.
func loginTokenMock(k signInTokens) func(w http.ResponseWriter, r *http.Request, body []byte) {
	refresh := oauthTokenMock(k)
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			GrantType string `json:"grant_type"`
			Code      string `json:"code"`
		}
		json.Unmarshal(body, &req)
		if req.GrantType != "authorization_code" {
			refresh(w, r, body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.Code != signInLoginCode {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "access_token": k.NewAccess, "refresh_token": k.NewRefresh,
			"expires_in": 28800, "scope": "user:inference user:profile", "account": map[string]any{"uuid": "u-1", "email_address": "person@example.test"}})
	}
}

// loginScript is what an agent's /login does once the browser handed it
// the code: exchange it at the token endpoint, and print the answer.
const loginScript = `curl -s -H 'Content-Type: application/json' -d '{"grant_type":"authorization_code","code":"` + signInLoginCode + `","code_verifier":"v","state":"s"}' https://` + signInTokenHost + `/v1/oauth/token; echo`

// A sign-in made inside the jail (an authorization code exchanged at the
// token endpoint) comes back with placeholders only, never the real
// tokens; the host's sign-in file keeps them only when the person says
// yes on the terminal after the command: without a terminal, or with no,
// the host file is as it was.
func TestSignInLoginInside(t *testing.T) {
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

		r := s.Jail("--profile", "claude", "--", "sh", "-c", loginScript)
		k.noReal(t, "the answer to a sign-in inside", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, `"access_token":"sk-ant-oat01-jail`) || !strings.Contains(r.Stdout, `"refresh_token":"sk-ant-ort01-jail`) {
			t.Fatalf("the sign-in's answer inside: want the new tokens as placeholders:\n%s\ntoken endpoint saw: %v", r, oauth.requests())
		}
		if !strings.Contains(r.Stderr, "person@example.test") || !strings.Contains(r.Stderr, "was used for this run only") {
			t.Errorf("without a terminal jail must say the sign-in was not kept, naming the account:\n%s", r)
		}
		if after, _ := os.ReadFile(hostFile); string(after) != string(before) {
			t.Errorf("a sign-in made inside was kept without a terminal:\n%s", after)
		}

		tm := NewTerm(t, s)
		for _, answer := range []string{"n", "y"} {
			tm.Type("clear")
			tm.WaitPrompt("a cleared screen")
			tm.tmux("clear-history")
			tm.Type(tm.Jail("--profile claude -- sh -c " + shellQuote(loginScript)))
			tm.WaitLine(`jail: a sign-in was made inside the jail, for the account person@example.test\. Keep it in .*\.credentials\.json, for later runs in and outside jail\? \[y/N\]`)
			tm.Type(answer)
			tm.WaitPrompt("jail after the question")
			got, _ := os.ReadFile(hostFile)
			toks := credsTokens(string(got))
			switch answer {
			case "n":
				if string(got) != string(before) {
					t.Errorf("answered no, the host file changed:\n%s", got)
				}
			case "y":
				if toks["accessToken"] != k.NewAccess || toks["refreshToken"] != k.NewRefresh || !strings.Contains(string(got), `"subscriptionType":"max"`) {
					t.Errorf("answered yes, the host file holds %v, want the sign-in's real tokens and its other fields:\n%s", toks, got)
				}
			}
		}
	})
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Signed out on the host (no sign-in file): a sign-in made inside still
// comes back as placeholders only, and a yes on the terminal creates the
// host file with the real tokens, mode 0600; without a terminal there is
// none.
func TestSignInLoginInsideSignedOut(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k := newSignInTokens()
		oauth := newSignInServer(t, loginTokenMock(k))
		trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{signInTokenHost}, "hosts": map[string]string{signInTokenHost: oauth.addr},
		}})
		s.WriteFile(s.Home+"/.claude/keep", "", 0o600)
		hostFile := s.Home + "/.claude/.credentials.json"
		r := s.Jail("--profile", "claude", "--", "sh", "-c", loginScript)
		k.noReal(t, "the answer to a sign-in inside, signed out", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, `"access_token":"sk-ant-oat01-jail`) {
			t.Fatalf("signed out, the sign-in's answer inside: want placeholders:\n%s", r)
		}
		hostAbsent(t, hostFile)
		tm := NewTerm(t, s)
		tm.Type(tm.Jail("--profile claude -- sh -c " + shellQuote(loginScript)))
		tm.WaitLine(`jail: a sign-in was made inside the jail, for the account person@example.test\. Keep it in .*\.credentials\.json, for later runs in and outside jail\? \[y/N\]`)
		tm.Type("y")
		tm.WaitPrompt("jail after the question")
		b, err := os.ReadFile(hostFile)
		toks := credsTokens(string(b))
		fi, _ := os.Stat(hostFile)
		if err != nil || toks["accessToken"] != k.NewAccess || toks["refreshToken"] != k.NewRefresh || fi.Mode().Perm() != 0o600 {
			t.Errorf("answered yes, signed out: the host file holds %v (%v, %v), want the real tokens, mode 0600", toks, err, fi)
		}
	})
}
