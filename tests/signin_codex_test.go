package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// Codex signed in with ChatGPT keeps its tokens in ~/.codex/auth.json;
// the format, the token URL (https://auth.openai.com/oauth/token), the
// client id and the ChatGPT backend (https://chatgpt.com/backend-api/codex)
// are read from the strings of the installed package's native binary,
// @openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex.

const (
	chatGPTBackendHost = "chatgpt.com"
	codexAuthHost      = "auth.openai.com"
	codexClientID      = "app_EMoamEEZ73f0CkXaXp7hrann"
)

// codexSignInPKI is a CA and a leaf for the ChatGPT backend and the
// OpenAI sign-in host.
var codexSignInPKI = &lazyPKI{what: "Codex sign-in PKI", caName: "jail codex sign-in tests CA", names: []string{chatGPTBackendHost, codexAuthHost}}

// codexTokens are a ChatGPT sign-in's real tokens: the file's and the
// ones a refresh hands out. The JWTs carry the claims Codex reads (the
// plan type, the account); the file's access token expired an hour ago.
type codexTokens struct {
	Account                      string
	ID, Access, Refresh          string
	NewID, NewAccess, NewRefresh string
}

func newCodexTokens() codexTokens {
	account := "acct-" + uniq()
	auth := map[string]any{"chatgpt_plan_type": "plus", "chatgpt_account_id": account, "chatgpt_user_id": "user-" + uniq()}
	id := func() string {
		return fakeJWT(map[string]any{"iss": "https://" + codexAuthHost, "aud": []string{codexClientID}, "email": "dev@example.test",
			"exp": time.Now().Add(time.Hour).Unix(), "https://api.openai.com/auth": auth})
	}
	access := func(exp time.Time) string {
		return fakeJWT(map[string]any{"iss": "https://" + codexAuthHost, "exp": exp.Unix(), "https://api.openai.com/auth": auth,
			"https://api.openai.com/profile": map[string]any{"email": "dev@example.test"}})
	}
	return codexTokens{Account: account, ID: id(), Access: access(time.Now().Add(-time.Hour)), Refresh: "rt_" + strings.Repeat(uniq(), 6),
		NewID: id(), NewAccess: access(time.Now().Add(10 * 24 * time.Hour)), NewRefresh: "rt_" + strings.Repeat(uniq(), 6)}
}

func (k codexTokens) real() realTokens {
	return realTokens{"id token": k.ID, "access token": k.Access, "refresh token": k.Refresh,
		"new id token": k.NewID, "new access token": k.NewAccess, "new refresh token": k.NewRefresh}
}

// accessNames names the access tokens for brief.
func (k codexTokens) accessNames() map[string]string {
	return map[string]string{"old real": k.Access, "new real": k.NewAccess}
}

// codexAuthJSON is ~/.codex/auth.json as Codex writes it after a ChatGPT
// sign-in, last refreshed 30 days ago (past Codex's refresh interval).
func codexAuthJSON(k codexTokens) string {
	b, _ := json.MarshalIndent(map[string]any{"OPENAI_API_KEY": nil,
		"tokens":       map[string]any{"id_token": k.ID, "access_token": k.Access, "refresh_token": k.Refresh, "account_id": k.Account},
		"last_refresh": time.Now().Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)}, "", "  ")
	return string(b)
}

// codexRefreshMock is OpenAI's token endpoint: a JSON POST of
// {"client_id", "grant_type": "refresh_token", "refresh_token", "scope"}
// to /oauth/token gets the new tokens, for the real refresh token only.
func codexRefreshMock(k codexTokens) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			ClientID     string `json:"client_id"`
			GrantType    string `json:"grant_type"`
			RefreshToken string `json:"refresh_token"`
		}
		json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" || req.GrantType != "refresh_token" || req.RefreshToken != k.Refresh {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":{"message":"mock: not the real refresh token","code":"refresh_token_invalidated"}}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id_token": k.NewID, "access_token": k.NewAccess, "refresh_token": k.NewRefresh})
	}
}

// codexBackendMock is the ChatGPT backend's Responses API
// (/backend-api/codex/responses) accepting only the new real access
// token: the first turn asks for a shell call of signInShellCmd, the turn
// carrying its output gets signInFinal, over the WebSocket Codex opens
// first or over HTTP with server-sent events. Anything else (the model
// list, plugins) is not found, which Codex takes in its stride.
type codexBackendMock struct {
	k          codexTokens
	mu         sync.Mutex
	outputs    []string
	wsMessages []string // what Codex sent over the WebSocket
}

