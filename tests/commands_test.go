package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Command rules: `"command": {"deny": ["git push"]}`
// holds at every execve/execveat of every process in the jail, however the
// command is spelled, and on the wire. Every attack below runs twice: with
// the rule, where it must fail, leave the remote's refs alone and be
// logged; and without it, where the same script must really push, proving
// the attack would land but for the protection.

// pushAttack is one spelling of `git push` run inside the jail.
type pushAttack struct {
	name   string
	script string   // run as jail -- sh -c SCRIPT in the project
	argv   []string // or jail's own argv, for `jail -- git push` itself
	code   int      // the exit code wanted when denied; 0: any non-zero
	eperm  bool     // the output must say "Operation not permitted"
	logArg string   // the denied argv in the log contains this ("" any)
	link   bool     // starts with a hard link that may fail (EXDEV/EPERM)
}

func (a pushAttack) run(s *Sandbox) Result {
	if a.argv != nil {
		return s.Jail(a.argv...)
	}
	return s.Sh(a.script)
}

// pushAttacks are the usual spellings of git push, plus jail's own argv and -c.
var pushAttacks = []pushAttack{
	{name: "jail -- git push", argv: []string{"--", "git", "push"}, code: 126, logArg: "push"},
	{name: "jail -c git push", argv: []string{"-c", "git push"}, eperm: true, logArg: "push"},
	{name: "git push", script: "git push", eperm: true, logArg: "push"},
	{name: "/usr/bin/git push", script: "/usr/bin/git push", eperm: true, logArg: "push"},
	{name: "env git push", script: "env git push", eperm: true, logArg: "push"},
	{name: "command git push", script: "command git push", eperm: true, logArg: "push"},
	{name: "bash -c", script: "bash -c 'git push'", eperm: true, logArg: "push"},
	{name: "sh -c eval", script: `sh -c 'eval "git push"'`, eperm: true, logArg: "push"},
	{name: "x=git; $x push", script: "x=git; $x push", eperm: true, logArg: "push"},
	{name: "$(echo git) push", script: "$(echo git) push", eperm: true, logArg: "push"},
	{name: "git -C . push", script: "git -C . push", eperm: true, logArg: "push"},
	{name: "git -c a.b=c push", script: "git -c a.b=c push", eperm: true, logArg: "push"},
	{name: "(git push)", script: "(git push)", eperm: true, logArg: "push"},
	{name: "VAR=1 git push", script: "VAR=1 git push", eperm: true, logArg: "push"},
	{name: "echo git push | sh", script: "echo 'git push' | sh", eperm: true, logArg: "push"},
	{name: "script file", script: "./push.sh", eperm: true, logArg: "push"},
	{name: "python subprocess", script: `python3 -c 'import subprocess, sys; sys.exit(subprocess.run(["git", "push"]).returncode)'`, eperm: true, logArg: "push"},
	{name: "copy of git", script: "rm -f /tmp/g; cp /usr/bin/git /tmp/g && /tmp/g push", eperm: true, logArg: "push"},
	// The jail cannot link /usr/bin/git into the project across its mounts
	// (EXDEV), so the hard link is made on the host, where /usr/bin and the
	// project may share a file system: the same inode as git under the
	// name hl-git.
	{name: "hard link of git made on the host", script: `test -e ./hl-git || { echo "ln: no hard link of /usr/bin/git could be made on the host"; exit 1; }; ./hl-git push`, eperm: true, logArg: "push", link: true},
}

