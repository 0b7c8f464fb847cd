package tests

import (
	"os"
	"strings"
	"testing"
)

// A denied program stays denied under another name: the supervisor knows
// git by its inode and its content, not by what the exec calls it, follows
// the kernel's own path walk (symbolic links and ".." inside the jail) and
// the "#!" line of a script, whose interpreter the kernel runs without an
// exec call of its own. Every attack runs with deny ["git push"], where it
// must fail, leave the remote alone and be logged, and without it, where
// the same script must push.
var renamedGitAttacks = []pushAttack{
	{name: "copy in the project under tools/", script: `rm -rf tools && mkdir tools && cp "$(command -v git)" tools/g && ./tools/g push`, eperm: true, logArg: "push"},
	{name: "rename of a copy", script: "rm -f /tmp/a /tmp/b; cp /usr/bin/git /tmp/a && mv /tmp/a /tmp/b && /tmp/b push", eperm: true, logArg: "push"},
	{name: "hard link of a copy in the project", script: "rm -f ./g ./hl; cp /usr/bin/git ./g && ln ./g ./hl && ./hl push", eperm: true, logArg: "push", link: true},
	{name: "copy of a copy in /tmp", script: "rm -f /tmp/c1 /tmp/c2; cp /usr/bin/git /tmp/c1 && cp /tmp/c1 /tmp/c2 && /tmp/c2 push", eperm: true, logArg: "push"},
	// ".." after a symbolic link goes up from the link's target, not
	// lexically: ./lk/../g is /tmp/d/g (git) while ./g is a copy of true.
	{name: "symlink then ..", script: "rm -rf /tmp/d ./g ./lk; mkdir -p /tmp/d/sub && cp /usr/bin/git /tmp/d/g && cp /bin/true ./g && ln -s /tmp/d/sub ./lk && ./lk/../g push", eperm: true, logArg: "push"},
	// An absolute link is followed in the jail, where the home is a
	// throwaway one: the host's file of that name is an innocent
	// .bashrc.
	{name: "absolute symlink to a path the host has otherwise", script: `rm -f ./hb; cp /usr/bin/git "$HOME/.bashrc" && ln -s "$HOME/.bashrc" ./hb && ./hb push`, eperm: true, logArg: "push"},
	// A script named like the remote whose "#!" line is `git push`: the
	// kernel runs `git push origin`.
	{name: "script whose #! is git push", script: `rm -f ./origin; printf '#!/usr/bin/git push\n' > origin && chmod +x origin && python3 -c 'import os; os.execv("origin", ["origin"])'`, eperm: true, logArg: "push"},
	{name: "script whose #! is a renamed copy", script: `rm -f ./origin /tmp/gg; cp /usr/bin/git /tmp/gg && printf '#!/tmp/gg push\n' > origin && chmod +x origin && python3 -c 'import os; os.execv("origin", ["origin"])'`, eperm: true, logArg: "push"},
	{name: "script whose #! is relative", script: `rm -f ./origin ./gg; cp /usr/bin/git ./gg && printf '#!gg push\n' > origin && chmod +x origin && python3 -c 'import os; os.execv("origin", ["origin"])'`, eperm: true, logArg: "push"},
	{name: "fexecve of a deleted copy", script: `rm -f /tmp/del; cp /usr/bin/git /tmp/del && python3 -c 'import os; fd = os.open("/tmp/del", os.O_RDONLY); os.unlink("/tmp/del"); os.execve(fd, ["x", "push"], dict(os.environ))'`, eperm: true, logArg: "push"},
	{name: "fexecve of a memfd copy", script: `python3 -c '
import os
fd = os.memfd_create("x", 0)
os.write(fd, open("/usr/bin/git", "rb").read())
os.execve(fd, ["x", "push"], dict(os.environ))'`, eperm: true, logArg: "push"},
	// The dynamic loader runs the program it is handed, options and all.
	{name: "through the dynamic loader", script: "/lib64/ld-linux-x86-64.so.2 /usr/bin/git push", eperm: true, logArg: "push"},
	{name: "a renamed copy through the loader, with options", script: "rm -f /tmp/lg; cp /usr/bin/git /tmp/lg && /lib64/ld-linux-x86-64.so.2 --library-path /a --preload '' --argv0 x /tmp/lg push", eperm: true, logArg: "push"},
	{name: "/proc/self/fd of a copy", script: `rm -f /tmp/pf; cp /usr/bin/git /tmp/pf && python3 -c 'import os; fd = os.open("/tmp/pf", os.O_RDONLY); os.execv("/proc/self/fd/%d" % fd, ["x", "push"])'`, eperm: true, logArg: "push"},
}

// Copies, renames, links and scripts of git under other names are git.
func TestCommandDenyRenamedGit(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		runPushAttacks(t, s, renamedGitAttacks)
	})
}

