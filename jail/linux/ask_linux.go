package linux

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/control"
	"github.com/jailsh/jail/jail/learn"
	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// askGrace is how long past its timeout the supervisor waits for the
// asker before it denies a held exec itself.
const askGrace = 5 * time.Second

// heldExec is an exec that command.ask holds: the notification, what was
// read of it and shown to the person asked, and the file it ran then.
type heldExec struct {
	n      seccompNotif
	o      op
	call   execCall
	base   string // the directory (dirfd's) a relative path started at
	cwd    string
	inJail string
	rule   jail.CommandRule
	file   fileKey // the file and its size and times: a rewrite shows
}

// holdExec records what an asked exec is, for the question and for the
// check that the same exec is the one let go on.
func (s *supervisor) holdExec(n *seccompNotif, o op, c execCall, inJail string, rule jail.CommandRule) *heldExec {
	pid := int(n.Pid)
	h := &heldExec{n: *n, o: o, call: c, inJail: inJail, rule: rule}
	h.cwd = ownProcLink(pid, unix.AT_FDCWD)
	if c.dirfd != unix.AT_FDCWD {
		h.base = ownProcLink(pid, c.dirfd)
	}
	h.file, _ = s.execFileKey(pid, c, ownProcLink)
	return h
}

// answerHeld asks about a held exec and answers it: on allow it lets the
// exec go on only when it is still the one shown (see unchanged), else
// and on deny, timeout or no one to ask it fails with EPERM.
func (s *supervisor) answerHeld(h *heldExec) {
	defer s.held.Done()
	pid := int(h.n.Pid)
	rule := "command.ask " + h.rule.String()
	s.logExec(pid, h, rule, "held", "exec of "+h.inJail)
	ans := control.Answer{By: "no one to ask"}
	if s.ask != nil {
		ans = s.askFor(h, rule)
	}
	resp := seccompNotifResp{ID: h.n.ID, Error: -int32(unix.EPERM)}
	verdict, reason := "deny", ans.By
	if ans.Allow {
		if why := s.unchanged(h); why != "" {
			reason = why
		} else {
			resp.Flags, resp.Error, verdict = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE, 0, "allow"
		}
	}
	// Recorded before the answer: a command refused may end the jail at
	// once, and its log with it.
	if verdict == "deny" {
		s.mu.Lock()
		s.denied = append(s.denied, h.rule.String())
		s.lastAsked, s.lastAskedAt = heldKey(h), time.Now()
		s.mu.Unlock()
	}
	s.logExec(pid, h, rule, verdict, reason)
	// A caller killed meanwhile: the id is no longer valid, sending
	// fails, and there is nothing left to answer.
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_SEND), uintptr(unsafe.Pointer(&resp)))
	if s.trace != nil && errno == 0 {
		e := 0
		if verdict == "deny" {
			e = int(unix.EPERM)
		}
		s.trace(learn.Event{Kind: learn.Exec, Path: h.inJail, Errno: e, Pid: pid})
	}
}

// retryWindow is how soon after a held exec is refused the same caller's
// same command is refused without asking again.
const retryWindow = 3 * time.Second

// heldKey names a held exec's caller and command, for refusedJustNow.
func heldKey(h *heldExec) string {
	return strconv.Itoa(int(h.n.Pid)) + "\x00" + h.cwd + "\x00" + strings.Join(h.call.argv, "\x00")
}

// refusedJustNow reports whether the same caller's same command (a shell
// trying the next PATH directory) was refused a moment ago: then it is
// refused again without another question. Only refusals are repeated.
func (s *supervisor) refusedJustNow(h *heldExec) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAsked == heldKey(h) && time.Since(s.lastAskedAt) < retryWindow
}

// askFor asks the asker about a held exec, for at most the ask timeout
// and a grace (the asker keeps its own timeout), until run returns, or
// until the exec's process is gone (killed meanwhile): then no one is
// left waiting for the answer.
func (s *supervisor) askFor(h *heldExec, rule string) control.Answer {
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var cancel context.CancelFunc
	if s.askTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.askTimeout+askGrace)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	watched := make(chan struct{})
	go func() { defer close(watched); s.cancelWhenGone(ctx, cancel, h.n.ID) }()
	defer func() { cancel(); <-watched }() // s.fd outlives the watch
	argv := slices.Clone(h.call.argv)
	return s.ask(ctx, control.Request{Session: s.session, Kind: control.KindCommand, Rule: rule, Argv: argv, Cwd: h.cwd, Path: h.inJail, PID: int(h.n.Pid)})
}

