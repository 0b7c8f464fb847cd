package tests

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// Red-team tests of the secrets layer: a cloned repository or a jailed
// command trying to get a real value into the jail, or to have it sent
// where an attacker on the network could read it.

// TestSecretsRedteamCopiedValues: the real value of a secret copied under
// innocent names (in the environment, whole and inside a longer value;
// in .env files, under another name and in a comment), and secrets in
// spellings the detector could miss (.envrc with an "export<TAB>" line,
// numbered and qualified names, a nested .env.production.local, an
// editor's .env~, a template's .envs/.production/.django, a lone CR and
// backtick quotes as dotenv libraries read them) and
// credentials inside longer values (a token in curl flags, passwords in
// a list of URLs) never reach the jail; the files on the host are left
// as they were.
func TestSecretsRedteamCopiedValues(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		real := "plain-" + randFrom(alnumChars, 24) // no known format: found by name only
		envrc := "rc-" + randFrom(alnumChars, 20)
		numbered := "num-" + randFrom(alnumChars, 20)
		nested := "nest-" + randFrom(alnumChars, 20)
		backup := "bak-" + randFrom(alnumChars, 20)
		django := "dj-" + randFrom(alnumChars, 20)
		lonecr := "cr-" + randFrom(alnumChars, 20)
		pemBody := "MIIE" + randFrom(alnumChars, 40)
		gh := "ghp_" + randFrom(alnumChars, 36)
		pw := "Pw" + randFrom(alnumChars, 14)
		s.Env = append(s.Env, "MY_API_KEY="+real, "BACKUP_VALUE="+real, "CURL_FLAGS=-H x-api-key:"+real+" -s",
			"GH_FLAGS=-H 'Authorization: token "+gh+"'",
			"PIP_EXTRA_INDEX_URL=https://u:"+pw+"@a.example.test/simple https://u:"+pw+"@b.example.test/simple")
		files := map[string]string{
			s.Project + "/.env":                              "COPY=" + real + "\n# the old key was " + real + "\n",
			s.Project + "/.envrc":                            "export\tSTRIPE_SECRET_KEY_LIVE=" + envrc + "\n",
			s.Project + "/app/.env":                          "API_TOKEN2=" + numbered + "\n",
			s.Project + "/deploy/prod/.env.production.local": "DB_PASSWORD_OLD=" + nested + "\n",
			s.Project + "/.env~":                             "OLD_SECRET=" + backup + "\n",
			s.Project + "/.envs/.production/.django":         "DJANGO_SECRET_KEY=" + django + "\n",
			// As dotenv libraries read it: a lone CR ends a line, backticks
			// quote a multi-line value.
			s.Project + "/.env.local": "PLAIN=1\rMY_PASSWORD=" + lonecr + "\rPRIVATE_KEY=`-----BEGIN RSA PRIVATE KEY-----\n" + pemBody + "\n-----END RSA PRIVATE KEY-----`\n",
		}
		for p, c := range files {
			if err := os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755); err != nil {
				t.Fatal(err)
			}
			s.WriteFile(p, c, 0o644)
		}
		r := s.Sh(`env; for f in .env .envrc app/.env deploy/prod/.env.production.local .env~ .envs/.production/.django .env.local; do echo "== $f"; cat "$f"; done`)
		if r.Code != 0 {
			t.Fatalf("the jailed command failed: %s", r)
		}
		out := r.Stdout + r.Stderr
		for name, v := range map[string]string{"MY_API_KEY": real, ".envrc": envrc, "API_TOKEN2": numbered, "DB_PASSWORD_OLD": nested, "GH_FLAGS": gh, "PIP_EXTRA_INDEX_URL": pw, ".env~": backup, ".envs/": django, "MY_PASSWORD": lonecr, "PRIVATE_KEY": pemBody} {
			if strings.Contains(out, v) {
				t.Errorf("the real value of %s reached the jail:\n%s", name, out)
			}
		}
		env := envMap(r.Stdout)
		ph := env["MY_API_KEY"]
		if !placeholderRE("MY_API_KEY").MatchString(ph) {
			t.Fatalf("control: MY_API_KEY inside is %q", ph)
		}
		if env["BACKUP_VALUE"] != ph || env["CURL_FLAGS"] != "-H x-api-key:"+ph+" -s" {
			t.Errorf("copies of MY_API_KEY inside: BACKUP_VALUE=%q CURL_FLAGS=%q; want its placeholder %q", env["BACKUP_VALUE"], env["CURL_FLAGS"], ph)
		}
		if !strings.HasPrefix(env["GH_FLAGS"], "-H 'Authorization: token ghp_jail") || !strings.Contains(env["PIP_EXTRA_INDEX_URL"], "@b.example.test/simple") {
			t.Errorf("the credentials inside longer values are not masked in place: GH_FLAGS=%q PIP_EXTRA_INDEX_URL=%q", env["GH_FLAGS"], env["PIP_EXTRA_INDEX_URL"])
		}
		if !strings.Contains(out, "COPY="+ph+"\n") || !strings.Contains(out, "# the old key was "+ph+"\n") {
			t.Errorf("the copies of MY_API_KEY in .env are not its placeholder:\n%s", out)
		}
		for p, c := range files {
			if b, _ := os.ReadFile(p); string(b) != c {
				t.Errorf("%s changed on the host: %q", p, b)
			}
		}
	})
}

