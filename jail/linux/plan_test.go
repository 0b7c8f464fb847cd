package linux

import (
	"errors"
	"flag"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fakeFacts describes a Debian-like machine with merged /usr, a user whose
// home is /home/u and a project at /home/u/proj.
func fakeFacts(extra map[string]PathInfo, matches map[string][]string) *Facts {
	f := &Facts{
		UID: 1000, GID: 1000, Home: "/home/u", Cwd: "/home/u/proj/sub", Exe: "/usr/local/bin/jail",
		LandlockABI: 7, Seccomp: true, SeccompNotify: true,
		Paths: map[string]PathInfo{
			"/usr": {Exists: true, Dir: true}, "/etc": {Exists: true, Dir: true}, "/opt": {Exists: true, Dir: true},
			"/bin":                    {Exists: true, Dir: true, Link: "usr/bin", Resolved: "/usr/bin"},
			"/lib":                    {Exists: true, Dir: true, Link: "usr/lib", Resolved: "/usr/lib"},
			"/lib64":                  {Exists: true, Dir: true, Link: "usr/lib64", Resolved: "/usr/lib64"},
			"/sbin":                   {Exists: true, Dir: true, Link: "usr/sbin", Resolved: "/usr/sbin"},
			"/sys/devices/system/cpu": {Exists: true, Dir: true},
			"/etc/shadow":             {Exists: true}, "/etc/gshadow": {Exists: true},
			"/etc/ssl/private": {Exists: true, Dir: true},
			"/home/u":          {Exists: true, Dir: true}, "/home/u/proj": {Exists: true, Dir: true},
			"/home/u/proj/.git":        {Exists: true, Dir: true},
			"/home/u/proj/.git/hooks":  {Exists: true, Dir: true},
			"/home/u/proj/.git/config": {Exists: true},
			"/home/u/.ssh":             {Exists: true, Dir: true},
			"/home/u/.ssh/id_ed25519":  {Exists: true},
			"/home/u/.bashrc":          {Exists: true},
			"/home/u/.aws":             {Exists: true, Dir: true},
		},
		Matches: map[string][]string{
			"/home/u/proj/**/jail.json":           {"/home/u/proj/jail.json"},
			"/etc/ssh/ssh_host_*key":              {"/etc/ssh/ssh_host_ed25519_key"},
			"/home/u/proj/.claude/settings*.json": nil,
		},
		Env: []string{
			"PATH=/usr/bin:/bin", "HOME=/home/u", "TERM=xterm", "ANTHROPIC_API_KEY=sk-ant-real",
			"SSH_AUTH_SOCK=/run/user/1000/ssh", "MY_SERVICE_TOKEN=t0k", "EDITOR=vi",
		},
		Session: "s3ss10n", SecretKey: "r4nd0m",
		SessionDir: "/run/user/1000/jail/s3ss10n", CADir: "/home/u/.config/jail/ca",
		StateDir: "/home/u/.local/state/jail",
	}
	f.Paths["/etc/resolv.conf"] = PathInfo{Exists: true}

	f.Paths["/home/u/proj/jail.json"] = PathInfo{Exists: true}
	f.Paths["/etc/ssh/ssh_host_ed25519_key"] = PathInfo{Exists: true}
	for k, v := range extra {
		f.Paths[k] = v
	}
	for k, v := range matches {
		f.Matches[k] = v
	}
	return f
}

func TestPlanGolden(t *testing.T) {
	tests := []struct {
		name    string
		pol     jail.Policy
		extra   map[string]PathInfo
		matches map[string][]string
	}{
		{name: "default", pol: jail.Policy{ProjectRoot: "/home/u/proj"}},
		{
			// The real home through the overlay: its credential stores
			// masked, its delayed-escape files read-only, init's lower
			// layer and upper directory planned.
			name: "learning",
			pol:  jail.Policy{ProjectRoot: "/home/u/proj", Mode: "learning", Network: jail.NetworkConfig{Unknown: "allow"}},
			extra: map[string]PathInfo{
				"/home/u/.ssh": {Exists: true, Dir: true}, "/home/u/.aws": {Exists: true, Dir: true},
				"/home/u/.netrc": {Exists: true}, "/home/u/.bashrc": {Exists: true},
			},
			matches: map[string][]string{
				"/home/u/.ssh/**": {"/home/u/.ssh", "/home/u/.ssh/id_ed25519"},
				"/home/u/.aws/**": {"/home/u/.aws", "/home/u/.aws/credentials"},
			},
		},
		{
			name: "users-example",
			pol: jail.Policy{
				ProjectRoot: "/home/u/proj", Sources: []string{"/home/u/proj/jail.json"},
				AllowWrite: []string{"/home/u/proj"},
				DenyRead:   []string{"/home/u/proj/.env", "/home/u/proj/.env.*", "/home/u/proj/secrets/**", "/home/u/proj/**/*.pem", "/home/u/.ssh/**", "/home/u/.aws/**"},
				Command:    jail.CommandConfig{Deny: []string{"git push", "npm publish"}},
			},
			extra: map[string]PathInfo{
				"/home/u/proj/.env": {Exists: true}, "/home/u/proj/secrets": {Exists: true, Dir: true},
				"/home/u/proj/secrets/a": {Exists: true}, "/home/u/proj/k/x.pem": {Exists: true},
			},
			matches: map[string][]string{
				"/home/u/proj/.env.*":     nil,
				"/home/u/proj/secrets/**": {"/home/u/proj/secrets", "/home/u/proj/secrets/a"},
				"/home/u/proj/**/*.pem":   {"/home/u/proj/k/x.pem"},
			},
		},
		{
			name: "allow-home-paths",
			pol: jail.Policy{
				ProjectRoot: "/home/u/proj",
				AllowRead:   []string{"/home/u/.config/gh", "/home/u/.gitconfig", "/home/u/missing"},
				AllowWrite:  []string{"/home/u/.npm", "/home/u/.cache/go-build"},
				DenyWrite:   []string{"/home/u/proj/Makefile"},
			},
			extra: map[string]PathInfo{
				"/home/u/.config/gh": {Exists: true, Dir: true, Resolved: "/data/gh"},
				"/home/u/.gitconfig": {Exists: true}, "/home/u/.npm": {Exists: true, Dir: true},
				"/home/u/.cache/go-build": {Exists: true, Dir: true}, "/home/u/proj/Makefile": {Exists: true},
				"/home/u/.config/gh/hosts.yml": {Exists: true},
			},
		},
		{
			// Symlinks at protected and denied paths: a link to a file
			// outside every bind must not pull that file into the jail;
			// a link to a file inside the project protects the target.
			name: "symlinks",
			pol:  jail.Policy{ProjectRoot: "/home/u/proj", DenyRead: []string{"/home/u/proj/.env", "/home/u/proj/link.pem"}},
			extra: map[string]PathInfo{
				"/home/u/proj/.env":      {Exists: true, Link: "/srv/secrets/.env", Resolved: "/srv/secrets/.env"},
				"/home/u/proj/link.pem":  {Exists: true, Link: "keys/a.pem", Resolved: "/home/u/proj/keys/a.pem"},
				"/home/u/proj/.git/info": {Exists: true, Dir: true, Resolved: "/elsewhere/.git/info"},
			},
		},
		{
			// Secrets: env placeholders bound by provider and by config,
			// .env files masked unless denyRead hides them whole.
			name: "secrets",
			pol: jail.Policy{
				ProjectRoot: "/home/u/proj",
				DenyRead:    []string{"/home/u/proj/.env.prod"},
				Secrets:     jail.SecretsConfig{Env: map[string]jail.SecretEnv{"MY_SERVICE_TOKEN": {Hosts: []string{"api.service.test"}}}},
			},
			extra: map[string]PathInfo{
				"/home/u/proj/.env": {Exists: true}, "/home/u/proj/.env.prod": {Exists: true},
				"/home/u/proj/sub/.env.local": {Exists: true},
			},
			matches: map[string][]string{
				"/home/u/proj/**/.env":   {"/home/u/proj/.env"},
				"/home/u/proj/**/.env.*": {"/home/u/proj/.env.prod", "/home/u/proj/sub/.env.local"},
			},
		},
		{
			name: "writable-home",
			pol:  jail.Policy{ProjectRoot: "/home/u/proj", AllowWrite: []string{"/home/u"}},
		},
		{
			name: "hard-link",
			pol:  jail.Policy{ProjectRoot: "/home/u/proj"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeFacts(tt.extra, tt.matches)
			if tt.name == "secrets" {
				// Names only, as facts gathering reads them: one also in
				// the environment, one bound by secrets.env, one unbound.
				f.EnvFileSecrets = map[string][]string{
					"/home/u/proj/.env":           {"ANTHROPIC_API_KEY", "DB_PASSWORD"},
					"/home/u/proj/sub/.env.local": {"DB_PASSWORD", "STRIPE_SECRET_KEY"},
				}
				f.Env = append(f.Env, "REDIS_URL=redis://:pw@cache:6379/0")
			}
			if tt.name == "hard-link" {
				f.HardLinks = []string{"/home/u/proj/innocent.txt"}
				f.Paths["/home/u/proj/innocent.txt"] = PathInfo{Exists: true}
			}
			pol := tt.pol
			pol.Network.Unknown = "deny"
			p, err := Build(&pol, f, []string{"claude", "--version"})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "plan", tt.name+".golden"), p.String())
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test ./jail -run %s -update to accept):\n%s", path, t.Name(), lineDiff(string(want), got))
	}
}

