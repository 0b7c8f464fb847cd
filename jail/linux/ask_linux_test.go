package linux

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/jailsh/jail/jail/control"
	"github.com/jailsh/jail/jail/linux/inside"
	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// asker is a test's answerer of held execs: it records each request and
// answers with answer (which may block, or act while the exec is held).
type asker struct {
	mu     sync.Mutex
	asked  []control.Request
	answer func(control.Request) control.Answer
	// answerCtx, when set, answers instead, seeing the supervisor's ctx.
	answerCtx func(context.Context, control.Request) control.Answer
}

func (a *asker) ask(ctx context.Context, r control.Request) control.Answer {
	a.mu.Lock()
	a.asked = append(a.asked, r)
	a.mu.Unlock()
	if a.answerCtx != nil {
		return a.answerCtx(ctx, r)
	}
	return a.answer(r)
}

func (a *asker) requests() []control.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.asked)
}

// superviseScript runs bash -c script in dir, under the exec filter of a
// supervisor with the command.ask rules asks answered by a (nil: no
// asker), and returns its combined output, its error and the decision
// log's text. The filter is installed on a thread of its own, which
// starts bash and ends: bash and its children keep the filter.
func superviseScript(t *testing.T, dir string, asks []string, a *asker, script string) (string, error, string) {
	t.Helper()
	logDir := t.TempDir()
	log, err := proxy.OpenLog(logDir)
	if err != nil {
		t.Fatal(err)
	}
	s := newSupervisor(nil, nil, "test", log)
	s.setAsk(asks, 10*time.Second)
	if a != nil {
		s.ask = a.ask
	}
	s.findPrograms(os.Getenv("PATH"), dir)
	var out strings.Builder
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	// In a user namespace of its own, as in a jail; and so started by a
	// fork, not a vfork: a vfork parent waiting for its child's exec
	// holds up the runtime's stop-the-world, and with it the supervisor
	// that answers that exec, in this same process.
	id := func(n int) []syscall.SysProcIDMap {
		return []syscall.SysProcIDMap{{ContainerID: n, HostID: n, Size: 1}}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: id(os.Getuid()), GidMappings: id(os.Getgid())}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			started <- err
			return
		}
		prog := inside.NotifyFilter(false)
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
		if errno != 0 {
			started <- errno
			return
		}
		s.fd = int(fd)
		go s.run()
		started <- cmd.Start()
	}()
	if err := <-started; err != nil {
		t.Fatal("starting bash under the exec filter:", err)
	}
	err = cmd.Wait()
	log.Close()
	var logText strings.Builder
	files, _ := filepath.Glob(filepath.Join(logDir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		logText.Write(b)
	}
	return out.String(), err, logText.String()
}

