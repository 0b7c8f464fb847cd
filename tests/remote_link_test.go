package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRemoteEndsWithTheLink: killing the local jail outright (SIGKILL: no
// chance to clean up) ends its ssh, and the end of the link ends the
// remote command and every process of it; nothing of the session keeps
// running as the remote user, and the local project is intact.
func TestRemoteEndsWithTheLink(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		beat := filepath.Join(d.remoteDir(s), "beat")
		os.Remove(beat)
		cmd := exec.Command(jailBin, "--remote", d.Target(), "--", "sh", "-c", `while :; do date +%s%N >beat; sleep 0.1; done`)
		cmd.Dir = s.Project
		s.as(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		if !waitFor(20*time.Second, func() bool { _, err := os.Stat(beat); return err == nil }) {
			t.Fatalf("the remote command never started")
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		last := ""
		stopped := waitFor(5*time.Second, func() bool {
			b, _ := os.ReadFile(beat)
			same := string(b) == last
			last = string(b)
			time.Sleep(300 * time.Millisecond)
			return same
		})
		if !stopped {
			out, _ := exec.Command("ps", "-eo", "pid,ppid,user,args", "--forest").CombinedOutput()
			t.Fatalf("the remote command still runs after the local jail was killed\n%s", out)
		}
		if left := sessionProcesses(d.UID); len(left) > 0 {
			t.Errorf("processes of the session left on the remote: %v", left)
		}
		if got := string(mustRead(t, s.Project+"/README.md")); got != "# project\n" {
			t.Errorf("the local project changed: %q", got)
		}
	})
}

// sessionProcesses lists the remote user's live processes other than
// sshd's own (the connection a control master keeps open); a zombie runs
// nothing, and waits for a parent that may never reap it.
func sessionProcesses(uid int) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range dirs {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil || int(st.Uid) != uid {
			continue
		}
		if stat, _ := os.ReadFile(p + "/stat"); strings.Contains(string(stat), ") Z ") {
			continue
		}
		comm, _ := os.ReadFile(p + "/comm")
		name := strings.TrimSpace(string(comm))
		if name == "sshd" || name == "" {
			continue
		}
		cmdline, _ := os.ReadFile(p + "/cmdline")
		out = append(out, filepath.Base(p)+":"+name+":"+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// TestRemoteSignalEndsCommand: SIGTERM to the local jail ends the remote
// command and jail exits 128+15.
func TestRemoteSignalEndsCommand(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		beat := filepath.Join(d.remoteDir(s), "beat")
		os.Remove(beat)
		cmd := exec.Command(jailBin, "--remote", d.Target(), "--", "sh", "-c", `while :; do date +%s%N >beat; sleep 0.1; done`)
		cmd.Dir = s.Project
		s.as(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		if !waitFor(20*time.Second, func() bool { _, err := os.Stat(beat); return err == nil }) {
			t.Fatalf("the remote command never started")
		}
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("jail did not end after SIGTERM")
		}
		if code := cmd.ProcessState.ExitCode(); code != 143 {
			t.Errorf("jail exited %d after SIGTERM, want 143", code)
		}
		last := ""
		if !waitFor(5*time.Second, func() bool {
			b, _ := os.ReadFile(beat)
			same := string(b) == last
			last = string(b)
			time.Sleep(300 * time.Millisecond)
			return same
		}) {
			t.Fatalf("the remote command still runs after jail ended")
		}
		if left := sessionProcesses(d.UID); len(left) > 0 {
			t.Errorf("processes of the session left on the remote: %v", left)
		}
	})
}
