package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestParseDenyCommands(t *testing.T) {
	for _, tt := range []struct {
		rules        []string
		git, npmRule string
	}{
		{nil, "", ""},
		{[]string{"git push", "npm publish"}, "git push", "npm publish"},
		{[]string{"  git \t push  ", "/usr/bin/npm   publish"}, "git push", "npm publish"},
		{[]string{"git"}, "git", ""},
		{[]string{"npm"}, "", "npm"},
		{[]string{"git", "git push"}, "git push", ""}, // the most specific names it
		{[]string{"git push", "git"}, "git push", ""},
		{[]string{"git send-pack"}, "git send-pack", ""},
		{[]string{"pnpm publish"}, "", "pnpm publish"},
		{[]string{"yarn npm publish"}, "", "yarn npm publish"},
		{[]string{"yarn"}, "", "yarn"},
		// Not on the wire: other commands, and rules more specific than
		// what a request shows.
		{[]string{"git commit", "git push --force", "git push origin main", "npm install", "npm publish --tag beta", "rm", "", "   ", "/"}, "", ""},
		{[]string{"gitx push", "npx publish", "git-push"}, "", ""},
	} {
		w := parseDenyCommands(tt.rules)
		if w.gitPush != tt.git || w.npmPublish != tt.npmRule {
			t.Errorf("parseDenyCommands(%q) = %+v, want git %q npm %q", tt.rules, w, tt.git, tt.npmRule)
		}
	}
}

func TestPackagePath(t *testing.T) {
	for p, want := range map[string]bool{
		"/left-pad":                          true,
		"/@scope/pkg":                        true, // /@scope%2fpkg decoded
		"/api/npm/npm-local/left-pad":        true,
		"/Uppercase.Old_pkg":                 true,
		"/uploads/blob.bin":                  true, // looks like one: the body decides
		"/":                                  false,
		"/-/package/left-pad/dist-tags/next": false,
		"/left-pad/-rev/3-abc":               false,
		"/-/v1/search":                       false,
		"/.hidden":                           false,
		"/_design":                           false,
		"/a b":                               false,
		"/left-pad/":                         false,
	} {
		if got := packagePath(p); got != want {
			t.Errorf("packagePath(%q) = %v, want %v", p, got, want)
		}
	}
}

// paths records the requests upstreams received, as "METHOD /path?query
// (body length)".
type paths struct {
	mu  sync.Mutex
	got []string
}

// handler records the requests of *u, which has read the body already.
func (p *paths) handler(u **upstream) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		(*u).mu.Lock()
		n := len((*u).body)
		(*u).mu.Unlock()
		p.mu.Lock()
		p.got = append(p.got, fmt.Sprintf("%s %s (%d)", r.Method, r.URL.RequestURI(), n))
		p.mu.Unlock()
		io.WriteString(w, "ok")
	}
}

func (p *paths) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got
	p.got = nil
	return got
}

// wireFixture is a proxy with a plain upstream (plain.test) and a TLS one
// (tls.test), both allowed, and a recorder of what they receive.
type wireFixture struct {
	e    *env
	c    *http.Client
	seen *paths
}

func newWireFixture(t *testing.T, deny []string, secrets []Secret) *wireFixture {
	t.Helper()
	f := &wireFixture{seen: &paths{}}
	upCA := memCA(t)
	var plain, tlsUp *upstream
	plain = newUpstream(t, nil, f.seen.handler(&plain))
	tlsUp = newUpstream(t, upCA, f.seen.handler(&tlsUp))
	f.e = newEnv(t, Config{
		Rules: Rules{
			Allow: []string{"plain.test", "tls.test"},
			Hosts: map[string]string{"plain.test": plain.addr(), "tls.test": tlsUp.addr()},
		},
		Upstream:     &tls.Config{RootCAs: pool(upCA)},
		DenyCommands: deny,
		Secrets:      secrets,
	})
	f.c = f.e.client()
	return f
}

// send makes one request through the proxy and returns the status and
// body of the answer.
func (f *wireFixture) send(t *testing.T, method, u string, body io.Reader, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, b := do(t, f.c, req)
	return resp.StatusCode, b
}

const (
	gitDenied = "jail: git push is denied by command.deny (\"git push\")\n"
	npmDenied = "jail: npm publish is denied by command.deny (\"npm publish\")\n"
)

