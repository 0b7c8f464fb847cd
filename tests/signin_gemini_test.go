package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Gemini CLI signed in with Google keeps google-auth-library's
// credentials in ~/.gemini/oauth_creds.json. What the mocks speak was read
// from the installed package's bundle
// (node_modules/@google/gemini-cli/bundle/chunk-5FZXKDXH.js: initOauthClient,
// cacheCredentials, the bundled google-auth-library's OAuth2Client and
// CodeAssistServer): an expired access token is refreshed with a
// form-encoded POST of refresh_token, client_id, client_secret and
// grant_type to https://oauth2.googleapis.com/token, whose JSON answer
// has a new access_token and id_token and no new refresh token; the
// token is then checked with a POST to /tokeninfo and the account's
// address read from https://www.googleapis.com/oauth2/v2/userinfo, both
// with "Authorization: Bearer"; the model is Code Assist,
// https://cloudcode-pa.googleapis.com/v1internal:METHOD, whose answers
// wrap a GenerateContentResponse in {"response": ...}.

const (
	googleOAuthHost = "oauth2.googleapis.com"
	googleAPIsHost  = "www.googleapis.com"
	codeAssistHost  = "cloudcode-pa.googleapis.com"
)

// geminiSignInPKI is a CA and a leaf for the Google hosts Gemini CLI
// signs in and talks to.
var geminiSignInPKI = &lazyPKI{what: "Gemini sign-in PKI", caName: "jail gemini sign-in tests CA", names: []string{googleOAuthHost, googleAPIsHost, codeAssistHost}}

// geminiTokens are a Google sign-in's real tokens: the file's and the ones
// a refresh hands out. A Google refresh token holds '/', which a form
// encodes.
type geminiTokens struct {
	Access, Refresh, ID, NewAccess, NewID string
}

func newGeminiTokens() geminiTokens {
	id := func() string {
		return fakeJWT(map[string]any{"iss": "https://accounts.google.com", "email": "dev@example.test", "exp": time.Now().Add(time.Hour).Unix()})
	}
	access := func() string { return "ya29.a0" + strings.Repeat(uniq(), 12) }
	return geminiTokens{Access: access(), Refresh: "1//0g" + strings.Repeat(uniq(), 8), ID: id(), NewAccess: access(), NewID: id()}
}

func (k geminiTokens) real() realTokens {
	return realTokens{"access token": k.Access, "refresh token": k.Refresh, "id token": k.ID, "new access token": k.NewAccess, "new id token": k.NewID}
}

// accessNames names the access tokens for brief.
func (k geminiTokens) accessNames() map[string]string {
	return map[string]string{"old real": k.Access, "new real": k.NewAccess}
}

const geminiScope = "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile openid"

// geminiOAuthCreds is ~/.gemini/oauth_creds.json as Gemini CLI writes it,
// its access token expired an hour ago.
func geminiOAuthCreds(k geminiTokens) string {
	b, _ := json.MarshalIndent(map[string]any{"access_token": k.Access, "refresh_token": k.Refresh, "scope": geminiScope,
		"token_type": "Bearer", "id_token": k.ID, "expiry_date": time.Now().Add(-time.Hour).UnixMilli()}, "", "  ")
	return string(b)
}

// geminiGoogleMock is Google's side of a signed-in Gemini CLI, one server
// for every host (told apart by Host): the token endpoint answering only
// the real refresh token, and tokeninfo, userinfo and Code Assist
// answering only the new real access token. Code Assist's first turn asks
// for run_shell_command of signInShellCmd; the turn carrying its
// functionResponse gets signInFinal.
type geminiGoogleMock struct {
	k         geminiTokens
	mu        sync.Mutex
	responses []string
}

func (m *geminiGoogleMock) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	switch {
	case r.Host == googleOAuthHost && r.URL.Path == "/token":
		m.token(w, r, body)
	case r.Header.Get("Authorization") != "Bearer "+m.k.NewAccess:
		googleAPIError(w, http.StatusUnauthorized, "mock: not the real access token", "UNAUTHENTICATED")
	case r.Host == googleOAuthHost && r.URL.Path == "/tokeninfo":
		writeJSON(w, map[string]any{"azp": "mock.apps.example.test", "aud": "mock.apps.example.test", "scope": geminiScope,
			"expires_in": 3599, "email": "dev@example.test", "email_verified": "true", "access_type": "offline"})
	case r.Host == googleAPIsHost && r.URL.Path == "/oauth2/v2/userinfo":
		writeJSON(w, map[string]any{"id": "1", "email": "dev@example.test", "verified_email": true})
	case r.Host == codeAssistHost:
		m.codeAssist(w, r, body)
	default:
		googleAPIError(w, http.StatusNotFound, "mock: no "+r.Method+" "+r.Host+r.URL.Path, "NOT_FOUND")
	}
}

