package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// `jail -- codex login` (the real CLI) publishes Codex's login callback
// port: the host's browser, sent to http://localhost:1455/auth/callback by
// the provider, reaches the login server Codex runs inside the jail. The
// runners take turns: the port is the host's one.
func TestSignInCallbackCodexLogin(t *testing.T) {
	cache := installedAgents(t)
	var codex string
	for _, a := range agents {
		if a.Name == "codex" {
			codex = agentBin(cache, a)
		}
	}
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		plan := s.Jail("plan", "--allow-read", cache, "--", codex, "login")
		if !strings.Contains(plan.Stdout, "sign-in callback: codex login listens on localhost:1455, published for the host's browser") {
			t.Fatalf("jail plan -- codex login: no sign-in callback line:\n%s", plan)
		}
		if p := s.Jail("plan", "--allow-read", cache, "--", codex, "login", "--device-auth"); strings.Contains(p.Stdout, "sign-in callback") {
			t.Errorf("jail plan -- codex login --device-auth publishes the callback:\n%s", p)
		}
		if resp, err := http.Get("http://127.0.0.1:1455/"); err == nil {
			resp.Body.Close()
			t.Fatalf("control: something on the host already listens on localhost:1455 (%s)", resp.Status)
		}
		cmd := s.JailCmd("--allow-read", cache, "--", codex, "login")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		client := &http.Client{Timeout: 2 * time.Second}
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := client.Get("http://127.0.0.1:1455/auth/callback?code=not-a-real-code&state=not-the-state")
			if err == nil && resp.StatusCode != http.StatusBadGateway {
				resp.Body.Close()
				t.Logf("Codex's login server inside answered the host's browser: %s", resp.Status)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the host never reached Codex's login server on localhost:1455 (%v):\n%s", err, out.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}
