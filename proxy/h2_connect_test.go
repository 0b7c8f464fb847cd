package proxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A CONNECT stream inside an intercepted HTTP/2 connection is refused, as
// CONNECT inside an HTTP/1.1 tunnel is: sent on, it would ask the allowed
// host's server to open a raw stream, one the proxy cannot read, wherever
// that server relays it.
func TestH2ConnectStreamRefused(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	var connects atomic.Int64
	up := newUpstream(t, upCA, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			connects.Add(1)
		}
		io.WriteString(w, "ok")
	})
	e := newEnv(t, Config{
		Rules:    Rules{Allow: []string{"api.test"}, Hosts: map[string]string{"api.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	c := h2Client(t, e, "api.test")
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequest(http.MethodConnect, "https://api.test:443", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "api.test:443"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("CONNECT stream: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(body), "jail:") {
		t.Errorf("CONNECT stream: %d %q, want the proxy's 400", resp.StatusCode, body)
	}
	if n := connects.Load(); n != 0 {
		t.Errorf("the upstream received %d CONNECT requests", n)
	}
	// Control: a GET on another stream of the same client is served.
	resp, err = c.Get("https://api.test/after")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("control GET: %v %v", resp, err)
	}
	resp.Body.Close()
}
