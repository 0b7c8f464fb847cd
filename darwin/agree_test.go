package darwin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
)

// access is what a jailed command may do with a host path.
type access string

const (
	none     access = "none"      // neither read nor write: masked or not shown
	readOnly access = "read-only" // read, not write
	readable access = "writable"  // read and write
)

// linuxAccess reads a bubblewrap plan the way the mounts stack: the last
// mount at or above the path decides, then init's read-only mounts, which
// bind the jail's own view onto itself, take writing away. A throwaway
// tree (the private home, tmpfs) shows nothing of the host.
func linuxAccess(p *linux.Plan, path string) access {
	got := none
	for _, op := range p.Ops {
		if !within(path, op.Dest) {
			continue
		}
		switch op.Kind {
		case "bind", "view":
			got = readable
		case "ro-bind", "ro-view":
			got = readOnly
		case "mask", "mask-dir", "home", "tmpfs":
			got = none
		}
	}
	for _, m := range p.Mounts { // each binds the jail's own view of Path onto itself
		if within(path, m.Path) && m.ReadOnly && got == readable {
			got = readOnly
		}
	}
	return got
}

// darwinAccess evaluates the Seatbelt profile for the path.
func darwinAccess(t *testing.T, p *Plan, path string) access {
	path = MacPath(path)
	read := evaluate(t, p.Profile, "file-read-data", path)
	write := evaluate(t, p.Profile, "file-write-data", path) && evaluate(t, p.Profile, "file-write-create", path)
	switch {
	case read && write:
		return readable
	case read:
		return readOnly
	}
	return none
}

