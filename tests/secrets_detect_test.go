package tests

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// End-to-end tests of secret detection: a credential is recognised by its
// variable's name, by the format of its value whatever the name, and as
// the password of a URL; inside the jail it is a placeholder shaped like
// it (prefix and length kept), in the environment and in .env files alike,
// and a URL keeps parsing with only its password replaced. .env names are
// masked whatever they link to.

// randFrom is n random characters of alphabet.
func randFrom(alphabet string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

const (
	alnumChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upperAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// generic is the placeholder of a secret without a known format.
func generic(name string) string { return `jail-secret-` + name + `-[A-Za-z0-9]{16}` }

// detectCase is one secret planted in the host environment and in a .env
// file: its real value (or, for a URL, the password in it), and what the
// variable must look like inside.
type detectCase struct {
	name, value string
	real        string // the secret part of value; value itself when empty
	want        string // regexp of the whole value inside
	// A URL: what it must parse to inside, the password being the
	// placeholder.
	user, host, port, path string
	userSecret             bool // the user is the secret (a Sentry DSN's key)
}

func detectCases() []detectCase {
	pw := func() string { return "Pw" + randFrom(alnumChars, 14) }
	jwt := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiJyZWFsLXVzZXIifQ." + randFrom(alnumChars, 43)
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + randFrom(alnumChars, 40) + "\n" + randFrom(alnumChars, 40) + "\n-----END RSA PRIVATE KEY-----"
	var cs []detectCase
	// By name: the new names and suffixes, with values of no known format.
	for _, n := range []string{
		"PGPASSWORD", "MYSQL_PWD", "REDIS_PASSWORD", "APP_DB_PASS", "LDAP_PASSWD", "ADMIN_PWD", "APP_DSN",
		"AZURE_CREDENTIALS", "PROXY_AUTH", "JWT_PRIVATE_KEY", "COSIGN_SIGNING_KEY", "STRIPE_WEBHOOK_SECRET",
		"OAUTH_CLIENT_SECRET", "AZURE_STORAGE_CONNECTION_STRING", "DJANGO_SECRET_KEY",
	} {
		cs = append(cs, detectCase{name: n, value: pw(), want: generic(n)})
	}
	// By value, under names that say nothing.
	for _, c := range []struct{ name, value, want string }{
		{"VALUE_SK", "sk-" + randFrom(alnumChars, 48), `sk-jail[A-Za-z0-9]{44}`},
		{"VALUE_SK_ANT", "sk-ant-api03-" + randFrom(alnumChars, 93) + "AA", `sk-ant-api03-jail[A-Za-z0-9]{91}`},
		{"VALUE_SK_PROJ", "sk-proj-" + randFrom(alnumChars, 56), `sk-proj-jail[A-Za-z0-9]{52}`},
		{"VALUE_GHP", "ghp_" + randFrom(alnumChars, 36), `ghp_jail[A-Za-z0-9]{32}`},
		{"VALUE_GHO", "gho_" + randFrom(alnumChars, 36), `gho_jail[A-Za-z0-9]{32}`},
		{"VALUE_GHU", "ghu_" + randFrom(alnumChars, 36), `ghu_jail[A-Za-z0-9]{32}`},
		{"VALUE_GHS", "ghs_" + randFrom(alnumChars, 36), `ghs_jail[A-Za-z0-9]{32}`},
		{"VALUE_GHR", "ghr_" + randFrom(alnumChars, 36), `ghr_jail[A-Za-z0-9]{32}`},
		{"VALUE_PAT", "github_pat_11" + randFrom(alnumChars, 20) + "_" + randFrom(alnumChars, 59), `github_pat_jail[A-Za-z0-9]{78}`},
		{"VALUE_GLPAT", "glpat-" + randFrom(alnumChars, 20), `glpat-jail[A-Za-z0-9]{16}`},
		{"VALUE_XOXB", "xoxb-" + randFrom("0123456789", 12) + "-" + randFrom(alnumChars, 24), `xoxb-jail-[A-Za-z0-9]{32}`},
		{"VALUE_XOXP", "xoxp-" + randFrom("0123456789", 12) + "-" + randFrom(alnumChars, 24), `xoxp-jail-[A-Za-z0-9]{32}`},
		{"VALUE_XOXA", "xoxa-2-" + randFrom(alnumChars, 24), `xoxa-jail-[A-Za-z0-9]{21}`},
		{"VALUE_AKIA", "AKIA" + randFrom(upperAlnum, 16), `AKIAJAIL[A-Z2-7]{12}`},
		{"VALUE_ASIA", "ASIA" + randFrom(upperAlnum, 16), `ASIAJAIL[A-Z2-7]{12}`},
		{"VALUE_AIZA", "AIza" + randFrom(alnumChars, 35), `AIzajail[A-Za-z0-9]{31}`},
		{"VALUE_NPM", "npm_" + randFrom(alnumChars, 36), `npm_jail[A-Za-z0-9]{32}`},
		{"VALUE_JWT", jwt, `eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.jail[A-Za-z0-9_-]{39}`},
		{"VALUE_PEM", pem, generic("VALUE_PEM")},
		{"VALUE_PEM_ESCAPED", strings.ReplaceAll(pem, "\n", `\n`), generic("VALUE_PEM_ESCAPED")},
	} {
		cs = append(cs, detectCase{name: c.name, value: c.value, want: c.want})
	}
	// URLs with a password: only the password is replaced.
	for _, u := range []struct{ name, scheme, user, host, port, path string }{
		{"DATABASE_URL", "postgres", "app", "db.internal.test", "5432", "/app"},
		{"REDIS_URL", "redis", "", "cache.internal.test", "6379", "/0"},
		{"AMQP_URL", "amqp", "rabbit", "mq.internal.test", "5672", "/vhost"},
		{"MYSQL_DSN", "mysql", "root", "127.0.0.1", "3306", "/shop"},
		{"UPSTREAM", "https", "deploy", "git.internal.test", "", "/org/repo.git"},
	} {
		p := pw()
		auth := u.host
		if u.port != "" {
			auth += ":" + u.port
		}
		cs = append(cs, detectCase{
			name: u.name, value: u.scheme + "://" + u.user + ":" + p + "@" + auth + u.path, real: p,
			want: regexp.QuoteMeta(u.scheme+"://"+u.user+":") + generic(u.name) + regexp.QuoteMeta("@"+auth+u.path),
			user: u.user, host: u.host, port: u.port, path: u.path,
		})
	}
	// A DSN whose user is the key: the user is replaced.
	key := randFrom("0123456789abcdef", 32)
	cs = append(cs, detectCase{
		name: "SENTRY_DSN", value: "https://" + key + "@o1.ingest.sentry.test/42", real: key,
		want: `https://` + generic("SENTRY_DSN") + regexp.QuoteMeta("@o1.ingest.sentry.test/42"),
		host: "o1.ingest.sentry.test", path: "/42", userSecret: true,
	})
	return cs
}

// dotenvLine is the case as a .env line: a value spanning lines quoted.
func (c detectCase) dotenvLine() string {
	if strings.Contains(c.value, "\n") {
		return c.name + `="` + c.value + `"`
	}
	return c.name + "=" + c.value
}

func (c detectCase) secret() string {
	if c.real != "" {
		return c.real
	}
	return c.value
}

// urlProbe prints, for every variable named on its command line, the URL
// it holds as the language's own parser reads it: name, user, password,
// host, port, path.
const urlProbePy = `import os, sys, urllib.parse
for n in sys.argv[1:]:
    u = urllib.parse.urlsplit(os.environ[n])
    print("url", n, u.username or "-", u.password or "-", u.hostname or "-", u.port or "-", u.path or "-")
`

const urlProbeJS = `for (const n of process.argv.slice(2)) {
  const u = new URL(process.env[n]);
  const d = (s) => decodeURIComponent(s) || "-";
  console.log("url", n, d(u.username), d(u.password), u.hostname || "-", u.port || "-", u.pathname || "-");
}
`

// Every name, value format and URL, in the host environment and in a
// project .env: inside, the real value is nowhere (env, /proc/self/environ,
// init's /proc/1/environ, the .env files), each placeholder has its
// format's shape, the .env file holds the environment's placeholder for
// the same value and another one for another value, and Python's and
// Node's URL parsers read every URL as it was, its password the
// placeholder.
func TestSecretsDetectEnvAndDotenv(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		cases := detectCases()
		var dotenv, urls []string
		for _, c := range cases {
			s.Env = append(s.Env, c.name+"="+c.value)
			dotenv = append(dotenv, c.dotenvLine())
			if c.host != "" {
				urls = append(urls, c.name)
			}
		}
		// Another value under three names: another placeholder, same shape.
		other := map[string]string{
			"VALUE_GHP":    "ghp_" + randFrom(alnumChars, 36),
			"DATABASE_URL": "postgres://app:Other" + randFrom(alnumChars, 12) + "@db.internal.test:5432/app",
			"PGPASSWORD":   "Other" + randFrom(alnumChars, 12),
		}
		s.WriteFile(s.Project+"/.env", "# settings\n"+strings.Join(dotenv, "\n")+"\nPLAIN=hello\n", 0o600)
		s.WriteFile(s.Project+"/.env.other", "VALUE_GHP="+other["VALUE_GHP"]+"\nDATABASE_URL="+other["DATABASE_URL"]+"\nPGPASSWORD="+other["PGPASSWORD"]+"\n", 0o600)
		s.WriteFile(s.Project+"/urlprobe.py", urlProbePy, 0o644)
		s.WriteFile(s.Project+"/urlprobe.js", urlProbeJS, 0o644)
		names := strings.Join(urls, " ")
		r := s.MustSh(`
			echo ==env; env
			echo ==self; tr '\0' '\n' < /proc/self/environ
			echo ==init; tr '\0' '\n' < /proc/1/environ
			echo ==dotenv; cat .env
			echo ==other; cat .env.other
			echo ==python; python3 urlprobe.py ` + names + `
			echo ==node; node urlprobe.js ` + names + `
			echo ==end`)
		out := r.Stdout + r.Stderr
		for _, c := range cases {
			if strings.Contains(out, c.secret()) {
				t.Errorf("%s: the real value reached the jail", c.name)
			}
			for _, l := range strings.Split(c.secret(), "\n") {
				if len(l) > 12 && strings.Contains(out, l) {
					t.Errorf("%s: a line of the real value reached the jail: %q", c.name, l)
				}
			}
		}
		for _, v := range other {
			if strings.Contains(out, v) {
				t.Errorf("a .env.other value reached the jail: %q", v)
			}
		}
		env := envMap(section(r.Stdout, "env"))
		for _, view := range []string{"env", "self", "dotenv"} {
			got := envMap(section(r.Stdout, view))
			for _, c := range cases {
				got[c.name] = strings.Trim(got[c.name], `"`) // a .env value spanning lines is quoted
				re := regexp.MustCompile(`^` + c.want + `$`)
				if !re.MatchString(got[c.name]) {
					t.Errorf("%s inside (%s): %q, want %s", c.name, view, got[c.name], c.want)
				}
				if got[c.name] != env[c.name] {
					t.Errorf("%s: %s holds %q, env %q: the same value must get the same placeholder", c.name, view, got[c.name], env[c.name])
				}
			}
		}
		if got := envMap(section(r.Stdout, "dotenv")); got["PLAIN"] != "hello" {
			t.Errorf("control: PLAIN=hello in .env became %q", got["PLAIN"])
		}
		otherSeen := envMap(section(r.Stdout, "other"))
		for name, want := range map[string]string{
			"VALUE_GHP": `ghp_jail[A-Za-z0-9]{32}`, "PGPASSWORD": generic("PGPASSWORD"),
			"DATABASE_URL": `postgres://app:` + generic("DATABASE_URL") + `@db\.internal\.test:5432/app`,
		} {
			if got := otherSeen[name]; !regexp.MustCompile(`^`+want+`$`).MatchString(got) || got == env[name] {
				t.Errorf("%s in .env.other (another value than the environment's): %q, want %s and not the environment's %q", name, got, want, env[name])
			}
		}
		for _, tool := range []string{"python", "node"} {
			parsed := map[string][]string{}
			for _, l := range lines(section(r.Stdout, tool)) {
				if f := strings.Fields(l); len(f) == 7 && f[0] == "url" {
					parsed[f[1]] = f[2:]
				}
			}
			for _, c := range cases {
				if c.host == "" {
					continue
				}
				ph := regexp.MustCompile(generic(c.name)).FindString(env[c.name])
				want := []string{orDash(c.user), ph, c.host, orDash(c.port), c.path}
				if c.userSecret {
					want[0], want[1] = ph, "-"
				}
				if strings.Join(parsed[c.name], " ") != strings.Join(want, " ") || ph == "" {
					t.Errorf("%s parsed by %s inside: %v, want user, password (the placeholder), host, port, path %v:\n%s", c.name, tool, parsed[c.name], want, section(r.Stdout, tool))
				}
			}
		}
		hostUnchanged(t, s.Project+"/.env.other", "VALUE_GHP="+other["VALUE_GHP"]+"\nDATABASE_URL="+other["DATABASE_URL"]+"\nPGPASSWORD="+other["PGPASSWORD"]+"\n")
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// A .env name is masked whatever it links to: a file in the project under
// another name, a chain of links, a file outside the project the jail may
// read, a file it may not, /proc/self/environ, /dev/stdin, nothing, a
// directory. The jail sees the masked copy through the link and at the
// target, never the original; a link jail cannot read safely shows no
// secret and does not hang; and from inside, renaming, hard-linking or
// re-linking does not reach the original either.
func TestSecretsDetectSymlinks(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		real := map[string]string{}
		for _, n := range []string{"LOCAL", "CHAIN", "HOME", "LINKED", "HIDDEN", "ENV", "STDIN"} {
			real[n] = "Real" + n + randFrom(alnumChars, 16)
		}
		s.Env = append(s.Env, "ENV_TOKEN="+real["ENV"])
		s.WriteFile(s.Project+"/config/local.settings", "LOCAL_TOKEN="+real["LOCAL"]+"\nPLAIN=local\n", 0o600)
		s.WriteFile(s.Project+"/config/chain.settings", "CHAIN_TOKEN="+real["CHAIN"]+"\nPLAIN=chain\n", 0o600)
		s.WriteFile(s.Home+"/shared/app.settings", "HOME_TOKEN="+real["HOME"]+"\nPLAIN=home\n", 0o600)
		// A directory the jail may read through a symlink to it: the bind's
		// source is the link's target, its destination the link's path.
		s.WriteFile(s.Home+"/real-dir/app.settings", "LINKED_TOKEN="+real["LINKED"]+"\nPLAIN=linked\n", 0o600)
		if err := os.Symlink(s.Home+"/real-dir", s.Home+"/link-dir"); err != nil {
			t.Fatal(err)
		}
		s.chownUp(s.Home + "/link-dir")
		s.WriteFile(s.Base+"/outside/app.settings", "HIDDEN_TOKEN="+real["HIDDEN"]+"\n", 0o600)
		links := map[string]string{
			".env.local":        "config/local.settings",
			".env.hop":          "config/chain.settings",
			".env.chain":        ".env.hop",
			"sub/.env":          "../.env.chain",
			".env.home":         s.Home + "/shared/app.settings",
			".env.hidden":       s.Base + "/outside/app.settings",
			".env.linked":       s.Home + "/link-dir/app.settings",
			".env.proc":         "/proc/self/environ",
			".env.stdin":        "/dev/stdin",
			".env.dangling":     "config/missing.settings",
			".env.dir":          "config",
			"config/.env.loop1": ".env.loop2",
			"config/.env.loop2": ".env.loop1",
		}
		// A FIFO named .env (a jailed command can leave one in the project
		// for the next run), and a link to it: reading either must not
		// hang jail's start.
		if err := syscall.Mkfifo(s.Project+"/.env.fifo", 0o600); err != nil {
			t.Fatal(err)
		}
		s.chownUp(s.Project + "/.env.fifo")
		links[".env.tofifo"] = ".env.fifo"
		os.MkdirAll(s.Project+"/sub", 0o755)
		s.chownUp(s.Project + "/sub/x")
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(s.Project, name)); err != nil {
				t.Fatal(err)
			}
			s.chownUp(filepath.Join(s.Project, name))
		}
		script := `
			for f in .env.local .env.chain sub/.env .env.home .env.linked ` + s.Home + `/link-dir/app.settings .env.hidden .env.proc .env.stdin .env.dangling .env.dir config/.env.loop1 .env.fifo .env.tofifo \
				config/local.settings config/chain.settings ` + s.Home + `/shared/app.settings; do
				echo "==$f"; timeout 10 cat "$f" 2>&1 | tr '\0' '\n'; echo "exit=$?"
			done
			echo ==attack
			mv config config-moved && cat config-moved/local.settings; mv config-moved config
			ln config/local.settings /tmp/hard 2>&1 && cat /tmp/hard
			ln config/local.settings config/hard 2>&1 && cat config/hard; rm -f config/hard
			cp config/local.settings /tmp/copy && cat /tmp/copy
			rm .env.local && ln -s config/local.settings .env.local && cat .env.local
			echo ==end`
		r := s.JailIn(s.Project, real["STDIN"]+"=stdin\n", "--allow-read", s.Home+"/shared", "--allow-read", s.Home+"/link-dir", "--", "sh", "-c", script)
		if r.Code != 0 {
			t.Fatalf("the script failed:\n%s", r)
		}
		for n, v := range real {
			if n == "STDIN" {
				continue // the jail's own stdin: the command may read it
			}
			if strings.Contains(r.Stdout+r.Stderr, v) {
				t.Errorf("%s: the real value behind a symlinked .env reached the jail:\n%s", n, r)
			}
		}
		for _, c := range []struct{ view, name string }{
			{".env.local", "LOCAL_TOKEN"}, {"config/local.settings", "LOCAL_TOKEN"},
			{".env.chain", "CHAIN_TOKEN"}, {"sub/.env", "CHAIN_TOKEN"}, {"config/chain.settings", "CHAIN_TOKEN"},
			{".env.home", "HOME_TOKEN"}, {s.Home + "/shared/app.settings", "HOME_TOKEN"},
			{".env.linked", "LINKED_TOKEN"}, {s.Home + "/link-dir/app.settings", "LINKED_TOKEN"},
		} {
			got := envMap(section(r.Stdout, c.view))
			if !regexp.MustCompile(`^`+generic(c.name)+`$`).MatchString(got[c.name]) || got["PLAIN"] == "" {
				t.Errorf("%s inside: want %s as a placeholder and PLAIN kept; got:\n%s", c.view, c.name, section(r.Stdout, c.view))
			}
		}
		if hidden := section(r.Stdout, ".env.hidden"); strings.Contains(hidden, "HIDDEN_TOKEN") {
			t.Errorf(".env.hidden leads outside every tree the jail shows: want nothing readable, got:\n%s", hidden)
		}
		if proc := envMap(section(r.Stdout, ".env.proc")); !regexp.MustCompile(`^` + generic("ENV_TOKEN") + `$`).MatchString(proc["ENV_TOKEN"]) {
			t.Errorf(".env.proc (-> /proc/self/environ) inside: want the reader's own environment, with ENV_TOKEN a placeholder; got %q", proc["ENV_TOKEN"])
		}
		for _, v := range []string{".env.local", ".env.chain", ".env.stdin", ".env.dangling", ".env.dir", "config/.env.loop1", ".env.fifo", ".env.tofifo"} {
			if sec := section(r.Stdout, v); strings.Contains(sec, "exit=124") {
				t.Errorf("reading %s inside hung:\n%s", v, sec)
			}
		}
		attack := section(r.Stdout, "attack")
		if n := strings.Count(attack, "LOCAL_TOKEN=jail-secret-LOCAL_TOKEN-"); n < 2 {
			t.Errorf("control: the attacks should read the masked copy (moved, copied, re-linked); got:\n%s", attack)
		}
		hostUnchanged(t, s.Project+"/config/local.settings", "LOCAL_TOKEN="+real["LOCAL"]+"\nPLAIN=local\n")
		hostUnchanged(t, s.Home+"/real-dir/app.settings", "LINKED_TOKEN="+real["LINKED"]+"\nPLAIN=linked\n")
		hostUnchanged(t, s.Home+"/shared/app.settings", "HOME_TOKEN="+real["HOME"]+"\nPLAIN=home\n")
	})
}