// cancelWhenGone cancels ctx once the notification id is no longer
// valid: the exec's caller was killed.
func (s *supervisor) cancelWhenGone(ctx context.Context, cancel context.CancelFunc, id uint64) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !s.valid(id) {
				cancel()
				return
			}
		}
	}
}

// unchanged checks, before a held exec is let go on, that it is the one
// that was shown: its path and argv read again from the caller (another
// thread of it may have rewritten them), the directory a relative path
// starts at, and the file it names. It returns why not, "" when it is.
// It reads with buffers of its own: run reuses the supervisor's.
func (s *supervisor) unchanged(h *heldExec) string {
	pid := int(h.n.Pid)
	// First that no one else can change it (see execwriters_linux.go), so that
	// what is read next is what the kernel will read.
	if why := sharedTasks(pid); why != "" {
		return why
	}
	mem := procMem{pid: pid}
	defer mem.release()
	var buf []byte
	c, ok := s.readExec(&mem, &h.n, h.o, &buf)
	if !ok || !s.valid(h.n.ID) {
		return "the held exec could not be read again"
	}
	if c.path != h.call.path || c.dirfd != h.call.dirfd || c.emptyPath != h.call.emptyPath || !slices.Equal(c.argv, h.call.argv) {
		return "the held exec changed its path or arguments"
	}
	if why := sharedMemory(pid, &mem, &h.n, h.o); why != "" {
		return why
	}
	// The working directory is part of what was shown: git push in
	// another repository is another push.
	base := ""
	if c.dirfd != unix.AT_FDCWD {
		base = ownProcLink(pid, c.dirfd)
	}
	if ownProcLink(pid, unix.AT_FDCWD) != h.cwd || base != h.base {
		return "the held exec changed its directory"
	}
	if file, ok := s.execFileKey(pid, c, ownProcLink); !ok || file != h.file {
		return "the held exec's file changed"
	}
	if !s.valid(h.n.ID) {
		return "the held exec could not be read again"
	}
	return ""
}

// execFileKey is the identity, size and times of the file an exec runs,
// as openExec finds it: another file, or the same rewritten, differs.
func (s *supervisor) execFileKey(pid int, c execCall, link func(int, int32) string) (fileKey, bool) {
	fd, errno := s.openExecWith(pid, c.dirfd, c.path, c.emptyPath, link)
	if errno != 0 {
		return fileKey{}, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileKey{}, false
	}
	return fileKey{fileID{st.Dev, st.Ino}, st.Size, st.Mtim, st.Ctim}, true
}

// ownProcLink is procLink without the supervisor's buffers, for the
// goroutines of held execs: a clean path, "" when it cannot be read.
func ownProcLink(pid int, dirfd int32) string {
	p := "/proc/" + strconv.Itoa(pid) + "/cwd"
	if dirfd != unix.AT_FDCWD {
		p = "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(int(dirfd))
	}
	l, err := os.Readlink(p)
	if err != nil || !strings.HasPrefix(l, "/") {
		return ""
	}
	return filepath.Clean(l)
}

// logExec writes a held exec's entry in the decision log and hands it to
// the live control's record.
func (s *supervisor) logExec(pid int, h *heldExec, rule, verdict, reason string) {
	if s.log == nil && s.record == nil {
		return
	}
	host := h.rule.Program
	if norm := jail.NormalizeArgv(h.call.argv); len(norm) > 0 {
		host = norm[0]
	}
	e := proxy.Entry{Time: time.Now(), Session: s.session, Client: strconv.Itoa(pid), Method: "EXEC", Scheme: "exec", Host: host, Path: strings.Join(h.call.argv, " "), Rule: rule, Verdict: verdict, Reason: reason}
	if s.log != nil {
		s.log.Write(e)
	}
	if s.record != nil {
		s.record(e)
	}
}