// TestSamePolicyBothPlatforms plans one table of policies on a real tree
// with both planners and asserts that the bubblewrap plan and the Seatbelt
// profile agree on what is readable, writable, masked and protected. The
// one difference is by design: a .env is shown as a masked copy on Linux
// and denied on macOS, where nothing can be mounted over a file.
func TestSamePolicyBothPlatforms(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, project := filepath.Join(dir, "home"), filepath.Join(dir, "home", "src", "app")
	for _, f := range []string{
		"src/app/main.go", "src/app/.env", "src/app/api/.env.local", "src/app/secrets/key", "src/app/.git/config",
		"src/app/.git/objects/x", "src/app/.vscode/settings.json", "src/app/cert.pem",
		".ssh/id_ed25519", ".aws/credentials", ".config/tool-a/config", ".config/tool-b/config", ".cache/go/jail/x",
		"notes/todo.txt", "notes/private-plan.txt", "shared/lib.txt",
		"src/app/vendor/lib/.git/config", "src/app/vendor/lib/main.c", "tools/status.sh",
	} {
		p := filepath.Join(home, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("API_TOKEN=not-a-real-token-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// An agent's settings name a program in the home the unjailed agent
	// runs later; a project file and a shared file are other names of the
	// SSH key and of the .env.
	settings := `{"statusLine": {"type": "command", "command": "sh ~/tools/status.sh"}}`
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	if err := os.WriteFile(filepath.Join(home, ".claude/settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"src/app/key-copy": ".ssh/id_ed25519", "shared/env-copy": "src/app/.env", "shared/pem-copy": "src/app/cert.pem"} {
		if err := os.Link(filepath.Join(home, target), filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	always := []probe{
		{"src/app/key-copy", none},
		{"src/app/vendor/lib/.git/config", readOnly},
		{"src/app/vendor/lib/.git/hooks/post-checkout", readOnly},
		{"src/app/vendor/lib/HEAD", readOnly},
		{"src/app/vendor/lib/main.c", readable},
	}
	type row struct {
		name   string
		opts   jail.Options
		probes []probe
		cmd    string // "" for sh
	}
	rows := []row{
		{"default", jail.Options{NoProfile: true}, []probe{
			{"src/app/main.go", readable},
			{"src/app/.git/config", readOnly},
			{"src/app/.git/objects/x", readable},
			{"src/app/.git/hooks/pre-commit", readOnly}, // missing: held all the same
			{"src/app/.vscode/settings.json", readOnly},
			{"src/app/.mcp.json", readOnly},
			{".ssh/id_ed25519", none},
			{"notes/todo.txt", none},
			{"shared/lib.txt", none},
		}, ""},
		{"globs and masks", jail.Options{NoProfile: true,
			AllowRead:  []string{"~/.config/tool-*", "~/notes", "~/.ssh"},
			AllowWrite: []string{"~/.cache/*/jail", "~/shared"},
			DenyRead:   []string{"secrets/**", "**/*.pem", "~/notes/private*"},
		}, []probe{
			{".config/tool-a/config", readOnly},
			{".config/tool-b/config", readOnly},
			{".cache/go/jail/x", readable},
			{"shared/lib.txt", readable},
			{"notes/todo.txt", readOnly},
			{"notes/private-plan.txt", none},
			{"src/app/secrets/key", none},
			{"src/app/cert.pem", none},
			{"shared/pem-copy", none}, // another name of a file a glob denies
			{".ssh/id_ed25519", none}, // a credential store, masked though allowed
			{".aws/credentials", none},
		}, ""},
		{"home writable", jail.Options{NoProfile: true, AllowWrite: []string{"~"}}, []probe{
			{"notes/todo.txt", readable},
			{".zshrc", readOnly},
			{".gitconfig", readOnly},
			{".ssh/id_ed25519", none},
			{".aws/credentials", none},
			{"tools/status.sh", readOnly},
			{".claude/settings.json", readOnly},
			{"shared/env-copy", none},
			{"shared/pem-copy", readable}, // nothing denies cert.pem here
		}, ""},
		{"globbed denyRead", jail.Options{NoProfile: true,
			AllowRead: []string{"~/.config", "~/shared"},
			DenyRead:  []string{"~/.config/tool-?/config", "**/vendor/*/main.c"},
		}, []probe{
			{".config/tool-a/config", none},
			{".config/tool-b/config", none},
			{"src/app/vendor/lib/main.c", none},
			{"shared/lib.txt", readOnly},
			{"shared/env-copy", none},
		}, ""},
	}
	// Each agent's built-in profile, as the goldens plan them: the
	// credential stores, the other names of masked files and git's files
	// are held the same on both.
	for _, a := range agentProfiles {
		rows = append(rows, row{"agent " + a, jail.Options{}, []probe{
			{".ssh/id_ed25519", none},
			{".aws/credentials", none},
			{"src/app/main.go", readable},
			{"src/app/.git/config", readOnly},
			{"src/app/.mcp.json", readOnly},
			{"shared/env-copy", none},
		}, a})
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			cmd := tc.cmd
			if cmd == "" {
				cmd = "sh"
			}
			pol := realPolicy(t, tc.opts, cmd, project, home, "")
			lf, err := linux.Gather(pol, home, project)
			if err != nil {
				t.Fatal(err)
			}
			lp, err := linux.Build(pol, lf, []string{cmd})
			if err != nil {
				t.Fatal(err)
			}
			df, err := Gather(pol, home, project, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			df.ProxyPort = PlanPort
			dp, err := Build(pol, df, []string{cmd})
			if err != nil {
				t.Fatal(err)
			}
			for _, pr := range append(append(probesWithout(always, tc.probes), tc.probes...), probe{"src/app/.env", none}, probe{"src/app/api/.env.local", none}) {
				path := filepath.Join(home, pr.path)
				l, d := linuxAccess(lp, path), darwinAccess(t, dp, path)
				if strings.Contains(pr.path, ".env") {
					if l != readOnly || d != none {
						t.Errorf("%s: Linux %s (want a read-only masked copy), macOS %s (want none)", pr.path, l, d)
					}
					continue
				}
				if l != pr.want || d != pr.want {
					t.Errorf("%s: Linux %s, macOS %s, want %s on both", pr.path, l, d, pr.want)
				}
			}
		})
	}
}

// probe is a host path, relative to the test's home, and the access the
// jailed command must have to it.
type probe struct {
	path string
	want access
}

// probesWithout is base less the paths of probes: a row's own probe of a
// path overrides the one every row has.
func probesWithout(base, probes []probe) []probe {
	var out []probe
	for _, b := range base {
		if !slices.ContainsFunc(probes, func(p probe) bool { return p.path == b.path }) {
			out = append(out, b)
		}
	}
	return out
}