// gitRepos makes a work repository with one commit whose origin is a
// local bare repository, and returns the work tree and the bare one.
func gitRepos(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "bare.git")
	for _, args := range [][]string{
		{"init", "-q", "--bare", bare},
		{"init", "-q", "-b", "main", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-q", "--allow-empty", "-m", "c"},
		{"-C", work, "remote", "add", "origin", bare},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return work, bare
}

// pushed reports whether the bare repository got the work's main.
func pushed(bare string) bool {
	return exec.Command("git", "--git-dir", bare, "rev-parse", "--verify", "-q", "refs/heads/main").Run() == nil
}

func answer(allow bool, by string) func(control.Request) control.Answer {
	return func(control.Request) control.Answer {
		return control.Answer{Allow: allow, Scope: control.ScopeOnce, By: by}
	}
}

// TestAskAllowAndDeny: an asked git push runs only on allow; the request
// shows the full argv, the working directory, the program and the rule;
// a deny, and no asker at all, fail the exec; the log holds the held and
// the answered entries.
func TestAskAllowAndDeny(t *testing.T) {
	for _, tt := range []struct {
		name   string
		a      *asker
		pushed bool
		reason string
	}{
		{"allow", &asker{answer: answer(true, "jail approve")}, true, "jail approve"},
		{"deny", &asker{answer: answer(false, "jail reject")}, false, "jail reject"},
		{"timeout", &asker{answer: answer(false, "timeout")}, false, "timeout"},
		{"no asker", nil, false, "no one to ask"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			work, bare := gitRepos(t)
			out, err, log := superviseScript(t, work, []string{"git push"}, tt.a, "git push -q origin main")
			if pushed(bare) != tt.pushed || (err == nil) != tt.pushed {
				t.Fatalf("pushed %v (err %v), want %v\n%s", pushed(bare), err, tt.pushed, out)
			}
			if tt.a != nil {
				r := tt.a.requests()
				if len(r) != 1 {
					t.Fatalf("asked %d times, want once: %+v", len(r), r)
				}
				want := control.Request{Session: "test", Kind: control.KindCommand, Rule: "command.ask git push", Argv: []string{"git", "push", "-q", "origin", "main"}, Cwd: work, Path: "/usr/bin/git", PID: r[0].PID}
				if r[0].PID == 0 || !slices.Equal(r[0].Argv, want.Argv) || r[0].Kind != want.Kind || r[0].Rule != want.Rule || r[0].Cwd != want.Cwd || r[0].Path != want.Path || r[0].Session != want.Session {
					t.Errorf("request %+v, want %+v", r[0], want)
				}
			}
			verdict := `"verdict":"deny"`
			if tt.pushed {
				verdict = `"verdict":"allow"`
			}
			for _, w := range []string{`"verdict":"held"`, `"rule":"command.ask git push"`, verdict, `"reason":"` + tt.reason + `"`} {
				if !strings.Contains(log, w) {
					t.Errorf("decision log lacks %s:\n%s", w, log)
				}
			}
		})
	}
}