// morePushSpellings are spellings beyond those: the rest of the
// wrappers and git options the contract names, argv[0] spoofing (git runs
// the builtin its argv[0] names when that is "git-NAME"), execveat on a
// file descriptor, git's dashed builtin, an alias (git re-execs itself),
// and links and copies under innocent names.
var morePushSpellings = []pushAttack{
	{name: "exec git push", script: "exec git push", logArg: "push"},
	{name: "nice -n 5 git push", script: "nice -n 5 git push", logArg: "push"},
	{name: "nohup git push", script: "nohup git push", logArg: "push"},
	{name: "timeout 60 git push", script: "timeout 60 git push", logArg: "push"},
	{name: "xargs git", script: "echo push | xargs git", logArg: "push"},
	{name: "env -i git push", script: "env -i PATH=/usr/bin:/bin git push", logArg: "push"},
	{name: "git --git-dir --work-tree push", script: "git --git-dir=.git --work-tree . push", logArg: "push"},
	{name: "git --no-pager push", script: "git --no-pager push", logArg: "push"},
	{name: "argv0 spoofed (exec -a ls)", script: "bash -c 'exec -a ls git push'", logArg: "push"},
	{name: "argv0 git-push (exec -a git-push git)", script: "bash -c 'exec -a git-push git'", logArg: ""},
	{name: "execveat on an fd", script: `python3 -c 'import os; fd = os.open("/usr/bin/git", os.O_RDONLY); os.execve(fd, ["ls", "push"], dict(os.environ))'`, logArg: "push"},
	{name: "dashed git-push", script: `"$(git --exec-path)/git-push"`, logArg: "push"},
	{name: "alias in process", script: "git -c alias.p=push p", logArg: ""},
	{name: "hard link of a copy", script: "rm -f /tmp/g1 /tmp/g2; cp /usr/bin/git /tmp/g1 && ln /tmp/g1 /tmp/g2 && /tmp/g2 push", logArg: "push", link: true},
	{name: "copy named ls", script: "rm -f ./ls; cp /usr/bin/git ./ls && ./ls push", logArg: "push"},
}

// linkFailed reports whether the run's hard link could not be made, and
// why.
func linkFailed(r Result) (string, bool) {
	for _, l := range lines(r.Stdout + "\n" + r.Stderr) {
		if strings.HasPrefix(l, "ln: ") {
			return l, true
		}
	}
	return "", false
}

// checkPushDenied runs one attack with the rule in force: it must fail,
// the remote must not move, and the log must say so.
func checkPushDenied(t *testing.T, s *Sandbox, g *pushRig, a pushAttack) {
	n := len(decisions(t, s, ""))
	r := a.run(s)
	moved := g.Head()
	if moved != g.Base {
		t.Errorf("the push landed: the remote's main moved %s -> %s\n%s", g.Base, moved, r)
		g.Reset()
	}
	if r.Code == 0 {
		t.Errorf("exit 0; want the denied exec to fail the command\n%s", r)
	}
	if why, failed := linkFailed(r); a.link && failed {
		t.Skipf("the hard link could not be made (%s): no push happened, but this spelling could not be tried here", why)
	}
	if a.code != 0 && r.Code != a.code {
		t.Errorf("exit %d; want %d\n%s", r.Code, a.code, r)
	}
	if a.eperm && !strings.Contains(r.Stdout+r.Stderr, "Operation not permitted") {
		t.Errorf("the output does not say \"Operation not permitted\" (EPERM from execve)\n%s", r)
	}
	wantExecDenial(t, logSince(t, s, n), a.logArg, "git push")
}

// checkPushLands runs one attack without command rules: it must push.
func checkPushLands(t *testing.T, s *Sandbox, g *pushRig, a pushAttack) {
	n := len(decisions(t, s, ""))
	r := a.run(s)
	head := g.Head()
	defer g.Reset()
	if why, failed := linkFailed(r); a.link && failed {
		if head != g.Base {
			t.Errorf("the remote moved although the link failed: %s -> %s", g.Base, head)
		}
		t.Skipf("the hard link cannot be made even without rules (%s); this spelling cannot push here at all", why)
	}
	if r.Code != 0 || head != g.Local {
		t.Errorf("control: without command rules %q must push (exit 0, remote main %s -> %s); got exit %d, remote main %s\n%s",
			a.name, g.Base, g.Local, r.Code, head, r)
	}
	if ds := execDenials(logSince(t, s, n)); len(ds) > 0 {
		t.Errorf("control: execs denied without any command rule:\n%s", dumpExec(ds))
	}
}

// runPushAttacks runs every attack with deny ["git push"] in jail.json,
// then the same-jail controls, then every attack again without the rule.
func runPushAttacks(t *testing.T, s *Sandbox, attacks []pushAttack) {
	g := setupPushRig(t, s)
	s.WriteFile(s.Project+"/push.sh", "#!/bin/sh\n# an innocent-looking script\ngit push\n", 0o755)
	if err := os.Link("/usr/bin/git", s.Project+"/hl-git"); err != nil {
		t.Logf("note: no hard link of /usr/bin/git in the project from the host: %v", err)
	}

	writeJailJSON(t, s, commandRules([]string{"git push"}, nil))
	for _, a := range attacks {
		t.Run("denied/"+a.name, func(t *testing.T) { checkPushDenied(t, s, g, a) })
	}

	writeJailJSON(t, s, map[string]any{})
	for _, a := range attacks {
		t.Run("control/"+a.name, func(t *testing.T) { checkPushLands(t, s, g, a) })
	}
}

