package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileRemote is an sshd whose every session runs script (the remote
// taken over: it answers jail's scripts as it likes), with jail's own
// command line in $SSH_ORIGINAL_COMMAND.
func hostileRemote(t *testing.T, script string) *remoteSSHD {
	t.Helper()
	dir, err := os.MkdirTemp("", "jail-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "answer")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return startRemoteSSHD(t, "ForceCommand "+p)
}

// TestRemoteHostileProbeBounded: a remote that answers the probe with an
// endless stream is cut off after a bounded amount, with one line saying
// so, rather than filling this machine's memory and temporary directory.
func TestRemoteHostileProbeBounded(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := hostileRemote(t, `yes "home /home/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" | head -c 64000000`)
		d.client(s, true, "")
		r := s.Jail("--remote", d.Target(), "--", "true")
		if r.Code != 125 {
			t.Fatalf("a remote flooding the probe: want 125:\n%s", r)
		}
		oneLine(t, r, "sent more than")
		if r.Took > 60*time.Second {
			t.Errorf("the flood was read for %v", r.Took)
		}
	})
}

// TestRemoteHostileStderrEscaped: what a remote writes on stderr when a
// sync script fails reaches jail's own message escaped: a terminal
// escape sequence in it cannot retitle or drive the local terminal.
func TestRemoteHostileStderrEscaped(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := hostileRemote(t, `case $SSH_ORIGINAL_COMMAND in
*"echo LIST"*) printf 'list failed \033]0;pwned\007 here\n' >&2; exit 1 ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`)
		d.client(s, true, "")
		r := s.Jail("--remote", d.Target(), "--", "true")
		if r.Code != 125 {
			t.Fatalf("a remote failing the listing: want 125:\n%s", r)
		}
		if !strings.Contains(r.Stderr, "list failed") {
			t.Fatalf("the remote's message is not shown:\n%s", r)
		}
		if strings.ContainsAny(r.Stderr, "\x1b\x07") {
			t.Errorf("the remote's terminal escape reached the terminal raw: %q", r.Stderr)
		}
	})
}

// TestRemoteCommandDeny: command.deny holds in the remote jail as in a
// local one: the same push to a repository in the workspace succeeds
// without the rule and is refused with it.
func TestRemoteCommandDeny(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		push := `git init -q r && cd r && git -c user.email=a@example.test -c user.name=a commit -q --allow-empty -m x &&
git init -q --bare ../o.git && git push -q ../o.git HEAD:refs/heads/main 2>&1; echo "rc=$?"; git --git-dir=../o.git rev-parse -q --verify main >/dev/null && echo landed; rm -rf ../r ../o.git`
		r := s.Jail("--remote", d.Target(), "--", "sh", "-c", push)
		if r.Code != 0 || !strings.Contains(r.Stdout, "rc=0") || !strings.Contains(r.Stdout, "landed") {
			t.Fatalf("without a command rule the push should land:\n%s", r)
		}
		s.WriteFile(s.Project+"/jail.json", `{"command": {"deny": ["git push"]}}`, 0o644)
		r = s.Jail("--remote", d.Target(), "--", "sh", "-c", push)
		if strings.Contains(r.Stdout, "landed") || strings.Contains(r.Stdout, "rc=0") {
			t.Errorf("command.deny git push did not hold in the remote jail:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "rc=") {
			t.Errorf("the remote command did not run to its end:\n%s", r)
		}
	})
}