// TestSecretsRedteamCleartext: the jailed command sends its placeholder
// in plain HTTP to the host the secret is bound to, which network.hosts
// maps to an address off the loopback (as a name on the local network
// would be): the proxy refuses to inject, so the value never crosses the
// network in clear text; the same request without the placeholder goes
// through, and the log names the secret.
func TestSecretsRedteamCleartext(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		ip := hostIPv4()
		if ip == "" {
			t.Fatalf("this machine has no non-loopback IPv4 address to test clear text against")
		}
		wire := newUpstreamAt(t, "0.0.0.0:0", false, "")
		g := setupSecrets(t, s, []string{"MY_API_KEY"}, nil, func(g *secretsRig) map[string]any {
			return map[string]any{"network": map[string]any{"hosts": map[string]string{boundHost: fmt.Sprintf("%s:%d", ip, wire.Port())}}}
		})
		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			probe header -H "x-api-key: $MY_API_KEY" http://` + boundHost + `/clear-header
			probe query "http://` + boundHost + `/clear-query?key=$MY_API_KEY"
			probe control http://` + boundHost + `/clear-control`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		ps := probes(t, r)
		for _, name := range []string{"header", "query"} {
			p := getProbe(t, ps, r, name)
			if p.HTTP != "403" || !strings.Contains(p.Body, "MY_API_KEY is not sent in clear text") {
				t.Errorf("%s: want 403 saying the value is not sent in clear text; got %s", name, p)
			}
		}
		wantOK(t, getProbe(t, ps, r, "control"), "/clear-control")
		if got := wire.SawPrefix("/clear-"); len(got) != 1 || got[0] != "/clear-control" {
			t.Errorf("the server off loopback received %v; want only /clear-control", got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		if d := secretDecisions(ds, boundHost, "/clear-header"); len(d) != 1 || d[0].Verdict != "deny" || !strings.Contains(d[0].Reason, "plain HTTP") {
			t.Errorf("log for /clear-header: want one deny naming plain HTTP; got %v\n%s", d, dumpDecisions(ds))
		}
		hostLogHasNoReal(t, s, g)
	})
}

// echoRig maps api.anthropic.com to a server that echoes the x-api-key
// it receives where the proxy cannot redact it on its own: in an
// upgraded connection (/ws) and in a brotli-labelled body sent unasked
// (/br).
func echoRig(t *testing.T, s *Sandbox) (*secretsRig, *echoServer) {
	t.Helper()
	var ant *echoServer
	g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY"}, nil, func(g *secretsRig) map[string]any {
		ant = newEchoServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
			key := r.Header.Get("X-Api-Key")
			switch r.URL.Path {
			case "/ws":
				c, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return false
				}
				defer c.Close()
				brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
				brw.Flush()
				brw.ReadString('\n')
				brw.WriteString("you sent " + key + "\n")
				brw.Flush()
				brw.ReadString('\n') // until the client goes
			case "/br":
				w.Header().Set("Content-Encoding", "br")
				fmt.Fprintf(w, "you sent %s\n", key)
			default:
				return false
			}
			return true
		})
		return map[string]any{"network": map[string]any{
			"allow": []string{anthropicHost},
			"hosts": map[string]string{anthropicHost: ant.Addr()},
		}}
	})
	return g, ant
}