// 1 and 2. Every usual spelling of `git push` is denied at exec,
// as root and as the user; each one pushes without the rule.
func TestCommandDenyGitPush(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		runPushAttacks(t, s, pushAttacks)
	})
}

// More spellings: wrappers, git options, argv[0] spoofing, execveat,
// dashed builtins, aliases, renamed copies and links.
func TestCommandDenyGitPushMoreSpellings(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		runPushAttacks(t, s, morePushSpellings)
	})
}

// 2. In the same jail as the rule, git status, commit and fetch work (and
// git's own helper execs, such as upload-pack for a local fetch, are not
// caught), while push is denied.
func TestCommandDenyGitPushOthersWork(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupPushRig(t, s)
		writeJailJSON(t, s, commandRules([]string{"git push"}, nil))
		r := s.Sh(`
			echo session=$JAIL_SESSION
			git status --porcelain >/dev/null; echo "##status=$?"
			git log -1 --format=%s >/dev/null; echo "##log=$?"
			echo "made in the jail" > jail-made.txt && git add jail-made.txt && git commit -qm "commit made in the jail"; echo "##commit=$?"
			git fetch -q origin && git rev-parse -q --verify refs/remotes/origin/feature >/dev/null; echo "##fetch=$?"
			git ls-remote origin >/dev/null; echo "##ls-remote=$?"
			git push -q --dry-run 2>/dev/null; echo "##push-dry-run=$?"
			git push; echo "##push=$?"`)
		for _, k := range []string{"status", "log", "commit", "fetch", "ls-remote"} {
			wantKV(t, r, k, is("0"), "exit 0 (not a push; the rule must not touch it)")
		}
		wantKV(t, r, "push", func(v string) bool { return v != "0" }, "a non-zero exit (denied)")
		if !strings.Contains(r.Stdout+r.Stderr, "Operation not permitted") {
			t.Errorf("the denied push does not say \"Operation not permitted\"\n%s", r)
		}
		if got := strings.TrimSpace(s.Host("git", "-C", s.Project, "log", "-1", "--format=%s")); got != "commit made in the jail" {
			t.Errorf("the commit made in the jail is not in the project on the host: HEAD is %q", got)
		}
		if head := g.Head(); head != g.Base {
			t.Errorf("the push landed: the remote's main moved %s -> %s", g.Base, head)
		}
		ds := decisions(t, s, sessionOf(t, r))
		den := execDenials(ds)
		if len(den) == 0 {
			t.Errorf("no EXEC denial logged for the session:\n%s", dumpExec(ds))
		}
		for _, d := range den {
			if !strings.Contains(d.Path, "push") {
				t.Errorf("an exec that is not a push was denied: %q (rule %q)", d.Path, d.Rule)
			}
		}
	})
}

// command.allow: the most specific rule wins, so deny ["git"] with allow
// ["git status"] runs status only, and allow ["git push --dry-run"] lets a
// dry run through a denied push.
func TestCommandAllow(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupPushRig(t, s)
		writeJailJSON(t, s, commandRules([]string{"git"}, []string{"git status"}))
		n := len(decisions(t, s, ""))
		r := s.Sh(`
			git status --porcelain >/dev/null; echo "##status=$?"
			git log -1 >/dev/null; echo "##log=$?"`)
		wantKV(t, r, "status", is("0"), "exit 0 (allowed by the more specific \"git status\")")
		wantKV(t, r, "log", func(v string) bool { return v != "0" }, "a non-zero exit (denied by \"git\")")
		wantExecDenial(t, logSince(t, s, n), "log", "git")

		writeJailJSON(t, s, commandRules([]string{"git push"}, []string{"git push --dry-run"}))
		n = len(decisions(t, s, ""))
		r = s.Sh(`
			git push --dry-run; echo "##dry-run=$?"
			git push; echo "##push=$?"`)
		wantKV(t, r, "dry-run", is("0"), "exit 0 (allowed by the more specific \"git push --dry-run\")")
		wantKV(t, r, "push", func(v string) bool { return v != "0" }, "a non-zero exit (denied)")
		if head := g.Head(); head != g.Base {
			t.Errorf("the push landed: the remote's main moved %s -> %s\n%s", g.Base, head, r)
		}
		wantExecDenial(t, logSince(t, s, n), "push", "git push")
	})
}

