package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// signInTokenHost is Claude Code's OAuth token endpoint's host.
const signInTokenHost = "platform.claude.com"

// signInPKI is a CA and a leaf for the Messages API and the OAuth token
// endpoint.
var signInPKI = &lazyPKI{what: "sign-in test PKI", caName: "jail sign-in tests CA", names: []string{anthropicHost, signInTokenHost}}

// signInTokens are a session's real tokens: the file's, and the ones the
// token endpoint hands out.
type signInTokens struct {
	Access, Refresh, NewAccess, NewRefresh string
}

func newSignInTokens() signInTokens {
	tok := func(kind string) string {
		v := strings.Repeat(uniq(), 8)
		return "sk-ant-" + kind + "01-" + regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(v, "")[:80] + "-AA"
	}
	return signInTokens{Access: tok("oat"), Refresh: tok("ort"), NewAccess: tok("oat"), NewRefresh: tok("ort")}
}

func (k signInTokens) all() map[string]string {
	return map[string]string{"access": k.Access, "refresh": k.Refresh, "new access": k.NewAccess, "new refresh": k.NewRefresh}
}

// noReal fails when a real token appears in text.
func (k signInTokens) noReal(t *testing.T, what, text string) {
	t.Helper()
	for name, v := range k.all() {
		if strings.Contains(text, v) {
			t.Errorf("the real %s token appears in %s:\n%s", name, what, text)
		}
	}
}

// claudeCredentials is ~/.claude/.credentials.json as Claude Code writes
// it, its access token expired at expiresAt (ms).
func claudeCredentials(access, refresh string, expiresAt int64) string {
	b, _ := json.Marshal(map[string]any{"claudeAiOauth": map[string]any{
		"accessToken": access, "refreshToken": refresh, "expiresAt": expiresAt,
		"scopes": []string{"user:inference", "user:profile"}, "subscriptionType": "max", "rateLimitTier": "default_claude_max_20x",
	}})
	return string(b)
}

// signInServer is a TLS server for anthropicHost and signInTokenHost that
// records what it received.
type signInServer struct {
	mu   sync.Mutex
	seen []seen
	addr string
}

func newSignInServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *signInServer {
	t.Helper()
	s := &signInServer{}
	srv := newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		s.mu.Lock()
		s.seen = append(s.seen, seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		s.mu.Unlock()
		handle(w, r, body)
	}))
	startTestServer(t, srv, &signInPKI.get(t).Leaf)
	s.addr = srv.Listener.Addr().String()
	return s
}

func (s *signInServer) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.seen...)
}

// paths are the requests' methods, paths and Authorization headers.
func (s *signInServer) paths() []string {
	var out []string
	for _, r := range s.requests() {
		out = append(out, r.Method+" "+r.Path+" "+r.Header.Get("Authorization"))
	}
	return out
}

// tokenPlaceholderRE finds a placeholder of a Claude Code token, or the
// sandbox's planted value.
var tokenPlaceholderRE = regexp.MustCompile(`sk-ant-o[ar]t01-jail|planted-by-the-sandbox`)

// matching returns the requests in which re matches.
func (s *signInServer) matching(re *regexp.Regexp) []seen {
	var out []seen
	for _, r := range s.requests() {
		if re.MatchString(r.String()) {
			out = append(out, r)
		}
	}
	return out
}

// otherAccountRefresh and otherAccountAccess are another account's real
// tokens, which a jailed command may hold and refresh with.
const (
	otherAccountRefresh = "sk-ant-ort01-otherAccountRefreshTokenOtherAccountRefreshToken-AA"
	otherAccountAccess  = "sk-ant-oat01-otherAccountAccessTokenOtherAccountAccessToken-AA"
)