func TestGitPushOnTheWire(t *testing.T) {
	t.Parallel()
	f := newWireFixture(t, []string{"npm publish", "git push"}, nil)
	for _, scheme := range []string{"http", "https"} {
		host := map[string]string{"http": "plain.test", "https": "tls.test"}[scheme]
		base := scheme + "://" + host + "/owner/repo.git"

		// The steps of a push: refused, and nothing reaches the server.
		for _, r := range []struct{ method, path, ct string }{
			{"GET", "/info/refs?service=git-receive-pack", ""},
			{"GET", "/info/refs?service=git%2Dreceive%2Dpack", ""},
			{"POST", "/git-receive-pack", "application/x-git-receive-pack-request"},
			{"POST", "/GIT-RECEIVE-PACK", ""},
			{"POST", "/other", "application/x-git-receive-pack-request"},
		} {
			status, body := f.send(t, r.method, base+r.path, strings.NewReader("0000"), "Content-Type", r.ct)
			if status != http.StatusForbidden || body != gitDenied {
				t.Errorf("%s %s%s: %d %q, want 403 %q", r.method, base, r.path, status, body, gitDenied)
			}
		}
		if got := f.seen.take(); len(got) != 0 {
			t.Errorf("%s: the server received %q", scheme, got)
		}
		got := f.e.entry(t, func(x Entry) bool { return x.Path == "/owner/repo.git/git-receive-pack" && x.Scheme == scheme })
		if got.Verdict != "deny" || got.Rule != "command.deny git push" || got.Reason != "git push over smart HTTP" ||
			got.Method != "POST" || got.Host != host || got.Status != 0 {
			t.Errorf("%s: log entry %+v", scheme, got)
		}

		// A fetch goes through.
		for _, r := range []struct{ method, path string }{
			{"GET", "/info/refs?service=git-upload-pack"},
			{"POST", "/git-upload-pack"},
			{"GET", "/info/refs"}, // dumb HTTP
		} {
			status, body := f.send(t, r.method, base+r.path, strings.NewReader("0000"), "Content-Type", "application/x-git-upload-pack-request")
			if status != 200 || body != "ok" {
				t.Errorf("%s %s%s: %d %q, want 200", r.method, base, r.path, status, body)
			}
		}
		if got := f.seen.take(); len(got) != 3 {
			t.Errorf("%s: the server received %q, want the 3 fetch requests", scheme, got)
		}
	}
	if d := f.e.srv.Denied(); len(d) != 10 {
		t.Errorf("Denied() has %d entries, want 10", len(d))
	}
}

func TestGitPushRuleVariants(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		deny   []string
		denied string // the answer to a push, "" when it passes
	}{
		{nil, ""},
		{[]string{"npm publish", "git commit", "git push --force"}, ""},
		{[]string{"git"}, "jail: git push is denied by command.deny (\"git\")\n"},
		{[]string{" /usr/bin/git\tpush "}, gitDenied},
	} {
		f := newWireFixture(t, tt.deny, nil)
		for _, u := range []string{"http://plain.test/r.git/info/refs?service=git-receive-pack", "https://tls.test/r.git/git-receive-pack"} {
			status, body := f.send(t, "POST", u, strings.NewReader("0000"))
			if tt.denied == "" && (status != 200 || body != "ok") || tt.denied != "" && (status != 403 || body != tt.denied) {
				t.Errorf("deny %q: POST %s: %d %q", tt.deny, u, status, body)
			}
		}
	}
}