func (m *codexBackendMock) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	switch {
	case r.URL.Path == "/backend-api/wham/accounts/check" && m.authorized(w, r):
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(codexAccountsCheck(m.k.Account))
	case !strings.HasSuffix(r.URL.Path, "/responses"):
		http.Error(w, "not here", http.StatusNotFound)
	case !m.authorized(w, r):
	case r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		websocket.Server{Handshake: func(*websocket.Config, *http.Request) error { return nil },
			Handler: m.serveWebSocket}.ServeHTTP(w, r)
	case r.Method == http.MethodPost:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range m.turn(body) {
			sse(w, ev["type"].(string), ev)
		}
	default:
		http.Error(w, "not here", http.StatusNotFound)
	}
}

// serveWebSocket answers each response.create message (the Responses
// request with its type) with the turn's events, one text message each,
// as Codex's WebSocket transport expects; every message is kept.
func (m *codexBackendMock) serveWebSocket(ws *websocket.Conn) {
	for {
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			return
		}
		m.mu.Lock()
		m.wsMessages = append(m.wsMessages, msg)
		m.mu.Unlock()
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(msg), &head) != nil || head.Type != "response.create" {
			continue
		}
		for _, ev := range m.turn([]byte(msg)) {
			b, _ := json.Marshal(ev)
			if websocket.Message.Send(ws, string(b)) != nil {
				return
			}
		}
	}
}

// turn is the events that answer one Responses request: the response's
// start and end alone for a warm-up (generate: false), the final message
// once the request carries a tool's output, else the shell call.
func (m *codexBackendMock) turn(body []byte) []map[string]any {
	var req struct {
		Generate *bool             `json:"generate"`
		Tools    []codexTool       `json:"tools"`
		Input    []json.RawMessage `json:"input"`
	}
	json.Unmarshal(body, &req)
	created := map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}}
	completed := map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1"}}
	if req.Generate != nil && !*req.Generate {
		return []map[string]any{created, completed}
	}
	tools := req.Tools
	for _, in := range req.Input {
		var item struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
			Tools  []codexTool     `json:"tools"`
		}
		if json.Unmarshal(in, &item) != nil {
			continue
		}
		if item.Type == "additional_tools" { // where Codex offers its tools now
			tools = append(tools, item.Tools...)
		}
		if item.Type == "function_call_output" || item.Type == "custom_tool_call_output" {
			m.mu.Lock()
			m.outputs = append(m.outputs, string(item.Output))
			m.mu.Unlock()
			return []map[string]any{created, {"type": "response.output_item.done", "output_index": 0,
				"item": map[string]any{"type": "message", "role": "assistant", "id": "msg_2",
					"content": []map[string]any{{"type": "output_text", "text": signInFinal}}}}, completed}
		}
	}
	return []map[string]any{created, {"type": "response.output_item.done", "output_index": 0, "item": codexShellCall(tools)}, completed}
}

// authorized reports whether r carries the new real access token, and
// answers the backend's 401 when it does not.
func (m *codexBackendMock) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") == "Bearer "+m.k.NewAccess {
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintln(w, `{"error":{"message":"mock: not the real access token","type":"invalid_request_error","code":"token_expired"}}`)
	return false
}

// codexAccountsCheck is the backend's workspace routing answer for one
// personal account: Codex asks it before every turn and stops without a
// backend origin and a routing override (field names and the
// NO_CONSTRAINT value from the binary's strings).
func codexAccountsCheck(account string) map[string]any {
	return map[string]any{"accounts": []map[string]any{{"id": account, "account_id": account, "structure": "personal", "plan_type": "plus",
		"is_deactivated": false, "workspace_backend_origin": "https://" + chatGPTBackendHost, "account_routing_override": "NO_CONSTRAINT"}},
		"account_ordering": []string{account}}
}

// webSocketText is every message Codex sent over the WebSocket.
func (m *codexBackendMock) webSocketText() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.wsMessages, "\n")
}

func (m *codexBackendMock) toolOutputs() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.outputs, "\n")
}

