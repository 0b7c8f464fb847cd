package tests

// Interactive terminal use: jail runs in a real pty (a tmux pane) under an
// interactive bash, the way a user runs it. See tty_helpers_test.go.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ttyInnerShell is the command line that starts an interactive bash in the
// jail, with a prompt the tests tell from the outer one.
func ttyInnerShell(tm *Term) string {
	return tm.Jail("-- env PS1='" + innerPS1 + "' HISTFILE=/dev/null bash --norc --noprofile -i")
}

// An interactive shell in the jail works on the terminal: it prompts, runs
// commands, sees the terminal's size, and follows a window resize (the
// kernel's SIGWINCH reaches it, and the new size is what it reads).
func TestTTYInteractiveShell(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		tm := NewTerm(t, s)
		tm.Type(ttyInnerShell(tm))
		tm.WaitInnerPrompt("the jailed bash's prompt")

		tm.Type("echo $((6*7))")
		tm.WaitLine("42")

		tm.Type("echo size-a $(stty size)")
		tm.WaitLine("size-a 40 120")

		// Every typed command prints a marker, so that the next step never
		// races the shell still reading the line.
		tm.Type(`trap 'echo got-winch $(stty size)' WINCH; echo trap-set`)
		tm.WaitLine("trap-set")
		tm.Resize(100, 30)
		tm.WaitLine("got-winch 30 100")
		tm.Type("echo size-b $(stty size)")
		tm.WaitLine("size-b 30 100")

		tm.Type("exit 7")
		tm.WaitPrompt("the outer shell once the jailed bash exited")
		tm.Type("echo rc=$?")
		if m := tm.WaitLine(`rc=(\d+)`); m[1] != "7" {
			t.Fatalf("jail exited %s after the jailed bash ran `exit 7`, want 7", m[1])
		}
	})
}

