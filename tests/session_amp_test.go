package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Amp (@sourcegraph/amp, a Bun binary whose JavaScript is in its .bun
// section as UTF-16 text) in the jail, against a local TLS mock of
// ampcode.com, as far as a mock can take it. What amp -x sends was read
// from that JavaScript and seen arriving: POST /api/internal?METHOD with
// {"method", "params"} and "Bearer <AMP_API_KEY>", answered
// {"ok": true, "result": …} (getUserInfo, loadPlugins, loadSkills); then
// POST /api/thread-actors, whose answer (threadId, wsToken, poolName,
// usesDtw) hands the thread to a server-side actor: the model runs on
// ampcode.com, and the CLI reaches the thread's actor with the RivetKit
// client (its WebSocket, JSON-RPC inside, on the Rivet endpoint that
// RIVET_PUBLIC_ENDPOINT or the Amp URL names) as an "executor": it
// registers its tools (executor_tools_register), takes tool leases,
// sends back executor_tool_result messages and follows the thread's state
// to print the last message. No provider API is called from the CLI, so a
// session with a tool call needs a mock of RivetKit's actor protocol and
// of the thread actor on top, which the package shows only in minified
// form: not done here. This test covers what can be checked without it:
// the key inside is a placeholder, the mock receives the real key on
// every call and answers only it, and the CLI gets as far as creating the
// thread, whose refusal it reports.

const ampHost = "ampcode.com"

// ampPKI is a CA and a leaf for ampcode.com.
var ampPKI = &lazyPKI{what: "Amp mock PKI", caName: "jail amp session tests CA", names: []string{ampHost}}

// ampKey is the real Amp access token the test hands to jail.
const ampKey = "sgamp_user_01JAILTESTAMPSESSION_0123456789abcdef0123456789abcdef"

// ampRefusal is what the mock's thread creation answers (402, the
// status whose error text amp prints as it is).
const ampRefusal = "the mock does not run thread actors"

// ampMock answers the internal API only for the real key (any other gets
// 401 {"error": "Unauthorized"}), and refuses to create the thread.
func ampMock(key string) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"Unauthorized","code":"auth-required"}`))
			return
		}
		switch {
		case r.URL.Path == "/api/internal" && r.URL.RawQuery == "getUserInfo":
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{
				"id": "user_jail", "email": "octo@example.test", "emailVerified": true, "username": "octo", "features": []any{}, "team": nil}})
		case r.URL.Path == "/api/internal" && (r.URL.RawQuery == "loadPlugins" || r.URL.RawQuery == "loadSkills"):
			w.Write([]byte(`{"ok":true,"result":[]}`))
		case r.URL.Path == "/api/thread-actors":
			w.WriteHeader(http.StatusPaymentRequired)
			json.NewEncoder(w).Encode(map[string]string{"error": ampRefusal})
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"not found"}`))
		}
	}
}

// TestSessionAmp: jail -- amp -x with AMP_API_KEY reaches the mock with
// the real key only (a placeholder inside the jail), gets through sign-in
// and settings, and stops at the thread creation the mock refuses.
func TestSessionAmp(t *testing.T) {
	t.Parallel()
	cache := installedAgents(t)
	bin := agentBin(cache, agentNamed(t, "amp"))
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		mock := newSessionMock(t, ampPKI, ampMock(ampKey))
		trustCA(t, s, ampPKI.get(t), "amp-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": map[string]string{ampHost: mock.Addr()}}})
		s.Env = append(s.Env, "AMP_API_KEY="+ampKey)

		inside := runAgent(t, s, "--profile", "amp", "--", "sh", "-c", `printf '%s\n' "$AMP_API_KEY"`)
		if got := strings.TrimSpace(inside.Stdout); inside.Code != 0 || got == ampKey || !placeholderRE("AMP_API_KEY").MatchString(got) {
			t.Fatalf("AMP_API_KEY inside the amp profile is %q, want its placeholder:\n%s", got, inside)
		}

		r := runAgent(t, s, "--allow-read", cache, "--", bin, "-x", "write the proof", "--no-ide", "--no-notifications")
		if r.Code == 0 || !strings.Contains(r.Stderr, ampRefusal) {
			t.Errorf("jail -- amp -x: want it through sign-in and stopped at the refused thread (%q):\n%s\nthe mock saw:\n%s", ampRefusal, r, mock.dump())
		}
		var methods []string
		for _, req := range mock.Requests() {
			methods = append(methods, req.Path+"?"+req.Query)
			if req.Header.Get("Authorization") != "Bearer "+ampKey {
				t.Errorf("amp: a request reached ampcode.com without the real key: %s", req)
			}
			if loc := sessionPlaceholderRE.FindString(req.String()); loc != "" {
				t.Errorf("amp: a placeholder (%q) reached ampcode.com: %s", loc, req)
			}
		}
		if !contains(methods, "/api/internal?getUserInfo") || !contains(methods, "/api/thread-actors?") {
			t.Errorf("amp: the mock saw %v, want the sign-in check (getUserInfo) and the thread creation", methods)
		}
		noSecret(t, r, "amp", SSHKeySecret, AWSSecret)
		mockRefuses(t, mock, http.MethodPost, "/api/internal?getUserInfo", map[string]string{"Authorization": "Bearer jail-secret-AMP_API_KEY-NotTheRealOne0123"}, `{"method":"getUserInfo","params":{}}`)
	})
}

// TestAmpProfilePlants: a shell under the amp profile cannot leave behind
// what Amp, run later outside the jail, would act on (read from its
// JavaScript): ~/.config/amp/settings.json, and settings.jsonc, which Amp
// reads when settings.json is missing; the plugins directory, whose
// plugins Amp runs; the skills it gives the model.
func TestAmpProfilePlants(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		plantsRefused(t, s, "amp", nil, []string{
			".config/amp/settings.json", ".config/amp/settings.jsonc", ".config/amp/plugins/evil/plugin.ts",
			".config/amp/skills/evil/SKILL.md",
		}, ".local/share/amp/jail-test-control")
	})
}