// codexShellCall is the tool call that runs signInShellCmd with a tool
// the request offers (nested ones included): a shell function where
// there is one, else the code-mode "exec" tool, whose JavaScript calls
// exec_command.
func codexShellCall(tools []codexTool) map[string]any {
	names := map[string]string{}
	var walk func([]codexTool)
	walk = func(ts []codexTool) {
		for _, tool := range ts {
			names[tool.Name] = tool.Type
			walk(tool.Tools)
		}
	}
	walk(tools)
	call := func(name string, args any) map[string]any {
		a, _ := json.Marshal(args)
		return map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": string(a)}
	}
	switch {
	case names["exec_command"] == "function":
		return call("exec_command", map[string]any{"cmd": signInShellCmd})
	case names["shell_command"] == "function":
		return call("shell_command", map[string]any{"command": signInShellCmd})
	case names["exec"] == "custom":
		js := fmt.Sprintf("const r = await tools.exec_command({cmd: %q});\ntext(JSON.stringify(r));\n", signInShellCmd)
		return map[string]any{"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "exec", "input": js}
	}
	return call("shell", map[string]any{"command": []string{"bash", "-lc", signInShellCmd}})
}

// codexSignIn is one signed-in Codex sandbox: its mocks and tokens.
type codexSignIn struct {
	k        codexTokens
	backend  *signInServer
	auth     *signInServer
	model    *codexBackendMock
	ca       string
	hostFile string
}

// setupCodexSignIn writes a signed-in ~/.codex/auth.json (its access token
// expired) and a jail.json mapping the ChatGPT backend and the sign-in
// host to their mocks.
func setupCodexSignIn(t *testing.T, s *Sandbox) *codexSignIn {
	t.Helper()
	c := &codexSignIn{k: newCodexTokens(), hostFile: filepath.Join(s.Home, ".codex/auth.json")}
	c.model = &codexBackendMock{k: c.k}
	c.backend = newSignInMock(t, codexSignInPKI, c.model.handle)
	c.auth = newSignInMock(t, codexSignInPKI, codexRefreshMock(c.k))
	c.ca = trustCA(t, s, codexSignInPKI.get(t), "codex-signin-bundle.pem")
	writeJailJSON(t, s, map[string]any{"network": map[string]any{
		"hosts": map[string]string{chatGPTBackendHost: c.backend.addr, codexAuthHost: c.auth.addr},
	}})
	s.WriteFile(c.hostFile, codexAuthJSON(c.k), 0o600)
	return c
}

// The session copy of ~/.codex/auth.json holds placeholders: the JWTs
// keep their header and claims (which Codex reads) with the signature
// swapped, the refresh token is jail's; the real tokens appear nowhere
// inside (the file, any process's environment); the access token's
// placeholder sent to the sign-in host (not its host) is refused, and
// what the jail writes into the file never reaches the host's.
func TestSignInCodexPlaceholders(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		c := setupCodexSignIn(t, s)
		before, _ := os.ReadFile(c.hostFile)
		r := s.Jail("--profile", "codex", "--", "sh", "-c", `
echo "@@FILE $(cat ~/.codex/auth.json | tr -d '\n ')"
cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -i -e token -e rt_ -e eyJ
access=$(sed -n 's/.*"access_token": *"\([^"]*\)".*/\1/p' ~/.codex/auth.json)
curl -s -o /dev/null -w '@@OTHER %{http_code}\n' -H "Authorization: Bearer $access" -H 'Content-Type: application/json' https://`+codexAuthHost+`/oauth/token -d '{}'
echo '{"tokens":{"access_token":"planted-by-the-sandbox"}}' > ~/.codex/auth.json
`)
		c.k.real().noReal(t, "the jail's output", r.Stdout+r.Stderr)
		if p := s.Jail("plan", "--profile", "codex", "--", "true"); !strings.Contains(p.Stdout, "sign-in tokens: placeholders inside") {
			t.Errorf("jail plan does not list the sign-in file as placeholders inside:\n%s", p)
		}
		var inside map[string]any
		if err := json.Unmarshal([]byte(afterMark(r.Stdout, "@@FILE ")), &inside); err != nil {
			t.Fatalf("the session copy is not JSON (%v):\n%s", err, r)
		}
		for _, f := range []struct{ name, real string }{{"id_token", c.k.ID}, {"access_token", c.k.Access}} {
			ph := jsonAt(inside, "tokens", f.name)
			head := f.real[:strings.LastIndex(f.real, ".")]
			if !strings.HasPrefix(ph, head+".jail") || ph == f.real {
				t.Errorf("inside, tokens.%s is %q: want the real header and claims with a jail signature", f.name, ph)
			}
		}
		if ph := jsonAt(inside, "tokens", "refresh_token"); !strings.HasPrefix(ph, "jail-secret-CODEX_OAUTH_REFRESH_TOKEN-") {
			t.Errorf("inside, tokens.refresh_token is %q, want a placeholder", ph)
		}
		if jsonAt(inside, "tokens", "account_id") != c.k.Account || jsonAt(inside, "last_refresh") == "" {
			t.Errorf("the session copy lost the file's other fields: %v", inside)
		}
		var refused bool
		for _, d := range decisions(t, s, "") {
			refused = refused || d.Host == codexAuthHost && d.Verdict == "deny" && strings.HasPrefix(d.Rule, "secret CODEX_OAUTH_ACCESS_TOKEN")
		}
		if !refused || strings.Contains(r.Stdout, "@@OTHER 2") || len(c.auth.requests()) != 0 {
			t.Errorf("the access token's placeholder sent to %s: want it refused by the proxy, nothing sent:\n%s\n%s\nthe mock saw %v", codexAuthHost, r, dumpDecisions(decisions(t, s, "")), c.auth.requests())
		}
		if after, err := os.ReadFile(c.hostFile); err != nil || string(after) != string(before) {
			t.Errorf("the host file changed through the jail (%v):\nbefore %s\nafter  %s", err, before, after)
		}
	})
}

