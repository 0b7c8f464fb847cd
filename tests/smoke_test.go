package tests

import (
	"strings"
	"testing"
)

func TestSmoke(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		r := s.MustSh("echo hello; id -u")
		if !strings.HasPrefix(r.Stdout, "hello\n") {
			t.Fatalf("unexpected output:\n%s", r)
		}
	})
}
