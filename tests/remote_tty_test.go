package tests

import (
	"strconv"
	"testing"
)

// TestRemoteTTY: on a terminal, jail --remote gives the remote command a
// terminal of its own (ssh -t): an interactive bash there prompts, sees
// the window's size and follows a resize, Ctrl-C interrupts the remote
// foreground command and not the session, and the exit code comes back.
func TestRemoteTTY(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		tm := NewTerm(t, s)
		tm.Type(tm.Jail("--remote " + d.Target() + " -- env PS1='" + innerPS1 + "' HISTFILE=/dev/null bash --norc --noprofile -i"))
		tm.WaitInnerPrompt("the remote jailed bash's prompt")
		tm.Type("echo remote-uid=$(id -u) size-a $(stty size)")
		tm.WaitLine("remote-uid=" + strconv.Itoa(d.UID) + " size-a 40 120")
		tm.Type(`trap 'echo got-winch $(stty size)' WINCH; echo trap-set`)
		tm.WaitLine("trap-set")
		tm.Resize(100, 30)
		tm.WaitLine("got-winch 30 100")
		tm.TypeUntil("echo size-b $(stty size)", "size-b 30 100")
		tm.Type("echo sleep-starts; sleep 30")
		tm.WaitLine("sleep-starts")
		tm.Keys("C-c")
		tm.WaitInnerPrompt("the remote bash after Ctrl-C")
		tm.Type("echo still-here-$?")
		tm.WaitLine("still-here-130")
		tm.Type("exit 7")
		tm.WaitPrompt("the outer shell once the remote bash exited")
		tm.Type("echo rc=$?")
		if m := tm.WaitLine(`rc=(\d+)`); m[1] != "7" {
			t.Fatalf("jail exited %s after the remote bash ran `exit 7`, want 7", m[1])
		}
	})
}
