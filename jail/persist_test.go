package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func persistEnv(t *testing.T) (dir, home string, getenv func(string) string) {
	t.Helper()
	root := t.TempDir()
	home, dir = filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{home, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, home, func(string) string { return "" }
}

func loadTrusted(t *testing.T, path, home string, getenv func(string) string) bool {
	t.Helper()
	c, err := LoadConfigFile(path, path)
	if err != nil {
		t.Fatal(err)
	}
	return IsTrusted(c, home, getenv)
}

// TestPersistRuleKeepsTheFile: the answer goes into the list by a minimal
// edit, comments and layout kept, the mode kept, the result trusted; a
// second time it changes nothing.
func TestPersistRuleKeepsTheFile(t *testing.T) {
	dir, home, getenv := persistEnv(t)
	path := filepath.Join(dir, "jail.json")
	in := `{
	// the team's rules
	"network": {
		"allow": [
			"a.example", // the API
		],
		"deny": ["*.evil.test"] /* never */
	},
	"filesystem": {"denyRead": [".env"]}
}
`
	want := `{
	// the team's rules
	"network": {
		"allow": [
			"a.example", // the API
			"b.example",
		],
		"deny": ["*.evil.test", "c.example"] /* never */
	},
	"filesystem": {"denyRead": [".env"]}
}
`
	if err := os.WriteFile(path, []byte(in), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Trust(path, "", home, getenv); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := PersistRule(path, "network.allow", "b.example", true, home, getenv); err != nil {
			t.Fatal(err)
		}
		if err := PersistRule(path, "network.deny", "c.example", true, home, getenv); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if !loadTrusted(t, path, home, getenv) {
		t.Error("the edited jail.json is not recorded as trusted")
	}
}

// TestPersistRuleFresh: a missing file becomes a fresh config with the
// one entry; the user's config is written without trust.
func TestPersistRuleFresh(t *testing.T) {
	dir, home, getenv := persistEnv(t)
	path := filepath.Join(dir, "jail.json")
	if err := PersistRule(path, "network.allow", "x.example:8443", true, home, getenv); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "{\n  \"network\": {\n    \"allow\": [\n      \"x.example:8443\"\n    ]\n  }\n}\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !loadTrusted(t, path, home, getenv) {
		t.Error("the new jail.json is not trusted")
	}
	user := filepath.Join(home, ".config", "jail", "config.json")
	if err := PersistRule(user, "network.deny", "y.example", false, home, getenv); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(user); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("user config: %v %v", fi, err)
	}
}

// TestPersistRuleRefusesUntrusted: a cloned jail.json that widens the jail
// and was never trusted is not edited, let alone trusted with the answer;
// one that only narrows may be.
func TestPersistRuleRefusesUntrusted(t *testing.T) {
	dir, home, getenv := persistEnv(t)
	path := filepath.Join(dir, "jail.json")
	planted := `{"network": {"allow": ["exfil.evil.test"]}, "env": {"set": {"LD_PRELOAD": "./x.so"}}}`
	os.WriteFile(path, []byte(planted), 0o644)
	err := PersistRule(path, "network.allow", "b.example", true, home, getenv)
	if err == nil || !strings.Contains(err.Error(), "has changes you have not trusted; run jail trust first") {
		t.Fatalf("got %v, want the untrusted refusal", err)
	}
	if got, _ := os.ReadFile(path); string(got) != planted {
		t.Errorf("the untrusted file was changed: %s", got)
	}
	if loadTrusted(t, path, home, getenv) {
		t.Error("the planted jail.json became trusted")
	}
	// Trusted once, then changed behind the user's back: refused again.
	Trust(path, "", home, getenv)
	os.WriteFile(path, []byte(`{"network": {"allow": ["exfil.evil.test", "more.evil.test"]}}`), 0o644)
	if err := PersistRule(path, "network.allow", "b.example", true, home, getenv); err == nil {
		t.Error("a jail.json changed after trust was edited")
	}
	os.WriteFile(path, []byte(`{"network": {"deny": ["x.test"]}}`), 0o644)
	if err := PersistRule(path, "network.allow", "b.example", true, home, getenv); err != nil {
		t.Errorf("a narrowing-only jail.json: %v", err)
	}
}

// TestPersistRuleRefusesSymlink: a jail.json that is a symlink (to a file
// outside the project) is not written through.
func TestPersistRuleRefusesSymlink(t *testing.T) {
	dir, home, getenv := persistEnv(t)
	outside := filepath.Join(home, "target.json")
	os.WriteFile(outside, []byte("{}\n"), 0o644)
	path := filepath.Join(dir, "jail.json")
	if err := os.Symlink(outside, path); err != nil {
		t.Fatal(err)
	}
	for _, project := range []bool{true, false} {
		err := PersistRule(path, "network.allow", "b.example", project, home, getenv)
		if err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("project=%v: got %v, want a symlink refusal", project, err)
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != "{}\n" {
		t.Errorf("the symlink's target was written: %s", got)
	}
	if fi, _ := os.Lstat(path); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced")
	}
}

// TestPersistRuleRefusesBadInput: only the answer lists, only domains.
func TestPersistRuleRefusesBadInput(t *testing.T) {
	dir, home, getenv := persistEnv(t)
	path := filepath.Join(dir, "jail.json")
	for _, c := range [][2]string{{"network.unknown", "allow"}, {"env.pass", "HOME"}, {"network.allow", "*"}, {"network.allow", "a b"}, {"network.allow", ""}} {
		if err := PersistRule(path, c[0], c[1], true, home, getenv); err == nil {
			t.Errorf("PersistRule(%q, %q) accepted", c[0], c[1])
		}
	}
	os.WriteFile(path, []byte(`{"network": {"allow": "x"}}`), 0o644)
	if err := PersistRule(path, "network.allow", "b.example", false, home, getenv); err == nil || !strings.Contains(err.Error(), `"network.allow" must be a list`) {
		t.Errorf("a malformed list: %v", err)
	}
}
