package tests

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestH2CurlInjection: curl --http2 through the jail negotiates HTTP/2
// with the intercepting proxy, its placeholder reaches an HTTP/2 upstream
// as the real value, and the value echoed back reaches curl as the
// placeholder. A second request names another host in :authority (curl
// sends its Host header as :authority) than the tunnel's SNI: it must be
// refused with 403 and reach no server.
func TestH2CurlInjection(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		var mu sync.Mutex
		var protos, keys []string
		g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY"}, nil, func(g *secretsRig) map[string]any {
			srv := newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				protos, keys = append(protos, r.Proto), append(keys, r.Header.Get("X-Api-Key"))
				mu.Unlock()
				w.Write([]byte("echo " + r.Header.Get("X-Api-Key") + "\n"))
			}))
			srv.EnableHTTP2 = true
			startTestServer(t, srv, &secretsPKI.get(t).Leaf)
			return map[string]any{"network": map[string]any{
				"allow": []string{anthropicHost},
				"hosts": map[string]string{anthropicHost: srv.Listener.Addr().String()},
			}}
		})
		real := g.Real["ANTHROPIC_API_KEY"]
		r := s.Sh(`
			curl -sS --http2 --max-time 15 -w '\nversion=%{http_version} code=%{http_code}\n' \
				-H "x-api-key: $ANTHROPIC_API_KEY" https://` + anthropicHost + `/v1/messages
			echo ph=$ANTHROPIC_API_KEY
			curl -sS --http2 --max-time 15 -o /dev/null -w 'spoof version=%{http_version} code=%{http_code}\n' \
				-H 'Host: evil.example.test' -H "x-api-key: $ANTHROPIC_API_KEY" https://` + anthropicHost + `/v1/spoof`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, "version=2 code=200") {
			t.Fatalf("curl --http2 did not get a 200 over HTTP/2 through the jail:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "spoof version=2 code=403") {
			t.Errorf("an :authority other than the tunnel's was not refused with 403 over HTTP/2:\n%s", r)
		}
		ph := ""
		for _, l := range lines(r.Stdout) {
			if strings.HasPrefix(l, "ph=") {
				ph = strings.TrimPrefix(l, "ph=")
			}
		}
		if ph == "" || ph == real || !strings.Contains(r.Stdout, "echo "+ph) {
			t.Errorf("the echoed value did not come back as the placeholder %q:\n%s", ph, r)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(keys) != 1 || keys[0] != real {
			t.Errorf("the upstream saw x-api-key %q, want the real value once", keys)
		}
		if len(protos) != 1 || protos[0] != "HTTP/2.0" {
			t.Errorf("the proxy spoke %q to an HTTP/2 upstream", protos)
		}
		hostLogHasNoReal(t, s, g)
	})
}
