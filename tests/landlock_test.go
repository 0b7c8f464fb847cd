package tests

import (
	"strings"
	"testing"
)

// TestLandlockBehindMounts attacks a place the mount layer leaves writable:
// bubblewrap's root tmpfs is mounted read-write, so only Landlock stops a
// write there. This proves Landlock is applied, independent of the mounts.
func TestLandlockBehindMounts(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		r := s.Sh(`awk '$5 == "/" {print $6}' /proc/self/mountinfo; touch /planted 2>&1; mkdir /run/planted 2>&1; ln -s /tmp /link 2>&1; echo end`)
		lines := strings.Split(strings.TrimSpace(r.Stdout+r.Stderr), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[0], "rw") {
			t.Fatalf("control: expected the root mount to be read-write (so the attack tests Landlock), got:\n%s", r)
		}
		for _, attack := range []string{"/planted", "/run/planted", "/link"} {
			if !strings.Contains(r.Stdout+r.Stderr, "'"+attack+"': Permission denied") && !strings.Contains(r.Stdout+r.Stderr, "‘"+attack+"’: Permission denied") {
				t.Errorf("creating %s on the read-write root tmpfs was not refused by Landlock:\n%s", attack, r)
			}
		}
	})
}
