package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tests that jail refuses to run, rather than run with less protection
// than the policy says, when it cannot see everything a pattern covers or
// cannot honour a pattern at all.

// lockedKey is a private key planted in directories the glob walks of the
// tests below cannot read.
const lockedKey = "LOCKED-PRIVATE-KEY-5e4d3c2b1a"

// refusal checks that a run was refused before the command started: exit
// 125, one line on stderr that contains want, the marker the command
// would have written absent on the host, and the key in no output.
func refusal(t *testing.T, r Result, marker, want string) {
	t.Helper()
	if r.Code != 125 {
		t.Errorf("exit %d, want 125 (refused):\n%s", r.Code, r)
	}
	if l := lines(r.Stderr); len(l) != 1 || !strings.HasPrefix(l[0], "jail: ") || !strings.Contains(l[0], want) {
		t.Errorf("stderr is not the one line %q:\n%s", want, r)
	}
	if _, err := os.Lstat(marker); err == nil {
		t.Errorf("the command ran although jail should have refused: %s exists on the host", marker)
	}
	noSecret(t, r, "refused run", lockedKey)
}

// TestFailClosedUnreadableDirUnderGlob: a directory the user owns with
// mode 0000 cannot be listed by the walk that expands "**/*.pem", but the
// jailed process can chmod it and read the key in it. jail must refuse and
// name the pattern; the command must not run. As root the walk reads the
// directory, finds the key and masks it: the command runs and cannot read
// it.
//
// Against the code that passed over unreadable directories, the unprivileged
// run printed the key.
func TestFailClosedUnreadableDirUnderGlob(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": ["**/*.pem"]}}`, 0o644)
		locked := s.Project + "/locked"
		s.WriteFile(locked+"/key.pem", lockedKey+"\n", 0o600)
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		marker := s.Project + "/ran"
		attack := `touch ran; chmod u+rx locked && cat locked/key.pem`
		r := s.Sh(attack)
		noSecret(t, r, "chmod and read a key the walk did not see", lockedKey)
		if s.R.UID == 0 {
			if r.Code == 125 {
				t.Errorf("as root the walk reads the directory: the key is masked and the command runs:\n%s", r)
			}
			hostFile(t, marker)
			return
		}
		want := `denyRead "` + s.Project + `/**/*.pem": cannot read ` + locked + ` (permission denied); make it readable (chmod u+rx ` + locked + `) or deny the directory itself`
		refusal(t, r, marker, want)
		// jail plan refuses the same way.
		p := s.Jail("plan", "--", "sh", "-c", attack)
		refusal(t, p, marker, want)
		if strings.Contains(p.Stdout, "mask") {
			t.Errorf("jail plan printed a plan:\n%s", p)
		}

		// Denying the directory itself is the fix the message names.
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": ["**/*.pem", "locked"]}}`, 0o644)
		os.Chmod(locked, 0)
		r = s.Sh(attack)
		noSecret(t, r, "chmod and read a key in a denied directory", lockedKey)
		if r.Code == 125 {
			t.Errorf("with the directory denied, jail still refuses:\n%s", r)
		}
	})
}

// TestFailClosedUnreadableDirUnderMask: an unreadable directory below a
// path the jail masks anyway ("secrets/**" masks secrets itself) hides
// nothing the jailed process could see: jail runs, and the chmod-and-read
// finds an empty directory.
func TestFailClosedUnreadableDirUnderMask(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": ["secrets/**"]}}`, 0o644)
		locked := s.Project + "/secrets/locked"
		s.WriteFile(locked+"/key.pem", lockedKey+"\n", 0o600)
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		r := s.Sh(`touch ran; chmod u+rx secrets/locked; cat secrets/locked/key.pem; ls -A secrets`)
		noSecret(t, r, "chmod and read a key under a masked directory", lockedKey)
		if r.Code == 125 {
			t.Errorf("refused although the directory is masked:\n%s", r)
		}
		hostFile(t, s.Project+"/ran")
		if strings.Contains(r.Stdout, "locked") {
			t.Errorf("the masked secrets directory shows its contents:\n%s", r)
		}
	})
}

// TestFailClosedOtherUsersDirs: directories that are not the user's. One
// the user can neither list nor search is closed inside the jail as well
// (same uid, no capabilities): the walk passes over it and jail runs. One
// the user can search but not list still serves files whose names are
// known: denied, it must be masked (it used to be left out as
// "unreadable", so its key could be read by name), and the walk that
// cannot list it is no reason to refuse.
func TestFailClosedOtherUsersDirs(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": ["**/*.pem", "searchonly"]}}`, 0o644)
		for _, d := range []struct {
			name string
			mode os.FileMode
		}{{"closed", 0o700}, {"searchonly", 0o711}} {
			dir := filepath.Join(s.Project, d.name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir+"/key.pem", []byte(lockedKey+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, d.mode); err != nil { // owned by the test process: root
				t.Fatal(err)
			}
		}
		r := s.Sh(`touch ran; cat closed/key.pem; cat searchonly/key.pem; chmod u+rx closed; cat closed/key.pem; true`)
		noSecret(t, r, "read keys in directories of another user", lockedKey)
		if r.Code != 0 {
			t.Errorf("exit %d, want 0: directories closed to the user need no walk:\n%s", r.Code, r)
		}
		hostFile(t, s.Project+"/ran")
	})
}