// token is the OAuth 2 token endpoint: a refresh with the real refresh
// token gets a new access and id token.
func (m *geminiGoogleMock) token(w http.ResponseWriter, r *http.Request, body []byte) {
	form, _ := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || form.Get("grant_type") != "refresh_token" || form.Get("refresh_token") != m.k.Refresh {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintln(w, `{"error":"invalid_grant","error_description":"Bad Request"}`)
		return
	}
	writeJSON(w, map[string]any{"access_token": m.k.NewAccess, "expires_in": 3599, "scope": geminiScope, "token_type": "Bearer", "id_token": m.k.NewID})
}

// codeAssist answers Code Assist's methods: the user's tier and project,
// the model's turns, and an empty object for the rest (experiments,
// quota, metrics).
func (m *geminiGoogleMock) codeAssist(w http.ResponseWriter, r *http.Request, body []byte) {
	method := strings.TrimPrefix(r.URL.Path, "/v1internal:")
	switch method {
	case "loadCodeAssist":
		writeJSON(w, map[string]any{"currentTier": map[string]any{"id": "standard-tier", "name": "Gemini Code Assist", "hasOnboardedPreviously": true},
			"cloudaicompanionProject": "mock-project-1"})
	case "countTokens":
		writeJSON(w, map[string]any{"totalTokens": 12})
	case "generateContent":
		// The model router's classifier and the next-speaker check: one
		// answer serves both, and ends the session.
		writeJSON(w, map[string]any{"traceId": "t-" + uniq(), "response": geminiTurn(map[string]any{"text": `{"reasoning": "a bounded task", "model_choice": "flash", "next_speaker": "user"}`})})
	case "streamGenerateContent":
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(map[string]any{"traceId": "t-" + uniq(), "response": geminiTurn(m.turn(body))})
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
	default:
		writeJSON(w, map[string]any{})
	}
}

// turn is the part that answers one streamed turn: the final text once
// the request carries a functionResponse (kept), else the shell call.
func (m *geminiGoogleMock) turn(body []byte) map[string]any {
	var req struct {
		Request struct {
			Contents []struct {
				Parts []struct {
					FunctionResponse json.RawMessage `json:"functionResponse"`
				} `json:"parts"`
			} `json:"contents"`
		} `json:"request"`
	}
	json.Unmarshal(body, &req)
	var got []string
	for _, c := range req.Request.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				got = append(got, string(p.FunctionResponse))
			}
		}
	}
	if len(got) > 0 {
		m.mu.Lock()
		m.responses = append(m.responses, got...)
		m.mu.Unlock()
		return map[string]any{"text": signInFinal}
	}
	return map[string]any{"functionCall": map[string]any{"name": "run_shell_command",
		"args": map[string]string{"command": signInShellCmd, "description": "write the proof and read the key"}}}
}

func (m *geminiGoogleMock) functionResponses() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.responses, "\n")
}

