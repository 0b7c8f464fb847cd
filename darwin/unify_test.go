package darwin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestPlanURLSecretKeepsItsShape: a .env value that is a URL with a
// password becomes the URL with only the password replaced, as the Linux
// jail's masked copy of the file has it, so the command can still parse
// it; the proxy swaps back the password alone, and no byte of it reaches
// the environment.
func TestPlanURLSecretKeepsItsShape(t *testing.T) {
	pol := realPolicy(t, jail.Options{NoProfile: true}, "sh", app, alice, "")
	f := fakeFacts(app, alice)
	const pass = "hunter2-Zq8vK3pLm9"
	f.EnvFileSecrets = []EnvFileSecret{{File: app + "/.env", Name: "DATABASE_URL", Value: "postgres://app:" + pass + "@db.example.test:5432/app"}}
	p := plan(t, pol, f)
	var got string
	for _, kv := range p.Env {
		if v, ok := strings.CutPrefix(kv, "DATABASE_URL="); ok {
			got = v
		}
		if strings.Contains(kv, pass) {
			t.Errorf("the password reaches the environment: %s", kv)
		}
	}
	if !strings.HasPrefix(got, "postgres://app:") || !strings.HasSuffix(got, "@db.example.test:5432/app") {
		t.Fatalf("DATABASE_URL inside = %q, want the URL with only its password replaced", got)
	}
	ph := strings.TrimSuffix(strings.TrimPrefix(got, "postgres://app:"), "@db.example.test:5432/app")
	found := false
	for _, s := range p.Secrets {
		found = found || s.Placeholder == ph && s.Value == pass
	}
	if !found {
		t.Errorf("the proxy is not given the password for placeholder %q: %d secrets", ph, len(p.Secrets))
	}
}

// TestPlanAgentProgramThroughLink: an agent's status-line script reached
// through a symlinked directory in a writable home is refused, since the
// rule on its name would not hold the file Seatbelt sees and the link
// could be replaced from inside; reached directly it is read-only.
func TestPlanAgentProgramThroughLink(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, project := filepath.Join(dir, "home"), filepath.Join(dir, "home", "src", "app")
	for _, d := range []string{project, filepath.Join(home, ".claude"), filepath.Join(home, "real-tools")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(home, "real-tools", "status.sh"), []byte("#!/bin/sh\n"), 0o755)
	settings := `{"statusLine": {"type": "command", "command": "sh ~/tools/status.sh"}}`
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(settings), 0o644)
	build := func() (*Plan, error) {
		pol := realPolicy(t, jail.Options{NoProfile: true, AllowWrite: []string{"~"}}, "sh", project, home, "")
		f, err := Gather(pol, home, project, noEnv)
		if err != nil {
			return nil, err
		}
		f.ProxyPort = PlanPort
		return Build(pol, f, []string{"sh"})
	}
	if err := os.Symlink("real-tools", filepath.Join(home, "tools")); err != nil {
		t.Fatal(err)
	}
	if _, err := build(); err == nil || !strings.Contains(err.Error(), "tools is a symlink") {
		t.Errorf("a status-line script behind a symlink in the writable home was planned: %v", err)
	}
	os.Remove(filepath.Join(home, "tools"))
	os.Rename(filepath.Join(home, "real-tools"), filepath.Join(home, "tools"))
	p, err := build()
	if err != nil {
		t.Fatal(err)
	}
	if a := darwinAccess(t, p, filepath.Join(home, "tools", "status.sh")); a != readOnly {
		t.Errorf("the status-line script is %s, want read-only", a)
	}
}

// TestHardLinksEveryMaskOfATree: masks sharing a tree are all applied to
// it, whichever comes first: a pattern for the whole project must not hide
// a narrower mask below it, nor the other way round.
func TestHardLinksEveryMaskOfATree(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project, shared := filepath.Join(dir, "app"), filepath.Join(dir, "shared")
	for _, f := range []string{"app/secrets/key", "app/cert.pem", "shared/x"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("s3cret"), 0o600)
	}
	os.Link(filepath.Join(project, "secrets/key"), filepath.Join(shared, "key-copy"))
	os.Link(filepath.Join(project, "cert.pem"), filepath.Join(shared, "pem-copy"))
	for _, masks := range [][]string{
		{project + "/**/*.pem", project + "/secrets"},
		{project + "/secrets", project + "/**/*.pem"},
		{project + "/**/*.pem", project + "/secrets/**"},
	} {
		got, err := hardLinks(masks, nil, []string{project, shared}, dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{shared + "/key-copy", shared + "/pem-copy"}; !slices.Equal(got, want) {
			t.Errorf("masks %q: other names %q, want %q", masks, got, want)
		}
	}
}
