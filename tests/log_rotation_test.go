package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLogRotation: with the log rotating every 4 KiB, 60 requests made
// from inside the jail by four concurrent clients (allowed and denied,
// plain and intercepted) rotate it several times during the run.
// `jail log`, `jail log --json` and a `jail log -f` that followed the
// whole run each show every one of them exactly once, and no file holds a
// torn line.
func TestLogRotation(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		s.Env = append(s.Env, "JAIL_LOG_MAX_BYTES=4096")

		follow := exec.Command(jailBin, "log", "-f")
		follow.Dir = s.Project
		s.as(follow)
		var followOut bytes.Buffer
		follow.Stdout, follow.Stderr = &followOut, &followOut
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		defer follow.Process.Kill()

		const clients, each = 4, 15
		r := s.Sh(fmt.Sprintf(`
			echo session=$JAIL_SESSION
			P='-sS -o /dev/null --max-time 15 -x http://127.0.0.1:3128'
			for c in $(seq 1 %d); do
				(for i in $(seq 1 %d); do
					case $((i %% 3)) in
					0) curl $P http://plain.allowed.test/rot-$c-$i ;;
					1) curl $P https://api.allowed.test/rot-$c-$i ;;
					2) curl $P http://evil.test/rot-$c-$i ;;
					esac
				done) &
			done
			wait`, clients, each))
		if r.Code != 0 {
			t.Fatalf("the requests failed:\n%s", r)
		}
		time.Sleep(800 * time.Millisecond) // -f polls every 200 ms
		follow.Process.Kill()
		follow.Wait()

		dir := filepath.Dir(decisionLog(s))
		var rotated []string
		for n := 1; ; n++ {
			p := fmt.Sprintf("%s.%d", decisionLog(s), n)
			if _, err := os.Stat(p); err != nil {
				break
			}
			rotated = append(rotated, filepath.Base(p))
		}
		if len(rotated) < 2 {
			t.Fatalf("the log rotated into %d files (%v); want several", len(rotated), rotated)
		}
		if len(rotated) >= 5 {
			t.Fatalf("the log rotated into all five kept files (%v): entries may have been dropped by design; the test must log less", rotated)
		}
		for _, name := range append(rotated, "decisions.jsonl") {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 || b[len(b)-1] != '\n' {
				t.Errorf("%s is empty or ends inside a line", name)
			}
			if fi, _ := os.Stat(filepath.Join(dir, name)); fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
			}
		}

		session := sessionOf(t, r)
		table := s.Jail("log")
		for what, out := range map[string]string{"jail log": table.Stdout, "jail log -f": followOut.String()} {
			for c := 1; c <= clients; c++ {
				for i := 1; i <= each; i++ {
					path := fmt.Sprintf("/rot-%d-%d ", c, i)
					if n := strings.Count(out, path); n != 1 {
						t.Errorf("%s shows %s %d times, want once", what, path, n)
					}
				}
			}
		}
		seen := map[string]int{}
		for _, d := range decisions(t, s, session) {
			if strings.HasPrefix(d.Path, "/rot-") {
				seen[d.Path]++
			}
		}
		if len(seen) != clients*each {
			t.Errorf("jail log --json shows %d of the %d requests", len(seen), clients*each)
		}
		for p, n := range seen {
			if n != 1 {
				t.Errorf("jail log --json shows %s %d times", p, n)
			}
		}
		if t.Failed() {
			t.Logf("jail log:\n%s\njail log -f:\n%s", table.Stdout, followOut.String())
		}
	})
}
