package linux

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestAllowInsideProjectKeepsMasks: an allow entry inside the project needs
// no trust because it cannot undo a mask: deny beats allow. A project that
// allows writing its .env files, its git hooks and its own jail.json, with
// an empty secrets.files, still gets the .env masks and the read-only
// re-binds, and they are mounted after (over) the allow binds.
func TestAllowInsideProjectKeepsMasks(t *testing.T) {
	home := t.TempDir()
	root := filepath.Join(home, "proj")
	files := map[string]string{
		".env": "ANTHROPIC_API_KEY=sk-ant-api03-0123456789abcdef\n", "config/.env.local": "DB_PASSWORD=hunter2hunter2\n",
		".git/hooks/pre-commit": "#!/bin/sh\n", "jail.json": "{}\n",
	}
	for rel, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, files := range []string{`[]`, `["nothing"]`} {
		plan := planFor(t, root, home, `{
		"filesystem": {"allowRead": [".env", "**"], "allowWrite": [".env", "config/.env.local", ".git/hooks", "jail.json"]},
		"secrets": {"files": `+files+`}}`)
		// The last mount at a path is the one the jail sees there.
		last := lastMounts(plan)
		for rel, why := range map[string]string{
			".env": "secrets masked", "config/.env.local": "secrets masked",
			".git/hooks": "read-only", "jail.json": "read-only",
		} {
			if op := last[filepath.Join(root, rel)]; op.Kind != "ro-bind" || op.Why != why {
				t.Errorf("secrets.files %s: %s: want the last mount there a ro-bind (%s) over any allow bind, got %+v", files, rel, why, op)
			}
		}
	}
}

// planFor plans a run of true in root with doc as the project's jail.json,
// from the real facts of the machine.
func planFor(t *testing.T, root, home, doc string) *Plan {
	t.Helper()
	c, err := jail.ParseConfig([]byte(doc), "jail.json")
	if err != nil {
		t.Fatal(err)
	}
	c.Dir, c.Project = root, true
	pol, err := jail.Resolve([]*jail.Config{c}, root, home, jail.Options{NoNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Gather(pol, home, root)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Build(pol, f, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}
