package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Learning and watch modes show the real home through an overlay that init
// mounts with capabilities bubblewrap leaves it. Attack that: the secrets
// must stay masked, the real home must not be reachable by another path,
// the capabilities must be gone, the masks must not come off, and nothing
// may reach the home on disk.
func TestLearningViewAttacks(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		// jail's own state directories (CA, log) exist before the snapshot.
		if r := s.Jail("--", "true"); r.Code != 0 {
			t.Fatalf("plain run failed:\n%s", r)
		}
		// A second name of the SSH key elsewhere in the (visible) home.
		if err := os.MkdirAll(filepath.Join(s.Home, "backup"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(s.Home, ".ssh/id_ed25519"), filepath.Join(s.Home, "backup/key")); err != nil {
			t.Fatal(err)
		}
		s.chownUp(filepath.Join(s.Home, "backup/key"))
		for _, mode := range []string{"--learning", "--watch"} {
			t.Run(strings.TrimPrefix(mode, "--"), func(t *testing.T) {
				before := homeSnapshot(t, s.Home)
				script := `
cat ~/.ssh/id_ed25519 ~/.ssh/id_rsa ~/.aws/credentials ~/backup/key 2>/dev/null
cat /proc/1/root$HOME/.ssh/id_ed25519 /proc/self/root$HOME/backup/key 2>/dev/null
cat ~/.config/jail/ca/* ~/.local/state/jail/* 2>/dev/null
echo hook >> .git/hooks/pre-commit 2>/dev/null && echo "wrote-hook"
echo "secret=$MY_API_KEY"
echo "home-notes=$(cat ~/notes.txt)"
ls -A /run/jail/home 2>/dev/null; cat /run/jail/home/.ssh/id_ed25519 2>/dev/null
ls -A /run/jail/overlay 2>/dev/null
grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status
umount -l ~/.ssh 2>/dev/null; umount ~/.aws 2>/dev/null
cat ~/.ssh/id_ed25519 2>/dev/null
python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
# A fresh mount namespace would let a process unmount nothing locked but
# mount over anything: refused (no capabilities, no new user namespace).
print("unshare-mnt", libc.unshare(0x00020000))
print("unshare-user", libc.unshare(0x10000000))
print("mount-tmpfs", libc.mount(b"tmpfs", os.path.expanduser("~/.ssh").encode(), b"tmpfs", 0, None))
EOF
echo overwritten > ~/notes.txt; echo new > ~/dropped; rm -f ~/.bashrc
echo done`
				const apiKey = "sk-REAL-LEARNING-0123456789abcdef"
				env := s.Env
				s.Env = append(s.Env, "MY_API_KEY="+apiKey)
				r := s.Jail(mode, "--", "bash", "-c", script)
				s.Env = env
				if r.Code != 0 || !strings.Contains(r.Stdout, "done") {
					t.Fatalf("the attack script did not run through:\n%s", r)
				}
				noSecret(t, r, "jailed "+mode+" run", SSHKeySecret, AWSSecret, apiKey, "PRIVATE KEY", `"session":`)
				if !strings.Contains(r.Stdout, "secret=sk-jail") { // shaped like the OpenAI-style key it is
					t.Errorf("the secret variable is not a placeholder in %s mode:\n%s", mode, r.Stdout)
				}
				if strings.Contains(r.Stdout, "wrote-hook") {
					t.Errorf("%s mode let the command write .git/hooks", mode)
				}
				if !strings.Contains(r.Stdout, "home-notes=host file in home") {
					t.Errorf("the real home is not visible in %s mode (want ~/notes.txt):\n%s", mode, r)
				}
				for _, line := range strings.Split(r.Stdout, "\n") {
					if strings.HasPrefix(line, "Cap") && !strings.HasSuffix(line, "0000000000000000") {
						t.Errorf("capability left to the command: %q", line)
					}
				}
				for _, want := range []string{"unshare-mnt -1", "unshare-user -1", "mount-tmpfs -1"} {
					if !strings.Contains(r.Stdout, want) {
						t.Errorf("want %q (refused) in:\n%s", want, r.Stdout)
					}
				}
				if strings.Contains(r.Stdout, ".ssh") || strings.Contains(r.Stdout, "upper") {
					t.Errorf("the real home or the overlay's layers are listed inside:\n%s", r.Stdout)
				}
				if d := homeDiff(before, homeSnapshot(t, s.Home)); d != "" {
					t.Errorf("%s changed the home on disk:\n%s", mode, d)
				}
				if _, err := os.Stat(filepath.Join(s.Home, "dropped")); err == nil {
					t.Errorf("a file written in %s mode reached the disk", mode)
				}
			})
		}
		// The same second name under a path a plain run allows.
		r := s.Jail("--allow-read", "~/backup", "--", "sh", "-c", "cat ~/backup/key; ls ~/backup")
		noSecret(t, r, "--allow-read ~/backup", SSHKeySecret)
		if !strings.Contains(r.Stdout, "key") {
			t.Errorf("control: ~/backup is not visible with --allow-read:\n%s", r)
		}
	})
}
