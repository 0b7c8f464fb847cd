package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent's own sandbox needs new namespaces, which the jail forbids.
// These tests run the real Codex CLI inside the jail against a local TLS
// mock of the OpenAI Responses API whose reply makes Codex run a shell
// command: without agentSandbox the command dies in Codex's bubblewrap
// while codex exec still exits 0; with it the command runs, confined by
// the jail.

// codexProofCmd is the shell command the mock asks Codex to run, in the
// project (Codex's working directory); it also writes in the home, which
// must not reach the host's: with Codex's own sandbox off, the jail alone
// keeps it (the home inside is a throwaway tmpfs).
const codexProofCmd = "echo ok > proof.txt; echo escaped > ~/escaped.txt"

func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// codexSandboxKey is the API key these tests give Codex.
const codexSandboxKey = "sk-proj-agentsandbox0123456789abcdefABCDEF"

// codexSetup installs the real Codex CLI, starts the mock, maps the OpenAI
// API host to it and trusts its CA on jail's host side; it returns the
// codex command and the agents' install directory.
func codexSetup(t *testing.T, s *Sandbox) (*codexMock, string, string) {
	t.Helper()
	cache := installedAgents(t)
	var codex string
	for _, a := range agents {
		if a.Name == "codex" {
			codex = agentBin(cache, a)
		}
	}
	mock := newCodexMock(t, codexSandboxKey, codexProofCmd, "proof written")
	trustCA(t, s, openaiPKI.get(t), "openai-bundle.pem")
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": mock.hosts()}})
	s.Env = append(s.Env, "CODEX_API_KEY="+codexSandboxKey)
	return mock, codex, cache
}

// TestAgentSandboxCodex: jail -- codex exec runs the shell command the
// model asks for, and proof.txt appears in the project; jail plan and
// jail check say that Codex relies on the jail.
func TestAgentSandboxCodex(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		mock, codex, cache := codexSetup(t, s)
		args := []string{"--allow-read", cache, "--", codex, "exec", "--skip-git-repo-check", "write the proof"}

		plan := runAgent(t, s, append([]string{"plan"}, args...)...)
		if plan.Code != 0 || !strings.Contains(plan.Stdout, "agent sandbox: codex relies on the jail (sandbox_mode=danger-full-access)\n") {
			t.Fatalf("jail plan -- codex: want the agent sandbox line:\n%s", plan)
		}
		if !strings.Contains(plan.Stdout, `-c 'sandbox_mode="danger-full-access"' exec`) {
			t.Errorf("jail plan -- codex: the command line does not carry the override:\n%s", plan.Stdout)
		}
		check := s.Jail("check")
		if !strings.Contains(check.Stdout, "codex sandbox     codex relies on the jail") {
			t.Errorf("jail check: no row for the codex profile:\n%s", check)
		}

		r := runAgent(t, s, args...)
		proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
		if r.Code != 0 || err != nil || string(proof) != "ok\n" {
			t.Fatalf("jail -- codex exec: want exit 0 and proof.txt holding \"ok\" in the project (read: %q, %v):\n%s\ntool outputs:\n%s\nthe mock saw:\n%s",
				proof, err, r, mock.toolOutputs(), mock.dump())
		}
		hostAbsent(t, filepath.Join(s.Home, "escaped.txt"))
		out := mock.toolOutputs()
		t.Logf("tool output: %s", out)
		if strings.Contains(out, "namespace") {
			t.Errorf("the tool output mentions namespaces: Codex still tried its own sandbox:\n%s", out)
		}
	})
}

