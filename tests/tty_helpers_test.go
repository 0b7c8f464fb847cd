package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Term is a real terminal: a tmux server of its own, run as the sandbox's
// runner, with one 120x40 window whose pane runs an interactive outer bash
// (the user's shell) in the project directory. Tests type into it and read
// the screen back.
type Term struct {
	t    *testing.T
	s    *Sandbox
	sock string
}

// outerPS1 is the host shell's prompt; innerPS1 the jailed shell's. They
// differ so a test knows which shell is waiting for input.
const (
	outerPS1 = "OUTER$ "
	innerPS1 = "INNER$ "
)

// termWait bounds every wait for the screen to show something.
const termWait = 5 * time.Second

// NewTerm starts the terminal and waits for the outer shell's prompt.
func NewTerm(t *testing.T, s *Sandbox) *Term {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux is not installed; the terminal tests drive a real pty with it: sudo apt-get install -y tmux (make test installs it)")
	}
	dir := filepath.Join(s.Base, "tmux")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.chownUp(dir)
	tm := &Term{t: t, s: s, sock: filepath.Join(dir, "sock")}
	// -f /dev/null: no user configuration. The pane runs bash directly (no
	// shell in between), as the runner, with the environment s.as gives.
	tm.tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-c", s.Project, "--",
		"env", "PS1="+outerPS1, "HISTFILE=/dev/null", "bash", "--norc", "--noprofile", "-i")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terminal at the end of the test:\n%s", tm.Screen())
		}
		// Closing the pty hangs up the shell and everything jailed in it.
		kill := exec.Command("tmux", "-S", tm.sock, "kill-server")
		s.as(kill)
		kill.Run()
	})
	tm.WaitPrompt("the outer shell's first prompt")
	return tm
}

// tmux runs a tmux client command against this terminal's server, as the
// runner, failing the test if it fails.
func (tm *Term) tmux(args ...string) string {
	tm.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...)
	cmd.Dir = tm.s.Base
	tm.s.as(cmd)
	cmd.Env = append(cmd.Env, "TERM=screen")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Type types text into the terminal, then presses Enter.
func (tm *Term) Type(text string) {
	tm.t.Helper()
	tm.tmux("send-keys", "-l", "--", text)
	tm.tmux("send-keys", "Enter")
}

// Keys presses keys by tmux name: "C-c", "C-z", "C-\\", "Enter".
func (tm *Term) Keys(keys ...string) {
	tm.t.Helper()
	tm.tmux(append([]string{"send-keys"}, keys...)...)
}

// Resize resizes the window, as a user dragging the terminal would.
func (tm *Term) Resize(cols, rows int) {
	tm.t.Helper()
	tm.tmux("resize-window", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows))
}

// Screen returns the scrollback and the visible screen, wrapped lines
// joined, trailing blank lines dropped.
func (tm *Term) Screen() string {
	cmd := exec.Command("tmux", "-S", tm.sock, "capture-pane", "-p", "-J", "-S", "-")
	cmd.Dir = tm.s.Base
	tm.s.as(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(capture-pane failed: %v: %s)", err, out)
	}
	return strings.TrimRight(string(out), "\n ") + "\n"
}

// ttyEchoedKeys is the terminal's echo of Ctrl-C, Ctrl-Z and Ctrl-\ (which
// output follows on the same line), at the start of a line.
var ttyEchoedKeys = regexp.MustCompile(`^(?:\^[CZ\\])+`)

