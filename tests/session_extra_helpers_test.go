package tests

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Helpers the Pi, Copilot CLI and Amp session tests share: the model's
// tool call, the checks of a finished session, and mocks on their own
// PKI.

// sessionFinal is the model's final text, after the tool result came back.
const sessionFinal = "proof written and the key stayed unreadable"

// sessionPlaceholderRE finds any credential placeholder jail makes: the
// generic jail-secret-NAME-… or a shaped one, with "jail" right after the
// format's prefix (sk-ant-api03-jail…, sk-proj-jail…, ghp_jail…,
// github_pat_jail…).
var sessionPlaceholderRE = regexp.MustCompile(`jail-secret-|(?:sk-ant-(?:[a-z]{3,5}[0-9]{2}-)?|sk-proj-|sk-|gh[pousr]_|github_pat_)(?:jail|JAIL)|planted-by-the-sandbox`)

// agentNamed is the agent called name in the agents list.
func agentNamed(t *testing.T, name string) agent {
	t.Helper()
	for _, a := range agents {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no agent %q in the agents list", name)
	return agent{}
}

// newSessionMock is an echo server with a leaf from pki: it records every
// request and answers with handle.
func newSessionMock(t *testing.T, pki *lazyPKI, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *echoServer {
	t.Helper()
	e := &echoServer{}
	e.srv = newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		e.add(seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		handle(w, r, body)
	}))
	startTestServer(t, e.srv, &pki.get(t).Leaf)
	return e
}

// sessionOutputCheck is a session's Check for the benchmark: the final
// text was printed and proof.txt holds "ok".
func sessionOutputCheck(s *Sandbox) func(out string) error {
	return func(out string) error {
		if !strings.Contains(out, sessionFinal) {
			return fmt.Errorf("the final text %q was not printed", sessionFinal)
		}
		b, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
		if err != nil || string(b) != "ok\n" {
			return fmt.Errorf("proof.txt in the project holds %q (%v), want \"ok\"", b, err)
		}
		return nil
	}
}

// checkToolSession checks a finished jailed session: exit 0, the final text
// printed, proof.txt in the host project, the tool results the mock got
// back show the key read failing without the key, and no request any
// mock saw carries a placeholder or the key.
func checkToolSession(t *testing.T, s *Sandbox, name string, r Result, results []string, mocks ...*echoServer) {
	t.Helper()
	var dump strings.Builder
	for _, m := range mocks {
		dump.WriteString(m.dump())
	}
	if r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, sessionFinal) {
		t.Errorf("jail -- %s: want exit 0 and %q printed:\n%s\nthe mocks saw:\n%s", name, sessionFinal, r, dump.String())
	}
	proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
	if err != nil || string(proof) != "ok\n" {
		t.Errorf("%s: proof.txt in the host project holds %q (%v), want \"ok\"; tool results %q", name, proof, err, results)
	}
	got := strings.Join(results, "\n")
	t.Logf("%s: the tool results the mock received: %q", name, results)
	if len(results) == 0 || strings.Contains(got, SSHKeySecret) || !strings.Contains(got, "id_ed25519") ||
		!(strings.Contains(got, "No such file") || strings.Contains(got, "Permission denied")) {
		t.Errorf("%s: the tool results the mock received must show the key's read failing, without the key: %q", name, results)
	}
	for _, m := range mocks {
		for _, req := range m.Requests() {
			if loc := sessionPlaceholderRE.FindString(req.String()); loc != "" || req.has(SSHKeySecret) {
				t.Errorf("%s: a request reached the mock with a placeholder (%q) or the key: %s", name, loc, req)
			}
		}
	}
	noSecret(t, r, name+" session", SSHKeySecret, AWSSecret)
}