// TestAgentSandboxCodexControl: the same run with a user codex profile that
// lacks agentSandbox shows the failure the key prevents: Codex's
// bubblewrap cannot make namespaces, no proof.txt, and codex exec still
// exits 0. jail check names the profile and the fix.
func TestAgentSandboxCodexControl(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		mock, codex, cache := codexSetup(t, s)
		profile := filepath.Join(s.Home, ".config/jail/profiles/codex.json")
		s.WriteFile(profile, `{"filesystem": {"allowWrite": ["~/.codex"]}, "network": {"allow": ["api.openai.com"]},
 "secrets": {"env": {"CODEX_API_KEY": ["api.openai.com"]}}}`, 0o644)

		check := s.Jail("check")
		if !strings.Contains(check.Stdout, profile+` does not turn codex's own sandbox off, which cannot start inside the jail; fix: add "agentSandbox": "codex" to it`) {
			t.Errorf("jail check: no fix for the codex profile without agentSandbox:\n%s", check)
		}
		r := runAgent(t, s, "--allow-read", cache, "--", codex, "exec", "--skip-git-repo-check", "write the proof")
		out := mock.toolOutputs()
		hostAbsent(t, filepath.Join(s.Project, "proof.txt"))
		if !strings.Contains(out, "namespace") {
			t.Errorf("control: without agentSandbox Codex's own sandbox should fail on namespaces; tool outputs:\n%s\nrun:\n%s", out, r)
		}
		t.Logf("without agentSandbox: codex exec exits %d; tool output %q", r.Code, out)
	})
}

// TestAgentSandboxCodexRefused: a command line that asks for Codex's own
// sandbox is refused before anything runs, with the flag to drop, and the
// mock is never asked; a prompt after "--" that merely names the flag is
// not mistaken for it.
func TestAgentSandboxCodexRefused(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		mock, codex, cache := codexSetup(t, s)
		for _, flags := range [][]string{
			{"exec", "--sandbox", "workspace-write"},
			{"exec", "--full-auto"},
			{"-c", `sandbox_mode="read-only"`, "exec"},
		} {
			args := append(append([]string{"--allow-read", cache, "--", codex}, flags...), "--skip-git-repo-check", "write the proof")
			r := s.Jail(args...)
			lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
			if r.Code != 125 || len(lines) != 1 || !strings.HasPrefix(lines[0], "jail: codex ") || !strings.Contains(lines[0], "cannot start inside the jail") || !strings.Contains(lines[0], "; drop ") {
				t.Errorf("jail -- codex %s: want exit 125 and one line with the fix:\n%s", strings.Join(flags, " "), r)
			}
		}
		hostAbsent(t, filepath.Join(s.Project, "proof.txt"))
		if n := len(mock.Requests()); n != 0 {
			t.Errorf("a refused codex reached the mock %d times:\n%s", n, mock.dump())
		}
		plan := s.Jail("plan", "--", codex, "exec", "--", "--full-auto")
		if plan.Code != 0 || !strings.Contains(plan.Stdout, "agent sandbox: codex relies on the jail") {
			t.Errorf("a prompt after -- naming --full-auto is refused:\n%s", plan)
		}
	})
}

// TestAgentSandboxGemini: GEMINI_SANDBOX=false reaches every command of a
// gemini jail, over a host GEMINI_SANDBOX=docker and over a project
// jail.json that sets it back, so Gemini CLI never tries a container it
// cannot start; jail plan says so.
func TestAgentSandboxGemini(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		writeJailJSON(t, s, map[string]any{"env": map[string]any{"set": map[string]string{"GEMINI_SANDBOX": "docker"}}})
		s.Env = append(s.Env, "GEMINI_SANDBOX=docker")
		r := s.Jail("--profile", "gemini", "--", "sh", "-c", `echo "GS=$GEMINI_SANDBOX"`)
		if r.Code != 0 || !strings.Contains(r.Stdout, "GS=false\n") {
			t.Errorf("GEMINI_SANDBOX inside a gemini jail: want false:\n%s", r)
		}
		plan := s.Jail("plan", "--profile", "gemini", "--", "sh")
		if !strings.Contains(plan.Stdout, "agent sandbox: gemini relies on the jail (GEMINI_SANDBOX=false)\n") {
			t.Errorf("jail plan --profile gemini: no agent sandbox line:\n%s", plan)
		}
		if r := s.Jail("--", "sh", "-c", `echo "GS=$GEMINI_SANDBOX"`); !strings.Contains(r.Stdout, "GS=docker\n") {
			t.Errorf("control: without the gemini profile the project's GEMINI_SANDBOX should apply:\n%s", r)
		}
	})
}