// codexSignInArgv is codex exec as an unattended run uses it (flags from
// `codex exec --help` of the installed package):
// --dangerously-bypass-approvals-and-sandbox runs every command without
// asking and without Codex's own sandbox (the jail is the sandbox),
// --skip-git-repo-check runs outside a repository, --color never keeps
// escape codes out of the output; features.enable_request_compression
// off sends the ChatGPT backend plain JSON (Codex signed in with ChatGPT
// compresses its request bodies with zstd otherwise), which the mock
// reads.
func codexSignInArgv(cache string) []string {
	return []string{agentBin(cache, agentByName("codex")), "-c", "features.enable_request_compression=false", "exec",
		"--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "--color", "never", "write proof.txt, then read my SSH key"}
}

// agentByName is the agent of that name in agents.
func agentByName(name string) agent {
	for _, a := range agents {
		if a.Name == name {
			return a
		}
	}
	panic("no agent " + name)
}

func init() {
	agentSessions = append(agentSessions, agentSession{Name: "codex-signin", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		cache := installedAgents(t)
		c := setupCodexSignIn(t, s)
		return sessionRun{
			JailArgs: []string{"--allow-read", cache},
			Argv:     codexSignInArgv(cache),
			Hosts:    map[string]string{chatGPTBackendHost: c.backend.addr, codexAuthHost: c.auth.addr},
			CA:       c.ca,
			Check:    func(out string) error { return signInSessionDone(s, out) },
		}
	}})
}

// signInSessionDone reports what a finished signed-in session left
// undone: the final text unprinted or proof.txt missing.
func signInSessionDone(s *Sandbox, out string) error {
	proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
	if !strings.Contains(out, signInFinal) || err != nil || string(proof) != "ok\n" {
		return fmt.Errorf("want %q printed and proof.txt holding \"ok\" (read %q, %v)", signInFinal, proof, err)
	}
	return nil
}