// mockRefuses sends the mock a request from the host (method, path, the
// headers, a "Host" among them naming the host, body) carrying a credential other than the real one and fails
// the test unless it gets a 401: the mock must not answer a placeholder.
func mockRefuses(t *testing.T, mock *echoServer, method, path string, header map[string]string, body string) {
	t.Helper()
	req, _ := http.NewRequest(method, "https://"+mock.Addr()+path, strings.NewReader(body))
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("control: asking the mock %s %s: %v", method, path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("control: the mock answered %s %s with another credential %d, want 401", method, path, resp.StatusCode)
	}
}

// toolTurnsMock is a Messages API (POST /v1/messages, streaming) that
// answers only a request authorized accepts (any other gets the API's
// 401): a request offering tool gets a call of it with input; the request
// carrying its result gets sessionFinal. The results are kept.
func toolTurnsMock(authorized func(*http.Request) bool, tool string, input any, results *reqLog[string]) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
			anthropicError(w, http.StatusNotFound, "not_found_error", "mock: no "+r.URL.Path)
			return
		}
		if !authorized(r) {
			anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid credential")
			return
		}
		var req struct {
			Model    string                  `json:"model"`
			Tools    []struct{ Name string } `json:"tools"`
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		call := false
		for _, t := range req.Tools {
			call = call || t.Name == tool
		}
		for _, m := range req.Messages {
			var blocks []struct {
				Type    string          `json:"type"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(m.Content, &blocks) != nil {
				continue
			}
			for _, b := range blocks {
				if b.Type == "tool_result" {
					results.add(string(b.Content))
					call = false
				}
			}
		}
		anthropicTurn(w, req.Model, call, tool, input)
	}
}

// anthropicError is the Messages API's error answer.
func anthropicError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// anthropicTurn streams one assistant turn: a tool_use of tool with input
// when call is set, else the text sessionFinal.
func anthropicTurn(w http.ResponseWriter, model string, call bool, tool string, input any) {
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_" + uniq(), "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 12, "output_tokens": 1},
	}})
	stop := "end_turn"
	if call {
		stop = "tool_use"
		in, _ := json.Marshal(input)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_" + uniq(), "name": tool, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "input_json_delta", "partial_json": string(in)}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": sessionFinal}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
	sse(w, "message_stop", map[string]string{"type": "message_stop"})
}

// plantsRefused tries, from a shell under profile, to create or overwrite
// each of planted (paths relative to ~, files the agent reads and acts on
// when it runs later outside the jail: code it loads, commands it runs,
// where it sends its key) and fails the test for each one that changed
// on the host. existing are written on the host first, as a user who ran
// the agent has them. control, a file in the agent's writable state, must
// persist: the profile is not simply read-only.
func plantsRefused(t *testing.T, s *Sandbox, profile string, existing, planted []string, control string) {
	t.Helper()
	for _, p := range existing {
		s.WriteFile(filepath.Join(s.Home, p), "{}\n", 0o644)
	}
	script := []string{`mkdir -p "$(dirname ~/` + control + `)"; echo persisted > ~/` + control}
	for _, p := range planted {
		script = append(script, `mkdir -p "$(dirname ~/`+p+`)" 2>/dev/null; echo planted-by-the-jail > ~/`+p+` 2>/dev/null || echo "refused ~/`+p+`"`)
	}
	r := runAgent(t, s, "--profile", profile, "--", "sh", "-c", strings.Join(script, "\n"))
	if b, err := os.ReadFile(filepath.Join(s.Home, control)); err != nil || string(b) != "persisted\n" {
		t.Errorf("control: ~/%s under the %s profile did not persist on the host (%q, %v):\n%s", control, profile, b, err, r)
	}
	for _, p := range planted {
		b, err := os.ReadFile(filepath.Join(s.Home, p))
		if err == nil && strings.Contains(string(b), "planted-by-the-jail") {
			t.Errorf("a shell under the %s profile planted ~/%s on the host, which %s run outside the jail later acts on", profile, p, profile)
		}
	}
	t.Logf("%s: %s", profile, strings.TrimSpace(r.Stdout+r.Stderr))
}