// TestAgentSandboxGeminiCLI: the real Gemini CLI with tools.sandbox in the
// user's settings gets past its sandbox in the jail (it stops later, at
// the untrusted folder, before any request), where under a user gemini
// profile without agentSandbox it dies trying its container; --sandbox on
// the command line is refused with the fix.
func TestAgentSandboxGeminiCLI(t *testing.T) {
	t.Parallel()
	cache := installedAgents(t)
	var gemini string
	for _, a := range agents {
		if a.Name == "gemini" {
			gemini = agentBin(cache, a)
		}
	}
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(filepath.Join(s.Home, ".gemini/settings.json"), `{"tools": {"sandbox": true}}`+"\n", 0o644)
		s.Env = append(s.Env, "GEMINI_API_KEY=AIzaSyAgentSandbox0123456789abcdefghijk")
		args := []string{"--allow-read", cache, "--", gemini, "-p", "hi"}
		r := runAgent(t, s, args...)
		if out := r.Stdout + r.Stderr; strings.Contains(out, "FatalSandboxError") || !strings.Contains(out, "trusted directory") {
			t.Errorf("jail -- gemini -p with tools.sandbox: want it past the sandbox, stopped at the folder trust:\n%s", r)
		}
		r = s.Jail("--allow-read", cache, "--", gemini, "--sandbox", "-p", "hi")
		if lines := strings.Split(strings.TrimSpace(r.Stderr), "\n"); r.Code != 125 || len(lines) != 1 || !strings.Contains(lines[0], "jail: gemini --sandbox asks for Gemini CLI's own sandbox") {
			t.Errorf("jail -- gemini --sandbox: want exit 125 and one line with the fix:\n%s", r)
		}

		s.WriteFile(filepath.Join(s.Home, ".config/jail/profiles/gemini.json"), `{"filesystem": {"allowWrite": ["~/.gemini"]}}`, 0o644)
		r = runAgent(t, s, args...)
		if !strings.Contains(r.Stdout+r.Stderr, "FatalSandboxError") {
			t.Errorf("control: without agentSandbox Gemini CLI should fail on its sandbox:\n%s", r)
		}
	})
}

// TestAgentSandboxProjectNeedsTrust: a cloned repository's jail.json that
// sets agentSandbox (turning an agent's own confinement off) is not
// applied without the user's trust.
func TestAgentSandboxProjectNeedsTrust(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.NoAutoTrust = true
		writeJailJSON(t, s, map[string]any{"agentSandbox": "gemini"})
		r := s.Jail("--", "sh", "-c", `echo "GS=$GEMINI_SANDBOX" > gs.txt`)
		if r.Code == 0 || !strings.Contains(r.Stderr, "agentSandbox") {
			t.Errorf("an untrusted jail.json with agentSandbox: want a refusal naming it:\n%s", r)
		}
		hostAbsent(t, filepath.Join(s.Project, "gs.txt"))
	})
}

