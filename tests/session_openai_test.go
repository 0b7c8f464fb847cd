package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/websocket"
)

// A local TLS mock of the OpenAI Responses API, as the real Codex CLI
// speaks it. The wire formats come from the Codex package's binary
// (node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex,
// its codex-api crate: endpoint/responses_websocket.rs, common.rs and
// sse): Codex first opens a WebSocket to /v1/responses (header OpenAI-Beta:
// responses_websockets=...), sends each turn as one text message
// {"type":"response.create", ...the Responses request...} and reads the
// stream's events back as text messages, the same JSON objects the HTTP
// transport sends as server-sent events, until response.completed. When
// the upgrade fails it retries, then falls back to POST /v1/responses with
// server-sent events; the mock serves both.

const (
	openaiHost  = "api.openai.com"
	chatgptHost = "chatgpt.com"
)

// openaiPKI is a CA and a leaf for the OpenAI API and ChatGPT hosts,
// signed by it.
var openaiPKI = &lazyPKI{what: "OpenAI mock PKI", caName: "jail agent sandbox tests CA", names: []string{openaiHost, chatgptHost}}

// codexMock is a Responses API that answers only the API key it was made
// with (others get the API's 401): the first turn with a shell tool call
// running cmd, and the turn carrying its output with the message final.
// Every request, and every WebSocket message, is kept in the echoServer's
// log.
type codexMock struct {
	*echoServer
	key, cmd, final string

	mu      sync.Mutex
	outputs []string // the tool outputs Codex sent back
	wsTurns int      // turns asked over the WebSocket
}

// newCodexMock starts a Responses API for key whose tool call runs cmd and
// whose last answer is final.
func newCodexMock(t *testing.T, key, cmd, final string) *codexMock {
	m := &codexMock{key: key, cmd: cmd, final: final}
	m.echoServer = newEchoServerPKI(t, openaiPKI, m.handle)
	return m
}

func (m *codexMock) handle(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Header.Get("Authorization") != "Bearer "+m.key {
		openaiError(w, http.StatusUnauthorized, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
		return true
	}
	switch {
	case r.URL.Path == "/v1/responses" && strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		websocket.Server{Handshake: func(*websocket.Config, *http.Request) error { return nil },
			Handler: func(ws *websocket.Conn) { m.serveWebSocket(ws, r) }}.ServeHTTP(w, r)
	case r.URL.Path == "/v1/responses" && r.Method == http.MethodPost:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range m.turn(body) {
			sse(w, ev["type"].(string), ev)
		}
	default:
		openaiError(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "invalid_request_error", "")
	}
	return true
}

// hosts is the network.hosts mapping that takes Codex to the mock: the
// OpenAI API, and the ChatGPT host, where Codex asks for its model list
// and plugin catalog even with an API key. On a real machine that host
// resolves and jail refuses the key there itself (it is bound to the API
// host): an unresolvable name instead makes Codex retry its model list
// for seconds before each session.
func (m *codexMock) hosts() map[string]string {
	return map[string]string{openaiHost: m.Addr(), chatgptHost: m.Addr()}
}

// openaiError writes an error in the OpenAI API's shape.
func openaiError(w http.ResponseWriter, status int, msg, typ, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var c any
	if code != "" {
		c = code
	}
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

// serveWebSocket answers each response.create message on the connection
// with the turn's events, one text message each; it logs every message
// Codex sent, as a request with method "WS".
func (m *codexMock) serveWebSocket(ws *websocket.Conn, r *http.Request) {
	for {
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			return
		}
		m.add(seen{"WS", r.Host, r.URL.Path, "", nil, msg})
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(msg), &head) != nil || head.Type != "response.create" {
			continue
		}
		m.mu.Lock()
		m.wsTurns++
		m.mu.Unlock()
		for _, ev := range m.turn([]byte(msg)) {
			b, _ := json.Marshal(ev)
			if websocket.Message.Send(ws, string(b)) != nil {
				return
			}
		}
	}
}

// turn is the events that answer one Responses request: none but the
// response's start and end for a warm-up (generate: false), the message
// final once the request carries a tool's output, else the shell call.
func (m *codexMock) turn(body []byte) []map[string]any {
	var req struct {
		Generate *bool             `json:"generate"`
		Tools    []codexTool       `json:"tools"`
		Input    []json.RawMessage `json:"input"`
	}
	json.Unmarshal(body, &req)
	id := "resp_" + uniq()
	created := map[string]any{"type": "response.created", "response": map[string]any{"id": id}}
	completed := map[string]any{"type": "response.completed", "response": map[string]any{"id": id}}
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
		switch item.Type {
		case "function_call_output", "custom_tool_call_output":
			m.mu.Lock()
			m.outputs = append(m.outputs, string(item.Output))
			m.mu.Unlock()
			msg := map[string]any{"type": "message", "role": "assistant", "id": "msg_" + uniq(),
				"content": []map[string]any{{"type": "output_text", "text": m.final}}}
			return []map[string]any{created, responsesItemDone(msg), completed}
		case "additional_tools":
			tools = append(tools, item.Tools...)
		}
	}
	return []map[string]any{created, responsesItemDone(codexCall(tools, m.cmd)), completed}
}

func responsesItemDone(item map[string]any) map[string]any {
	return map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item}
}

// codexTool is a tool a request offers; a namespace holds more.
type codexTool struct {
	Type  string      `json:"type"`
	Name  string      `json:"name"`
	Tools []codexTool `json:"tools"`
}

// codexCall is the tool call that runs cmd with a tool the request offers:
// a shell function where there is one, else the code-mode "exec" tool,
// whose JavaScript calls exec_command.
func codexCall(tools []codexTool, cmd string) map[string]any {
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
		return call("exec_command", map[string]any{"cmd": cmd})
	case names["shell_command"] == "function":
		return call("shell_command", map[string]any{"command": cmd})
	case names["exec"] == "custom":
		js := fmt.Sprintf("const r = await tools.exec_command({cmd: %q});\ntext(JSON.stringify(r));\n", cmd)
		return map[string]any{"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "exec", "input": js}
	}
	return call("shell", map[string]any{"command": []string{"bash", "-lc", cmd}})
}

// toolOutputs are the outputs of the tool calls Codex reported back.
func (m *codexMock) toolOutputs() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.outputs, "\n")
}

// webSocketTurns is how many turns Codex asked over the WebSocket.
func (m *codexMock) webSocketTurns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wsTurns
}
