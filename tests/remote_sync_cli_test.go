package tests

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRemoteProjectRoundTrip: through jail --remote, a .env value and a
// denied file's content appear nowhere in the remote user's home while
// the command runs there (the command sees the .env masked); a change
// made remotely comes back; a file changed here while the command ran is
// kept, the remote version saved beside it; a hook planted remotely is
// not applied here.
func TestRemoteProjectRoundTrip(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		const envValue, deniedValue = "sk-remote-envvalue-77aa66bb55cc", "denied-content-3e2d1c0b"
		s.WriteFile(s.Project+"/.env", "API_TOKEN="+envValue+"\n", 0o600)
		s.WriteFile(s.Project+"/private/notes.txt", deniedValue+"\n", 0o600)
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": ["private"]}}`, 0o644)
		s.WriteFile(s.Project+"/shared.txt", "base\n", 0o644)
		s.Host("git", "-C", s.Project, "add", "-A")
		s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "commit", "-qm", "files")

		leak := make(chan string, 1)
		go func() {
			// While the command runs: grep the whole remote home.
			waitFor(20*time.Second, func() bool {
				_, err := os.Stat(filepath.Join(d.remoteDir(s), "started"))
				return err == nil
			})
			var hits []string
			filepath.WalkDir(d.Home(), func(p string, e fs.DirEntry, err error) error {
				if err == nil && e.Type().IsRegular() {
					if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(envValue)) || bytes.Contains(b, []byte(deniedValue))) {
						hits = append(hits, p)
					}
				}
				return nil
			})
			s.WriteFile(s.Project+"/shared.txt", "changed here\n", 0o644) // while the remote changes it too
			leak <- strings.Join(hits, ", ")
		}()
		r := s.Jail("--remote", d.Target(), "--", "sh", "-c", `cat .env; ls private 2>&1; echo new >made-there.txt; echo remote >shared.txt
mkdir -p .git/hooks && printf '#!/bin/sh\ntouch /tmp/pwned\n' >.git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
touch started; sleep 3`)
		if hits := <-leak; hits != "" {
			t.Errorf("secret content is in the remote home: %s", hits)
		}
		if r.Code != 0 {
			t.Fatalf("remote run:\n%s", r)
		}
		if strings.Contains(r.Stdout, envValue) || strings.Contains(r.Stdout, deniedValue) || !strings.Contains(r.Stdout, "API_TOKEN=") {
			t.Errorf("the remote command saw a secret, or no masked .env:\n%s", r)
		}
		if b, err := os.ReadFile(s.Project + "/made-there.txt"); err != nil || string(b) != "new\n" {
			t.Errorf("a file made remotely did not come back: %q %v", b, err)
		}
		if b := string(mustRead(t, s.Project+"/shared.txt")); b != "changed here\n" {
			t.Errorf("a file changed on both sides was overwritten: %q", b)
		}
		if b, err := os.ReadFile(s.Project + "/shared.txt.jail-remote"); err != nil || string(b) != "remote\n" {
			t.Errorf("the remote version of a conflict is not kept beside it: %q %v\n%s", b, err, r)
		}
		if _, err := os.Stat(s.Project + "/.git/hooks/pre-commit"); err == nil {
			t.Errorf("a hook planted on the remote was applied here")
		}
		if b := string(mustRead(t, s.Project+"/.env")); b != "API_TOKEN="+envValue+"\n" {
			t.Errorf("the local .env changed: %q", b)
		}
	})
}

// TestRemoteKillSSHEndsRemote: killing the session's ssh (not jail) ends
// the remote command and every process of it; jail fails the run, and the
// local project is intact.
func TestRemoteKillSSHEndsRemote(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		cmd := exec.Command(jailBin, "--remote", d.Target(), "--", "sh", "-c", `touch started; while :; do date +%s%N >beat; sleep 0.1; done`)
		cmd.Dir = s.Project
		s.as(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		beat := filepath.Join(d.remoteDir(s), "beat")
		if !waitFor(20*time.Second, func() bool { _, err := os.Stat(beat); return err == nil }) {
			t.Fatalf("the remote command never started")
		}
		ssh := childNamed(cmd.Process.Pid, "ssh")
		if ssh == 0 {
			t.Fatalf("no ssh under jail")
		}
		syscall.Kill(ssh, syscall.SIGKILL)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("jail did not end after its ssh was killed")
		}
		if cmd.ProcessState.ExitCode() == 0 {
			t.Errorf("jail exited 0 after its ssh was killed")
		}
		if !waitFor(10*time.Second, func() bool { return len(sessionProcesses(d.UID)) == 0 }) {
			t.Errorf("processes of the session left on the remote: %v", sessionProcesses(d.UID))
		}
		if got := string(mustRead(t, s.Project+"/README.md")); got != "# project\n" {
			t.Errorf("the local project changed: %q", got)
		}
	})
}

// childNamed is the pid of a child of pid whose command is name, or 0.
func childNamed(pid int, name string) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		fields := strings.Fields(string(b[end+1:]))
		if open < 0 || len(fields) < 2 || string(b[open+1:end]) != name || fields[1] != strconv.Itoa(pid) {
			continue
		}
		var child int
		for _, c := range filepath.Base(filepath.Dir(p)) {
			child = child*10 + int(c-'0')
		}
		return child
	}
	return 0
}

// TestRemoteFetch: what a run left in a kept remote workspace (a change
// made there after the run, as a dropped link leaves one) comes back with
// --remote-fetch, which runs nothing and then removes the workspace.
func TestRemoteFetch(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		if r := s.Jail("--remote", d.Target(), "--remote-keep", "--", "true"); r.Code != 0 {
			t.Fatalf("kept run:\n%s", r)
		}
		d.asRemote(t, `echo later >`+d.remoteDir(s)+`/later.txt`)
		r := s.Jail("--remote", d.Target(), "--remote-fetch")
		if r.Code != 0 {
			t.Fatalf("--remote-fetch:\n%s", r)
		}
		if b, err := os.ReadFile(s.Project + "/later.txt"); err != nil || string(b) != "later\n" {
			t.Errorf("--remote-fetch did not bring the remote change back: %q %v", b, err)
		}
		if _, err := os.Stat(d.remoteDir(s)); err == nil {
			t.Errorf("--remote-fetch left the workspace without --remote-keep")
		}
		if r := s.Jail("--remote", d.Target(), "--remote-fetch", "--", "true"); r.Code != 125 {
			t.Errorf("--remote-fetch with a command: want 125:\n%s", r)
		}
	})
}
