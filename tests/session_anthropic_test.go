package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Shared by the Claude Code and OpenCode session tests: a local TLS mock
// of the Anthropic Messages API whose model asks for one shell tool call
// and then answers with a final text, and the checks every session makes.

// sessionProofCmd is the shell command the model asks for: it writes a
// file in the project (the agent's working directory) and tries to read
// the user's SSH key, which the jail must keep out of the tool's result.
const sessionProofCmd = "echo ok > proof.txt; cat ~/.ssh/id_ed25519"

// sessionAnswer is the model's final text, after the tool's result.
const sessionAnswer = "the proof is written"

// sessionPKI is a CA and a leaf for the hosts the session mocks answer.
var sessionPKI = &lazyPKI{what: "agent session PKI", caName: "jail agent session tests CA",
	names: []string{anthropicHost, signInTokenHost}}

// messagesSession is the Messages API as api.anthropic.com serves it,
// answering only the requests authorized accepts (else the API's 401). A
// streaming (SSE) request that offers the shell tool named tool is
// answered with a tool_use running command (sessionProofCmd unless the
// test adds to it before the agent starts); a request that carries
// a tool_result, or offers no such tool (titles, side requests), with
// sessionAnswer. The tool results that came back are kept. Every other
// path (Claude Code's feature flags, profile, bootstrap and event
// logging) gets the API's 404 at once: nothing waits on them.
type messagesSession struct {
	tool       string
	command    string
	authorized func(r *http.Request) bool
	srv        *httptest.Server
	reqLog[seen]
	results reqLog[string]
}

func newMessagesSession(t *testing.T, tool string, authorized func(r *http.Request) bool) *messagesSession {
	t.Helper()
	m := &messagesSession{tool: tool, command: sessionProofCmd, authorized: authorized}
	m.srv = newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		m.add(seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		m.handle(w, r, body)
	}))
	startTestServer(t, m.srv, &sessionPKI.get(t).Leaf)
	return m
}

// apiKeyAuth accepts the key in x-api-key, as the API does.
func apiKeyAuth(key string) func(r *http.Request) bool {
	return func(r *http.Request) bool { return r.Header.Get("x-api-key") == key }
}

// bearerAuth accepts an OAuth access token as "Authorization: Bearer".
func bearerAuth(token string) func(r *http.Request) bool {
	return func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }
}

// Addr is the mock's "127.0.0.1:PORT".
func (m *messagesSession) Addr() string { return m.srv.Listener.Addr().String() }

