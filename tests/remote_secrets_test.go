package tests

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRemoteEnvSecretsStayLocal: a secret in the local environment (one
// jail recognises, and one named with --secret) reaches the remote
// command only as a placeholder; its value appears nowhere on the remote,
// neither in the remote user's home nor in the session's spec, while the
// run lasts or after.
func TestRemoteEnvSecretsStayLocal(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		const custom = "custom-token-value-5b4c3d2e1f"
		s.Env = append(s.Env, "ANTHROPIC_API_KEY="+EnvSecret, "MY_PLAIN_NAME="+custom)
		// While the command runs, the session's spec is on the remote.
		before := globs("/tmp/jail-r.*")
		specs := make(chan []byte, 1)
		go func() {
			var found []byte
			waitFor(20*time.Second, func() bool {
				for _, dir := range globs("/tmp/jail-r.*") {
					if !slices.Contains(before, dir) {
						found, _ = os.ReadFile(dir + "/spec.json")
					}
				}
				return len(found) > 0
			})
			specs <- found
		}()
		script := `echo "key=$ANTHROPIC_API_KEY"; echo "custom=$MY_PLAIN_NAME"; sleep 2`
		r := s.Jail("--remote", d.Target(), "--secret", "MY_PLAIN_NAME", "--", "sh", "-c", script)
		if r.Code != 0 {
			t.Fatalf("remote run:\n%s", r)
		}
		spec := <-specs
		if !bytes.Contains(spec, []byte("ANTHROPIC_API_KEY=")) || !bytes.Contains(spec, []byte("MY_PLAIN_NAME=")) {
			t.Fatalf("the session's spec was not seen on the remote, or lacks the variables: %q", spec)
		}
		if bytes.Contains(spec, []byte(EnvSecret)) || bytes.Contains(spec, []byte(custom)) {
			t.Errorf("the session's spec on the remote holds a secret value")
		}
		if strings.Contains(r.Stdout, EnvSecret) || strings.Contains(r.Stdout, custom) {
			t.Fatalf("a secret value reached the remote command:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "key=") || strings.Contains(r.Stdout, "key=\n") || strings.Contains(r.Stdout, "custom=\n") {
			t.Errorf("the secrets are not there as placeholders:\n%s", r)
		}
		for _, root := range append([]string{d.Home()}, globs("/tmp/jail-r.*")...) {
			filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
				if err != nil || !e.Type().IsRegular() {
					return nil
				}
				if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(EnvSecret)) || bytes.Contains(b, []byte(custom))) {
					t.Errorf("a secret value is on the remote in %s", p)
				}
				return nil
			})
		}
	})
}

func globs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}
