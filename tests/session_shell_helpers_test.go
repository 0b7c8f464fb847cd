package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What the API-key agent sessions share: the shell command the model asks
// for, the final text, and the checks on a finished jailed session.

// shellSessionCmd is the command the mock model asks the agent's shell
// tool to run in the project: it writes proof.txt there and tries to read
// the host's SSH key, which the jail keeps out of reach.
const shellSessionCmd = "echo ok > proof.txt; cat ~/.ssh/id_ed25519"

// shellSessionFinal is the mock model's answer once the tool's result is
// back; the agent prints it.
const shellSessionFinal = "Proof written; the key was out of reach."

// randomAPIKey is an API key of the given prefix with 36 random hex
// characters: never "jail" inside, so it cannot pass for a placeholder.
func randomAPIKey(prefix string) string { return prefix + uniq() + uniq() + uniq() }

// shellSessionDone reports what a finished session (inside or outside)
// left undone: the final text unprinted in out, or proof.txt not holding
// "ok" in the host project.
func shellSessionDone(s *Sandbox, out string) error {
	proof, err := os.ReadFile(filepath.Join(s.Project, "proof.txt"))
	if !strings.Contains(out, shellSessionFinal) || err != nil || string(proof) != "ok\n" {
		return fmt.Errorf("want %q printed and proof.txt holding \"ok\" in the host project (read %q, %v)", shellSessionFinal, proof, err)
	}
	return nil
}

// sessionAgentBin is the command of the agent of that name in agents,
// installed in cache.
func sessionAgentBin(cache, name string) string {
	for _, a := range agents {
		if a.Name == name {
			return agentBin(cache, a)
		}
	}
	panic("no agent " + name)
}

// checkShellSession fails the test unless the jailed session r did its
// work: exit 0 with the final text printed, proof.txt holding "ok" in the
// host project, the tool results the mock received (results) showing the
// key's read failed without the key, and no placeholder among the
// requests the mock saw (reqs) while one carried the real key (hasKey).
func checkShellSession(t *testing.T, s *Sandbox, r Result, results string, reqs []seen, hasKey func(seen) bool) {
	t.Helper()
	if err := shellSessionDone(s, r.Stdout); r.Code != 0 || err != nil {
		t.Errorf("want exit 0: %v:\n%s\ntool results:\n%s\nthe mock saw:\n%s", err, r, results, dumpRequests(reqs))
	}
	noSecret(t, r, "the agent's output", SSHKeySecret)
	if strings.Contains(results, SSHKeySecret) {
		t.Errorf("the SSH key reached the model in a tool result:\n%s", results)
	}
	if !strings.Contains(results, "id_ed25519") || !(strings.Contains(results, "No such file") || strings.Contains(results, "Permission denied")) {
		t.Errorf("the tool results do not show cat ~/.ssh/id_ed25519 failing:\n%s", results)
	}
	if got := placeholdersSeen(reqs); len(got) > 0 {
		t.Errorf("placeholders reached the provider (not replaced by the real key):\n%s", strings.Join(got, "\n"))
	}
	keyed := false
	for _, q := range reqs {
		keyed = keyed || hasKey(q)
	}
	if !keyed {
		t.Errorf("no request carried the real key:\n%s", dumpRequests(reqs))
	}
}

// placeholdersSeen lists the requests in which a placeholder appears: the
// generic jail-secret- prefix anywhere, or "jail" in a credential (the
// Authorization and x-goog-api-key fields, the key query parameter), where
// jail puts it in a placeholder shaped like the real value.
func placeholdersSeen(reqs []seen) []string {
	var out []string
	for _, q := range reqs {
		var creds []string
		creds = append(creds, q.Header.Values("Authorization")...)
		creds = append(creds, q.Header.Values("X-Goog-Api-Key")...)
		for _, kv := range strings.Split(q.Query, "&") {
			if k, v, _ := strings.Cut(kv, "="); k == "key" {
				creds = append(creds, v)
			}
		}
		for _, c := range creds {
			if strings.Contains(strings.ToLower(c), "jail") {
				out = append(out, fmt.Sprintf("%s %s: credential %q", q.Method, q.Path, c))
			}
		}
		if q.has(placeholderPrefix) {
			out = append(out, q.String())
		}
	}
	return out
}

// newEchoServerPKI is an echoServer with pki's leaf (newEchoServer has the
// secrets tests' one): a provider's mock under the provider's host name.
func newEchoServerPKI(t *testing.T, pki *lazyPKI, handle func(w http.ResponseWriter, r *http.Request, body []byte) bool) *echoServer {
	t.Helper()
	e := &echoServer{handle: handle}
	e.srv = newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		e.add(seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		e.handle(w, r, body)
	}))
	startTestServer(t, e.srv, &pki.get(t).Leaf)
	return e
}

// refusedStatus is the status a mock's handler answers a POST to path
// that carries a placeholder-shaped credential in header field h (value v):
// a mock that answers only the real key must refuse it, so that an
// uninjected placeholder would fail the session.
func refusedStatus(handle func(w http.ResponseWriter, r *http.Request, body []byte) bool, path, h, v string) int {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "https://mock.example.test"+path, nil)
	r.Header.Set(h, v)
	handle(w, r, []byte(`{}`))
	return w.Code
}