// oauthTokenMock answers Claude Code's refresh (a JSON POST of
// grant_type=refresh_token to /v1/oauth/token) with the new tokens, only
// for the real refresh token.
func oauthTokenMock(k signInTokens) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			GrantType    string `json:"grant_type"`
			RefreshToken string `json:"refresh_token"`
		}
		json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		if req.RefreshToken == otherAccountRefresh { // someone else's account, signed in for real
			json.NewEncoder(w).Encode(map[string]any{"access_token": otherAccountAccess, "refresh_token": otherAccountRefresh, "expires_in": 28800})
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/oauth/token" || req.GrantType != "refresh_token" || req.RefreshToken != k.Refresh {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintln(w, `{"error":"invalid_grant","error_description":"mock: not the real refresh token"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "access_token": k.NewAccess, "refresh_token": k.NewRefresh,
			"expires_in": 28800, "scope": "user:inference user:profile"})
	}
}

// messagesMock is the Messages API accepting only the new real access
// token, as "Authorization: Bearer".
func messagesMock(k signInTokens) func(w http.ResponseWriter, r *http.Request, body []byte) {
	api := anthropicMock("mock-accepted")
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Header.Get("Authorization") == "Bearer "+k.NewAccess {
			r.Header.Set("x-api-key", "mock-accepted")
		} else {
			r.Header.Del("x-api-key")
		}
		api(w, r, body)
	}
}

// setupSignIn writes a signed-in Claude Code's credentials (access token
// expired an hour ago) and a jail.json mapping the API and the token
// endpoint to their mocks.
func setupSignIn(t *testing.T, s *Sandbox) (signInTokens, *signInServer, *signInServer) {
	k := newSignInTokens()
	api := newSignInServer(t, messagesMock(k))
	oauth := newSignInServer(t, oauthTokenMock(k))
	trustCA(t, s, signInPKI.get(t), "signin-bundle.pem")
	writeJailJSON(t, s, map[string]any{"network": map[string]any{
		"allow": []string{anthropicHost, signInTokenHost},
		"hosts": map[string]string{anthropicHost: api.addr, signInTokenHost: oauth.addr},
	}})
	s.WriteFile(s.Home+"/.claude/.credentials.json", claudeCredentials(k.Access, k.Refresh, time.Now().Add(-time.Hour).UnixMilli()), 0o600)
	return k, api, oauth
}

// credsRE finds the tokens of a credentials file.
var credsRE = regexp.MustCompile(`"(accessToken|refreshToken)":"([^"]*)"`)