// TestFailClosedBadPattern: a pattern the matcher cannot honour is a
// config error with its position, and the command never runs.
func TestFailClosedBadPattern(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/key.pem", lockedKey+"\n", 0o600)
		for _, tc := range []struct{ doc, want string }{
			{`{"filesystem": {"denyRead": ["[a-", "key.pem"]}}`, `jail.json:1:30: "denyRead" entry "[a-": "[a-": malformed bracket expression`},
			{"{\n \"filesystem\": {\"denyRead\": [\"*.pem**\"]}}", `jail.json:2:30: "denyRead" entry "*.pem**": "*.pem**": "**" must be a whole path segment`},
		} {
			s.WriteFile(s.Project+"/jail.json", tc.doc, 0o644)
			refusal(t, s.Sh(`touch ran; cat key.pem`), s.Project+"/ran", tc.want)
		}
		os.Remove(s.Project + "/jail.json")
		r := s.Jail("--deny-read", "[!.]*", "--", "sh", "-c", "touch ran; cat key.pem")
		refusal(t, r, s.Project+"/ran", `--deny-read "[!.]*": "[!.]*": "[!" is a literal "!" here; negate a class with "[^...]"`)
	})
}

// TestFailClosedDecisionLogUnwritable: a decision log that cannot be
// written (its path is a directory) does not stop the run, but is reported
// once on stderr, even with both the proxy and the exec supervisor writing
// to it and a denial to record; the command rule still holds.
func TestFailClosedDecisionLogUnwritable(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		state := s.Base + "/state"
		s.WriteFile(state+"/jail/decisions.jsonl/x", "not a log\n", 0o644)
		s.Env = append(s.Env, "XDG_STATE_HOME="+state)
		s.WriteFile(s.Project+"/jail.json", `{"command": {"deny": ["git push"]}}`, 0o644)
		want := "jail: warning: decision log " + state + "/jail/decisions.jsonl: is a directory; decisions are not being recorded"
		// With the network, the proxy and the supervisor both open the log;
		// without it, only the supervisor (whose failure went unsaid).
		for _, args := range [][]string{nil, {"--no-network"}} {
			r := s.Jail(append(args, "--", "sh", "-c", `git push origin main 2>/dev/null && echo PUSHED; echo ran`)...)
			if r.Code != 0 || !strings.Contains(r.Stdout, "ran") || strings.Contains(r.Stdout, "PUSHED") {
				t.Errorf("%q: want the command run with git push denied:\n%s", args, r)
			}
			n := 0
			for _, l := range jailLines(r.Stderr) {
				if strings.Contains(l, "decision log") {
					n++
					if l != want {
						t.Errorf("%q: warning %q, want %q", args, l, want)
					}
				}
			}
			if n != 1 {
				t.Errorf("%q: %d warnings about the decision log, want 1:\n%s", args, n, r)
			}
		}
	})
}

// TestFailClosedGlobInProjectName: in a project directory named like a
// glob, the paths jail protects under it (.git/hooks) would be taken for
// patterns matching other paths, and a hook written from inside would run
// at the next unjailed commit. jail refuses instead; nothing is written.
func TestFailClosedGlobInProjectName(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		project := s.Base + "/proj[1]"
		s.WriteFile(project+"/README.md", "# project\n", 0o644)
		s.Host("git", "init", "-q", project)
		hook := project + "/.git/hooks/pre-commit"
		r := s.JailIn(project, "", "--", "sh", "-c", `printf '#!/bin/sh\ntouch /tmp/owned\n' > .git/hooks/pre-commit; touch ran`)
		refusal(t, r, project+"/ran", "jail: the project directory "+project+" has a glob character (*, ? or [) in its name")
		if _, err := os.Lstat(hook); err == nil {
			t.Errorf("a git hook was written from inside the jail: %s", hook)
		}
	})
}

// TestFailClosedPlaceholderJournal: jail cannot record the placeholders it
// makes (its state directory is a file), so it could not remove them after
// a kill: it refuses to run and says where.
func TestFailClosedPlaceholderJournal(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		state := s.Base + "/state"
		s.WriteFile(state+"/jail", "not a directory\n", 0o644)
		s.Env = append(s.Env, "XDG_STATE_HOME="+state)
		r := s.Sh("touch ran")
		refusal(t, r, s.Project+"/ran", "placeholder journal")
		hostAbsent(t, s.Project+"/.mcp.json")
	})
}

// TestFailClosedGlobTooLarge: a denyRead glob whose tree is larger than the
// walk bound (lowered here with JAIL_MAX_WALK, which can only lower it)
// refuses the run, naming the pattern; the key it would have missed is not
// read. Under the bound the same jail runs and masks it.
func TestFailClosedGlobTooLarge(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		for i := 0; i < 60; i++ {
			s.WriteFile(fmt.Sprintf("%s/src/f%02d.txt", s.Project, i), "x\n", 0o644)
		}
		s.WriteFile(s.Project+"/src/zz/key.pem", lockedKey+"\n", 0o600)
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"denyRead": ["**/*.pem"]}}`, 0o644)
		env := s.Env
		s.Env = append(env, "JAIL_MAX_WALK=40")
		r := s.Sh("touch ran; cat src/zz/key.pem")
		refusal(t, r, s.Project+"/ran", `denyRead "`+s.Project+`/**/*.pem": more than 40 entries`)
		s.Env = append(env, "JAIL_MAX_WALK=100000000")
		r = s.Sh("cat src/zz/key.pem; echo done")
		if !strings.Contains(r.Stdout, "done") {
			t.Fatalf("under the bound the jail should run:\n%s", r)
		}
		noSecret(t, r, "run under the bound", lockedKey)
	})
}