// Lines returns the screen's lines, each without trailing blanks and
// without a leading echo of Ctrl-C, Ctrl-Z or Ctrl-\.
func (tm *Term) Lines() []string {
	lines := strings.Split(strings.TrimRight(tm.Screen(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = ttyEchoedKeys.ReplaceAllString(strings.TrimRight(l, " "), "")
	}
	return lines
}

// ttyLineRE matches a whole line of output; the output may follow a prompt
// on the same line (a trap's output printed while the shell prompts).
func ttyLineRE(re string) *regexp.Regexp {
	return regexp.MustCompile("^(?:" + regexp.QuoteMeta(outerPS1) + "|" + regexp.QuoteMeta(innerPS1) + ")?(?:" + re + ")$")
}

// WaitFor polls the screen every 50 ms until cond holds, failing the test
// with the screen after termWait.
func (tm *Term) WaitFor(what string, cond func(lines []string) bool) []string {
	tm.t.Helper()
	deadline := time.Now().Add(termWait)
	for {
		lines := tm.Lines()
		if cond(lines) {
			return lines
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("after %v the terminal does not show %s; screen:\n%s", termWait, what, strings.Join(lines, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitLine waits for a line matching the whole of the regular expression
// and returns its submatches.
func (tm *Term) WaitLine(re string) []string {
	tm.t.Helper()
	rx := ttyLineRE(re)
	var m []string
	tm.WaitFor(fmt.Sprintf("a line matching %q", re), func(lines []string) bool {
		for _, l := range lines {
			if m = rx.FindStringSubmatch(l); m != nil {
				return true
			}
		}
		return false
	})
	return m
}

// WaitLineAfter waits for a line matching re below the last line matching
// after (both whole-line regular expressions).
func (tm *Term) WaitLineAfter(after, re string) []string {
	tm.t.Helper()
	ax := ttyLineRE(after)
	rx := ttyLineRE(re)
	var m []string
	tm.WaitFor(fmt.Sprintf("a line matching %q below a line matching %q", re, after), func(lines []string) bool {
		start := -1
		for i, l := range lines {
			if ax.MatchString(l) {
				start = i
			}
		}
		if start < 0 {
			return false
		}
		for _, l := range lines[start+1:] {
			if m = rx.FindStringSubmatch(l); m != nil {
				return true
			}
		}
		return false
	})
	return m
}

// ttyLastLine is the screen's last non-blank line.
func ttyLastLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) != "" {
			return lines[i]
		}
	}
	return ""
}

// WaitPrompt waits until the cursor line is an empty outer prompt: the
// outer shell is waiting for input (jail is done or stopped).
func (tm *Term) WaitPrompt(what string) {
	tm.t.Helper()
	tm.WaitFor(what+" (an empty "+strconv.Quote(outerPS1)+" prompt on the last line)", func(lines []string) bool {
		return ttyLastLine(lines) == strings.TrimSpace(outerPS1)
	})
}

// WaitInnerPrompt waits until the jailed shell is waiting for input.
func (tm *Term) WaitInnerPrompt(what string) {
	tm.t.Helper()
	tm.WaitFor(what+" (an empty "+strconv.Quote(innerPS1)+" prompt on the last line)", func(lines []string) bool {
		return ttyLastLine(lines) == strings.TrimSpace(innerPS1)
	})
}

// Jail is the command line that runs jail with args, for typing.
func (tm *Term) Jail(args string) string { return jailBin + " " + args }

// TypeUntil types a line, and again every 500 ms, until a line matching
// re shows.
func (tm *Term) TypeUntil(text, re string) []string {
	tm.t.Helper()
	return tm.until("typing "+strconv.Quote(text), func() { tm.Type(text) }, re)
}

// KeysUntil presses key, and again every 500 ms, until a line matching re
// shows: a key sent while the shell is still starting the job may be
// consumed before the job exists.
func (tm *Term) KeysUntil(key, re string) []string {
	tm.t.Helper()
	return tm.until("pressing "+key, func() { tm.Keys(key) }, re)
}

func (tm *Term) until(what string, act func(), re string) []string {
	tm.t.Helper()
	rx := ttyLineRE(re)
	deadline := time.Now().Add(termWait)
	next := time.Now()
	for {
		if time.Now().After(next) {
			act()
			next = time.Now().Add(500 * time.Millisecond)
		}
		lines := tm.Lines()
		for _, l := range lines {
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("after %s for %v the terminal does not show a line matching %q; screen:\n%s", what, termWait, re, strings.Join(lines, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ttyBetween returns the lines strictly between the last line equal to begin
// and the next line equal to end.
func ttyBetween(lines []string, begin, end string) []string {
	start := -1
	for i, l := range lines {
		if l == begin {
			start = i
		}
	}
	if start < 0 {
		return nil
	}
	for i := start + 1; i < len(lines); i++ {
		if lines[i] == end {
			return lines[start+1 : i]
		}
	}
	return nil
}