// wireRig is a git smart-HTTP server as git.allowed.test and a project
// whose jail.json allows that name and maps it to the server.
type wireRig struct {
	srv *gitServer
	s   *Sandbox
}

func setupWire(t *testing.T, s *Sandbox) *wireRig {
	t.Helper()
	w := &wireRig{srv: newGitServer(t), s: s}
	trustCA(t, s, commandsPKI.get(t), "commands-bundle.pem")
	s.Env = append(s.Env, gitIdentity...)
	s.WriteFile(s.Project+"/wirepush.py", wirePushPy, 0o644)
	return w
}

func (w *wireRig) config(deny []string) {
	writeJailJSON(w.s.t, w.s, hostRules(gitHost, w.srv.Addr(), deny))
}

// wireProbes push the clone's HEAD to the server without exec'ing git
// push; each prints "##NAME=...". OLD is the server's main.
var wireProbes = []struct{ name, script string }{
	{"python-urllib", `python3 ../wirepush.py python-urllib post https://git.allowed.test/repo.git "$old" "$new"`},
	{"curl", `python3 ../wirepush.py body body /tmp/rp.body "$old" "$new" &&
		code=$(curl -sS --max-time 30 -o /tmp/rp.out -w '%{http_code}' --data-binary @/tmp/rp.body \
			-H 'Content-Type: application/x-git-receive-pack-request' https://git.allowed.test/repo.git/git-receive-pack 2>/tmp/rp.err)
		echo "##curl=$code $(head -c 300 /tmp/rp.out | tr '\n\r\t' '   ') $(head -c 200 /tmp/rp.err | tr '\n' ' ')"`},
	{"git-alias", `git -c alias.p=push p -q https://git.allowed.test/repo.git HEAD:main; echo "##git-alias=$?"`},
	{"renamed-git", `rm -f /tmp/g; cp /usr/bin/git /tmp/g && /tmp/g push -q https://git.allowed.test/repo.git HEAD:main; echo "##renamed-git=$?"`},
	{"git-push", `git push -q https://git.allowed.test/repo.git HEAD:main; echo "##git-push=$?"`},
}

