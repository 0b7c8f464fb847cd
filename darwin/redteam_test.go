package darwin

import (
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestMasksHoldInEveryCase attacks the masks and protections with other
// spellings of the same names: the default macOS volume is case-insensitive,
// so .ENV is the .env file and .GIT/hooks the .git/hooks directory.
func TestMasksHoldInEveryCase(t *testing.T) {
	p := plan(t, realPolicy(t, jail.Options{}, "sh", app, alice, ""), fakeFacts(app, alice))
	for _, tc := range []struct{ op, path string }{
		{"file-read-data", app + "/.ENV"},
		{"file-read-data", app + "/.Env.Local"},
		{"file-read-data", app + "/sub/.eNv"},
		{"file-write-create", app + "/.GIT/hooks/pre-commit"},
		{"file-write-create", app + "/.Git/HOOKS/post-checkout"},
		{"file-write-data", app + "/.git/CONFIG"},
		{"file-write-create", app + "/vendor/dep/.GIT/config"},
		{"file-write-data", app + "/.Claude/settings.json"},
		{"file-write-data", app + "/JAIL.JSON"},
		{"file-write-unlink", app + "/.GIT"},
		{"file-write-unlink", "/Users/ALICE/src/app/.git"},
	} {
		want(t, p, tc.op, tc.path, false)
	}
	// Work in the project is untouched by the folding.
	want(t, p, "file-write-create", app+"/Environment.md", true)
	want(t, p, "file-write-data", app+"/.git/index", true)
}

// TestMasksHoldInEveryNormalization attacks a mask on a non-ASCII name
// under a readable tree with the other Unicode normalization of the same
// name, which APFS opens as the same file.
func TestMasksHoldInEveryNormalization(t *testing.T) {
	pol := defaultPolicy()
	pol.Read = append(pol.Read, home+"/docs")
	pol.DenyRead = append(pol.DenyRead, home+"/docs/Soci\u00e9t\u00e9")
	pol.Protected = append(pol.Protected, project+"/caf\u00e9.json")
	prof, err := Generate(pol)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, pol, prof)
	for _, tc := range []struct{ op, path string }{
		{"file-read-data", home + "/docs/Soci\u00e9t\u00e9/.env"},
		{"file-read-data", home + "/docs/Socie\u0301te\u0301/.env"},
		{"file-read-data", home + "/docs/SOCI\u00c9T\u00c9/.env"},
		{"file-write-data", project + "/cafe\u0301.json"},
	} {
		if evaluate(t, prof, tc.op, tc.path) {
			t.Errorf("%s %s: allowed, want denied", tc.op, tc.path)
		}
	}
	if !evaluate(t, prof, "file-read-data", home+"/docs/other.txt") {
		t.Errorf("file-read-data %s/docs/other.txt: denied, want allowed", home)
	}
}

// TestGitCannotBeSwapped attacks the project's .git: renamed away (then
// written), replaced by a link or a gitdir file pointing at a directory the
// command fills with hooks, or created when the project had none.
func TestGitCannotBeSwapped(t *testing.T) {
	p := plan(t, realPolicy(t, jail.Options{}, "sh", app, alice, ""), fakeFacts(app, alice))
	for _, tc := range []struct{ op, path string }{
		{"file-write-unlink", app + "/.git"},
		{"file-write-unlink", app + "/.Git"},
		{"file-write-create", app + "/.git"}, // ln -s evil .git, echo gitdir: evil > .git, mv evil .git
		{"file-write-create", app + "/.GIT"},
		{"file-write-create", app + "/.git/hooks/pre-commit"},
		{"file-write-unlink", app + "/.git/hooks"},
		{"file-write-create", app + "/.git/commondir"},
		{"file-write-create", app + "/HEAD"},
	} {
		want(t, p, tc.op, tc.path, false)
	}
	want(t, p, "file-write-create", app+"/.git/objects/ab/cdef", true)
	want(t, p, "file-write-create", app+"/.gitignore", true)
}

