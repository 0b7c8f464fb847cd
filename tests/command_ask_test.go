package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// askedRun is a jail run in the background whose execs command.ask
// holds: its output once it ends.
type askedRun struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
}

// startAsked starts `jail -- sh -c script` under jail.json cfg.
func startAsked(t *testing.T, s *Sandbox, cfg map[string]any, script string) *askedRun {
	t.Helper()
	writeJailJSON(t, s, cfg)
	r := &askedRun{cmd: s.JailCmd("--", "sh", "-c", script), done: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

// wait waits for the run to end and returns what it printed.
func (r *askedRun) wait(t *testing.T, within time.Duration) Result {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(within):
		t.Fatalf("the jailed command did not end within %v:\n%s%s", within, r.out.String(), r.err.String())
	}
	return Result{Stdout: r.out.String(), Stderr: r.err.String(), Code: r.cmd.ProcessState.ExitCode()}
}

// pendingRequest is a held request as `jail pending --json` prints it.
type pendingRequest struct {
	ID   string   `json:"id"`
	Kind string   `json:"kind"`
	Rule string   `json:"rule"`
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd"`
	Path string   `json:"path"`
}

// waitPending waits until the runner's sessions hold a command request
// whose argv has want in it, and returns it.
func waitPending(t *testing.T, s *Sandbox, r *askedRun, want string) pendingRequest {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-r.done:
			t.Fatalf("the jailed command ended before its exec was held:\n%s%s", r.out.String(), r.err.String())
		default:
		}
		res := s.Jail("pending", "--json")
		for _, l := range lines(res.Stdout) {
			var p pendingRequest
			if json.Unmarshal([]byte(l), &p) == nil && p.Kind == "command" && strings.Contains(strings.Join(p.Argv, " "), want) {
				return p
			}
		}
	}
	t.Fatalf("no held exec of %q appeared in jail pending", want)
	return pendingRequest{}
}

func commandAskConfig(timeout int) map[string]any {
	return map[string]any{"command": map[string]any{"ask": []string{"git push"}}, "askTimeout": timeout}
}

// A git push under command.ask waits for a person: the remote is
// untouched while it is held; `jail approve` lets it run, `jail reject`
// refuses it, and so does the timeout; the log holds the held and the
// answered entries.
func TestCommandAskGitPush(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		g := setupPushRig(t, s)
		const script = `echo session=$JAIL_SESSION; git push -q origin main; echo "##push=$?"`
		t.Run("approve", func(t *testing.T) {
			r := startAsked(t, s, commandAskConfig(60), script)
			p := waitPending(t, s, r, "push")
			if p.Rule != "command.ask git push" || !slices.Equal(p.Argv, []string{"git", "push", "-q", "origin", "main"}) || p.Cwd != s.Project || p.Path != "/usr/bin/git" {
				t.Errorf("held request %+v: want the rule, the full argv, the project as cwd and /usr/bin/git", p)
			}
			time.Sleep(300 * time.Millisecond)
			if head := g.Head(); head != g.Base {
				t.Fatalf("the push landed while held: the remote's main is %s", head)
			}
			if res := s.Jail("approve", p.ID); res.Code != 0 {
				t.Fatalf("jail approve %s:\n%s", p.ID, res)
			}
			res := r.wait(t, 20*time.Second)
			wantKV(t, res, "push", is("0"), "exit 0 (approved)")
			if head := g.Head(); head != g.Local {
				t.Errorf("the approved push did not land: the remote's main is %s, want %s", head, g.Local)
			}
			wantAskLog(t, s, sessionOf(t, res), "allow", "jail approve")
			g.Reset()
		})
		t.Run("reject", func(t *testing.T) {
			r := startAsked(t, s, commandAskConfig(60), script)
			p := waitPending(t, s, r, "push")
			if res := s.Jail("reject", p.ID); res.Code != 0 {
				t.Fatalf("jail reject %s:\n%s", p.ID, res)
			}
			res := r.wait(t, 20*time.Second)
			wantKV(t, res, "push", func(v string) bool { return v != "0" }, "a non-zero exit (rejected)")
			if head := g.Head(); head != g.Base {
				t.Errorf("the rejected push landed: the remote's main is %s", head)
			}
			wantAskLog(t, s, sessionOf(t, res), "deny", "jail reject")
		})
		t.Run("timeout", func(t *testing.T) {
			r := startAsked(t, s, commandAskConfig(2), script)
			waitPending(t, s, r, "push")
			res := r.wait(t, 20*time.Second)
			wantKV(t, res, "push", func(v string) bool { return v != "0" }, "a non-zero exit (timed out)")
			if head := g.Head(); head != g.Base {
				t.Errorf("the unanswered push landed: the remote's main is %s", head)
			}
			wantAskLog(t, s, sessionOf(t, res), "deny", "timeout")
		})
	})
}