func apiError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// sessionRequest is the part of a Messages request the mock reads.
type sessionRequest struct {
	Model string `json:"model"`
	Tools []struct {
		Name        string `json:"name"`
		InputSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"input_schema"`
	} `json:"tools"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func (m *messagesSession) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("request-id", "req_mock_"+uniq())
	if r.URL.Path != "/v1/messages" && r.URL.Path != "/v1/messages/count_tokens" {
		apiError(w, http.StatusNotFound, "not_found_error", "mock: no "+r.URL.Path)
		return
	}
	if !m.authorized(r) {
		apiError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	var req sessionRequest
	if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "mock: want a POST of JSON")
		return
	}
	if r.URL.Path == "/v1/messages/count_tokens" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"input_tokens": 12}`)
		return
	}
	input := m.toolInput(req)
	if m.keepResults(req) {
		input = nil
	}
	m.stream(w, req.Model, input)
}

// toolInput is the input of a call of the shell tool when req offers it
// (with a description only where its schema has one), else nil.
func (m *messagesSession) toolInput(req sessionRequest) map[string]string {
	for _, tool := range req.Tools {
		if tool.Name != m.tool {
			continue
		}
		in := map[string]string{"command": m.command}
		if _, ok := tool.InputSchema.Properties["description"]; ok {
			in["description"] = "Write the proof and read the key"
		}
		return in
	}
	return nil
}

// keepResults records the tool results req carries and reports whether
// there was one.
func (m *messagesSession) keepResults(req sessionRequest) bool {
	found := false
	for _, msg := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				m.results.add(resultText(b.Content))
				found = true
			}
		}
	}
	return found
}

// resultText is a tool_result's content as text: a string, or the text
// of its blocks (anything else as it came).
func resultText(content json.RawMessage) string {
	var text string
	if json.Unmarshal(content, &text) == nil {
		return text
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return string(content)
	}
	var out []string
	for _, b := range blocks {
		out = append(out, b.Text)
	}
	return strings.Join(out, "\n")
}

// stream answers with a server-sent event stream: a tool_use of m.tool
// with input, or the final text when input is nil.
func (m *messagesSession) stream(w http.ResponseWriter, model string, input map[string]string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_" + uniq(), "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 12, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	stop := "end_turn"
	if input != nil {
		stop = "tool_use"
		in, _ := json.Marshal(input)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + uniq(), "name": m.tool, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]string{"type": "input_json_delta", "partial_json": string(in)}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]string{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]string{"type": "text_delta", "text": sessionAnswer}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
	sse(w, "message_stop", map[string]string{"type": "message_stop"})
}

// toolResults are the tool results the agent sent back, one a line.
func (m *messagesSession) toolResults() string {
	return strings.Join(m.results.Requests(), "\n")
}

// paths are the requests' methods, hosts and paths.
func (m *messagesSession) paths() string {
	var out []string
	for _, q := range m.Requests() {
		out = append(out, q.Method+" "+q.Host+q.Path)
	}
	return strings.Join(out, ", ")
}

func (m *messagesSession) dump() string { return dumpRequests(m.Requests()) }

// credentialHeaders are the headers a client authenticates with.
var credentialHeaders = []string{"X-Api-Key", "Authorization"}

// placeholders returns the requests whose credential headers hold a
// placeholder: a credential the proxy did not replace with the real one.
// (A placeholder elsewhere, in the conversation a tool result printed it
// into, is the model seeing what the jail sees, and must stay as it is.)
func (m *messagesSession) placeholders() []seen {
	var out []seen
	for _, r := range m.Requests() {
		for _, h := range credentialHeaders {
			if v := r.Header.Get(h); sessionPlaceholderRE.MatchString(v) || strings.Contains(strings.ToLower(v), "jail") {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// realOutsideCredentials returns the requests that carry real anywhere
// but their credential headers: in the conversation sent to the model, a
// query, another header.
func (m *messagesSession) realOutsideCredentials(real string) []seen {
	var out []seen
	for _, r := range m.Requests() {
		rest := r
		rest.Header = r.Header.Clone()
		for _, h := range credentialHeaders {
			rest.Header.Del(h)
		}
		if rest.has(real) {
			out = append(out, r)
		}
	}
	return out
}

// authorizedMessages counts the Messages requests the mock accepted.
func (m *messagesSession) authorizedMessages() int {
	n := 0
	for _, q := range m.Requests() {
		r := &http.Request{Header: q.Header}
		if q.Path == "/v1/messages" && m.authorized(r) {
			n++
		}
	}
	return n
}

// sessionSetup maps hosts to m in the project's jail.json (allowing them
// too) and trusts the mocks' CA on jail's host side; it returns the CA
// bundle and the hosts' map, as the wall-time benchmark wants them.
func sessionSetup(t *testing.T, s *Sandbox, m *messagesSession, hosts ...string) (string, map[string]string) {
	t.Helper()
	ca := trustCA(t, s, sessionPKI.get(t), "session-bundle.pem")
	mapped := map[string]string{}
	for _, h := range hosts {
		mapped[h] = m.Addr()
	}
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"allow": hosts, "hosts": mapped}})
	return ca, mapped
}

// sessionDone is the benchmark's check of a finished session, inside the
// jail or outside: the final text printed and the proof in the project.
func sessionDone(s *Sandbox) func(out string) error {
	return func(out string) error {
		if !strings.Contains(out, sessionAnswer) {
			return fmt.Errorf("the final text %q was not printed", sessionAnswer)
		}
		proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
		if err != nil || string(proof) != "ok\n" {
			return fmt.Errorf("proof.txt in the project holds %q (%v), want \"ok\"", proof, err)
		}
		return nil
	}
}

// checkSession checks a jailed session: exit 0, the final text printed,
// proof.txt in the host project, the SSH key out of the tool result (the
// read failed), no placeholder in a credential at the mock, and the real
// credential nowhere else.
func checkSession(t *testing.T, s *Sandbox, r Result, m *messagesSession, real string) {
	t.Helper()
	results := m.toolResults()
	if err := sessionDone(s)(r.Stdout); r.Code != 0 || err != nil {
		t.Fatalf("the session: want exit 0, the final text and the proof (%v):\n%s\ntool results: %s\nthe mock saw:\n%s", err, r, results, m.dump())
	}
	t.Logf("tool results: %q; the mock saw: %s", results, m.paths())
	if results == "" {
		t.Errorf("no tool result came back to the mock: the shell tool never ran\nthe mock saw:\n%s", m.dump())
	}
	if strings.Contains(results+r.Stdout+r.Stderr, SSHKeySecret) {
		t.Errorf("the SSH key reached the model or the output:\ntool results: %s\n%s", results, r)
	}
	if !strings.Contains(results, "id_ed25519") || !regexp.MustCompile(`No such file|Permission denied`).MatchString(results) {
		t.Errorf("the tool result does not show the key's read failing: %s", results)
	}
	if got := m.placeholders(); len(got) > 0 {
		t.Errorf("a placeholder reached the provider as a credential (not replaced by the real one):\n%s", dumpRequests(got))
	}
	if got := m.realOutsideCredentials(real); len(got) > 0 {
		t.Errorf("the real credential reached the provider outside the credential headers:\n%s", dumpRequests(got))
	}
	if m.authorizedMessages() < 2 {
		t.Errorf("the mock accepted %d Messages requests, want the tool's turn and the final one:\n%s", m.authorizedMessages(), m.dump())
	}
}