// 3. On the wire: a push to a real git smart-HTTP server on loopback made
// without exec'ing `git push` (python urllib, curl, git through an alias, a
// renamed git) is refused by the proxy with 403 and the server's
// repository is unchanged; clone and fetch over HTTPS still work. Without
// the rule each of them lands.
func TestCommandDenyGitPushWire(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		w := setupWire(t, s)
		srv := w.srv
		w.config([]string{"git push"})

		// Clone, commit, fetch over HTTPS with the rule in force.
		r := s.Sh(`
			echo session=$JAIL_SESSION
			git clone -q https://git.allowed.test/repo.git clone; echo "##clone=$?"
			cd clone || exit 1
			echo wire > wire.txt && git add wire.txt && git commit -qm "wire push"; echo "##commit=$?"
			git fetch -q origin; echo "##fetch=$?"
			git ls-remote origin main; echo "##ls-remote=$?"`)
		for _, k := range []string{"clone", "commit", "fetch", "ls-remote"} {
			wantKV(t, r, k, is("0"), "exit 0 (clone and fetch over HTTPS are not pushes)")
		}
		if t.Failed() {
			t.Fatalf("the clone over HTTPS failed; server saw:\n%s\n%s", dumpRequests(srv.Requests()), r)
		}
		if len(withPath(srv.Requests(), "POST", "/git-upload-pack")) == 0 {
			t.Errorf("the server saw no upload-pack request for the clone:\n%s", dumpRequests(srv.Requests()))
		}
		newHead := strings.TrimSpace(s.Host("git", "-C", s.Project+"/clone", "rev-parse", "HEAD"))
		prelude := fmt.Sprintf("echo session=$JAIL_SESSION; cd clone || exit 1; old=%s; new=%s\n", srv.Base, newHead)

		for _, p := range wireProbes {
			t.Run("denied/"+p.name, func(t *testing.T) {
				seen := len(srv.Requests())
				r := s.Sh(prelude + p.script)
				got := srv.Since(seen)
				if head := srv.Head(t); head != srv.Base {
					t.Errorf("the push landed: the server's main moved %s -> %s\n%s", srv.Base, head, r)
					srv.Reset(t)
				}
				if rp := withPath(got, "POST", "/git-receive-pack"); len(rp) > 0 {
					t.Errorf("a receive-pack request reached the server:\n%s", dumpRequests(got))
				}
				v, ok := kvs(r)[p.name]
				if !ok {
					t.Fatalf("the probe printed nothing:\n%s", r)
				}
				ds := decisions(t, s, sessionOf(t, r))
				switch p.name {
				case "python-urllib", "curl":
					if !strings.HasPrefix(v, "403") {
						t.Errorf("want 403 from the proxy for POST /repo.git/git-receive-pack; got %q\n%s", v, r)
					}
					wantWireDenial(t, ds, gitHost, "/repo.git/git-receive-pack", "git push")
				case "git-push":
					if v == "0" {
						t.Errorf("git push exited 0\n%s", r)
					}
					wantExecDenial(t, ds, "push", "git push")
				default: // refused at exec or on the wire, either is fine
					if v == "0" {
						t.Errorf("%s exited 0\n%s", p.name, r)
					}
					if len(execDenials(ds)) == 0 {
						wantWireDenial(t, ds, gitHost, "/git-receive-pack", "git push")
					}
				}
			})
		}

		// Without the rule the same pushes land (each undone on the host).
		w.config(nil)
		for _, p := range wireProbes {
			t.Run("control/"+p.name, func(t *testing.T) {
				seen := len(srv.Requests())
				r := s.Sh(prelude + p.script)
				defer srv.Reset(t)
				v := kvs(r)[p.name]
				head := srv.Head(t)
				if head != newHead {
					t.Errorf("control: without command rules %s must push (server main %s -> %s); got %q, server main %s\nserver saw:\n%s%s",
						p.name, srv.Base, newHead, v, head, dumpRequests(srv.Since(seen)), r)
				}
				switch p.name {
				case "python-urllib", "curl":
					if !strings.HasPrefix(v, "200") || !strings.Contains(v, "ok refs/heads/main") {
						t.Errorf("control: want 200 and \"ok refs/heads/main\" from git http-backend; got %q", v)
					}
				default:
					if v != "0" {
						t.Errorf("control: %s exited %q", p.name, v)
					}
				}
			})
		}
	})
}

// wantWireDenial checks that the log has a proxy deny for host and a path
// ending in pathSuffix whose rule names rule.
func wantWireDenial(t *testing.T, ds []decision, host, pathSuffix, rule string) {
	t.Helper()
	for _, d := range ds {
		if d.Host == host && strings.HasSuffix(d.Path, pathSuffix) && d.Verdict == "deny" {
			if !strings.Contains(d.Rule, rule) {
				t.Errorf("the wire denial does not name the rule %q: %s", rule, d)
			}
			return
		}
	}
	t.Errorf("the log has no deny entry for %s …%s:\n%s", host, pathSuffix, dumpExec(ds))
}