// TestEnvironmentCarriesNoSecretAndNoInjection gives the host environment
// secrets and dyld injection variables, and a .env value, and checks that
// the jailed command's environment holds placeholders for the secrets and
// none of the injection variables, and that no printed part of the plan
// holds a secret value.
func TestEnvironmentCarriesNoSecretAndNoInjection(t *testing.T) {
	f := fakeFacts(app, alice)
	token := "ghp_" + strings.Repeat("Z9y8", 9)
	dotenv := "sk_live_" + strings.Repeat("q", 24)
	f.Env = append(f.Env, "GITHUB_TOKEN="+token, "DATABASE_URL=postgres://u:hunter2pass@db.example.test/x",
		"DYLD_INSERT_LIBRARIES="+app+"/evil.dylib", "DYLD_LIBRARY_PATH="+app, "DYLD_FRAMEWORK_PATH="+app,
		"DYLD_FALLBACK_LIBRARY_PATH="+app, "SSH_AUTH_SOCK=/private/tmp/agent.sock")
	f.EnvFileSecrets = []EnvFileSecret{{File: app + "/.env", Name: "STRIPE_SECRET_KEY", Value: dotenv}}
	p := plan(t, realPolicy(t, jail.Options{}, "sh", app, alice, ""), f)
	printed := strings.Join(p.Env, "\n") + p.CommandLine() + p.Profile.Text
	for _, secret := range []string{token, dotenv, "hunter2pass", "sk-proj-" + strings.Repeat("A1b2", 10)} {
		if strings.Contains(printed, secret) {
			t.Errorf("the plan shows the secret %q", secret)
		}
	}
	for _, kv := range p.Env {
		if strings.HasPrefix(kv, "DYLD_") || strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			t.Errorf("the jailed command gets %s", kv)
		}
	}
	for _, name := range []string{"GITHUB_TOKEN", "STRIPE_SECRET_KEY", "OPENAI_API_KEY"} {
		if !slices.Contains(p.Placeholders, name) {
			t.Errorf("%s is not passed as a placeholder: %v", name, p.Placeholders)
		}
	}
}

// TestMacStartupStaysReadOnly widens the jail to write ~/Library and
// plants what macOS runs at the next login or a terminal runs when opened.
func TestMacStartupStaysReadOnly(t *testing.T) {
	pol := realPolicy(t, jail.Options{}, "sh", app, alice, "")
	pol.AllowWrite = append(pol.AllowWrite, alice+"/Library")
	p := plan(t, pol, fakeFacts(app, alice))
	for _, rel := range []string{"LaunchAgents/evil.plist", "LAUNCHAGENTS/evil.plist", "Preferences/com.apple.Terminal.plist",
		"Application Support/Code/User/settings.json", "Services/evil.workflow/x"} {
		want(t, p, "file-write-create", alice+"/Library/"+rel, false)
	}
	want(t, p, "file-write-unlink", alice+"/Library", false)
	want(t, p, "file-write-create", alice+"/Library/Caches/tool/x", true)
}

// TestHostileParameterValues gives the profile paths that hold SBPL
// syntax, "=", quotes and non-UTF-8 bytes: each travels as one -D value that
// splits back exactly at its first "=", the text holds none of it, and
// paths with a newline or a NUL (which no argv can carry whole) are refused.
func TestHostileParameterValues(t *testing.T) {
	pol := defaultPolicy()
	odd := "/Users/al/a=b\") (allow default) (\"\xff\xfe;#|c"
	pol.Project = odd
	pol.DenyRead = []string{odd + "/.env"}
	prof, err := Generate(pol)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, pol, prof)
	args := prof.Args([]string{"sh"})
	values := map[string]string{}
	for i := 0; i+1 < len(args) && args[i] == "-D"; i += 2 {
		name, value, _ := strings.Cut(args[i+1], "=")
		if _, dup := values[name]; dup {
			t.Errorf("parameter %s bound twice", name)
		}
		values[name] = value
	}
	if values["PROJECT_0"] != odd {
		t.Errorf("PROJECT_0 splits back as %q, want %q", values["PROJECT_0"], odd)
	}
	if strings.Contains(prof.Text, "allow default") {
		t.Error("the path's SBPL reached the profile text")
	}
	if evaluate(t, prof, "file-read-data", odd+"/.env") || evaluate(t, prof, "file-read-data", odd+"/.ENV") {
		t.Error("the mask under the odd project does not hold")
	}
	if !evaluate(t, prof, "file-read-data", odd+"/main.go") {
		t.Error("the odd project is not readable")
	}
	for _, bad := range []string{"/Users/al/a\nb", "/Users/al/a\x00b"} {
		p := defaultPolicy()
		p.DenyRead = []string{bad}
		if _, err := Generate(p); err == nil {
			t.Errorf("Generate accepted the path %q", bad)
		}
		p = defaultPolicy()
		p.DenyGlobs = []Glob{{bad, "*.pem"}}
		if _, err := Generate(p); err == nil {
			t.Errorf("Generate accepted the glob directory %q", bad)
		}
	}
}

// TestNoNetworkMeansNone asks for published and forwarded ports without a
// proxy: no network rule at all is written.
func TestNoNetworkMeansNone(t *testing.T) {
	pol := defaultPolicy()
	pol.ProxyPort, pol.Published, pol.Forward = 0, []int{8080}, []int{5432}
	prof, err := Generate(pol)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(prof.Text, "\n") {
		if strings.Contains(l, "network") && !strings.HasPrefix(l, ";") {
			t.Errorf("a network rule without a proxy: %s", l)
		}
	}
}