func credsTokens(s string) map[string]string {
	out := map[string]string{}
	for _, m := range credsRE.FindAllStringSubmatch(s, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// The sign-in file inside is a session copy: its tokens are placeholders
// of the tokens' own shape; the real ones appear nowhere inside (the file,
// every process's environment); what the jail writes into it never
// reaches the host file, nor does a refresh with another account's own
// token (which would sign the host in as someone else: its answer comes
// back as placeholders, and is not kept without a person's yes); a
// placeholder sent to a host it is not bound to is refused.
func TestSignInPlaceholders(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		k, _, oauth := setupSignIn(t, s)
		hostFile := s.Home + "/.claude/.credentials.json"
		before, _ := os.ReadFile(hostFile)
		r := s.Jail("--profile", "claude", "--", "sh", "-c", `
cat ~/.claude/.credentials.json; echo
cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -i -e oauth -e token -e sk-ant
access=$(sed -n 's/.*"accessToken":"\([^"]*\)".*/\1/p' ~/.claude/.credentials.json)
echo '{"claudeAiOauth":{"accessToken":"planted-by-the-sandbox"}}' > ~/.claude/.credentials.json
mv -f ~/.claude/.credentials.json ~/.claude/moved.json 2>/dev/null
rm -f ~/.claude/.credentials.json 2>/dev/null
curl -s -H 'Content-Type: application/json' -d '{"grant_type":"refresh_token","refresh_token":"`+otherAccountRefresh+`"}' https://`+signInTokenHost+`/v1/oauth/token; echo
curl -s -o /dev/null -w '@@OTHER %{http_code}\n' -H "Authorization: Bearer $access" https://`+signInTokenHost+`/v1/oauth/token -d '{}'
`)
		k.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		toks := credsTokens(r.Stdout)
		if !regexp.MustCompile(`^sk-ant-oat01-jail[A-Za-z0-9]{13,}$`).MatchString(toks["accessToken"]) ||
			!regexp.MustCompile(`^sk-ant-ort01-jail[A-Za-z0-9]{13,}$`).MatchString(toks["refreshToken"]) {
			t.Errorf("inside, the credentials' tokens are %v, want placeholders shaped like Claude Code's tokens:\n%s", toks, r)
		}
		if !strings.Contains(r.Stdout, `"subscriptionType":"max"`) {
			t.Errorf("the session copy lost the file's other fields:\n%s", r)
		}
		var refused bool
		for _, d := range decisions(t, s, "") {
			refused = refused || d.Host == signInTokenHost && d.Verdict == "deny" && strings.HasPrefix(d.Rule, "secret CLAUDE_OAUTH_ACCESS_TOKEN")
		}
		if !refused || strings.Contains(r.Stdout, "@@OTHER 2") {
			t.Errorf("the access token's placeholder sent to %s: want it refused by the proxy:\n%s\n%s", signInTokenHost, r, dumpDecisions(decisions(t, s, "")))
		}
		if got := oauth.matching(tokenPlaceholderRE); len(got) > 0 {
			t.Errorf("a placeholder reached %s: %v", signInTokenHost, got)
		}
		if len(oauth.matching(regexp.MustCompile(otherAccountRefresh))) == 0 {
			t.Errorf("control: the refresh with another account's own token did not reach the token endpoint:\n%s", r)
		}
		if strings.Contains(r.Stdout, otherAccountAccess) || !strings.Contains(r.Stdout, `"access_token":"sk-ant-oat01-jail`) {
			t.Errorf("the answer to a refresh with another account's own token: want its new token as a placeholder, never real:\n%s", r)
		}
		if !strings.Contains(r.Stderr, "was used for this run only") {
			t.Errorf("jail did not say that the other account's tokens were not kept:\n%s", r)
		}
		after, err := os.ReadFile(hostFile)
		if err != nil || string(after) != string(before) {
			t.Errorf("the host file changed through the jail (%v):\nbefore %s\nafter  %s", err, before, after)
		}
		hostAbsent(t, s.Home+"/.claude/moved.json")
	})
}

// A missing sign-in file stays missing on the host: nothing inside can
// plant one that a later run outside the jail would sign in with. (Inside
// it may be written, as a sign-in made there writes it: that copy stays in
// the session.)
func TestSignInMissingNotPlanted(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(s.Home+"/.claude/keep", "", 0o600)
		r := s.Jail("--profile", "claude", "--", "sh", "-c", `echo '{"claudeAiOauth":{"accessToken":"planted"}}' > ~/.claude/.credentials.json; echo rc=$?`)
		hostAbsent(t, s.Home+"/.claude/.credentials.json")
		if again := s.Jail("--profile", "claude", "--", "cat", s.Home+"/.claude/.credentials.json"); again.Code == 0 || strings.Contains(again.Stdout, "planted") {
			t.Errorf("what a run wrote into the missing sign-in file reached the next run:\n%s\n%s", r, again)
		}
		if p := s.Jail("plan", "--profile", "claude", "--", "true"); !strings.Contains(p.Stdout, ".credentials.json") {
			t.Errorf("jail plan does not name the held sign-in file:\n%s", p)
		}
	})
}