// bash -c 'git push' is asked as git push is (the exec of git is held),
// and while it is held the jail's other commands run: the supervisor
// does not wait for the answer to answer them.
func TestCommandAskShellAndOthers(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		g := setupPushRig(t, s)
		others := s.Project + "/others-ran"
		r := startAsked(t, s, commandAskConfig(60), `echo session=$JAIL_SESSION
			bash -c 'git push -q origin main' & pid=$!
			sleep 1; true && ls >/dev/null && touch `+others+`
			wait $pid; echo "##push=$?"`)
		p := waitPending(t, s, r, "push")
		if !slices.Equal(p.Argv, []string{"git", "push", "-q", "origin", "main"}) {
			t.Errorf("held %v, want the git push bash runs", p.Argv)
		}
		var ran bool
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !ran; time.Sleep(100 * time.Millisecond) {
			_, err := os.Stat(others)
			ran = err == nil
		}
		if !ran {
			t.Fatal("true, ls and touch did not run while git push was held")
		}
		if head := g.Head(); head != g.Base {
			t.Fatalf("the push landed while held: the remote's main is %s", head)
		}
		if res := s.Jail("reject", p.ID); res.Code != 0 {
			t.Fatalf("jail reject %s:\n%s", p.ID, res)
		}
		res := r.wait(t, 20*time.Second)
		wantKV(t, res, "push", func(v string) bool { return v != "0" }, "a non-zero exit (rejected)")
		if head := g.Head(); head != g.Base {
			t.Errorf("the rejected push landed: the remote's main is %s", head)
		}
	})
}

// wantAskLog checks the session's decision log for the held entry of the
// push and its answer, with the rule that asked and who answered.
func wantAskLog(t *testing.T, s *Sandbox, session, verdict, by string) {
	t.Helper()
	var held, answered bool
	ds := decisions(t, s, session)
	for _, d := range ds {
		if d.Method != "EXEC" || d.Rule != "command.ask git push" || !strings.Contains(d.Path, "push") {
			continue
		}
		held = held || d.Verdict == "held"
		answered = answered || (d.Verdict == verdict && d.Reason == by)
	}
	if !held || !answered {
		t.Errorf("the log lacks the held entry (%v) or the %s by %q (%v):\n%s", held, verdict, by, answered, dumpExec(ds))
	}
}

// A jailed process that rewrites its held exec's argv from another thread
// after the question was shown gets no approval for the rewritten one:
// the exec fails, neither the shown nor the rewritten command runs.
func TestCommandAskRewriteWhileHeld(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		shown, evil := s.Project+"/shown-made", s.Project+"/evil-made"
		s.WriteFile(s.Project+"/swap.py", `import ctypes, threading, time
libc = ctypes.CDLL(None, use_errno=True)
arg = ctypes.create_string_buffer(b"`+shown+`")
argv = (ctypes.c_char_p * 3)(b"touch", ctypes.addressof(arg), None)
def rewrite():
    time.sleep(0.5)
    ctypes.memmove(arg, b"`+evil+`\0", len("`+evil+`") + 1)
threading.Thread(target=rewrite, daemon=True).start()
libc.execv(b"/usr/bin/touch", argv)
print("##exec=%d" % ctypes.get_errno())
`, 0o644)
		cfg := map[string]any{"command": map[string]any{"ask": []string{"touch"}}, "askTimeout": 60}
		r := startAsked(t, s, cfg, "python3 swap.py")
		p := waitPending(t, s, r, "touch")
		if !slices.Equal(p.Argv, []string{"touch", shown}) {
			t.Fatalf("held %v, want touch %s", p.Argv, shown)
		}
		time.Sleep(time.Second) // the rewrite happens meanwhile
		if res := s.Jail("approve", p.ID); res.Code != 0 {
			t.Fatalf("jail approve %s:\n%s", p.ID, res)
		}
		res := r.wait(t, 20*time.Second)
		wantKV(t, res, "exec", is("1"), "EPERM (the exec changed after it was shown)")
		for _, f := range []string{shown, evil} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s exists: an exec other than the one approved ran\n%s", f, res)
			}
		}
	})
}

// An approved exec goes on only when nothing but its caller can change
// what the kernel reads for it: a push from a single-threaded Python
// (subprocess execs from a vfork child, whose parent sleeps until the
// exec is done) runs once approved; the same push from a process with a
// second thread is refused although approved, and the log says why.
func TestCommandAskSharedMemory(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		g := setupPushRig(t, s)
		run := func(t *testing.T, threaded string) Result {
			script := `echo session=$JAIL_SESSION; python3 -c '
import subprocess, threading, time
if ` + threaded + `:
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
try:
    print("##push=%d" % subprocess.run(["git", "push", "-q", "origin", "main"]).returncode)
except PermissionError:
    print("##push=EPERM")
'`
			r := startAsked(t, s, commandAskConfig(60), script)
			p := waitPending(t, s, r, "push")
			if res := s.Jail("approve", p.ID); res.Code != 0 {
				t.Fatalf("jail approve %s:\n%s", p.ID, res)
			}
			return r.wait(t, 20*time.Second)
		}
		t.Run("single-threaded", func(t *testing.T) {
			res := run(t, "False")
			wantKV(t, res, "push", is("0"), "exit 0 (approved, nothing else shares its memory)")
			if head := g.Head(); head != g.Local {
				t.Errorf("the approved push did not land: the remote's main is %s, want %s", head, g.Local)
			}
			g.Reset()
		})
		t.Run("threaded", func(t *testing.T) {
			res := run(t, "True")
			wantKV(t, res, "push", is("EPERM"), "EPERM (its memory is shared)")
			if head := g.Head(); head != g.Base {
				t.Errorf("a push whose memory another thread shares ran: the remote's main is %s", head)
			}
			found := false
			for _, d := range decisions(t, s, sessionOf(t, res)) {
				found = found || (d.Method == "EXEC" && d.Verdict == "deny" && strings.Contains(d.Reason, "could change what it runs after it was shown"))
			}
			if !found {
				t.Errorf("the log does not say the approved push was refused for the memory its other thread shares")
			}
		})
	})
}
