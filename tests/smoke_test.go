package tests

import (
	"fmt"
	"testing"
)

func TestSmoke(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		r := s.MustSh("echo hello; id -u")
		if r.Stdout != fmt.Sprintf("hello\n%d\n", s.R.UID) {
			t.Fatalf("want hello and the runner's uid %d (the jail maps it to itself):\n%s", s.R.UID, r)
		}
	})
}
