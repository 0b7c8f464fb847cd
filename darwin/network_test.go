package darwin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
)

// upstream is a loopback server recording the Authorization headers it
// receives.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
		fmt.Fprint(w, "hello from upstream")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) sawAuth(v string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.auth {
		if a == v {
			return true
		}
	}
	return false
}

// realNetworkPlan plans a jail on this machine's real directories whose
// proxy lets registry.example.test through to up, with API_TOKEN bound
// to it and a .env secret in the project.
func realNetworkPlan(t *testing.T, up *upstream) (*Plan, func() string) {
	t.Helper()
	dir := t.TempDir()
	home, project := filepath.Join(dir, "home"), filepath.Join(dir, "home", "src", "app")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".env"), []byte("DOTENV_TOKEN=dotenv-secret-value-0123456789\nPORT=3000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "jail.json")
	host := strings.TrimPrefix(up.URL, "http://")
	os.WriteFile(cfg, []byte(`{"network": {"allow": ["registry.example.test"], "hosts": {"registry.example.test": "`+host+`"}},
		"secrets": {"env": {"API_TOKEN": ["registry.example.test"], "DOTENV_TOKEN": ["registry.example.test"]}}}`), 0o644)
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", project, home, cfg)
	env := func(k string) string {
		return map[string]string{"XDG_STATE_HOME": filepath.Join(dir, "state"), "XDG_CONFIG_HOME": filepath.Join(dir, "config")}[k]
	}
	f, err := Gather(pol, home, project, env)
	if err != nil {
		t.Fatal(err)
	}
	f.SessionDir = filepath.Join(dir, "session")
	f.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "API_TOKEN=real-api-token-value-0123456789"}
	l, port, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	f.ProxyPort = port
	p, err := Build(pol, f, []string{"sh"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Prepare(p); err != nil {
		t.Fatal(err)
	}
	n, err := StartNetwork(p, l, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return p, n.Close
}

// curlIn runs curl with the plan's environment, as the jailed command
// would.
func curlIn(t *testing.T, p *Plan, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("curl", append([]string{"-sS", "--max-time", "10"}, args...)...)
	cmd.Env = p.Env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestNetworkOnePort: curl, pointed only by the plan's variables, reaches
// an allowed host through the proxy by HTTP and by SOCKS5 on the one
// port the profile opens; another host is refused; secrets of the
// environment and of .env files leave as placeholders and arrive real.
func TestNetworkOnePort(t *testing.T) {
	up := newUpstream(t)
	p, stop := realNetworkPlan(t, up)
	token := envValue(p.Env, "API_TOKEN")
	dotenv := envValue(p.Env, "DOTENV_TOKEN")
	if token == "" || strings.Contains(token, "real-api") || dotenv == "" || strings.Contains(dotenv, "dotenv-secret") {
		t.Fatalf("secrets are not placeholders in the environment: API_TOKEN=%q DOTENV_TOKEN=%q", token, dotenv)
	}
	out, err := curlIn(t, p, "-H", "Authorization: "+token, "http://registry.example.test/a")
	if err != nil || out != "hello from upstream" {
		t.Fatalf("HTTP through the proxy: %v %q", err, out)
	}
	out, err = curlIn(t, p, "-x", envValue(p.Env, "ALL_PROXY"), "-H", "Authorization: "+dotenv, "http://registry.example.test/b")
	if err != nil || out != "hello from upstream" {
		t.Fatalf("SOCKS5 through the same port: %v %q", err, out)
	}
	if !up.sawAuth("real-api-token-value-0123456789") || !up.sawAuth("dotenv-secret-value-0123456789") {
		t.Errorf("the proxy did not swap the placeholders back: %q", up.auth)
	}
	out, _ = curlIn(t, p, "-o", "/dev/null", "-w", "%{http_code}", "http://other.example.test/")
	if out != "403" {
		t.Errorf("a host the policy does not allow: %q, want 403", out)
	}
	if s := stop(); !strings.Contains(s, "other.example.test") {
		t.Errorf("the summary does not name the denied host: %q", s)
	}
	log, err := os.ReadFile(filepath.Join(p.StateDir, "decisions.jsonl"))
	if err != nil || !strings.Contains(string(log), "other.example.test") {
		t.Errorf("the decision log lacks the refusal: %v", err)
	}
	bundle, err := os.ReadFile(p.Bundle)
	ca, _ := os.ReadFile(filepath.Join(p.CADir, "ca.pem"))
	if err != nil || !strings.Contains(string(bundle), strings.TrimSpace(string(ca))) {
		t.Error("the CA bundle does not hold the jail CA")
	}
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestRunCommandExitAndSignals: the command's exit code comes back, a
// signal death is 128+N, and SIGTERM sent to jail reaches the command.
func TestRunCommandExitAndSignals(t *testing.T) {
	if code, err := runCommand(exec.Command("/bin/sh", "-c", "exit 7")); code != 7 || err != nil {
		t.Errorf("exit 7: got %d %v", code, err)
	}
	if code, _ := runCommand(exec.Command("/bin/sh", "-c", "kill -KILL $$")); code != 137 {
		t.Errorf("killed by SIGKILL: got %d, want 137", code)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	go func() {
		for i := 0; i < 200; i++ {
			if _, err := os.Stat(ready); err == nil {
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
	}()
	cmd := exec.Command("/bin/sh", "-c", `trap 'exit 42' TERM; touch "$1"; sleep 20 & wait`, "sh", ready)
	if code, err := runCommand(cmd); code != 42 || err != nil {
		t.Errorf("SIGTERM to jail: the command exited %d (%v), want its trap's 42", code, err)
	}
	if code, err := runCommand(exec.Command("/nonexistent/launcher")); code != 125 || err == nil {
		t.Errorf("a launcher that cannot start: %d %v, want 125 and an error", code, err)
	}
}
