package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileRemote is an sshd whose every session runs script (the remote
// taken over: it answers jail's scripts as it likes), with jail's own
// command line in $SSH_ORIGINAL_COMMAND; extra is more sshd_config.
func hostileRemote(t *testing.T, script string, extra ...string) *remoteSSHD {
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
	return startRemoteSSHD(t, strings.Join(append(extra, "ForceCommand "+p), "\n"))
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

// TestRemoteKilledJailLeavesNothing: while a remote run goes on, its
// local proxy and control sockets are out of a local jail's reach; once
// the local jail is killed outright (no cleanup of its own), nothing of
// the session runs on the remote, its remote session directory is gone,
// and nothing listens on its local sockets any more.
func TestRemoteKilledJailLeavesNothing(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		start := time.Now()
		cmd := exec.Command(jailBin, "--remote", d.Target(), "--", "sh", "-c", `while :; do date +%s%N >beat; sleep 0.1; done`)
		cmd.Dir = s.Project
		s.as(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		if !waitFor(20*time.Second, func() bool { _, err := os.Stat(filepath.Join(d.remoteDir(s), "beat")); return err == nil }) {
			t.Fatalf("the remote command never started")
		}
		remoteDir := ""
		for _, p := range sessionProcesses(d.UID) {
			if _, rest, ok := strings.Cut(p, "remote-run --spec "); ok {
				remoteDir = filepath.Dir(strings.Fields(rest)[0])
			}
		}
		if !strings.Contains(remoteDir, "/jail-r.") {
			t.Fatalf("no remote-run of the session on the remote: %v", sessionProcesses(d.UID))
		}
		var socks []string
		all, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("jail-%d", s.R.UID), "*", "control.sock"))
		for _, p := range all {
			if fi, err := os.Stat(p); err == nil && fi.ModTime().After(start.Add(-time.Second)) {
				socks = append(socks, p)
			}
		}
		if len(socks) == 0 {
			t.Fatalf("no local control socket of the session among %v", all)
		}
		probe := ""
		for _, sock := range socks {
			probe += fmt.Sprintf("ls -A %[1]s >/dev/null 2>&1 && echo VISIBLE %[1]s; ", filepath.Dir(sock))
		}
		if r := s.Sh(probe + "echo done"); r.Code != 0 || strings.Contains(r.Stdout, "VISIBLE") || !strings.Contains(r.Stdout, "done") {
			t.Errorf("a local jail reaches the remote session's local sockets:\n%s", r)
		}

		t.Logf("remote session %s, local sockets %v", remoteDir, socks)
		cmd.Process.Kill()
		cmd.Wait()
		if !waitFor(15*time.Second, func() bool {
			for _, p := range sessionProcesses(d.UID) {
				if strings.Contains(p, remoteDir) {
					return false
				}
			}
			return true
		}) {
			t.Errorf("the session still runs on the remote after the local jail was killed: %v", sessionProcesses(d.UID))
		}
		if !waitFor(10*time.Second, func() bool { _, err := os.Lstat(remoteDir); return err != nil }) {
			t.Errorf("the remote session directory %s stayed after the local jail was killed", remoteDir)
		}
		for _, sock := range socks {
			if c, err := net.Dial("unix", sock); err == nil {
				c.Close()
				t.Errorf("something still listens on %s after the local jail was killed", sock)
			}
		}
		if got := string(mustRead(t, s.Project+"/README.md")); got != "# project\n" {
			t.Errorf("the local project changed: %q", got)
		}
	})
}

// TestRemoteSSHSendsNoSecretEnv: an ssh config that sends the whole
// environment (SendEnv *) to a remote that takes it all still hands the
// remote no secret value: the ssh jail runs has the secrets of its
// environment (those the jailed command sees as placeholders) removed.
func TestRemoteSSHSendsNoSecretEnv(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		seen := filepath.Join(os.TempDir(), fmt.Sprintf("jail-sendenv-%d-%d", s.R.UID, time.Now().UnixNano()))
		t.Cleanup(func() { os.Remove(seen) })
		d := hostileRemote(t, `env >>`+seen+`
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`, "AcceptEnv *")
		d.client(s, true, "SendEnv *\n")
		const custom = "custom-token-value-77aa1c"
		s.Env = append(s.Env, "ANTHROPIC_API_KEY="+EnvSecret, "MY_PLAIN_NAME="+custom, "PLAIN_MARKER_VAR=sent-along")
		r := s.Jail("--remote", d.Target(), "--secret", "MY_PLAIN_NAME", "--", "true")
		if r.Code != 0 {
			t.Fatalf("remote run:\n%s", r)
		}
		env := string(mustRead(t, seen))
		if !strings.Contains(env, "PLAIN_MARKER_VAR=sent-along") {
			t.Fatalf("the remote did not get the environment SendEnv * sends; the test proves nothing:\n%s", env)
		}
		if strings.Contains(env, EnvSecret) || strings.Contains(env, custom) {
			t.Errorf("ssh sent a secret value of the local environment to the remote")
		}
	})
}

// TestRemoteHostileFetchBounded: a remote that answers the fetch of one
// small file with an endless stream is cut off near the size its own
// listing gave, with the run failed and the file not applied, instead of
// filling this machine's disk.
func TestRemoteHostileFetchBounded(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := hostileRemote(t, `case $SSH_ORIGINAL_COMMAND in
*--no-recursion*) cat >/dev/null; exec head -c 200000000 /dev/zero ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`)
		d.client(s, true, "")
		r := s.Jail("--remote", d.Target(), "--", "sh", "-c", "echo made-remotely >new.txt")
		if r.Code != 125 {
			t.Fatalf("a remote flooding the fetch: want 125:\n%s", r)
		}
		if !strings.Contains(r.Stderr, "sent more than 1 MiB") {
			t.Errorf("the flood was not cut off near the listed size:\n%s", r)
		}
		if _, err := os.Stat(filepath.Join(s.Project, "new.txt")); err == nil {
			t.Errorf("a file of the flooded fetch was applied")
		}
	})
}

// TestRemoteOptionInjectionRefused: --remote values and named-host fields
// that ssh would read as options, tokens or several words are refused
// before any ssh runs; the ProxyCommand they carry never runs.
func TestRemoteOptionInjectionRefused(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		marker := filepath.Join(s.Base, "injected-marker")
		cmd := "touch " + marker
		for _, target := range []string{"-oProxyCommand=" + cmd, "-oProxyCommand=" + cmd + "@host", "user@-oProxyCommand=x", "host -oProxyCommand=x", "ho%dst", "host\n-oProxyCommand=x", "h:-1"} {
			r := s.Jail("--remote", target, "--", "true")
			if r.Code != 125 || !strings.Contains(r.Stderr, "--remote") {
				t.Errorf("--remote %q: want 125 naming the value:\n%s", target, r)
			}
		}
		for _, field := range []string{`"host": "-oProxyCommand=` + cmd + `"`, `"host": "h", "user": "-oProxyCommand=` + cmd + `"`, `"host": "h %d"`, `"host": "h", "port": -22`} {
			s.WriteFile(s.Home+"/.config/jail/config.json", `{"remote": {"box": {`+field+`}}}`, 0o644)
			if r := s.Jail("--remote", "box", "--", "true"); r.Code != 125 || !strings.Contains(r.Stderr, "config.json") {
				t.Errorf("named host {%s}: want 125 naming the config:\n%s", field, r)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("an injected ProxyCommand ran")
		}
	})
}
