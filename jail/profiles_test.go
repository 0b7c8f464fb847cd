package jail

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/profiles"
)

// TestBuiltinProfilesStrict: every embedded profile passes the strict
// config parser and composes with every other.
func TestBuiltinProfilesStrict(t *testing.T) {
	entries, err := fs.ReadDir(profiles.FS, ".")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no embedded profiles: %v", err)
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		names = append(names, name)
		c, err := LoadProfile(name, "/home/u", func(string) string { return "" })
		if err != nil {
			t.Errorf("profile %s: %v", name, err)
			continue
		}
		if c.Description == "" {
			t.Errorf("profile %s has no description", name)
		}
	}
	for _, a := range names {
		for _, b := range names {
			layers, err := loadProfiles([]string{a, b}, "/home/u", func(string) string { return "" })
			if err != nil {
				t.Fatalf("%s+%s: %v", a, b, err)
			}
			if _, err := Resolve(layers, "/home/u/proj", "/home/u", Options{}); err != nil {
				t.Errorf("%s+%s do not compose: %v", a, b, err)
			}
		}
	}
}

func TestAutoProfile(t *testing.T) {
	exists := func(n string) bool { return n == "claude" || n == "codex" || n == "node" || n == "go" }
	for _, tt := range []struct{ argv, want string }{
		{"claude --version", "claude"},
		{"/usr/local/bin/codex", "codex"},
		{"npm install", "node"},
		{"npx @anthropic-ai/claude-code -p hi", "claude"},
		{"npx -y @openai/codex@1.2.3", "codex"},
		{"npx cowsay", "node"},
		{"go build", "go"},
		{"sh -c x", ""},
	} {
		if got := AutoProfile(strings.Fields(tt.argv), exists); got != tt.want {
			t.Errorf("AutoProfile(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

func TestLoadLayersProfiles(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	proj := filepath.Join(home, "proj")
	os.MkdirAll(filepath.Join(proj, ".git"), 0o755)
	cfgHome := filepath.Join(dir, "cfg")
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return cfgHome
		}
		return ""
	}
	profileNames := func(opts Options, argv ...string) (string, error) {
		layers, root, err := LoadLayers(opts, argv, proj, home, getenv)
		if err != nil {
			return "", err
		}
		p, err := Resolve(layers, root, home, opts)
		if err != nil {
			return "", err
		}
		return strings.Join(p.Profiles, ","), nil
	}
	if got, err := profileNames(Options{}, "claude", "-p", "hi"); err != nil || got != "claude" {
		t.Errorf("jail -- claude: profiles %q, %v", got, err)
	}
	if got, err := profileNames(Options{NoProfile: true}, "claude"); err != nil || got != "" {
		t.Errorf("--no-profile: profiles %q, %v", got, err)
	}
	if got, err := profileNames(Options{Profiles: []string{"gemini", "node"}}, "sh"); err != nil || got != "gemini,node" {
		t.Errorf("--profile gemini,node: profiles %q, %v", got, err)
	}
	if _, err := profileNames(Options{Profiles: []string{"nope"}}, "sh"); err == nil || !strings.Contains(err.Error(), `unknown profile "nope"`) {
		t.Errorf("--profile nope: %v", err)
	}
	os.WriteFile(filepath.Join(proj, "jail.json"), []byte(`{"extends": ["go"]}`), 0o644)
	if got, err := profileNames(Options{}, "sh"); err != nil || got != "go" {
		t.Errorf("extends go: profiles %q, %v", got, err)
	}
	// A user profile overrides the built-in of the same name.
	os.MkdirAll(filepath.Join(cfgHome, "jail", "profiles"), 0o755)
	os.WriteFile(filepath.Join(cfgHome, "jail", "profiles", "go.json"), []byte(`{"description": "mine", "filesystem": {"allowRead": ["~/mine"]}}`), 0o644)
	layers, root, err := LoadLayers(Options{}, []string{"sh"}, proj, home, getenv)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := Resolve(layers, root, home, Options{})
	if len(p.AllowRead) != 1 || p.AllowRead[0] != filepath.Join(home, "mine") {
		t.Errorf("user profile go: allowRead %v", p.AllowRead)
	}
}
