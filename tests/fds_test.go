package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoStrayFDs: descriptors open in jail's caller (fds 3 to 10, a file
// in the home) never reach the jailed command; it holds only stdio.
func TestNoStrayFDs(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		f, err := os.Open(s.Home + "/notes.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// ls itself opens one descriptor (3) to read the directory.
		cmd := exec.Command(jailBin, "--", "ls", "/proc/self/fd")
		cmd.Dir = s.Project
		s.as(cmd)
		cmd.ExtraFiles = []*os.File{f, f, f, f, f, f, f, f} // fds 3..10
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if got := strings.Fields(string(out)); strings.Join(got, " ") != "0 1 2 3" {
			t.Errorf("the command holds more than stdio: %q", got)
		}
	})
}