// TestProtectedParentsCannotBeRenamedIn prepares a directory elsewhere in
// the project and renames it into the missing parent of a protected path
// (.claude with a settings.json of hooks, .git/modules with hooks): the
// rename creates only the parent's name, which must be denied.
func TestProtectedParentsCannotBeRenamedIn(t *testing.T) {
	p := plan(t, realPolicy(t, jail.Options{}, "sh", app, alice, ""), fakeFacts(app, alice))
	for _, dir := range []string{".claude", ".CLAUDE", ".git/modules", ".git/worktrees", ".cargo", ".git"} {
		want(t, p, "file-write-create", app+"/"+dir, false)
	}
	want(t, p, "file-write-create", app+"/.claude/notes.md", true)
	want(t, p, "file-write-create", app+"/src", true)
}

// TestDataVolumeSpellingIsMasked reads the home and the package managers'
// databases through the readable system trees: /System/Volumes/Data is a
// second spelling of /Users, and the var trees of Homebrew and MacPorts
// hold local databases.
func TestDataVolumeSpellingIsMasked(t *testing.T) {
	p := plan(t, realPolicy(t, jail.Options{}, "sh", app, alice, ""), fakeFacts(app, alice))
	for _, path := range []string{
		"/System/Volumes/Data" + alice + "/.ssh/id_ed25519",
		"/System/Volumes/Data" + alice + "/Documents/taxes.pdf",
		"/System/Volumes/data" + app + "/.env",
		"/opt/homebrew/var/postgresql@16/base/1/1259",
		"/usr/local/var/mysql/ibdata1",
	} {
		want(t, p, "file-read-data", path, false)
	}
	want(t, p, "file-read-data", "/System/Library/Frameworks/Security.framework/Security", true)
	want(t, p, "file-read-data", "/opt/homebrew/bin/node", true)
}

// TestRulesHoldUnderAnotherSpellingOfAWritableTree allows writing and
// reading trees spelled in another case than the protected and masked
// paths below them (the default macOS volume opens ~/library as
// ~/Library): the protections and masks must still be written.
func TestRulesHoldUnderAnotherSpellingOfAWritableTree(t *testing.T) {
	pol := realPolicy(t, jail.Options{}, "sh", app, alice, "")
	pol.AllowWrite = append(pol.AllowWrite, alice+"/library")
	pol.AllowRead = append(pol.AllowRead, alice+"/.AWS")
	p := plan(t, pol, fakeFacts(app, alice))
	want(t, p, "file-write-create", alice+"/library/LaunchAgents/evil.plist", false)
	want(t, p, "file-read-data", alice+"/.AWS/credentials", false)
	want(t, p, "file-write-create", alice+"/library/Caches/x", true)
}

// TestNoServiceReachesOutside looks up the launchd services that would run
// something outside the sandbox or reach the user's session or keychain:
// none may be allowed, by name or by prefix.
func TestNoServiceReachesOutside(t *testing.T) {
	prof, err := Generate(defaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{
		"com.apple.coreservices.launchservicesd", "com.apple.lsd.mapdb", "com.apple.lsd.modifydb",
		"com.apple.pasteboard.1", "com.apple.windowserver.active", "com.apple.SecurityServer",
		"com.apple.securityd.xpc", "com.apple.coreservices.appleevents", "com.apple.distributed_notifications@Uv3",
		"com.apple.cfprefsd.daemon", "com.apple.cfprefsd.agent", "com.apple.xpc.launchd.domain.system",
		"com.apple.ctkd.token-client", "com.apple.tccd", "com.apple.screencapture.interactive",
	}
	forms, err := parseSexp(prof.Text)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forms[2:] {
		if f.head() != "allow" || !ruleOp(f, "mach-lookup") {
			continue
		}
		for _, n := range f.list[2:] {
			if !n.isList || len(n.list) != 2 || n.list[1].str == nil {
				t.Errorf("mach-lookup filter %s is not a (global-name \"...\")", render1(n))
				continue
			}
			name := *n.list[1].str
			if n.head() != "global-name" {
				t.Errorf("mach-lookup by %s %q: only exact names are allowed", n.head(), name)
			}
			if slices.Contains(forbidden, name) {
				t.Errorf("mach-lookup allows %s", name)
			}
		}
	}
}

// TestOtherTerminalsCannotBeRead opens another terminal tab's device by
// name: reading it would take the keystrokes typed there (a sudo password).
// The jail's own terminal stays usable through /dev/tty and the inherited
// descriptors, which are written and controlled.
func TestOtherTerminalsCannotBeRead(t *testing.T) {
	prof, err := Generate(defaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	validate(t, defaultPolicy(), prof)
	for _, tc := range []struct {
		op, path string
		want     bool
	}{
		{"file-read-data", "/dev/ttys003", false},
		{"file-write-data", "/dev/ttys003", true},
		{"file-read-data", "/dev/tty", true},
		{"file-read-data", "/dev/ptmx", true},
	} {
		if got := evaluate(t, prof, tc.op, tc.path); got != tc.want {
			t.Errorf("%s %s: allowed=%v, want %v", tc.op, tc.path, got, tc.want)
		}
	}
}
