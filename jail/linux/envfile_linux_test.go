package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// prepareSecrets derives the plan's placeholders: the environment's value
// gets PlanEnv's, the same value in a .env file the same one (one secret
// for the proxy), another value another one; a URL's password is its own
// secret; no two secrets share a placeholder.
func TestPrepareSecretsAgreesWithPlanEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	os.Mkdir(dir, 0o700)
	session := filepath.Join(dir, "s")
	host := []string{"API_TOKEN=env-value-1", "DATABASE_URL=postgres://app:dbpass@db/app", "EMPTY_TOKEN="}
	pol := &jail.Policy{}
	ep := jail.PlanEnv(host, pol, "key", "s", nil)
	env := map[string]string{}
	for _, kv := range host {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	inside := map[string]string{}
	for _, kv := range ep.Env {
		k, v, _ := strings.Cut(kv, "=")
		inside[k] = v
	}
	src := filepath.Join(t.TempDir(), ".env")
	os.WriteFile(src, []byte("API_TOKEN=env-value-1\nDATABASE_URL=postgres://app:dbpass@db/app\nEMPTY_TOKEN=file-value\nOTHER_TOKEN=other\n"), 0o600)
	src2 := filepath.Join(t.TempDir(), ".env.local")
	os.WriteFile(src2, []byte("API_TOKEN=file-value-2\n"), 0o600)
	plan := &Plan{
		SecretKey: "key", Secrets: jail.Bindings(ep.Placeholders, pol),
		EnvFiles: []EnvFile{{Path: src, Copy: filepath.Join(session, "env-0")}, {Path: src2, Copy: filepath.Join(session, "env-1")}},
	}
	secrets, err := prepareSecrets(plan, func(n string) string { return env[n] })
	if err != nil {
		t.Fatal(err)
	}
	byPh := map[string]string{}
	for _, s := range secrets {
		if _, dup := byPh[s.Placeholder]; dup {
			t.Errorf("placeholder %s used twice", s.Placeholder)
		}
		byPh[s.Placeholder] = s.Name + "=" + s.Value
	}
	if byPh[inside["API_TOKEN"]] != "API_TOKEN=env-value-1" {
		t.Errorf("the environment's placeholder %s stands for %q", inside["API_TOKEN"], byPh[inside["API_TOKEN"]])
	}
	pw := strings.TrimSuffix(strings.TrimPrefix(inside["DATABASE_URL"], "postgres://app:"), "@db/app")
	if byPh[pw] != "DATABASE_URL=dbpass" {
		t.Errorf("the URL's password placeholder %s stands for %q", pw, byPh[pw])
	}
	copy0, _ := os.ReadFile(filepath.Join(session, "env-0"))
	copy1, _ := os.ReadFile(filepath.Join(session, "env-1"))
	if !strings.HasPrefix(string(copy0), "API_TOKEN="+inside["API_TOKEN"]+"\nDATABASE_URL="+inside["DATABASE_URL"]+"\n") {
		t.Errorf("the copy does not hold the environment's placeholders for the same values:\n%s", copy0)
	}
	for _, c := range [][2]string{{string(copy0), "EMPTY_TOKEN="}, {string(copy1), "API_TOKEN="}} {
		ph := strings.TrimSpace(strings.SplitN(strings.SplitAfterN(c[0], c[1], 2)[1], "\n", 2)[0])
		if ph == inside[strings.TrimSuffix(c[1], "=")] || byPh[ph] == "" {
			t.Errorf("%s another value than the environment's: placeholder %q (environment's %q), secret %q", c[1], ph, inside[strings.TrimSuffix(c[1], "=")], byPh[ph])
		}
	}
	if len(secrets) != 5 {
		t.Errorf("want 5 secrets (2 from the environment, 3 from the files), got %d: %v", len(secrets), byPh)
	}
}