// jail plan lists every detected secret, the ones only in .env files
// included, with where it may be injected or, when bound to no host, the
// exact line to add to jail.json; it names the secrets of each .env file
// and never prints a value.
func TestSecretsDetectPlan(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		pgpass, ghp, filePass := "Pg"+randFrom(alnumChars, 16), "ghp_"+randFrom(alnumChars, 36), "File"+randFrom(alnumChars, 16)
		urlPass := "Url" + randFrom(alnumChars, 16)
		s.Env = append(s.Env, "PGPASSWORD="+pgpass, "SOME_VALUE="+ghp, "REDIS_URL=redis://:"+urlPass+"@cache:6379/0")
		writeJailJSON(t, s, map[string]any{"secrets": map[string]any{"env": map[string][]string{"PGPASSWORD": {"db.example.test"}}}})
		s.WriteFile(s.Project+"/.env", "STRIPE_SECRET_KEY="+filePass+"\nPLAIN=1\n", 0o600)
		r := s.Jail("plan", "--", "true")
		if r.Code != 0 {
			t.Fatalf("jail plan failed:\n%s", r)
		}
		for _, v := range []string{pgpass, ghp, filePass, urlPass} {
			if strings.Contains(r.Stdout+r.Stderr, v) {
				t.Errorf("jail plan printed a secret's value %q:\n%s", v, r.Stdout)
			}
		}
		for _, want := range []string{
			`PGPASSWORD               -> db.example.test in request headers`,
			`SOME_VALUE               -> nowhere; to bind it add to jail.json: "secrets": {"env": {"SOME_VALUE": ["HOST"]}}`,
			`REDIS_URL                -> nowhere; to bind it add to jail.json: "secrets": {"env": {"REDIS_URL": ["HOST"]}}`,
			`file ` + s.Project + `/.env: secret values masked: STRIPE_SECRET_KEY`,
			`STRIPE_SECRET_KEY (.env) -> nowhere; to bind it add to jail.json: "secrets": {"env": {"STRIPE_SECRET_KEY": ["HOST"]}}`,
		} {
			if !strings.Contains(r.Stdout, want+"\n") {
				t.Errorf("jail plan lacks the line %q:\n%s", want, r.Stdout)
			}
		}
		if strings.Contains(r.Stdout, "PLAIN") {
			t.Errorf("jail plan lists PLAIN, not a secret:\n%s", r.Stdout)
		}
	})
}