// claudeSandboxMock is a Messages API that answers a request offering the
// Bash tool with a Bash call running codexProofCmd, and any other request
// (the turn carrying the call's result, side requests) with text. The
// results Claude Code sent back are kept.
func claudeSandboxMock(results *reqLog[string]) func(w http.ResponseWriter, r *http.Request, body []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/messages" {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"mock"}}`, http.StatusNotFound)
			return true
		}
		var req struct {
			Model    string                  `json:"model"`
			Tools    []struct{ Name string } `json:"tools"`
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		bash := false
		for _, tool := range req.Tools {
			bash = bash || tool.Name == "Bash"
		}
		for _, m := range req.Messages {
			var blocks []struct {
				Type    string          `json:"type"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(m.Content, &blocks) == nil {
				for _, b := range blocks {
					if b.Type == "tool_result" {
						results.add(string(b.Content))
						bash = false
					}
				}
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_" + uniq(), "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 12, "output_tokens": 1},
		}})
		stop := "end_turn"
		if bash {
			stop = "tool_use"
			in, _ := json.Marshal(map[string]string{"command": codexProofCmd, "description": "write the proof"})
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_" + uniq(), "name": "Bash", "input": map[string]any{}}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "input_json_delta", "partial_json": string(in)}})
		} else {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": "proof written"}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
		sse(w, "message_stop", map[string]string{"type": "message_stop"})
		return true
	}
}

// TestAgentSandboxClaude: with sandbox.enabled in the user's Claude Code
// settings, jail -- claude -p still runs the Bash command the model asks
// for (proof.txt in the project, nothing in the host's home), because jail
// passes --settings turning the sandbox off; jail plan says so. The same
// run under a user claude profile without agentSandbox is the control: its
// Bash command dies in Claude Code's bubblewrap.
func TestAgentSandboxClaude(t *testing.T) {
	t.Parallel()
	argv, cache := claudeCode(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		var results reqLog[string]
		mock := newEchoServer(t, claudeSandboxMock(&results))
		trustCA(t, s, secretsPKI.get(t), "claude-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": map[string]string{anthropicHost: mock.Addr()}}})
		s.WriteFile(filepath.Join(s.Home, ".claude/settings.json"), `{"sandbox": {"enabled": true}}`+"\n", 0o644)
		s.Env = append(s.Env, "ANTHROPIC_API_KEY=sk-ant-api03-agentsandbox0123456789abcdef", "CLAUDE_CODE_MAX_RETRIES=1")
		args := append(append([]string{"--allow-read", cache, "--"}, argv...), "-p", "write the proof", "--allowedTools", "Bash")

		plan := s.Jail(append([]string{"plan"}, args...)...)
		if !strings.Contains(plan.Stdout, "agent sandbox: claude relies on the jail (--settings sandbox.enabled=false)\n") {
			t.Fatalf("jail plan -- claude: no agent sandbox line:\n%s", plan)
		}
		r := runAgent(t, s, args...)
		proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
		hostAbsent(t, filepath.Join(s.Home, "escaped.txt"))
		if r.Code != 0 || err != nil || string(proof) != "ok\n" {
			t.Fatalf("jail -- claude -p: want exit 0 and proof.txt holding \"ok\" (read %q, %v):\n%s\ntool results: %q\nthe mock saw:\n%s", proof, err, r, results.Requests(), mock.dump())
		}

		os.Remove(filepath.Join(s.Project, "proof.txt"))
		s.WriteFile(filepath.Join(s.Home, ".config/jail/profiles/claude.json"), `{"filesystem": {"allowWrite": ["~/.claude", "~/.claude.json"]},
 "network": {"allow": ["api.anthropic.com"]}, "secrets": {"env": {"ANTHROPIC_API_KEY": ["api.anthropic.com"]}}}`, 0o644)
		before := len(results.Requests())
		r = runAgent(t, s, args...)
		hostAbsent(t, filepath.Join(s.Project, "proof.txt"))
		got := strings.Join(results.Requests()[before:], "\n")
		if !strings.Contains(got, "namespace") {
			t.Errorf("control: without agentSandbox Claude Code's sandbox should fail on namespaces; tool results:\n%s\nrun:\n%s", got, r)
		}
		t.Logf("without agentSandbox: claude -p exits %d; tool result %q", r.Code, got)
	})
}

// TestAgentSandboxCodexConfigs: the override beats a sandbox_mode in the
// user's ~/.codex/config.toml and in the --profile file the command names,
// as well as a project .codex/config.toml: Codex still runs the command
// without its own sandbox, and proof.txt appears.
func TestAgentSandboxCodexConfigs(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		mock, codex, cache := codexSetup(t, s)
		s.WriteFile(filepath.Join(s.Home, ".codex/config.toml"), "sandbox_mode = \"workspace-write\"\n", 0o644)
		s.WriteFile(filepath.Join(s.Home, ".codex/tight.config.toml"), "sandbox_mode = \"read-only\"\n", 0o644)
		s.WriteFile(filepath.Join(s.Project, ".codex/config.toml"), "sandbox_mode = \"read-only\"\n", 0o644)
		r := runAgent(t, s, "--allow-read", cache, "--", codex, "--profile", "tight", "exec", "--skip-git-repo-check", "write the proof")
		proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
		if r.Code != 0 || err != nil || string(proof) != "ok\n" || !strings.Contains(r.Stderr, "sandbox: danger-full-access") {
			t.Errorf("codex --profile tight exec with sandbox_mode in its config files: want full access and proof.txt (read %q, %v):\n%s\ntool outputs:\n%s",
				proof, err, r, mock.toolOutputs())
		}
	})
}
