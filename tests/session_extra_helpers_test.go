package tests

import (
	"crypto/tls"
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

// sessionProofCmd is the shell command every session's model asks for:
// it writes proof.txt in the project and tries to read the host's SSH key.
const sessionProofCmd = "echo ok > proof.txt; cat ~/.ssh/id_ed25519"

// sessionFinal is the model's final text, after the tool result came back.
const sessionFinal = "proof written and the key stayed unreadable"

// sessionPlaceholderRE finds any credential placeholder jail makes: the
// generic jail-secret-NAME-… or a shaped one, with "jail" right after the
// format's prefix (sk-ant-api03-jail…, sk-proj-jail…, ghp_jail…,
// github_pat_jail…).
var sessionPlaceholderRE = regexp.MustCompile(`jail-secret-|(?:sk-ant-(?:[a-z]{3,5}[0-9]{2}-)?|sk-proj-|sk-|gh[pousr]_|github_pat_)(?:jail|JAIL)`)

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

// checkSession checks a finished jailed session: exit 0, the final text
// printed, proof.txt in the host project, the tool results the mock got
// back show the key read failing without the key, and no request any
// mock saw carries a placeholder or the key.
func checkSession(t *testing.T, s *Sandbox, name string, r Result, results []string, mocks ...*echoServer) {
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
// headers, body) carrying a credential other than the real one and fails
// the test unless it gets a 401: the mock must not answer a placeholder.
func mockRefuses(t *testing.T, mock *echoServer, method, path string, header map[string]string, body string) {
	t.Helper()
	req, _ := http.NewRequest(method, "https://"+mock.Addr()+path, strings.NewReader(body))
	for k, v := range header {
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