// 3. SSH: with git push denied, a SOCKS connection to port 22 of an
// allowed host is refused (the far end never sees it) unless a network
// rule names that host on port 22. On another port the tunnel works, but
// SSH through it is cut before the client's identification reaches the
// server, whether the client speaks first (OpenSSH) or waits for the
// server's banner. Without the rule all of it connects.
func TestCommandDenyGitPushSSH(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		sshd := newBannerServer(t)
		s.WriteFile(s.Project+"/socksbanner.py", socksBannerPy, 0o644)
		cfg := func(deny []string, allow ...string) {
			writeJailJSON(t, s, hostRules(sshHost, sshd.Addr(), deny, allow...))
		}
		greeted := func(v string) bool { return strings.HasPrefix(v, "rep=0 banner=SSH-2.0-jailtest_sshd") }
		// clientSpoke waits up to d for the client's identification to
		// arrive at the server after the first `from` lines.
		clientSpoke := func(from int, d time.Duration) bool {
			return waitFor(d, func() bool {
				for _, l := range sshd.ClientLines()[from:] {
					if strings.HasPrefix(l, "SSH-2.0-OpenSSH_9.2p1 jailtest-client") {
						return true
					}
				}
				return false
			})
		}
		// probe runs socksbanner.py NAME ssh.git.test PORT MODE in the jail.
		probe := func(t *testing.T, name string, port int, mode string) (r Result, v string, conns int64, lines int) {
			conns, lines = sshd.Conns(), len(sshd.ClientLines())
			r = s.Sh(fmt.Sprintf("echo session=$JAIL_SESSION; python3 socksbanner.py %s %s %d %s", name, sshHost, port, mode))
			v, ok := kvs(r)[name]
			if !ok {
				t.Fatalf("the probe printed nothing:\n%s", r)
			}
			return r, v, conns, lines
		}

		cfg([]string{"git push"})
		t.Run("denied/port 22", func(t *testing.T) {
			r, v, conns, _ := probe(t, "ssh22", 22, "first")
			if strings.HasPrefix(v, "rep=0") {
				t.Errorf("SOCKS to %s:22 connected with git push denied: %q", sshHost, v)
			}
			if c := sshd.Conns() - conns; c != 0 {
				t.Errorf("the SSH server accepted %d connections on port 22 with git push denied", c)
			}
			ds := decisions(t, s, sessionOf(t, r))
			for _, d := range ds {
				if d.Host == sshHost && d.Port == 22 && d.Verdict == "deny" {
					if !strings.Contains(d.Rule, "git push") {
						t.Errorf("the SOCKS denial for %s:22 does not name the rule \"git push\": %s", sshHost, d)
					}
					return
				}
			}
			t.Errorf("the log has no deny entry for %s:22:\n%s", sshHost, dumpExec(ds))
		})
		t.Run("denied/other port, no ssh", func(t *testing.T) {
			// Any raw stream needs an entry with its port, SSH or not.
			if _, v, _, _ := probe(t, "other-port", 2222, ""); greeted(v) || !strings.Contains(v, sshHost+":2222") {
				t.Errorf("SOCKS to %s:2222 (allowed without the port): want the server's first line kept from the client and the entry to add; got %q", sshHost, v)
			}
		})
		t.Run("denied/other port, ssh client speaks first", func(t *testing.T) {
			r, v, _, lines := probe(t, "ssh-first", 2222, "first")
			if clientSpoke(lines, time.Second) {
				t.Errorf("an SSH client's identification reached the server through a tunnel on port 2222 with git push denied: %q\n%s", v, r)
			}
		})
		t.Run("denied/other port, ssh client waits for the server", func(t *testing.T) {
			r, v, _, lines := probe(t, "ssh-after", 2222, "after")
			if clientSpoke(lines, time.Second) {
				t.Errorf("an SSH client that waits for the server's banner before sending its own got through a tunnel on port 2222 with git push denied (the proxy only sniffs the client's first bytes): %q\n%s", v, r)
			}
		})

		// A network rule naming the host on port 22 allows it.
		cfg([]string{"git push"}, sshHost+":22")
		t.Run("explicitly allowed/port 22", func(t *testing.T) {
			_, v, _, lines := probe(t, "ssh22-allowed", 22, "first")
			if !greeted(v) || !clientSpoke(lines, 2*time.Second) {
				t.Errorf("with %q in network.allow, SSH to port 22 must connect despite the git push rule; got %q, server saw %q", sshHost+":22", v, sshd.ClientLines()[lines:])
			}
		})

		// Controls: without the rule, SSH connects on either port named
		// with its port.
		cfg(nil, sshHost+":22", sshHost+":2222")
		for _, c := range []struct {
			port int
			mode string
		}{{22, "first"}, {2222, "first"}, {2222, "after"}} {
			t.Run(fmt.Sprintf("control/port %d %s", c.port, c.mode), func(t *testing.T) {
				r, v, _, lines := probe(t, "ctl", c.port, c.mode)
				if !greeted(v) || !clientSpoke(lines, 2*time.Second) {
					t.Errorf("control: without the rule SSH to port %d must connect and the client's identification arrive; got %q, server saw %q\n%s", c.port, v, sshd.ClientLines()[lines:], r)
				}
			})
		}
	})
}