// Ctrl-C interrupts the jailed command, not jail: the command handles
// SIGINT and jail waits for it and relays its exit code. Ctrl-\ kills the
// command with SIGQUIT and jail reports that as 128+3.
func TestTTYCtrlC(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(s.Project+"/int.py", `import time
print("ready", flush=True)
try:
    time.sleep(30)
except KeyboardInterrupt:
    time.sleep(0.3)  # jail must wait for this, not die with the Ctrl-C
    print("interrupted", flush=True)
`, 0o644)
		tm := NewTerm(t, s)
		tm.Type(tm.Jail("-- python3 int.py; echo rc=$?"))
		tm.WaitLine("ready")
		tm.Keys("C-c")
		tm.WaitLine("interrupted")
		if m := tm.WaitLineAfter("interrupted", `rc=(\d+)`); m[1] != "0" {
			t.Fatalf("after Ctrl-C jail exited %s, want 0 (python caught KeyboardInterrupt and exited 0; 130 means jail itself died of SIGINT)", m[1])
		}
		tm.WaitPrompt("the outer shell after Ctrl-C")

		tm.Type(tm.Jail("-- sh -c 'echo ready2; exec sleep 30'; echo rc2=$?"))
		tm.WaitLine("ready2")
		tm.Keys(`C-\`)
		if m := tm.WaitLine(`rc2=(\d+)`); m[1] != "131" {
			t.Fatalf("after Ctrl-\\ jail exited %s, want 131 (sleep killed by SIGQUIT; 2 is a Go runtime dump of jail or its init)", m[1])
		}
		tm.WaitPrompt("the outer shell after Ctrl-\\")
		if screen := tm.Screen(); strings.Contains(screen, "goroutine ") || strings.Contains(screen, "SIGQUIT: quit") {
			t.Fatalf("Ctrl-\\ made a Go program dump its stacks: jail or its init did not ignore SIGQUIT")
		}
	})
}

// Ctrl-Z stops the jailed command along with jail, the outer shell reports
// the job stopped, and fg resumes it.
func TestTTYCtrlZ(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		tm := NewTerm(t, s)
		tm.Type(tm.Jail(`-- sh -c 'for i in $(seq 1 100); do echo tick$i; sleep 0.2; done'`))
		tm.WaitLine("tick3")

		tm.Keys("C-z")
		tm.WaitLine(`\[1\]\+\s+Stopped\s+.*jail -- sh -c .*`)
		tm.WaitPrompt("the outer shell after Ctrl-Z")
		stopped := ttyLastTick(tm.Lines())
		time.Sleep(600 * time.Millisecond) // three ticks' worth
		if now := ttyLastTick(tm.Lines()); now != stopped {
			t.Fatalf("the jailed command kept running after Ctrl-Z: tick%d, then tick%d 600 ms later", stopped, now)
		}

		tm.Type("fg")
		want := stopped + 2
		tm.WaitFor("tick"+strconv.Itoa(want)+" (the command resumed by fg)", func(lines []string) bool {
			return ttyLastTick(lines) >= want
		})

		tm.Keys("C-c")
		tm.WaitPrompt("the outer shell after Ctrl-C of the resumed job")
		tm.Type("echo rc=$?")
		if m := tm.WaitLine(`rc=(\d+)`); m[1] != "130" {
			t.Fatalf("jail exited %s after Ctrl-C of the resumed loop, want 130 (sh killed by SIGINT)", m[1])
		}
		ended := ttyLastTick(tm.Lines())
		time.Sleep(300 * time.Millisecond)
		if now := ttyLastTick(tm.Lines()); now != ended {
			t.Fatalf("the loop kept ticking after Ctrl-C: tick%d, then tick%d", ended, now)
		}
	})
}

var ttyTickRE = regexp.MustCompile(`^tick(\d+)$`)

// ttyLastTick is the highest tick number on the screen.
func ttyLastTick(lines []string) int {
	n := 0
	for _, l := range lines {
		if m := ttyTickRE.FindStringSubmatch(l); m != nil {
			if i, _ := strconv.Atoi(m[1]); i > n {
				n = i
			}
		}
	}
	return n
}

// Job control works inside the jail: the jailed bash stops a job with
// Ctrl-Z, lists it, kills it, and exits back to the outer shell.
func TestTTYJobControlInside(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		tm := NewTerm(t, s)
		tm.Type(ttyInnerShell(tm))
		tm.WaitInnerPrompt("the jailed bash's prompt")

		tm.Type("echo sleeping; sleep 30")
		tm.WaitLine("sleeping")
		tm.KeysUntil("C-z", `\[1\]\+\s+Stopped\s+sleep 30`)
		tm.WaitInnerPrompt("the jailed bash after Ctrl-Z")

		tm.Type("echo jobs-begin; jobs; echo jobs-end")
		tm.WaitLine("jobs-end")
		jobs := ttyBetween(tm.Lines(), "jobs-begin", "jobs-end")
		if len(jobs) != 1 || !regexp.MustCompile(`^\[1\]\+\s+Stopped\s+sleep 30$`).MatchString(jobs[0]) {
			t.Fatalf("jobs in the jailed bash printed %q, want the one stopped `sleep 30`", jobs)
		}

		// kill sends a stopped job SIGTERM and SIGCONT. bash 5.2 reports
		// it "Stopped" again at the next prompt and, about one time in
		// ten (unjailed too), leaves the dead job a zombie it has not
		// noticed until the next SIGCHLD; /bin/true brings one.
		tm.Type("kill %1")
		// Under load bash sometimes marks the dead job "-" rather than "+".
		tm.TypeUntil("/bin/true; jobs", `\[1\][+-]\s+Terminated\s+sleep 30`)
		tm.Type("echo jobs2-begin; jobs; echo jobs2-end")
		tm.WaitLine("jobs2-end")
		if jobs := ttyBetween(tm.Lines(), "jobs2-begin", "jobs2-end"); len(jobs) != 0 {
			t.Fatalf("jobs after kill %%1 printed %q, want nothing", jobs)
		}

		tm.Type("exit 3")
		tm.WaitPrompt("the outer shell once the jailed bash exited")
		tm.Type("echo rc=$?")
		if m := tm.WaitLine(`rc=(\d+)`); m[1] != "3" {
			t.Fatalf("jail exited %s after the jailed bash ran `exit 3`, want 3", m[1])
		}
		// The outer shell has the terminal back: it runs a command that
		// reads the terminal without being stopped for background input.
		tm.Type("read -t 5 line && echo read-got=$line")
		tm.Type("hello")
		tm.WaitLine("read-got=hello")
	})
}

// ttyInjectScript tries to type its argument into the terminal it runs on
// (TIOCSTI), then the console-selection ioctl (TIOCLINUX), and prints what
// the kernel said.
const ttyInjectScript = `import errno, fcntl, sys, termios
def errname(e):
    return "%d %s" % (e.errno, errno.errorcode.get(e.errno, "?"))
try:
    for ch in sys.argv[1] + "\n":
        fcntl.ioctl(sys.stdin.fileno(), termios.TIOCSTI, ch.encode())
    print("TIOCSTI-ALLOWED")
except OSError as e:
    print("TIOCSTI-ERRNO=" + errname(e))
try:
    fcntl.ioctl(sys.stdin.fileno(), 0x541C, bytes([2]) + bytes(10))  # TIOCLINUX, TIOCL_SETSEL
    print("TIOCLINUX-ALLOWED")
except OSError as e:
    print("TIOCLINUX-ERRNO=" + errname(e))
`

// The jailed command cannot type into the user's terminal: TIOCSTI and
// TIOCLINUX on the real pty fail with EPERM, and nothing it tried to type
// reaches the outer shell once jail exits. The same script run unjailed
// shows the outer shell would have run the injected command.
func TestTTYNoInputInjection(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(s.Project+"/sti.py", ttyInjectScript, 0o644)
		// Targets in the real home: the jail cannot write there, only the
		// outer shell can, by running injected input.
		pwned := filepath.Join(s.Home, "pwned")
		control := filepath.Join(s.Home, "control-injected")
		tm := NewTerm(t, s)

		tm.Type(tm.Jail("-- python3 sti.py 'touch " + pwned + "'; echo rc=$?"))
		sti := tm.WaitLine(`TIOCSTI-(ALLOWED|ERRNO=.*)`)
		linux := tm.WaitLine(`TIOCLINUX-(ALLOWED|ERRNO=.*)`)
		tm.WaitLine("rc=0")
		tm.WaitPrompt("the outer shell after the jailed script")
		if sti[1] != "ERRNO=1 EPERM" {
			t.Errorf("TIOCSTI on the terminal from inside the jail: %s, want ERRNO=1 EPERM (the seccomp filter's answer)", sti[0])
		}
		if linux[1] != "ERRNO=1 EPERM" {
			t.Errorf("TIOCLINUX on the terminal from inside the jail: %s, want ERRNO=1 EPERM (the seccomp filter's answer)", linux[0])
		}

		// Control: unjailed, the same injection works (when the kernel
		// allows TIOCSTI at all), so the check below can see an injection.
		legacy, _ := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti")
		if s.R.UID != 0 && strings.TrimSpace(string(legacy)) == "0" {
			t.Logf("dev.tty.legacy_tiocsti=0: the kernel refuses TIOCSTI to unprivileged users; no unjailed control run")
			time.Sleep(500 * time.Millisecond)
		} else {
			tm.Type("echo unjailed; python3 sti.py 'touch " + control + "'; echo host-rc=$?")
			tm.WaitLine("host-rc=0")
			if host := tm.WaitLineAfter("unjailed", `TIOCSTI-(ALLOWED|ERRNO=.*)`); host[1] != "ALLOWED" {
				t.Fatalf("unjailed TIOCSTI: %s; the control run cannot inject, so the test cannot tell", host[0])
			}
			deadline := time.Now().Add(termWait)
			for {
				if _, err := os.Stat(control); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the unjailed control injection did not make the outer shell create %s", control)
				}
				time.Sleep(50 * time.Millisecond)
			}
			// The outer shell read its input in order: anything the jailed
			// script queued would have run before the control's touch.
		}
		if _, err := os.Stat(pwned); err == nil {
			t.Fatalf("the jailed command typed into the outer shell: it ran `touch %s`", pwned)
		}
	})
}

// jail's exit code reaches the shell that ran it in the terminal, for an
// exit and for a death by signal.
func TestTTYExitCode(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		tm := NewTerm(t, s)
		tm.Type(tm.Jail("-- sh -c 'exit 42'; echo rc=$?"))
		if m := tm.WaitLine(`rc=(\d+)`); m[1] != "42" {
			t.Fatalf("jail -- sh -c 'exit 42' exited %s, want 42", m[1])
		}
		tm.Type(tm.Jail("-- sh -c 'kill -TERM $$'; echo rc2=$?"))
		if m := tm.WaitLine(`rc2=(\d+)`); m[1] != "143" {
			t.Fatalf("jail -- sh -c 'kill -TERM $$' exited %s, want 143 (128+SIGTERM)", m[1])
		}
		tm.WaitPrompt("the outer shell after jail exited")
	})
}
