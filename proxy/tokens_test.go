package proxy

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

const (
	phRefresh   = "rt-jail-placeholder-000001"
	realRefresh = "rt-real-refresh-token-first"
	newAccess   = "at-real-new-access-token-1"
	newRefresh  = "rt-real-new-refresh-token-1"
)

// tokenFixture is a proxy with a refresh token bound to auth.test's body
// and auth.test/oauth/token as a token endpoint whose access_token is
// bound to api.test; both upstreams answer as the provider does.
type tokenFixture struct {
	f      *secretFixture
	mu     sync.Mutex
	saved  []map[string]any
	logins []map[string]any
	n      int
	// answer, when set, is the token endpoint's answer instead of new
	// access and refresh tokens.
	answer map[string]any
}

func newTokenFixture(t *testing.T, gz bool, refreshPaths ...string) *tokenFixture {
	t.Helper()
	tf := &tokenFixture{}
	h := func(w http.ResponseWriter, r *http.Request) {
		tf.f.other.mu.Lock() // the upstream read the body
		body := tf.f.other.body
		tf.f.other.mu.Unlock()
		if r.URL.Path != "/oauth/token" {
			fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
			return
		}
		if !strings.Contains(body, realRefresh) && !strings.Contains(body, "other-account-refresh") {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		answer := map[string]any{"access_token": newAccess, "refresh_token": newRefresh, "expires_in": 3600, "scope": "a b"}
		if tf.answer != nil {
			answer = tf.answer
		}
		out, _ := json.Marshal(answer)
		if gz {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(out)
			zw.Close()
			w.Header().Set("Content-Encoding", "gzip")
			out = b.Bytes()
		}
		w.Write(out)
	}
	upCA := memCA(t)
	f := &secretFixture{api: newUpstream(t, upCA, h), other: newUpstream(t, upCA, h), evil: newUpstream(t, upCA, h)}
	f.e = newEnv(t, Config{
		Rules: Rules{
			Allow: []string{"api.test", "auth.test", "evil.test"},
			Hosts: map[string]string{"api.test": f.api.addr(), "auth.test": f.other.addr(), "evil.test": f.evil.addr()},
		},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
		Secrets:  []Secret{{Name: "REFRESH", Placeholder: phRefresh, Value: realRefresh, Hosts: []string{"auth.test"}, Inject: []string{"body"}, Paths: refreshPaths}},
		TokenEndpoints: []TokenEndpoint{{
			Host: "auth.test", Path: "/oauth/token", Carrying: "REFRESH",
			Tokens: map[string]TokenSecret{
				"access_token":  {Name: "ACCESS", Hosts: []string{"api.test"}, Inject: []string{"header:Authorization"}},
				"refresh_token": {Name: "REFRESH", Hosts: []string{"auth.test"}, Inject: []string{"body"}},
				"id_token":      {Name: "ID", Hosts: []string{"auth.test"}, Inject: []string{"body"}},
			},
			Mint: func(field, value string) string {
				tf.mu.Lock()
				defer tf.mu.Unlock()
				tf.n++
				return fmt.Sprintf("%s-jail-minted-%06d", strings.SplitN(field, "_", 2)[0], tf.n)
			},
			Save: func(answer map[string]any) error {
				tf.mu.Lock()
				defer tf.mu.Unlock()
				tf.saved = append(tf.saved, answer)
				return nil
			},
			Login: func(answer map[string]any) error {
				tf.mu.Lock()
				defer tf.mu.Unlock()
				tf.logins = append(tf.logins, answer)
				return nil
			},
		}},
	})
	f.c = f.e.client()
	tf.f = f
	return tf
}

func (tf *tokenFixture) refresh(t *testing.T, refresh string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", "https://auth.test/oauth/token", strings.NewReader(`{"grant_type":"refresh_token","refresh_token":"`+refresh+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, body := do(t, tf.f.c, req)
	var m map[string]any
	json.Unmarshal([]byte(body), &m)
	return resp.StatusCode, m
}

// A token endpoint's answer reaches the client with new placeholders
// only; the real tokens go to Save; the new access placeholder is
// injected toward its host and refused toward another; the new refresh
// placeholder refreshes again.
func TestTokenEndpointMintsPlaceholders(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			tf := newTokenFixture(t, gz)
			status, m := tf.refresh(t, phRefresh)
			at, _ := m["access_token"].(string)
			rt, _ := m["refresh_token"].(string)
			if status != 200 || !strings.Contains(at, "jail") || !strings.Contains(rt, "jail") || m["expires_in"] == nil {
				t.Fatalf("the token answer: %d %v, want new placeholders and the other fields", status, m)
			}
			if len(tf.saved) != 1 || tf.saved[0]["access_token"] != newAccess || tf.saved[0]["refresh_token"] != newRefresh {
				t.Errorf("Save got %v, want the real new tokens", tf.saved)
			}
			req, _ := http.NewRequest("GET", "https://api.test/v1", nil)
			req.Header.Set("Authorization", "Bearer "+at)
			// The answer echoes the value, which comes back redacted.
			if _, body := do(t, tf.f.c, req); !strings.Contains(tf.f.api.seen(), "Bearer "+newAccess) || body != "auth=Bearer "+at {
				t.Errorf("the new access placeholder toward its host: upstream saw %q, the client %q; want the real new token sent, its placeholder back", tf.f.api.seen(), body)
			}
			req, _ = http.NewRequest("GET", "https://evil.test/v1", nil)
			req.Header.Set("Authorization", "Bearer "+at)
			if resp, body := do(t, tf.f.c, req); resp.StatusCode != http.StatusForbidden || strings.Contains(tf.f.evil.seen(), "minted") {
				t.Errorf("the new access placeholder toward another host: %d %q, want 403 and nothing sent", resp.StatusCode, body)
			}
			// The provider rotated the refresh token: the first is refused,
			// the new placeholder carries the new real one.
			if status, _ := tf.refresh(t, rt); status != http.StatusBadRequest || !strings.Contains(tf.f.other.seen(), newRefresh) {
				t.Errorf("refreshing with the new placeholder: %d, upstream saw %q, want the real new refresh token sent", status, tf.f.other.seen())
			}
			if log := tf.f.e.logText(t); strings.Contains(log, newAccess) || strings.Contains(log, newRefresh) || strings.Contains(log, realRefresh) {
				t.Errorf("the log holds a real token:\n%s", log)
			}
		})
	}
}