// npmRig is a package in the project and a registry as registry.npm.test
// that accepts its publish, with a (fake) token in the project's .npmrc so
// that npm gets as far as the network.
func setupNpm(t *testing.T, s *Sandbox) (*recordingServer, func(deny []string)) {
	t.Helper()
	reg := newRegistryServer(t)
	trustCA(t, s, commandsPKI.get(t), "commands-bundle.pem")
	s.Env = append(s.Env, "npm_config_registry=https://"+registryHost+"/", "npm_config_update_notifier=false",
		"npm_config_audit=false", "npm_config_fund=false", "npm_config_fetch_retries=0")
	s.WriteFile(s.Project+"/package.json", `{"name": "jail-cmd-test-pkg", "version": "1.0.0", "description": "jail command-rule test"}`+"\n", 0o644)
	s.WriteFile(s.Project+"/index.js", "module.exports = 1;\n", 0o644)
	s.WriteFile(s.Project+"/.npmrc", "registry=https://"+registryHost+"/\n//"+registryHost+"/:_authToken=jailtest-fake-registry-login\n", 0o644)
	cfg := func(deny []string) { writeJailJSON(t, s, hostRules(registryHost, reg.Addr(), deny)) }
	return reg, cfg
}

// 4. `npm publish` is denied at exec, before any network: the registry
// sees nothing and the log has the EXEC denial. Without the rule the
// publish reaches the registry.
func TestCommandDenyNpmPublish(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		reg, cfg := setupNpm(t, s)
		cfg([]string{"npm publish"})

		r := s.Sh("echo session=$JAIL_SESSION; npm publish")
		if r.Code == 0 {
			t.Errorf("npm publish exited 0 with the rule\n%s", r)
		}
		if !strings.Contains(r.Stdout+r.Stderr, "Operation not permitted") {
			t.Errorf("the output does not say \"Operation not permitted\"\n%s", r)
		}
		if got := reg.Requests(); len(got) > 0 {
			t.Errorf("the registry was contacted although npm publish is denied at exec:\n%s", dumpRequests(got))
		}
		ds := decisions(t, s, sessionOf(t, r))
		wantExecDenial(t, ds, "publish", "npm publish")
		for _, d := range ds {
			if d.Method != "EXEC" && d.Host == registryHost {
				t.Errorf("a network decision for the registry in a session whose npm publish was denied at exec: %s", d)
			}
		}

		n := len(decisions(t, s, ""))
		r = s.Jail("--", "npm", "publish")
		if r.Code != 126 {
			t.Errorf("jail -- npm publish: exit %d, want 126\n%s", r.Code, r)
		}
		wantExecDenial(t, logSince(t, s, n), "publish", "npm publish")
		if got := reg.Requests(); len(got) > 0 {
			t.Errorf("the registry was contacted:\n%s", dumpRequests(got))
		}

		// Control: other npm commands run with the rule; without it the
		// publish reaches the registry.
		r = s.Sh("npm pack --dry-run >/dev/null 2>&1; echo \"##pack=$?\"")
		wantKV(t, r, "pack", is("0"), "exit 0 (npm pack is not npm publish)")
		cfg(nil)
		r = s.Sh("npm publish")
		if r.Code != 0 || len(withPath(reg.Requests(), "PUT", "/jail-cmd-test-pkg")) == 0 {
			t.Errorf("control: without the rule npm publish must reach the registry (PUT /jail-cmd-test-pkg); registry saw:\n%s%s", dumpRequests(reg.Requests()), r)
		}
	})
}

// curlPublish PUTs a package document with a tarball attachment, the
// request npm publish makes, to the registry with curl.
const curlPublish = `
printf '%s' '{"_id":"jail-cmd-test-pkg","name":"jail-cmd-test-pkg","dist-tags":{"latest":"1.0.1"},"versions":{"1.0.1":{"name":"jail-cmd-test-pkg","version":"1.0.1","dist":{"tarball":"https://registry.npm.test/jail-cmd-test-pkg/-/jail-cmd-test-pkg-1.0.1.tgz"}}},"_attachments":{"jail-cmd-test-pkg-1.0.1.tgz":{"content_type":"application/octet-stream","data":"H4sIAAAAAAAAA+3OMQ6AIBAEQGpfsQ+QAILvMdFCYiz8v0qhjZ2dzjSb3Sm2Lr12/Oea1pLTL/qbQWR/AAAAAAAAAAAAAAAAAAAA4NYB1EXU7wAoAAA=","length":120}}}' >/tmp/publish.json
code=$(curl -sS --max-time 30 -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
	-H 'npm-command: publish' -H 'Authorization: Bearer jailtest-fake-registry-login' \
	--data-binary @/tmp/publish.json https://registry.npm.test/jail-cmd-test-pkg)
echo "##curl=$code"
`