// geminiTurn is a GenerateContentResponse with one candidate of one part.
func geminiTurn(part map[string]any) map[string]any {
	return map[string]any{
		"candidates": []map[string]any{{"index": 0, "finishReason": "STOP",
			"content": map[string]any{"role": "model", "parts": []any{part}}}},
		"usageMetadata": map[string]int{"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17},
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// googleAPIError writes an error in the Google APIs' shape.
func googleAPIError(w http.ResponseWriter, code int, msg, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

// geminiSignIn is one signed-in Gemini CLI sandbox.
type geminiSignIn struct {
	k        geminiTokens
	srv      *signInServer
	model    *geminiGoogleMock
	ca       string
	hosts    map[string]string
	hostFile string
}

// setupGeminiSignIn writes a signed-in ~/.gemini/oauth_creds.json (its
// access token expired), the Google sign-in selected in
// ~/.gemini/settings.json (security.auth.selectedType "oauth-personal"),
// and a jail.json mapping the Google hosts to the mock.
func setupGeminiSignIn(t *testing.T, s *Sandbox) *geminiSignIn {
	t.Helper()
	g := &geminiSignIn{k: newGeminiTokens(), hostFile: filepath.Join(s.Home, ".gemini/oauth_creds.json")}
	g.model = &geminiGoogleMock{k: g.k}
	g.srv = newSignInMock(t, geminiSignInPKI, g.model.handle)
	g.ca = trustCA(t, s, geminiSignInPKI.get(t), "gemini-signin-bundle.pem")
	g.hosts = map[string]string{googleOAuthHost: g.srv.addr, googleAPIsHost: g.srv.addr, codeAssistHost: g.srv.addr}
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": g.hosts}})
	s.WriteFile(filepath.Join(s.Home, ".gemini/settings.json"), `{"security": {"auth": {"selectedType": "oauth-personal"}}}`+"\n", 0o644)
	s.WriteFile(g.hostFile, geminiOAuthCreds(g.k), 0o600)
	return g
}

// The session copy of ~/.gemini/oauth_creds.json holds placeholders only
// (the id token's shows nothing of the real one: Gemini CLI never reads
// it); the real tokens appear nowhere inside; the refresh token's
// placeholder sent to Code Assist (not its host) is refused; what the
// jail writes into the file never reaches the host's.
func TestSignInGeminiPlaceholders(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupGeminiSignIn(t, s)
		before, _ := os.ReadFile(g.hostFile)
		r := s.Jail("--profile", "gemini", "--", "sh", "-c", `
echo "@@FILE $(tr -d '\n' < ~/.gemini/oauth_creds.json)"
cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -i -e token -e ya29 -e 1//
refresh=$(sed -n 's/.*"refresh_token": *"\([^"]*\)".*/\1/p' ~/.gemini/oauth_creds.json)
curl -s -o /dev/null -w '@@OTHER %{http_code}\n' -H "Authorization: Bearer $refresh" -X POST https://`+codeAssistHost+`/v1internal:loadCodeAssist -d '{}'
echo '{"access_token":"planted-by-the-sandbox"}' > ~/.gemini/oauth_creds.json
`)
		g.k.real().noReal(t, "the jail's output", r.Stdout+r.Stderr)
		if p := s.Jail("plan", "--profile", "gemini", "--", "true"); !strings.Contains(p.Stdout, "sign-in tokens: placeholders inside") {
			t.Errorf("jail plan does not list the sign-in file as placeholders inside:\n%s", p)
		}
		var inside map[string]any
		if err := json.Unmarshal([]byte(afterMark(r.Stdout, "@@FILE ")), &inside); err != nil {
			t.Fatalf("the session copy is not JSON (%v):\n%s", err, r)
		}
		for _, f := range []string{"access_token", "refresh_token"} {
			if v := jsonAt(inside, f); !strings.HasPrefix(v, "jail-secret-GEMINI_OAUTH_") {
				t.Errorf("inside, %s is %q, want a placeholder", f, v)
			}
		}
		if id := jsonAt(inside, "id_token"); strings.Count(id, ".") != 2 || !strings.Contains(jwtSignature(id), "jail") || strings.Contains(id, g.k.ID[:strings.LastIndex(g.k.ID, ".")]) {
			t.Errorf("inside, id_token is %q, want a JWT placeholder showing nothing of the real one", id)
		}
		if jsonAt(inside, "scope") != geminiScope || inside["expiry_date"] == nil {
			t.Errorf("the session copy lost the file's other fields: %v", inside)
		}
		var refused bool
		for _, d := range decisions(t, s, "") {
			refused = refused || d.Host == codeAssistHost && d.Verdict == "deny" && strings.HasPrefix(d.Rule, "secret GEMINI_OAUTH_REFRESH_TOKEN")
		}
		if !refused || strings.Contains(r.Stdout, "@@OTHER 2") || len(g.srv.requests()) != 0 {
			t.Errorf("the refresh token's placeholder sent to %s: want it refused, nothing sent:\n%s\n%s\nthe mock saw %v", codeAssistHost, r, dumpDecisions(decisions(t, s, "")), g.srv.requests())
		}
		if after, err := os.ReadFile(g.hostFile); err != nil || string(after) != string(before) {
			t.Errorf("the host file changed through the jail (%v):\nbefore %s\nafter  %s", err, before, after)
		}
	})
}

// geminiSignInArgv is gemini as an unattended run uses it (flags from
// `gemini --help` of the installed package): -p runs headless,
// --approval-mode yolo runs every tool without asking, --skip-trust
// trusts the project for this session only.
func geminiSignInArgv(cache string) []string {
	return []string{agentBin(cache, agentByName("gemini")), "--approval-mode", "yolo", "--skip-trust", "--output-format", "text",
		"-p", "write proof.txt, then read my SSH key"}
}

func init() {
	agentSessions = append(agentSessions, agentSession{Name: "gemini-signin", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		cache := installedAgents(t)
		g := setupGeminiSignIn(t, s)
		return sessionRun{
			JailArgs: []string{"--allow-read", cache},
			Argv:     geminiSignInArgv(cache),
			Hosts:    g.hosts,
			CA:       g.ca,
			Check:    func(out string) error { return signInSessionDone(s, out) },
		}
	}})
}

// A signed-in Gemini CLI (the real CLI) whose access token has expired
// runs a session in the jail: google-auth-library refreshes through the
// proxy (the token endpoint gets the real refresh token in its form),
// tokeninfo, userinfo and Code Assist get only the new real access
// token, the model's shell call writes proof.txt and fails to read the
// SSH key, gemini exits 0 with the final text; no mock ever saw a
// placeholder, the jail saw new placeholders, and the host file ends with
// the new real tokens, the refresh token and other fields kept, a new
// expiry, mode 0600.
func TestSignInGeminiSession(t *testing.T) {
	t.Parallel()
	cache := installedAgents(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupGeminiSignIn(t, s)
		script := `"$@"; echo "@@EXIT $?"; echo "@@CREDS $(tr -d '\n' < ~/.gemini/oauth_creds.json)"`
		args := append([]string{"--profile", "gemini", "--allow-read", cache, "--", "sh", "-c", script, "gemini"}, geminiSignInArgv(cache)...)
		r := runAgent(t, s, args...)
		g.k.real().noReal(t, "Gemini CLI's output", r.Stdout+r.Stderr)
		proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
		if !strings.Contains(r.Stdout, "@@EXIT 0") || !strings.Contains(r.Stdout, signInFinal) || err != nil || string(proof) != "ok\n" {
			t.Errorf("gemini -p inside: want exit 0, %q and proof.txt (%q, %v):\n%.6000s\nthe mock saw:\n%.6000s", signInFinal, proof, err, r, brief(g.srv, g.k.accessNames()))
		}
		if out := g.model.functionResponses(); strings.Contains(out, SSHKeySecret) || !strings.Contains(out, "id_ed25519") {
			t.Errorf("the tool result the model got: want the SSH key read to fail, without the key:\n%s", out)
		}
		var refreshed, used bool
		for _, q := range g.srv.requests() {
			form, _ := url.ParseQuery(q.Body)
			refreshed = refreshed || q.Host == googleOAuthHost && q.Path == "/token" && form.Get("refresh_token") == g.k.Refresh
			used = used || q.Host == codeAssistHost && strings.Contains(q.Path, "GenerateContent") && q.Header.Get("Authorization") == "Bearer "+g.k.NewAccess
		}
		if !refreshed || !used {
			t.Errorf("want the real refresh token at the token endpoint (%v) and the new real access token at Code Assist (%v): %v", refreshed, used, brief(g.srv, g.k.accessNames()))
		}
		if got := g.srv.matching(anyPlaceholderRE); len(got) > 0 {
			t.Errorf("a placeholder reached a provider (not injected): %v", got)
		}
		checkGeminiHostFile(t, g, afterMark(r.Stdout, "@@CREDS "))
	})
}

