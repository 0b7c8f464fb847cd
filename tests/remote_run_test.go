package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRemoteRunsJailedAsRemoteUser: jail --remote runs the command on the
// host as the remote user, in the project's remote directory, relays its
// exit code (and 128+N for a signal), and runs it jailed: a file in the
// remote user's own home is out of the command's reach, where a plain ssh
// command would read it.
func TestRemoteRunsJailedAsRemoteUser(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		d.asRemote(t, `printf 'remote-only-secret-8d7c\n' >"$HOME/remote-secret.txt"; chmod 600 "$HOME/remote-secret.txt"`)
		r := s.Jail("--remote", d.Target(), "--", "sh", "-c", `id -u; pwd; touch ran-marker; cat "$HOME/remote-secret.txt" /home/`+remoteUser+`/remote-secret.txt 2>&1; exit 7`)
		t.Logf("first run took %v", r.Took)
		if r.Code != 7 {
			t.Fatalf("want the command's exit 7 relayed:\n%s", r)
		}
		lines := strings.Split(r.Stdout, "\n")
		if lines[0] != strconv.Itoa(d.UID) {
			t.Errorf("the command ran as uid %s, want %s (%s):\n%s", lines[0], strconv.Itoa(d.UID), remoteUser, r)
		}
		if len(lines) < 2 || lines[1] != d.remoteDir(s) {
			t.Errorf("the command ran in %q, want the project's remote directory %s:\n%s", lines[1], d.remoteDir(s), r)
		}
		if strings.Contains(r.Stdout, "remote-only-secret") {
			t.Errorf("the remote command read a file of the remote home: it did not run jailed:\n%s", r)
		}
		if _, err := os.Stat(filepath.Join(s.Project, "ran-marker")); err != nil {
			t.Errorf("the command's write to its project directory did not come back: %v", err)
		}
		if _, err := os.Stat(d.remoteDir(s)); err == nil {
			t.Errorf("the remote workspace stayed without --remote-keep")
		}
		os.Remove(filepath.Join(s.Project, "ran-marker"))
		if r := s.Jail("--remote", d.Target(), "--remote-keep", "--", "sh", "-c", "cat README.md; touch kept-marker"); r.Code != 0 || r.Stdout != "# project\n" {
			t.Fatalf("--remote-keep run (the project synced there):\n%s", r)
		}
		if _, err := os.Stat(filepath.Join(d.remoteDir(s), "kept-marker")); err != nil {
			t.Errorf("--remote-keep did not keep the remote workspace: %v", err)
		}
		r = s.Jail("--remote", d.Target(), "--", "sh", "-c", "kill -TERM $$")
		if r.Code != 143 {
			t.Errorf("a command killed by SIGTERM: want exit 143 relayed:\n%s", r)
		}
	})
}

// TestRemoteStdin: the local stdin reaches the remote command, and its
// end is the command's end of input, not the end of the link (the
// command goes on running after it).
func TestRemoteStdin(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		r := s.JailIn(s.Project, "line one\nline two\n", "--remote", d.Target(), "--", "sh", "-c", "cat; sleep 1; echo after-eof")
		if r.Code != 0 || r.Stdout != "line one\nline two\nafter-eof\n" {
			t.Fatalf("stdin through the session:\n%s", r)
		}
	})
}

// TestRemoteCheck: jail check --remote runs the checks on the host, as
// the remote user, with their exit code; an option check does not take
// is refused there, by the remote jail.
func TestRemoteCheck(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		r := s.Jail("check", "--remote", d.Target())
		if r.Code != 0 || !strings.Contains(r.Stdout, "jail check on "+d.Target()) || !strings.Contains(r.Stdout, "Landlock") || !strings.Contains(r.Stdout, "bubblewrap") {
			t.Fatalf("jail check --remote:\n%s", r)
		}
		r = s.Jail("check", "--bogus", "--remote", d.Target())
		if r.Code != 125 || !strings.Contains(r.Stderr, `check takes only --verbose, got "--bogus"`) {
			t.Fatalf("jail check --remote with a bad option:\n%s", r)
		}
	})
}