// 4 (on the wire). With npm publish denied, a publish that is not
// an exec of npm (node running npm's own script, curl) is refused by the
// proxy: the registry sees no PUT.
func TestCommandDenyNpmPublishWire(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		reg, cfg := setupNpm(t, s)
		cfg([]string{"npm publish"})
		r := s.Sh(`
			echo session=$JAIL_SESSION
			node "$(readlink -f /usr/bin/npm)" publish; echo "##node-npm-cli=$?"
			` + curlPublish)
		wantKV(t, r, "node-npm-cli", func(v string) bool { return v != "0" }, "a non-zero exit (publish refused on the wire)")
		wantKV(t, r, "curl", is("403"), "403 from the proxy")
		if got := withPath(reg.Requests(), "PUT", "/jail-cmd-test-pkg"); len(got) > 0 {
			t.Errorf("a publish reached the registry with npm publish denied:\n%s", dumpRequests(reg.Requests()))
		}
		ds := decisions(t, s, sessionOf(t, r))
		wantWireDenial(t, ds, registryHost, "/jail-cmd-test-pkg", "npm publish")

		cfg(nil)
		r = s.Sh(`node "$(readlink -f /usr/bin/npm)" publish; echo "##node-npm-cli=$?"` + "\n" + curlPublish)
		wantKV(t, r, "node-npm-cli", is("0"), "control: exit 0 without the rule")
		wantKV(t, r, "curl", is("200"), "control: the registry's 200 without the rule")
		if len(withPath(reg.Requests(), "PUT", "/jail-cmd-test-pkg")) == 0 {
			t.Errorf("control: the publish did not reach the registry without the rule:\n%s", dumpRequests(reg.Requests()))
		}
	})
}

// 5. BenchmarkExecWithRules times 1,000 execs of /bin/true from a shell in
// the jail with command.deny ["git push"] (every exec goes to the
// supervisor) against the same without command rules, interleaved in one
// run, and reports both medians and their ratio (target: ≤ 1.5×).
func BenchmarkExecWithRules(b *testing.B) {
	root := b.TempDir()
	with, without := filepath.Join(root, "with-rules"), filepath.Join(root, "without-rules")
	for _, dir := range []string{with, without} {
		if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
			b.Fatalf("git init %s: %v\n%s", dir, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(with, "jail.json"), []byte(`{"command": {"deny": ["git push"]}}`+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	env := []string{"HOME=" + os.Getenv("HOME"), "PATH=/usr/bin:/bin"}
	run := func(dir string, args ...string) (time.Duration, int, string) {
		cmd := exec.Command(jailBin, args...)
		cmd.Dir = dir
		cmd.Env = env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			b.Fatalf("running jail: %v", err)
		}
		return took, code, string(out)
	}
	// The rule must be in force, or the ratio measures nothing: git push
	// with no remote exits 128 from git itself, 126 when the exec is denied.
	if _, code, out := run(with, "--", "git", "push"); code != 126 {
		b.Fatalf("command.deny [\"git push\"] is not enforced at exec (jail -- git push: exit %d, want 126); nothing to measure\n%s", code, out)
	}
	loop := []string{"--", "sh", "-c", `i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done`}
	timed := func(dir string) time.Duration {
		took, code, out := run(dir, loop...)
		if code != 0 {
			b.Fatalf("the exec loop failed in %s: exit %d\n%s", dir, code, out)
		}
		return took
	}
	timed(with) // warm the page cache
	timed(without)

	var ruled, plain []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain = append(plain, timed(without))
		ruled = append(ruled, timed(with))
	}
	b.StopTimer()
	mp, mr := median(plain), median(ruled)
	b.ReportMetric(float64(mp.Microseconds())/1000, "plain-ms")
	b.ReportMetric(float64(mr.Microseconds())/1000, "rules-ms")
	b.ReportMetric(float64(mr-mp)/1000/float64(time.Microsecond), "us-added/exec")
	b.ReportMetric(float64(mr)/float64(mp), "ratio")
}