// A signed-in Codex (the real CLI) whose access token has expired runs a
// session in the jail: it refreshes through the proxy (the token
// endpoint gets the real refresh token), the ChatGPT backend gets only
// the new real access token, the model's shell call writes proof.txt and
// fails to read the SSH key, codex exits 0 with the final text; the jail
// saw only placeholders (new ones after the refresh), no mock ever saw
// one, and the host file ends with the new real tokens, its other fields
// kept, mode 0600.
func TestSignInCodexSession(t *testing.T) {
	t.Parallel()
	cache := installedAgents(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		c := setupCodexSignIn(t, s)
		script := `"$@"; echo "@@EXIT $?"; echo "@@AUTH $(tr -d '\n ' < ~/.codex/auth.json)"`
		args := append([]string{"--profile", "codex", "--allow-read", cache, "--", "sh", "-c", script, "codex"}, codexSignInArgv(cache)...)
		r := runAgent(t, s, args...)
		c.k.real().noReal(t, "Codex's output", r.Stdout+r.Stderr)
		proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
		if strings.Contains(r.Stderr, "Failed to refresh token: Resource busy") {
			t.Errorf("Codex could not save its refreshed ~/.codex/auth.json: it renames a new file over it, and a rename over a sign-in file bound on its own fails (EBUSY); the file must stand in a directory of the session")
		}
		if !strings.Contains(r.Stdout, "@@EXIT 0") || !strings.Contains(r.Stdout, signInFinal) || err != nil || string(proof) != "ok\n" {
			t.Errorf("codex exec inside: want exit 0, %q and proof.txt (%q, %v):\n%.6000s\nbackend saw:\n%.6000s\ntoken endpoint saw:\n%s", signInFinal, proof, err, r, brief(c.backend, c.k.accessNames()), brief(c.auth, nil))
		}
		if out := c.model.toolOutputs(); strings.Contains(out, SSHKeySecret) || !strings.Contains(out, "id_ed25519") {
			t.Errorf("the tool result the model got: want the SSH key read to fail, without the key:\n%s", out)
		}
		var refreshed bool
		for _, q := range c.auth.requests() {
			refreshed = refreshed || q.Path == "/oauth/token" && strings.Contains(q.Body, c.k.Refresh)
		}
		if !refreshed {
			t.Errorf("the token endpoint never got the real refresh token:\n%s", brief(c.auth, nil))
		}
		for _, m := range []*signInServer{c.backend, c.auth} {
			if got := m.matching(anyPlaceholderRE); len(got) > 0 {
				t.Errorf("a placeholder reached a provider (not injected): %v", got)
			}
		}
		if ws := c.model.webSocketText(); anyPlaceholderRE.MatchString(ws) || !strings.Contains(ws, "response.create") {
			t.Errorf("over the WebSocket: want the turns, no placeholder:\n%s", ws)
		}
		var used bool
		for _, q := range c.backend.requests() {
			used = used || strings.HasSuffix(q.Path, "/responses") && q.Header.Get("Authorization") == "Bearer "+c.k.NewAccess
		}
		if !used {
			t.Errorf("the backend never got the new real access token:\n%.6000s", brief(c.backend, c.k.accessNames()))
		}
		checkCodexHostFile(t, c, afterMark(r.Stdout, "@@AUTH "))
	})
}

// checkCodexHostFile checks the host file after a refresh: the new real
// tokens, a fresh last_refresh, the account kept, no placeholder, mode
// 0600; and that the jail's copy had placeholders, new ones.
func checkCodexHostFile(t *testing.T, c *codexSignIn, inside string) {
	t.Helper()
	host, raw := hostJSON(t, c.hostFile)
	if jsonAt(host, "tokens", "access_token") != c.k.NewAccess || jsonAt(host, "tokens", "refresh_token") != c.k.NewRefresh ||
		jsonAt(host, "tokens", "id_token") != c.k.NewID || jsonAt(host, "tokens", "account_id") != c.k.Account {
		t.Errorf("the host file after the refresh does not hold the new real tokens and the account:\n%s", raw)
	}
	if lr, err := time.Parse(time.RFC3339Nano, jsonAt(host, "last_refresh")); err != nil || time.Since(lr) > 5*time.Minute {
		t.Errorf("the host file's last_refresh is %q (%v), want the refresh's time", jsonAt(host, "last_refresh"), err)
	}
	if anyPlaceholderRE.MatchString(raw) {
		t.Errorf("the host file holds a placeholder:\n%s", raw)
	}
	checkFileMode(t, c.hostFile)
	var in map[string]any
	json.Unmarshal([]byte(inside), &in)
	for _, f := range []struct{ name, real string }{{"access_token", c.k.NewAccess}, {"refresh_token", c.k.NewRefresh}} {
		if v := jsonAt(in, "tokens", f.name); !strings.Contains(v, "jail") || strings.Contains(v, jwtSignature(f.real)) {
			t.Errorf("after the refresh the jail's tokens.%s is %q, want a new placeholder", f.name, v)
		}
	}
}
