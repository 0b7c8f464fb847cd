package tests

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Helpers of the Codex and Gemini CLI sign-in tests: a recording TLS mock
// for any test PKI, fake provider tokens, and the session's shell call.

// signInShellCmd is the shell tool call a signed-in session's model asks
// for: a file in the project, and the SSH key, which must stay unread.
const signInShellCmd = "echo ok > proof.txt; cat ~/.ssh/id_ed25519"

// signInFinal is the model's last answer, once the tool result is back.
const signInFinal = "signed-in session done"

// newSignInMock is a recording TLS server with a leaf of pki.
func newSignInMock(t *testing.T, pki *lazyPKI, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *signInServer {
	t.Helper()
	s := &signInServer{}
	srv := newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		s.mu.Lock()
		s.seen = append(s.seen, seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		s.mu.Unlock()
		handle(w, r, body)
	}))
	startTestServer(t, srv, &pki.get(t).Leaf)
	s.addr = srv.Listener.Addr().String()
	return s
}

// fakeJWT is a JWT with these claims and a random signature, shaped as a
// provider's (RS256, a key id): nothing checks its signature but the
// provider, here the mock, which compares the whole token.
func fakeJWT(claims map[string]any) string {
	enc := base64.RawURLEncoding.EncodeToString
	c, _ := json.Marshal(claims)
	return enc([]byte(`{"alg":"RS256","kid":"mock-key","typ":"JWT"}`)) + "." + enc(c) + "." + enc([]byte(strings.Repeat(uniq(), 22)))
}

// jwtSignature is a JWT's last part.
func jwtSignature(tok string) string { return tok[strings.LastIndex(tok, ".")+1:] }

// realTokens are a sign-in's real tokens, by what they are.
type realTokens map[string]string

// noReal fails when a real token, or a JWT's signature, appears in text.
func (k realTokens) noReal(t *testing.T, what, text string) {
	t.Helper()
	for name, v := range k {
		if strings.Contains(text, v) || strings.Count(v, ".") == 2 && strings.Contains(text, jwtSignature(v)) {
			t.Errorf("the real %s appears in %s:\n%s", name, what, text)
		}
	}
}

// anyPlaceholderRE finds a placeholder jail made: "jail" inside a
// credential, at a place a jail placeholder has it.
var anyPlaceholderRE = regexp.MustCompile(`jail-secret-|[._-]jail[A-Za-z0-9_-]`)

// hostJSON reads a JSON file of the host.
func hostJSON(t *testing.T, path string) (map[string]any, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", path, err, b)
	}
	return m, string(b)
}

// jsonAt is the string at a path of keys in a decoded JSON object.
func jsonAt(m map[string]any, path ...string) string {
	var cur any = m
	for _, k := range path {
		o, _ := cur.(map[string]any)
		cur = o[k]
	}
	s, _ := cur.(string)
	return s
}

// afterMark is the rest of the line after the last mark in out.
func afterMark(out, mark string) string {
	i := strings.LastIndex(out, mark)
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(out[i+len(mark):], "\n")
	return strings.TrimSpace(line)
}

// checkFileMode fails unless path is a 0600 file.
func checkFileMode(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s after the refresh: %v, mode %v, want 0600", path, err, fi.Mode())
	}
}

// brief is what a mock received, one request a line, its credential
// named instead of shown (a JWT is long): by its name in known,
// "placeholder", or its first bytes.
func brief(s *signInServer, known map[string]string) string {
	var b strings.Builder
	for _, q := range s.requests() {
		auth := q.Header.Get("Authorization")
		for name, v := range known {
			if auth == "Bearer "+v {
				auth = name
			}
		}
		if anyPlaceholderRE.MatchString(auth) {
			auth = "placeholder"
		}
		if len(auth) > 24 {
			auth = auth[:24] + "..."
		}
		fmt.Fprintf(&b, "  %s %s%s auth=%s body=%.120q\n", q.Method, q.Host, q.Path, auth, q.Body)
	}
	return b.String()
}

// A missing Codex or Gemini CLI sign-in file stays missing: nothing
// inside can plant one that a later run outside the jail would sign in
// with (as another account, or with a token the jail chose).
func TestSignInMoreMissingNotPlanted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ profile, dir, file string }{
		{"codex", ".codex", "auth.json"},
		{"gemini", ".gemini", "oauth_creds.json"},
	} {
		t.Run(c.profile, func(t *testing.T) {
			t.Parallel()
			forEachRunner(t, func(t *testing.T, s *Sandbox) {
				t.Parallel()
				s.WriteFile(s.Home+"/"+c.dir+"/keep", "", 0o600)
				path := "~/" + c.dir + "/" + c.file
				s.Jail("--profile", c.profile, "--", "sh", "-c", `echo '{"planted":"by-the-sandbox"}' > `+path)
				hostAbsent(t, s.Home+"/"+c.dir+"/"+c.file)
				s.Jail("--profile", c.profile, "--", "sh", "-c", `mv ~/`+c.dir+`/keep `+path)
				hostAbsent(t, s.Home+"/"+c.dir+"/"+c.file)
				if _, err := os.Stat(s.Home + "/" + c.dir + "/keep"); err != nil {
					t.Errorf("a host file renamed onto the sign-in file's name inside is gone from the host: %v", err)
				}
			})
		})
	}
}
