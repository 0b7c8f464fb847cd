package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDashboardArgs: bad arguments are refused with one line and 125,
// before anything listens.
func TestDashboardArgs(t *testing.T) {
	for _, args := range [][]string{{"--port", "-1"}, {"--port", "70000"}, {"--port", "x"}, {"extra"}, {"--nosuch"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"dashboard"}, args...), &out, &errb); code != 125 {
			t.Errorf("jail dashboard %v: exit %d, want 125", args, code)
		}
		if lines := strings.Split(strings.TrimSpace(errb.String()), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "jail: ") || out.Len() != 0 {
			t.Errorf("jail dashboard %v: stdout %q stderr %q, want one jail: line and no URL", args, out.String(), errb.String())
		}
	}
}