func TestSSHWhileGitPushDenied(t *testing.T) {
	t.Parallel()
	port, hits := canary(t)
	echo := echoServer(t, "")
	canaryAddr := fmt.Sprintf("127.0.0.1:%d", port)
	hosts := map[string]string{"allowed.test": canaryAddr, "git.test": echo, "ssh.test": echo, "alt.test": echo}
	e := newEnv(t, Config{
		Rules:        Rules{Allow: []string{"allowed.test", "git.test:22", "ssh.test", "ssh.test:5432", "alt.test:443"}, Hosts: hosts},
		DenyCommands: []string{"git push"},
	})

	// Port 22 of a host allowed without its port: refused before any dial.
	resp, body, _, _ := raw(t, e.httpAddr, "CONNECT allowed.test:22 HTTP/1.1\r\nHost: allowed.test:22\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, "ssh to port 22 while git push is denied") || !strings.Contains(body, `"allowed.test:22"`) {
		t.Errorf("CONNECT allowed.test:22: %d %q", resp.StatusCode, body)
	}
	got := e.entry(t, func(x Entry) bool { return x.Host == "allowed.test" && x.Method == "CONNECT" })
	if got.Verdict != "deny" || got.Rule != "command.deny git push" || got.Reason != "ssh to port 22 while git push is denied" || got.Port != 22 {
		t.Errorf("log entry %+v", got)
	}
	code, _ := socks(t, e.socksAddr, socksConnect, socksDomain, "allowed.test", 22)
	if code != socksNotAllowed {
		t.Errorf("SOCKS allowed.test:22: reply %#x, want %#x", code, socksNotAllowed)
	}
	got = e.entry(t, func(x Entry) bool { return x.Host == "allowed.test" && x.Scheme == "socks5" })
	if got.Verdict != "deny" || got.Rule != "command.deny git push" || got.Reason != "ssh to port 22 while git push is denied" {
		t.Errorf("log entry %+v", got)
	}
	if hits.Load() != 0 {
		t.Errorf("the server on port 22 saw %d connections", hits.Load())
	}
	// Its other ports are not SSH's.
	resp, _, _, _ = raw(t, e.httpAddr, "CONNECT allowed.test:8080 HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Errorf("CONNECT allowed.test:8080: %d", resp.StatusCode)
	}

	// Allowed with ":22": SSH goes through, by CONNECT and SOCKS.
	sshExchange := func(what string, c net.Conn, br *bufio.Reader, want string) {
		t.Helper()
		io.WriteString(c, "SSH-2.0-client\r\n")
		line, err := br.ReadString('\n')
		if want == "" {
			if err != nil || line != "SSH-2.0-client\r\n" {
				t.Errorf("%s: echo %q, %v", what, line, err)
			}
			return
		}
		rest, _ := io.ReadAll(br)
		if !strings.Contains(line, want) || len(rest) != 0 {
			t.Errorf("%s: got %q then %q, want a line with %q and the end", what, line, rest, want)
		}
	}
	resp, _, c, br := raw(t, e.httpAddr, "CONNECT git.test:22 HTTP/1.1\r\nHost: git.test:22\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT git.test:22: %d", resp.StatusCode)
	}
	sshExchange("CONNECT git.test:22", c, br, "")
	code, c = socks(t, e.socksAddr, socksConnect, socksDomain, "git.test", 22)
	if code != 0 {
		t.Fatalf("SOCKS git.test:22: reply %#x", code)
	}
	sshExchange("SOCKS git.test:22", c, bufio.NewReader(c), "")

	// SSH on another port (ssh.github.com:443) is cut when it shows,
	// unless the host is allowed with that port.
	resp, _, c, br = raw(t, e.httpAddr, "CONNECT ssh.test:443 HTTP/1.1\r\nHost: ssh.test:443\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT ssh.test:443: %d", resp.StatusCode)
	}
	sshExchange("CONNECT ssh.test:443", c, br, "ssh while git push is denied")
	got = e.entry(t, func(x Entry) bool { return x.Host == "ssh.test" && x.Port == 443 })
	if got.Verdict != "deny" || got.Rule != "command.deny git push" || got.Reason != "ssh to port 443 while git push is denied" || got.Scheme != "tcp" {
		t.Errorf("log entry %+v", got)
	}
	code, c = socks(t, e.socksAddr, socksConnect, socksDomain, "ssh.test", 2222)
	if code != 0 {
		t.Fatalf("SOCKS ssh.test:2222: reply %#x", code)
	}
	sshExchange("SOCKS ssh.test:2222", c, bufio.NewReader(c), "ssh while git push is denied")
	resp, _, c, br = raw(t, e.httpAddr, "CONNECT alt.test:443 HTTP/1.1\r\nHost: alt.test:443\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT alt.test:443: %d", resp.StatusCode)
	}
	sshExchange("CONNECT alt.test:443", c, br, "")
	// Other raw protocols pass.
	resp, _, c, br = raw(t, e.httpAddr, "CONNECT ssh.test:5432 HTTP/1.1\r\nHost: ssh.test:5432\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT ssh.test:5432: %d", resp.StatusCode)
	}
	io.WriteString(c, "SSX-not-ssh\n")
	if line, err := br.ReadString('\n'); err != nil || line != "SSX-not-ssh\n" {
		t.Errorf("raw tunnel: %q, %v", line, err)
	}
}