// An upstream that is not the token endpoint cannot make the proxy mint
// anything: the same answer from another host or path reaches the
// client as it is, redacted only of known values.
func TestTokenEndpointOnlyItsHostAndPath(t *testing.T) {
	tf := newTokenFixture(t, false)
	req, _ := http.NewRequest("POST", "https://evil.test/oauth/token", strings.NewReader(`{"refresh_token":"`+realRefresh+`"}`))
	resp, body := do(t, tf.f.c, req)
	if resp.StatusCode != http.StatusForbidden || len(tf.saved) != 0 {
		t.Errorf("the refresh placeholder's value toward another host: %d %q, saved %v; want 403 and nothing saved", resp.StatusCode, body, tf.saved)
	}
}

// A request with a token of the client's own (another account's refresh
// token sent real, or a sign-in's authorization code) does not go to
// Save, so that the jail cannot sign the host in as someone else by
// itself: it goes to Login, and its tokens still reach the client as
// placeholders only, so that no real token enters by a sign-in made
// inside either.
func TestTokenEndpointOwnTokenNotSaved(t *testing.T) {
	tf := newTokenFixture(t, false)
	req, _ := http.NewRequest("POST", "https://auth.test/oauth/token", strings.NewReader(`{"grant_type":"refresh_token","refresh_token":"other-account-refresh-token"}`))
	resp, body := do(t, tf.f.c, req)
	if resp.StatusCode != 200 || strings.Contains(body, newAccess) || strings.Contains(body, newRefresh) || !strings.Contains(body, "jail-minted") {
		t.Errorf("a refresh with the client's own token: %d %q; want the answer's tokens as placeholders", resp.StatusCode, body)
	}
	if len(tf.saved) != 0 || len(tf.logins) != 1 || tf.logins[0]["access_token"] != newAccess {
		t.Errorf("saved %v, logins %v: want nothing saved and the real answer handed to Login", tf.saved, tf.logins)
	}
}