// lineDiff shows the lines that differ, marked - (want) and + (got).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString(strconv.Itoa(i+1) + ":\n- " + wl + "\n+ " + gl + "\n")
		}
	}
	return b.String()
}

func TestPlanRefusals(t *testing.T) {
	tests := []struct {
		name string
		pol  jail.Policy
		mod  func(*Facts)
		want string
	}{
		{"home as project", jail.Policy{ProjectRoot: "/home/u"}, nil, "refusing to use /home/u as the project root"},
		{"root as project", jail.Policy{ProjectRoot: "/"}, nil, "refusing to use / as the project root"},
		{"no landlock", jail.Policy{ProjectRoot: "/home/u/proj"}, func(f *Facts) { f.LandlockABI = 0 }, "Landlock is not available"},
		{"no seccomp", jail.Policy{ProjectRoot: "/home/u/proj"}, func(f *Facts) { f.Seccomp = false }, "seccomp filters are not available"},
		// A protected path that is a symlink, or lies below one, inside the
		// writable project: the link itself could be replaced from inside.
		{"protected symlink", jail.Policy{ProjectRoot: "/home/u/proj"}, func(f *Facts) {
			f.Paths["/home/u/proj/.vscode"] = PathInfo{Exists: true, Dir: true, Link: "/home/u/.ssh", Resolved: "/home/u/.ssh"}
		}, "/home/u/proj/.vscode is a symlink inside a writable tree"},
		{"protected below a symlink", jail.Policy{ProjectRoot: "/home/u/proj"}, func(f *Facts) {
			f.Paths["/home/u/proj/.claude"] = PathInfo{Exists: true, Dir: true, Link: "shared/claude", Resolved: "/home/u/proj/shared/claude"}
		}, "/home/u/proj/.claude is a symlink inside a writable tree, so /home/u/proj/.claude/agents cannot be kept read-only"},
		{"no user notification", jail.Policy{ProjectRoot: "/home/u/proj", Command: jail.CommandConfig{Deny: []string{"git push"}}}, func(f *Facts) { f.SeccompNotify = false }, "command.deny needs seccomp user notification"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeFacts(nil, nil)
			if tt.mod != nil {
				tt.mod(f)
			}
			_, err := Build(&tt.pol, f, []string{"true"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	f := fakeFacts(nil, nil)
	f.LandlockABI = 0
	_, err := Build(&jail.Policy{ProjectRoot: "/home/u/proj"}, f, []string{"true"})
	if !errors.Is(err, jail.ErrUnsupported) {
		t.Errorf("missing Landlock: %v is not ErrUnsupported", err)
	}
	p, err := Build(&jail.Policy{ProjectRoot: "/home/u/proj", BestEffort: true}, f, []string{"true"})
	if err != nil || p.LandlockV != 0 || len(p.GaveUp) != 1 {
		t.Errorf("best effort without Landlock: err=%v LandlockV=%d GaveUp=%v", err, p.LandlockV, p.GaveUp)
	}
}

// TestPlanDeterministic builds the same plan twice from the same facts.
func TestPlanDeterministic(t *testing.T) {
	pol := jail.Policy{ProjectRoot: "/home/u/proj", AllowRead: []string{"/home/u/.gitconfig"}}
	a, err := Build(&pol, fakeFacts(nil, nil), []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		b, _ := Build(&pol, fakeFacts(nil, nil), []string{"x"})
		if a.String() != b.String() {
			t.Fatalf("plan differs between two builds:\n%s", lineDiff(a.String(), b.String()))
		}
	}
}

// TestPlannerIsPure is a statement of policy: the planning files touch no
// kernel and run no programs; only the apply side does.
func TestPlannerIsPure(t *testing.T) {
	forbidden := map[string]bool{"os": true, "os/exec": true, "syscall": true, "golang.org/x/sys/unix": true, "unsafe": true}
	for _, file := range []string{"plan.go", "build.go", "../env.go", "../envfile.go", "../placeholder.go", "../secretmask.go", "../glob.go", "../jsonc/jsonc.go", "../learn/learn.go", "../learn/merge.go", "seccomp/rules.go"} {
		f, err := goparser.ParseFile(token.NewFileSet(), file, nil, goparser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); forbidden[p] {
				t.Errorf("%s imports %s; planning must stay pure (gather facts in facts.go)", file, p)
			}
		}
	}
}

func TestPlanEnv(t *testing.T) {
	pol := &jail.Policy{Env: jail.EnvConfig{Pass: []string{"GH_TOKEN"}, Set: map[string]string{"CI": "1"}}, SecretNames: []string{"DB_URL_X"}}
	ep := jail.PlanEnv([]string{"GH_TOKEN=ghp_passme", "OPENAI_API_KEY=sk-x", "DB_URL_X=postgres://u:p@h", "FOO=bar", "SSH_AUTH_SOCK=/x", "JAIL_SESSION=old", "WEIRD=ghp_0123456789abcdef"}, pol, "SUF", "SESS", nil)
	got := strings.Join(ep.Env, "\n")
	for _, want := range []string{"GH_TOKEN=ghp_passme", "FOO=bar", "CI=1", "JAIL_SESSION=SESS"} {
		if !strings.Contains(got+"\n", want+"\n") {
			t.Errorf("env lacks %q:\n%s", want, got)
		}
	}
	// By name: generic; a URL: only its password; by value: the shape kept.
	for _, want := range []string{
		`OPENAI_API_KEY=jail-secret-OPENAI_API_KEY-[A-Za-z0-9]{16}`,
		`DB_URL_X=postgres://u:jail-secret-DB_URL_X-[A-Za-z0-9]{16}@h`,
		`WEIRD=ghp_jail[A-Za-z0-9]{32}`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(got) {
			t.Errorf("env lacks a line matching %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "SSH_AUTH_SOCK") || strings.Contains(got, "sk-x") || strings.Contains(got, "=old") {
		t.Errorf("env leaks:\n%s", got)
	}
}

// lastMounts is the last mount at each path, the one the jail sees there:
// bubblewrap's ops, then init's mounts (as a ro-bind or a bind).
func lastMounts(p *Plan) map[string]Op {
	last := map[string]Op{}
	for _, op := range p.Ops {
		last[op.Dest] = op
	}
	for _, m := range p.Mounts {
		kind := "bind"
		if m.ReadOnly {
			kind = "ro-bind"
		}
		last[m.Path] = Op{Kind: kind, Src: m.Host, Dest: m.Path, Why: m.Why}
	}
	return last
}