func TestSSHWithoutCommandRules(t *testing.T) {
	t.Parallel()
	echo := echoServer(t, "")
	e := newEnv(t, Config{
		Rules:        Rules{Allow: []string{"allowed.test:22"}, Hosts: map[string]string{"allowed.test": echo}},
		DenyCommands: []string{"npm publish", "git commit"},
	})
	for _, via := range []string{"CONNECT", "SOCKS"} {
		var c net.Conn
		var br *bufio.Reader
		if via == "CONNECT" {
			var resp *http.Response
			resp, _, c, br = raw(t, e.httpAddr, "CONNECT allowed.test:22 HTTP/1.1\r\nHost: allowed.test:22\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT allowed.test:22: %d", resp.StatusCode)
			}
		} else {
			var code byte
			if code, c = socks(t, e.socksAddr, socksConnect, socksDomain, "allowed.test", 22); code != 0 {
				t.Fatalf("SOCKS allowed.test:22: reply %#x", code)
			}
			br = bufio.NewReader(c)
		}
		io.WriteString(c, "SSH-2.0-client\r\n")
		if line, err := br.ReadString('\n'); err != nil || line != "SSH-2.0-client\r\n" {
			t.Errorf("%s: echo %q, %v", via, line, err)
		}
	}
}

// publishBody is what npm publish sends: the package document with the
// tarball inline.
const publishBody = `{"_id":"left-pad","name":"left-pad","description":"pads","dist-tags":{"latest":"1.0.0"},` +
	`"versions":{"1.0.0":{"name":"left-pad","version":"1.0.0","dist":{"shasum":"x","tarball":"https://registry.test/left-pad/-/left-pad-1.0.0.tgz"}}},` +
	`"access":null,"_attachments":{"left-pad-1.0.0.tgz":{"content_type":"application/octet-stream","data":"H4sIAAAAAAAAA+3BAQ0AAADCoPdPbQ8HFAAAAAAAAAAAAAAAAAAAAAA=","length":20}}}`

