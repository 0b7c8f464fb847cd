package darwin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestHardLinksToDeniedFilesAreMasked plants, in a real project, hard links
// to a key in ~/.ssh and to the project's own masked .env, and checks that
// the planned profile denies reading them by their project names, while a
// pair of linked ordinary files stays readable.
func TestHardLinksToDeniedFilesAreMasked(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	project := filepath.Join(home, "src", "app")
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(project, "docs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := func(old, new string) {
		if err := os.Link(old, new); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".ssh", "id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----\n")
	link(filepath.Join(home, ".ssh", "id_rsa"), filepath.Join(project, "docs", "logo.txt"))
	write(filepath.Join(project, ".env"), "STRIPE_SECRET_KEY=sk_live_abcdefghijklmnop\n")
	link(filepath.Join(project, ".env"), filepath.Join(project, "config.txt"))
	write(filepath.Join(project, ".ENV.local"), "AWS_SECRET_ACCESS_KEY=abcdefghijklmnopqrstuvwxyz0123456789ABCD\n")
	link(filepath.Join(project, ".ENV.local"), filepath.Join(project, "readme.txt"))
	write(filepath.Join(project, "a.go"), "package a\n")
	link(filepath.Join(project, "a.go"), filepath.Join(project, "b.go"))

	pol := realPolicy(t, jail.Options{}, "sh", project, home, "")
	f, err := Gather(pol, home, project, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	f.ProxyPort = PlanPort
	p := plan(t, pol, f)
	for _, name := range []string{"docs/logo.txt", "config.txt", ".env", "readme.txt", ".ENV.local"} {
		want(t, p, "file-read-data", MacPath(filepath.Join(project, name)), false)
	}
	for _, name := range []string{"a.go", "b.go"} {
		want(t, p, "file-read-data", MacPath(filepath.Join(project, name)), true)
	}
}

// TestLinkedStartupIsRefused makes ~/Library writable where LaunchAgents is
// a symlink to another directory: the rule on the name would not hold for
// the target, so the plan is refused.
func TestLinkedStartupIsRefused(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	project := filepath.Join(home, "src", "app")
	for _, d := range []string{filepath.Join(home, "Library"), filepath.Join(home, "elsewhere"), project} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, "elsewhere"), filepath.Join(home, "Library", "LaunchAgents")); err != nil {
		t.Fatal(err)
	}
	pol := realPolicy(t, jail.Options{}, "sh", project, home, "")
	pol.AllowWrite = append(pol.AllowWrite, filepath.Join(home, "Library"))
	f, err := Gather(pol, home, project, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	f.ProxyPort = PlanPort
	if _, err := Build(pol, f, []string{"sh"}); err == nil {
		t.Error("planned a writable ~/Library whose LaunchAgents is a symlink")
	}
}

// TestLinkedStartupIsRefusedInAnyCase is the same with ~/Library made
// writable as ~/library: the symlink check must see the tree all the same.
func TestLinkedStartupIsRefusedInAnyCase(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	project := filepath.Join(home, "src", "app")
	// On Linux the two spellings are two directories; the planted link is
	// where the protected name is, under ~/Library.
	for _, d := range []string{filepath.Join(home, "Library"), filepath.Join(home, "library"), filepath.Join(home, "elsewhere"), project} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, "elsewhere"), filepath.Join(home, "Library", "LaunchAgents")); err != nil {
		t.Fatal(err)
	}
	pol := realPolicy(t, jail.Options{}, "sh", project, home, "")
	pol.AllowWrite = append(pol.AllowWrite, filepath.Join(home, "library"))
	f, err := Gather(pol, home, project, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	f.ProxyPort = PlanPort
	if _, err := Build(pol, f, []string{"sh"}); err == nil {
		t.Error("planned a writable ~/library whose LaunchAgents is a symlink")
	}
}