// A renamed copy of git runs everything the rules do not deny, and a file
// of git's very size that is not git is not taken for it.
func TestCommandDenyRenamedGitOthersRun(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupPushRig(t, s)
		st, err := os.Stat("/usr/bin/git")
		if err != nil {
			t.Fatal(err)
		}
		// A shell script padded with a comment to git's size.
		body := "#!/bin/sh\necho same-size-ran\n#"
		s.WriteFile(s.Project+"/same-size", body+strings.Repeat("x", int(st.Size())-len(body)-1)+"\n", 0o755)
		writeJailJSON(t, s, commandRules([]string{"git push"}, nil))
		r := s.Sh(`
			cp /usr/bin/git ./g
			./g status --porcelain >/dev/null; echo "##status=$?"
			./g log -1 --format=%s >/dev/null; echo "##log=$?"
			./same-size >/dev/null; echo "##same-size=$?"
			./g push; echo "##push=$?"`)
		wantKV(t, r, "status", is("0"), "exit 0 (g status is not a push)")
		wantKV(t, r, "log", is("0"), "exit 0 (g log is not a push)")
		wantKV(t, r, "same-size", is("0"), "exit 0 (a script of git's size is not git)")
		wantKV(t, r, "push", func(v string) bool { return v != "0" }, "a non-zero exit (denied)")
		if head := g.Head(); head != g.Base {
			t.Errorf("the push landed: the remote's main moved %s -> %s\n%s", g.Base, head, r)
		}
	})
}

// deployScript is a project script that leaves a marker in the project
// each time it runs.
const deployScript = "#!/bin/sh\necho ran > \"$PWD/.deployed-$1\"\n"

// projectAttack runs a copy of the project's deploy script under another
// name; MARK names its marker.
type projectAttack struct{ name, script string }

var projectAttacks = []projectAttack{
	{"copy in /tmp", "cp scripts/deploy.sh /tmp/ship && /tmp/ship MARK"},
	{"copy in the project", "rm -rf tools && mkdir tools && cp scripts/deploy.sh tools/ship && ./tools/ship MARK"},
	{"hard link", "rm -f ./ship; ln scripts/deploy.sh ./ship && ./ship MARK"},
	{"rename of a copy", "rm -f /tmp/a /tmp/b; cp scripts/deploy.sh /tmp/a && mv /tmp/a /tmp/b && /tmp/b MARK"},
	// An interpreter given the script (or its copy) runs it.
	{"sh of the original", "sh scripts/deploy.sh MARK"},
	{"bash -e of a copy", "cp scripts/deploy.sh /tmp/sc && bash -e /tmp/sc MARK"},
	{"env sh of a copy in the project", "rm -f ./ship; cp scripts/deploy.sh ./ship && env sh ./ship MARK"},
	// The rules know the script as it was when the jail started: a copy
	// taken before the original is changed is still it.
	{"copy of the original, then the original changed", "cp scripts/deploy.sh /tmp/orig && echo '# changed' >> scripts/deploy.sh && /tmp/orig MARK; s=$?; git checkout -q scripts/deploy.sh; exit $s"},
}

// A project script denied by a rule is denied under any name, whether the
// rule names its path or its bare name.
func TestCommandDenyProjectScriptCopies(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/scripts/deploy.sh", deployScript, 0o755)
		s.WriteFile(s.Project+"/bin/deploy", deployScript, 0o755)
		s.WriteFile(s.Project+"/.git/info/exclude", "/tools\n/ship\n/.deployed-*\n", 0o644)
		s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "add", "scripts", "bin")
		s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "commit", "-qm", "deploy script")
		marker := func(mark string) bool {
			_, err := os.Stat(s.Project + "/.deployed-" + mark)
			return err == nil
		}
		for _, rule := range []string{"scripts/deploy.sh", "deploy"} {
			script := "scripts/deploy.sh"
			if rule == "deploy" {
				script = "bin/deploy"
			}
			writeJailJSON(t, s, commandRules([]string{rule}, nil))
			for i, a := range projectAttacks {
				mark := strings.NewReplacer("/", "-", ".", "-").Replace(rule) + "-" + string(rune('a'+i))
				t.Run("denied/"+rule+"/"+a.name, func(t *testing.T) {
					n := len(decisions(t, s, ""))
					r := s.Sh(strings.ReplaceAll(strings.ReplaceAll(a.script, "scripts/deploy.sh", script), "MARK", mark))
					if marker(mark) {
						t.Errorf("the copy of %s ran with command.deny [%q]\n%s", script, rule, r)
					}
					if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "Operation not permitted") {
						t.Errorf("want the exec refused with EPERM\n%s", r)
					}
					wantExecDenial(t, logSince(t, s, n), mark, progNameOf(rule))
				})
			}
		}
		writeJailJSON(t, s, map[string]any{})
		for i, a := range projectAttacks {
			mark := "control-" + string(rune('a'+i))
			t.Run("control/"+a.name, func(t *testing.T) {
				r := s.Sh(strings.ReplaceAll(a.script, "MARK", mark))
				if !marker(mark) {
					t.Errorf("control: without the rule the copy must run and leave .deployed-%s\n%s", mark, r)
				}
			})
		}
	})
}

// progNameOf is a rule's program as the log names it: its base name.
func progNameOf(rule string) string {
	f := strings.Fields(rule)[0]
	return f[strings.LastIndex(f, "/")+1:]
}