func TestNpmPublishOnTheWire(t *testing.T) {
	t.Parallel()
	f := newWireFixture(t, []string{"git push", "npm publish"}, nil)
	json := []string{"Content-Type", "application/json"}
	for _, scheme := range []string{"http", "https"} {
		host := map[string]string{"http": "plain.test", "https": "tls.test"}[scheme]
		base := scheme + "://" + host

		// Publishes: refused before anything is sent.
		for _, r := range []struct {
			path string
			body io.Reader
		}{
			{"/left-pad", strings.NewReader(publishBody)},
			{"/@scope%2fpkg", strings.NewReader(strings.Replace(publishBody, "left-pad", "@scope/pkg", -1))},
			{"/api/npm/npm-local/left-pad", strings.NewReader(publishBody)}, // a registry under a path
			{"/left-pad", io.MultiReader(strings.NewReader(publishBody))},   // chunked
			{"/left-pad", strings.NewReader(" \r\n" + publishBody)},
		} {
			status, body := f.send(t, "PUT", base+r.path, r.body, json...)
			if status != http.StatusForbidden || body != npmDenied {
				t.Errorf("PUT %s%s: %d %q, want 403 %q", base, r.path, status, body, npmDenied)
			}
		}
		if got := f.seen.take(); len(got) != 0 {
			t.Errorf("%s: the server received %q", scheme, got)
		}
		got := f.e.entry(t, func(x Entry) bool { return x.Path == "/@scope/pkg" && x.Scheme == scheme })
		if got.Verdict != "deny" || got.Rule != "command.deny npm publish" || got.Method != "PUT" || got.Host != host ||
			got.Reason != "npm publish: a PUT of a package document with _attachments" {
			t.Errorf("%s: log entry %+v", scheme, got)
		}

		// What is not a publish goes through, body intact.
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/left-pad", ""},
			{"GET", "/left-pad/-/left-pad-1.0.0.tgz", ""},
			// npm dist-tag add: not a publish (deny "npm dist-tag" at exec
			// time to stop it).
			{"PUT", "/-/package/left-pad/dist-tags/latest", `"1.0.0"`},
			// npm deprecate, owner, unpublish of a version: the document
			// without attachments.
			{"PUT", "/left-pad/-rev/3-abc", `{"_id":"left-pad","_rev":"3-abc","name":"left-pad","versions":{}}`},
			{"PUT", "/left-pad", `{"name":"left-pad","versions":{}}`},
			// Not a JSON object: no registry reads it as a document.
			{"PUT", "/uploads/blob.bin", "binary \x00 data with \"_attachments\""},
			// Publishes are PUTs: a POST is not inspected.
			{"POST", "/left-pad", publishBody},
		} {
			status, body := f.send(t, r.method, base+r.path, strings.NewReader(r.body), json...)
			if status != 200 || body != "ok" {
				t.Errorf("%s %s%s: %d %q, want 200", r.method, base, r.path, status, body)
			}
			got := f.seen.take()
			if want := fmt.Sprintf("%s %s (%d)", r.method, r.path, len(r.body)); len(got) != 1 || got[0] != want {
				t.Errorf("%s %s%s: the server received %q, want %q", r.method, base, r.path, got, want)
			}
		}

		// Bodies that cannot be inspected, to a package path: refused
		// unless they cannot be JSON objects.
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		io.WriteString(zw, publishBody)
		zw.Close()
		status, body := f.send(t, "PUT", base+"/left-pad", bytes.NewReader(gz.Bytes()), "Content-Type", "application/json", "Content-Encoding", "gzip")
		if status != 403 || body != npmDenied {
			t.Errorf("%s: gzip-encoded PUT: %d %q", scheme, status, body)
		}
		status, body = f.send(t, "PUT", base+"/left-pad", strings.NewReader(publishBody[:100]), json...)
		if status != 403 || body != npmDenied {
			t.Errorf("%s: PUT of broken JSON: %d %q", scheme, status, body)
		}
		if got := f.seen.take(); len(got) != 0 {
			t.Errorf("%s: the server received %q", scheme, got)
		}
		got = f.e.entry(t, func(x Entry) bool { return x.Scheme == scheme && strings.Contains(x.Reason, "content-encoded") })
		if got.Verdict != "deny" || got.Rule != "command.deny npm publish" || got.Reason != "possible npm publish: a PUT to a package path with a content-encoded body, which is not inspected" {
			t.Errorf("%s: log entry %+v", scheme, got)
		}
		status, _ = f.send(t, "PUT", base+"/-/package/left-pad/dist-tags/latest", bytes.NewReader(gz.Bytes()), "Content-Encoding", "gzip")
		if status != 200 {
			t.Errorf("%s: gzip-encoded PUT to a dist-tag: %d", scheme, status)
		}
		f.seen.take()
	}
}