// A form-encoded refresh (google-auth-library's: refresh_token,
// client_id, client_secret, grant_type) gets the real refresh token in
// its form; an answer without a new refresh token (Google's) mints new
// placeholders for what it has, the access and id tokens, and Save gets
// those real and nothing for the refresh token, which stays the file's.
func TestTokenEndpointFormRefresh(t *testing.T) {
	tf := newTokenFixture(t, false)
	newID := "eyJhbGciOiJSUzI1NiJ9.eyJlbWFpbCI6ImFAZXhhbXBsZS50ZXN0In0.real-id-signature"
	tf.answer = map[string]any{"access_token": newAccess, "id_token": newID, "expires_in": 3599, "scope": "openid", "token_type": "Bearer"}
	form := url.Values{"refresh_token": {phRefresh}, "client_id": {"cid.apps.example.test"}, "client_secret": {"public-secret"}, "grant_type": {"refresh_token"}}
	req, _ := http.NewRequest("POST", "https://auth.test/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, body := do(t, tf.f.c, req)
	seen := tf.f.other.seen()
	sent, _ := url.ParseQuery(seen[strings.LastIndex(seen, "\n")+1:])
	if sent.Get("refresh_token") != realRefresh || sent.Get("client_id") != "cid.apps.example.test" {
		t.Errorf("the token endpoint got the form %q, want the real refresh token and the rest as sent", tf.f.other.seen())
	}
	var m map[string]any
	json.Unmarshal([]byte(body), &m)
	at, _ := m["access_token"].(string)
	id, _ := m["id_token"].(string)
	if resp.StatusCode != 200 || !strings.Contains(at, "jail") || !strings.Contains(id, "jail") || m["refresh_token"] != nil || m["token_type"] != "Bearer" {
		t.Fatalf("the answer: %d %s, want new access and id placeholders, no refresh token, the other fields", resp.StatusCode, body)
	}
	if strings.Contains(body, newAccess) || strings.Contains(body, newID) {
		t.Errorf("a real new token reached the client: %s", body)
	}
	if len(tf.saved) != 1 || tf.saved[0]["access_token"] != newAccess || tf.saved[0]["id_token"] != newID || tf.saved[0]["refresh_token"] != nil {
		t.Errorf("Save got %v, want the real access and id tokens only", tf.saved)
	}
	req, _ = http.NewRequest("GET", "https://api.test/v1", nil)
	req.Header.Set("Authorization", "Bearer "+at)
	if do(t, tf.f.c, req); !strings.Contains(tf.f.api.seen(), "Bearer "+newAccess) {
		t.Errorf("the new access placeholder toward its host: upstream saw %q", tf.f.api.seen())
	}
}

// A secret with Paths is injected only at those paths of its host:
// elsewhere there its placeholder goes as it is (kept), so that a sign-in's
// refresh token reaches its token endpoint and no other page of the host.
func TestSecretOnlyAtItsPaths(t *testing.T) {
	tf := newTokenFixture(t, false, "/oauth/token")
	for _, tt := range []struct {
		path string
		real bool
	}{{"/oauth/token", true}, {"/oauth/token/", false}, {"/echo", false}} {
		req, _ := http.NewRequest("POST", "https://auth.test"+tt.path, strings.NewReader(`{"refresh_token":"`+phRefresh+`"}`))
		do(t, tf.f.c, req)
		seen := tf.f.other.seen()
		if got := strings.Contains(seen, realRefresh); got != tt.real || !tt.real && !strings.Contains(seen, phRefresh) {
			t.Errorf("POST %s: upstream saw %q; want the real value: %v", tt.path, seen, tt.real)
		}
	}
}