// TestAskEverySpelling: bash -c, env and its options, git's global
// options, git-push by its own name, send-pack, a renamed copy of git and
// a script run by sh are all asked (and refused here), as command.deny
// would refuse them; git status is not asked.
func TestAskEverySpelling(t *testing.T) {
	work, bare := gitRepos(t)
	if err := os.WriteFile(filepath.Join(work, "ship"), []byte("git push -q origin main\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitCopy := filepath.Join(t.TempDir(), "notgit")
	if out, err := exec.Command("cp", "/usr/bin/git", gitCopy).CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	exec, _ := exec.Command("git", "--exec-path").Output()
	for _, cmd := range []string{
		"bash -c 'git push -q origin main'",
		"env -u HOME VAR=1 nice -n 5 git -C . -c a.b=c push -q origin main",
		strings.TrimSpace(string(exec)) + "/git-push -q origin main",
		"git send-pack ../bare.git main",
		gitCopy + " push -q origin main",
		"sh ./ship",
	} {
		a := &asker{answer: answer(false, "jail reject")}
		out, err, _ := superviseScript(t, work, []string{"git push"}, a, cmd+"; git status >/dev/null && echo status-ran")
		if pushed(bare) {
			t.Fatalf("%s: pushed though refused", cmd)
		}
		if len(a.requests()) == 0 {
			t.Errorf("%s: not asked\n%s", cmd, out)
		}
		if err != nil || !strings.Contains(out, "status-ran") {
			t.Errorf("%s: git status did not run unasked (%v)\n%s", cmd, err, out)
		}
	}
}

// TestAskHoldsOnlyTheOne: while one exec is held, the jail's other execs
// run: the supervisor does not wait for the answer to answer them.
func TestAskHoldsOnlyTheOne(t *testing.T) {
	work, bare := gitRepos(t)
	others := filepath.Join(work, "others-ran")
	release := make(chan struct{})
	a := &asker{answer: func(control.Request) control.Answer {
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		return control.Answer{Allow: true, By: "jail approve"}
	}}
	go func() {
		defer close(release)
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(others); err == nil {
				return
			}
		}
	}()
	start := time.Now()
	out, err, _ := superviseScript(t, work, []string{"git push"}, a, "git push -q origin main & true; ls >/dev/null; touch "+others+"; wait $!")
	if err != nil || !pushed(bare) {
		t.Fatalf("push after release: %v\n%s", err, out)
	}
	if _, err := os.Stat(others); err != nil {
		t.Fatal("the other commands did not run:", err)
	}
	if time.Since(start) > 15*time.Second {
		t.Fatal("the other commands waited for the held exec's answer")
	}
}

// TestAskShownIsRun attacks the gap between the question and the answer:
// another thread of the asking process rewrites the exec's argv, or the
// file the exec names is replaced, while it is held; the approval of what
// was shown must not run something else.
func TestAskShownIsRun(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is needed to rewrite an exec's argv from another thread")
	}
	dir := t.TempDir()
	shown, evil := filepath.Join(dir, "shown"), filepath.Join(dir, "evil")
	t.Run("argv rewritten", func(t *testing.T) {
		script := `import ctypes, threading, time
libc = ctypes.CDLL(None, use_errno=True)
arg = ctypes.create_string_buffer(b"` + shown + `")
argv = (ctypes.c_char_p * 3)(b"touch", ctypes.addressof(arg), None)
def rewrite():
    time.sleep(0.5)
    ctypes.memmove(arg, b"` + evil + `\0", len("` + evil + `") + 1)
threading.Thread(target=rewrite, daemon=True).start()
libc.execv(b"/usr/bin/touch", argv)
print("exec failed", ctypes.get_errno())
`
		if err := os.WriteFile(filepath.Join(dir, "swap.py"), []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		a := &asker{answer: func(control.Request) control.Answer {
			time.Sleep(1500 * time.Millisecond) // the rewrite happens meanwhile
			return control.Answer{Allow: true, By: "jail approve"}
		}}
		out, _, log := superviseScript(t, dir, []string{"touch"}, a, "python3 swap.py")
		if r := a.requests(); len(r) != 1 || !slices.Equal(r[0].Argv, []string{"touch", shown}) {
			t.Fatalf("asked %+v, want touch %s once", r, shown)
		}
		for _, f := range []string{shown, evil} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s was created: the rewritten exec ran\n%s", f, out)
			}
		}
		if !strings.Contains(out, "exec failed 1") {
			t.Errorf("the exec did not fail with EPERM:\n%s", out)
		}
		if !strings.Contains(log, "changed its path or arguments") {
			t.Errorf("the log does not say why:\n%s", log)
		}
	})
	t.Run("directory changed", func(t *testing.T) {
		other := t.TempDir()
		script := `import ctypes, threading, time, os
libc = ctypes.CDLL(None, use_errno=True)
argv = (ctypes.c_char_p * 3)(b"touch", b"made", None)
def move():
    time.sleep(0.5)
    os.chdir("` + other + `")
threading.Thread(target=move, daemon=True).start()
libc.execv(b"/usr/bin/touch", argv)
print("exec failed", ctypes.get_errno())
`
		if err := os.WriteFile(filepath.Join(dir, "move.py"), []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		a := &asker{answer: func(control.Request) control.Answer {
			time.Sleep(1500 * time.Millisecond) // the chdir happens meanwhile
			return control.Answer{Allow: true, By: "jail approve"}
		}}
		out, _, log := superviseScript(t, dir, []string{"touch"}, a, "python3 move.py")
		if r := a.requests(); len(r) != 1 || r[0].Cwd != dir {
			t.Fatalf("asked %+v, want once in %s", r, dir)
		}
		for _, f := range []string{filepath.Join(dir, "made"), filepath.Join(other, "made")} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s was created: the exec ran elsewhere than shown\n%s", f, out)
			}
		}
		if !strings.Contains(out, "exec failed 1") || !strings.Contains(log, "changed its directory") {
			t.Errorf("the exec was not refused for its directory:\n%s\n%s", out, log)
		}
	})
	t.Run("file rewritten", func(t *testing.T) {
		tool := filepath.Join(dir, "tool2")
		if err := os.WriteFile(tool, []byte("#!/bin/sh\necho shown-ran\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		a := &asker{answer: func(control.Request) control.Answer {
			// The same file, its content replaced in place.
			if err := os.WriteFile(tool, []byte("#!/bin/sh\ntouch "+evil+"\n"), 0o755); err != nil {
				t.Error(err)
			}
			return control.Answer{Allow: true, By: "jail approve"}
		}}
		out, err, log := superviseScript(t, dir, []string{"tool2"}, a, "./tool2")
		if _, serr := os.Stat(evil); serr == nil || err == nil || strings.Contains(out, "shown-ran") {
			t.Errorf("the rewritten file ran (err %v)\n%s", err, out)
		}
		if !strings.Contains(log, "file changed") {
			t.Errorf("the log does not say why:\n%s", log)
		}
	})
	t.Run("file replaced", func(t *testing.T) {
		tool, other := filepath.Join(dir, "tool"), filepath.Join(dir, "other")
		if err := os.WriteFile(tool, []byte("#!/bin/sh\necho shown-ran\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(other, []byte("#!/bin/sh\ntouch "+evil+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		a := &asker{answer: func(control.Request) control.Answer {
			if err := os.Rename(other, tool); err != nil { // as a process of the jail would
				t.Error(err)
			}
			return control.Answer{Allow: true, By: "jail approve"}
		}}
		out, err, log := superviseScript(t, dir, []string{"tool"}, a, "./tool")
		if _, serr := os.Stat(evil); serr == nil || err == nil || strings.Contains(out, "shown-ran") {
			t.Errorf("the replaced file ran (err %v)\n%s", err, out)
		}
		if !strings.Contains(log, "file changed") {
			t.Errorf("the log does not say why:\n%s", log)
		}
	})
}