// A signed-in Claude Code (the real CLI) whose access token has expired
// refreshes through the proxy: the token endpoint gets the real refresh
// token, the Messages API only the new real access token, the jail only
// placeholders (new ones after the refresh), and the host file ends with
// the new real tokens so that the next run is signed in.
func TestSignInClaudeCodeRefresh(t *testing.T) {
	t.Parallel()
	argv, cache := claudeCode(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		k, api, oauth := setupSignIn(t, s)
		hostFile := s.Home + "/.claude/.credentials.json"
		if p := s.Jail("plan", "--profile", "claude", "--", "true"); !strings.Contains(p.Stdout, "sign-in tokens: placeholders inside") {
			t.Errorf("jail plan does not list the sign-in file as placeholders inside:\n%s", p)
		}
		first := credsTokens(s.Jail("--profile", "claude", "--", "cat", hostFile).Stdout)
		s.Env = append(s.Env, "CLAUDE_CODE_MAX_RETRIES=1")
		script := `"$@" -p "say hi"; echo "@@EXIT $?"; echo "@@CREDS $(cat ~/.claude/.credentials.json)"`
		args := append([]string{"--profile", "claude", "--allow-read", cache, "--", "sh", "-c", script, "claude"}, argv...)
		r, timedOut := jailTimeout(t, s.JailCmd(args...), "", 2*time.Minute)
		k.noReal(t, "Claude Code's output", r.Stdout+r.Stderr)
		if timedOut || !strings.Contains(r.Stdout, "@@EXIT 0") || !strings.Contains(r.Stdout, mockAnswer) {
			t.Errorf("claude -p inside: want exit 0 and %q (timed out: %v):\n%s\napi saw: %v\ntoken endpoint saw: %v", mockAnswer, timedOut, r, api.paths(), oauth.requests())
		}
		var refreshed bool
		for _, q := range oauth.requests() {
			refreshed = refreshed || q.Path == "/v1/oauth/token" && strings.Contains(q.Body, k.Refresh)
		}
		if !refreshed {
			t.Errorf("the token endpoint never got the real refresh token: %v", oauth.requests())
		}
		for _, m := range []*signInServer{api, oauth} {
			if got := m.matching(tokenPlaceholderRE); len(got) > 0 {
				t.Errorf("a placeholder reached a provider (not injected): %v", got)
			}
		}
		var used bool
		for _, q := range api.requests() {
			used = used || q.Path == "/v1/messages" && q.Header.Get("Authorization") == "Bearer "+k.NewAccess
		}
		if !used {
			t.Errorf("the Messages API never got the new real access token: %v", api.paths())
		}
		inside := credsTokens(r.Stdout[strings.Index(r.Stdout, "@@CREDS"):])
		for _, f := range []string{"accessToken", "refreshToken"} {
			if v := inside[f]; !strings.Contains(v, "jail") || v == first[f] {
				t.Errorf("after the refresh the jail's %s is %q, want a new placeholder (the first was %q)", f, v, first[f])
			}
		}
		b, err := os.ReadFile(hostFile)
		host := credsTokens(string(b))
		if err != nil || host["accessToken"] != k.NewAccess || host["refreshToken"] != k.NewRefresh {
			t.Errorf("the host file after the refresh holds %v (%v), want the new real tokens", host, err)
		}
		if strings.Contains(string(b), "jail") || !strings.Contains(string(b), `"subscriptionType":"max"`) {
			t.Errorf("the host file after the refresh holds a placeholder or lost its other fields:\n%s\ninside: %s\n%s", b, r.Stdout[strings.Index(r.Stdout, "@@CREDS"):], dumpDecisions(decisions(t, s, "")))
		}
		if fi, err := os.Stat(hostFile); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the host file after the refresh: %v, mode %v, want 0600", err, fi.Mode())
		}
		var expires struct {
			O struct {
				ExpiresAt int64 `json:"expiresAt"`
			} `json:"claudeAiOauth"`
		}
		if json.Unmarshal(b, &expires); expires.O.ExpiresAt < time.Now().Add(time.Hour).UnixMilli() {
			t.Errorf("the host file's expiresAt is %d, want the new token's (8 hours from now)", expires.O.ExpiresAt)
		}
	})
}