// The password of a URL is a secret of its own: bound by the variable's
// name in secrets.env, the placeholder a client takes out of the URL and
// sends in a header reaches the bound host as the real password, and is
// refused toward a host it is not bound to; the server never sees the
// whole URL or the placeholder.
func TestSecretsDetectURLPasswordInjected(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		pass := "UrlPass" + randFrom(alnumChars, 16)
		g := setupSecrets(t, s, []string{"MY_API_KEY"}, nil, func(g *secretsRig) map[string]any {
			g.Real["UPSTREAM_PASSWORD"] = pass
			return map[string]any{"secrets": map[string]any{"env": map[string][]string{"UPSTREAM_URL": {boundHost}}}}
		})
		s.Env = append(s.Env, "UPSTREAM_URL=https://deploy:"+pass+"@"+boundHost+"/v1")
		r := s.Sh(probeSh + `
			PW=$(python3 -c 'import os, urllib.parse; print(urllib.parse.urlsplit(os.environ["UPSTREAM_URL"]).password)')
			echo "pw=$PW"
			probe bound -H "x-api-key: $PW" https://` + boundHost + `/detect-url
			probe other -H "x-api-key: $PW" https://` + otherHost + `/detect-url-other`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		ph := envMap(r.Stdout)["pw"]
		if !regexp.MustCompile(`^` + generic("UPSTREAM_URL") + `$`).MatchString(ph) {
			t.Fatalf("the URL's password inside: %q, want its placeholder:\n%s", ph, r)
		}
		ps := probes(t, r)
		if p := getProbe(t, ps, r, "bound"); p.HTTP != "200" {
			t.Errorf("the request to the bound host: %s", p)
		}
		got := g.Bound.At("/detect-url")
		if len(got) != 1 || got[0].Header.Get("X-Api-Key") != pass {
			t.Errorf("the bound host must receive the real password in x-api-key; got %v", got)
		}
		if p := getProbe(t, ps, r, "other"); p.HTTP != "403" {
			t.Errorf("the placeholder toward a host it is not bound to: want 403 from the proxy, got %s", p)
		}
		if reqs := g.Other.At("/detect-url-other"); len(reqs) > 0 {
			t.Errorf("the other host received the request: %v", reqs)
		}
		for _, srv := range []*echoServer{g.Bound, g.Other} {
			if c := srv.Containing(ph); len(c) > 0 {
				t.Errorf("a server received the placeholder: %v", c)
			}
		}
	})
}