// TestAskCallerKilled: a held exec whose process is killed meanwhile is
// no longer waited for: the asker's context ends, long before any
// timeout, and the supervisor goes on.
func TestAskCallerKilled(t *testing.T) {
	work, bare := gitRepos(t)
	ended := make(chan time.Duration, 1)
	a := &asker{answerCtx: func(ctx context.Context, r control.Request) control.Answer {
		start := time.Now()
		select {
		case <-ctx.Done():
			ended <- time.Since(start)
		case <-time.After(8 * time.Second):
			ended <- -1
		}
		return control.Answer{By: "ended"}
	}}
	out, _, _ := superviseScript(t, work, []string{"git push"}, a, "git push -q origin main & sleep 0.5; kill -9 $!; wait; true")
	if pushed(bare) {
		t.Fatal("pushed")
	}
	if d := <-ended; d < 0 || d > 5*time.Second {
		t.Fatalf("the asker was still asked about a killed process (%v)\n%s", d, out)
	}
}

// TestAskOnceForPathSearch: a shell that tries each PATH directory in
// turn (/usr/bin/git refused, then /bin/git) asks once, not once per
// directory; the next push is a new question.
func TestAskOnceForPathSearch(t *testing.T) {
	work, bare := gitRepos(t)
	a := &asker{answer: answer(false, "jail reject")}
	out, _, _ := superviseScript(t, work, []string{"git push"}, a, "PATH=/usr/local/bin:/usr/bin:/bin; export PATH; sh -c 'git push -q origin main'; sleep 3.2; sh -c 'git push -q origin main'")
	if pushed(bare) {
		t.Fatal("pushed though refused")
	}
	if n := len(a.requests()); n != 2 {
		t.Errorf("asked %d times, want twice (once per push)\n%s", n, out)
	}
}