// checkGeminiHostFile checks the host file after a refresh: the new real
// access and id tokens, the refresh token kept, a new expiry, no
// placeholder, mode 0600; and that the jail's copy had new placeholders.
func checkGeminiHostFile(t *testing.T, g *geminiSignIn, inside string) {
	t.Helper()
	host, raw := hostJSON(t, g.hostFile)
	if jsonAt(host, "access_token") != g.k.NewAccess || jsonAt(host, "id_token") != g.k.NewID || jsonAt(host, "refresh_token") != g.k.Refresh || jsonAt(host, "scope") != geminiScope {
		t.Errorf("the host file after the refresh does not hold the new real tokens and the refresh token:\n%s", raw)
	}
	if exp, _ := host["expiry_date"].(float64); int64(exp) < time.Now().Add(30*time.Minute).UnixMilli() {
		t.Errorf("the host file's expiry_date is %v, want the new token's (an hour from now)", host["expiry_date"])
	}
	if anyPlaceholderRE.MatchString(raw) {
		t.Errorf("the host file holds a placeholder:\n%s", raw)
	}
	checkFileMode(t, g.hostFile)
	var in map[string]any
	json.Unmarshal([]byte(inside), &in)
	if v := jsonAt(in, "access_token"); !strings.HasPrefix(v, "jail-secret-GEMINI_OAUTH_ACCESS_TOKEN-") {
		t.Errorf("after the refresh the jail's access_token is %q, want a new placeholder", v)
	}
}