// TestNpmPublishLarge sends bodies over the inspected size, by hand
// (the proxy answers before it has read them whole).
func TestNpmPublishLarge(t *testing.T) {
	t.Parallel()
	f := newWireFixture(t, []string{"npm publish"}, nil)
	big := func(first byte) []byte {
		b := bytes.Repeat([]byte("a"), maxPublishBody+100)
		b[0] = first
		return b
	}
	put := func(path string, body []byte) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", f.e.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			fmt.Fprintf(c, "PUT http://plain.test%s HTTP/1.1\r\nHost: plain.test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
			c.Write(body)
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("PUT %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// A JSON object too large to inspect, to a package path: refused.
	status, body := put("/big-pkg", big('{'))
	if status != 403 || body != npmDenied {
		t.Errorf("large JSON PUT to /big-pkg: %d %q", status, body)
	}
	got := f.e.entry(t, func(x Entry) bool { return x.Path == "/big-pkg" })
	if got.Verdict != "deny" || got.Reason != "possible npm publish: a PUT to a package path with a body over 4 MiB, which is not inspected" {
		t.Errorf("log entry %+v", got)
	}
	// Its "_attachments" key within the inspected part names it a publish,
	// whatever the path.
	b := big('{')
	copy(b[1:], `"_attachments":`)
	status, body = put("/-/odd/path", b)
	if status != 403 || body != npmDenied {
		t.Errorf("large publish to /-/odd/path: %d %q", status, body)
	}
	if got := f.seen.take(); len(got) != 0 {
		t.Errorf("the server received %q", got)
	}
	// Large bodies that are not JSON objects, or not to a package path,
	// go through whole.
	for _, r := range []struct {
		path string
		body []byte
	}{{"/uploads/blob.bin", big('x')}, {"/-/odd/path", big('{')}} {
		status, body = put(r.path, r.body)
		if status != 200 || body != "ok" {
			t.Errorf("large PUT to %s: %d %q", r.path, status, body)
		}
		if got, want := f.seen.take(), fmt.Sprintf("PUT %s (%d)", r.path, len(r.body)); len(got) != 1 || got[0] != want {
			t.Errorf("the server received %q, want %q", got, want)
		}
	}
}

// TestNpmPublishExpectContinue: a client that waits for 100 Continue
// gets it, sends its body, and is refused.
func TestNpmPublishExpectContinue(t *testing.T) {
	t.Parallel()
	f := newWireFixture(t, []string{"npm"}, nil)
	c, err := net.Dial("tcp", f.e.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "PUT http://plain.test/left-pad HTTP/1.1\r\nHost: plain.test\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(publishBody))
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("before the body: %q, %v", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, publishBody)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if want := "jail: npm publish is denied by command.deny (\"npm\")\n"; resp.StatusCode != 403 || string(b) != want {
		t.Errorf("got %d %q, want 403 %q", resp.StatusCode, b, want)
	}
	if got := f.seen.take(); len(got) != 0 {
		t.Errorf("the server received %q", got)
	}
}

// TestNpmPublishWithSecrets: a body read for inspection is still
// rewritten by the secrets, and a publish is refused whatever token it
// carries.
func TestNpmPublishWithSecrets(t *testing.T) {
	t.Parallel()
	const ph, val = "jail-secret-NPM_TOKEN-q1", "npm_real_token_value_1"
	f := newWireFixture(t, []string{"npm publish"}, []Secret{{Name: "NPM_TOKEN", Placeholder: ph, Value: val, Hosts: []string{"tls.test"}, Inject: []string{"header", "body"}}})
	status, body := f.send(t, "PUT", "https://tls.test/left-pad", strings.NewReader(publishBody), "Content-Type", "application/json", "Authorization", "Bearer "+ph)
	if status != 403 || body != npmDenied {
		t.Errorf("publish with a token: %d %q", status, body)
	}
	doc := `{"_id":"left-pad","token":"` + ph + `"}`
	status, body = f.send(t, "PUT", "https://tls.test/left-pad/-rev/1-a", strings.NewReader(doc), "Content-Type", "application/json", "Authorization", "Bearer "+ph)
	if status != 200 || body != "ok" {
		t.Errorf("document update: %d %q", status, body)
	}
	want := fmt.Sprintf("PUT /left-pad/-rev/1-a (%d)", len(doc)-len(ph)+len(val))
	if got := f.seen.take(); len(got) != 1 || got[0] != want {
		t.Errorf("the server received %q, want %q", got, want)
	}
}

// TestWithoutCommandRules: with no DenyCommands, pushes and publishes go
// through.
func TestWithoutCommandRules(t *testing.T) {
	t.Parallel()
	f := newWireFixture(t, nil, nil)
	for _, scheme := range []string{"http", "https"} {
		host := map[string]string{"http": "plain.test", "https": "tls.test"}[scheme]
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/r.git/info/refs?service=git-receive-pack", ""},
			{"POST", "/r.git/git-receive-pack", "0000"},
			{"PUT", "/left-pad", publishBody},
			{"PUT", "/left-pad", publishBody[:100]},
		} {
			status, body := f.send(t, r.method, scheme+"://"+host+r.path, strings.NewReader(r.body))
			if status != 200 || body != "ok" {
				t.Errorf("%s %s://%s%s: %d %q", r.method, scheme, host, r.path, status, body)
			}
		}
		if got := f.seen.take(); len(got) != 4 {
			t.Errorf("%s: the server received %q", scheme, got)
		}
	}
	if d := f.e.srv.Denied(); len(d) != 0 {
		t.Errorf("denials: %+v", d)
	}
}