// wsPy opens a CONNECT tunnel through HTTPS_PROXY, speaks TLS over it
// (trusting SSL_CERT_FILE), sends an upgrade request with x-api-key set
// to the placeholder in $ANTHROPIC_API_KEY and a first line, and prints
// what comes back.
const wsPy = `
import os, socket, ssl, sys, urllib.parse
host = sys.argv[1]
p = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
s = socket.create_connection((p.hostname, p.port), timeout=10)
s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
t = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]).wrap_socket(s, server_hostname=host)
t.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\nx-api-key: %s\r\n\r\n" % (host, os.environ["ANTHROPIC_API_KEY"])).encode())
got = b""
try:
    while b"\r\n\r\n" not in got:
        got += t.recv(1)
    t.sendall(b"hello\n")
    while True:
        b = t.recv(4096)
        if not b:
            break
        got += b
except Exception as e:
    print("ERR", repr(e))
print("GOT", repr(got))
`

// TestSecretsRedteamEchoBack: the provider a secret is bound to receives
// the real value and echoes it where redaction cannot reach: in an
// upgraded connection (cut before the echo reaches the jail) and in a
// response body in a content coding the proxy cannot decode, sent
// although the request did not ask for it (refused with a 502). The
// value never reaches the jail; the control shows the provider got it.
func TestSecretsRedteamEchoBack(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g, ant := echoRig(t, s)
		real := g.Real["ANTHROPIC_API_KEY"]
		s.WriteFile(s.Project+"/ws.py", wsPy, 0o644)
		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			python3 ws.py ` + anthropicHost + `
			probe br -H "x-api-key: $ANTHROPIC_API_KEY" https://` + anthropicHost + `/br`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, "101 Switching Protocols") {
			t.Errorf("control: the upgrade did not go through:\n%s", r)
		}
		p := getProbe(t, probes(t, r), r, "br")
		if p.HTTP != "502" || !strings.Contains(p.Body, "cannot be checked for secrets") {
			t.Errorf("br: want 502 saying the body cannot be checked; got %s", p)
		}
		for _, path := range []string{"/ws", "/br"} {
			if got := ant.At(path); len(got) != 1 || got[0].Header.Get("X-Api-Key") != real {
				t.Errorf("control: the provider did not get the real value at %s:\n%s", path, ant.dump())
			}
		}
		ds := decisions(t, s, sessionOf(t, r))
		if d := secretDecisions(ds, anthropicHost, "/ws"); len(d) != 1 || d[0].Verdict != "deny" || !strings.Contains(d[0].Reason, "real value of ANTHROPIC_API_KEY") {
			t.Errorf("log for /ws: want one deny naming the echoed value; got %v\n%s", d, dumpDecisions(ds))
		}
		hostLogHasNoReal(t, s, g)
	})
}

// TestSecretsRedteamHardLinkedEnv: a .env with a second name in the
// project (a hard link, as a tool that shares one .env between
// directories makes) is masked under its .env name, and its other name
// shows nothing of it; a hard link between two .env names gets the masked
// copy at both.
func TestSecretsRedteamHardLinkedEnv(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		real := "hl-" + randFrom(alnumChars, 24)
		s.WriteFile(s.Project+"/.env", "DB_PASSWORD="+real+"\n", 0o644)
		if err := os.MkdirAll(s.Project+"/config", 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"/config/settings.ini", "/.env.backup"} {
			if err := os.Link(s.Project+"/.env", s.Project+name); err != nil {
				t.Fatal(err)
			}
		}
		r := s.Sh(`for f in .env .env.backup config/settings.ini; do echo "== $f"; cat "$f"; done; true`)
		out := r.Stdout + r.Stderr
		if strings.Contains(out, real) {
			t.Errorf("the real value reached the jail through a hard link:\n%s", out)
		}
		for _, f := range []string{".env", ".env.backup"} {
			if !strings.Contains(r.Stdout, "== "+f+"\nDB_PASSWORD=jail-secret-DB_PASSWORD-") {
				t.Errorf("control: %s inside is not the masked copy:\n%s", f, r)
			}
		}
		if b, _ := os.ReadFile(s.Project + "/config/settings.ini"); string(b) != "DB_PASSWORD="+real+"\n" {
			t.Errorf("the host file changed: %q", b)
		}
	})
}
