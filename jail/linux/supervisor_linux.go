package linux

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/control"
	"github.com/jailsh/jail/jail/learn"
	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// seccomp_notif and seccomp_notif_resp (linux/seccomp.h).
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// supervisor answers the jail's execs: it reads each one's path and argv
// from the calling process, normalizes them, and lets it run or refuses it
// with EPERM. With trace set it is also the unprivileged tracer: it
// reports every exec and every traced file and connect call (see
// trace_linux.go), which it lets go on. It lives in the host process,
// outside every filter; when it is gone, the notified calls fail.
type supervisor struct {
	fd          int
	deny, allow []jail.CommandRule
	session     string
	log         *proxy.Log
	trace       func(learn.Event) // must not block: the call waits meanwhile
	// ask holds an exec that command.ask names until a person answers;
	// nil denies it. It is called from a goroutine of its own per held
	// exec, while run goes on answering the others.
	ask        func(ctx context.Context, r control.Request) control.Answer
	asks       []jail.CommandRule
	askTimeout time.Duration // a backstop past the asker's own timeout
	held       sync.WaitGroup
	ctx        context.Context // done when run returns
	// record sees each refused exec's entry (the live control's counts
	// and stream); it must not block. nil records nothing.
	record func(proxy.Entry)

	// Reused by the one goroutine that answers (run).
	mem             procMem
	strBuf, procBuf []byte
	linkBuf         [4096]byte
	sockBuf         [128]byte // sizeof(struct sockaddr_storage)

	// The denied programs by identity and content, and the jail's root,
	// where exec'd paths are resolved (opened at the first exec decided;
	// every process of the jail has the same root: the calls that change
	// it are refused by the seccomp filter).
	progs  *programs
	rootFD int
	mu     sync.Mutex
	denied []string
	last   string // pid and argv of the last denial
	// The last held exec refused, and when: a shell tries the next PATH
	// directory at once, which is the same command, not a new question.
	lastAsked   string
	lastAskedAt time.Time
}

// newSupervisor makes the supervisor of the command rules (and the tracer,
// when trace is set); findPrograms must run before it answers.
func newSupervisor(deny, allow []string, session string, log *proxy.Log) *supervisor {
	return &supervisor{deny: jail.ParseCommandRules(deny), allow: jail.ParseCommandRules(allow), session: session, log: log, progs: newPrograms(), rootFD: -1}
}

// findPrograms records the files that are the denied programs (see
// programs): on the jail's PATH (the jail sees the host's system
// directories as they are) and in the project (seen at the same path).
func (s *supervisor) findPrograms(pathEnv, project string) {
	s.progs.find(slices.Concat(s.deny, s.asks), pathEnv, project)
}

// setAsk makes the supervisor hold the execs the command.ask rules name
// until s.ask answers (at most timeout plus a grace).
func (s *supervisor) setAsk(rules []string, timeout time.Duration) {
	s.asks, s.askTimeout = jail.ParseCommandRules(rules), timeout
}

// run answers notifications until the listener fails (the jail is gone).
func (s *supervisor) run() {
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx = ctx
	defer unix.Close(s.fd)
	defer func() {
		if s.rootFD >= 0 {
			unix.Close(s.rootFD)
		}
	}()
	// The held execs are answered (denied: their askers see ctx done)
	// before the listener and the root are closed.
	defer s.held.Wait()
	defer cancel()
	// The call waits for the answer: where the kernel can (Linux >= 6.6),
	// hand the CPU straight over between the jail and the supervisor.
	unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS), unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	var n seccompNotif
	for {
		n = seccompNotif{}
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_RECV), uintptr(unsafe.Pointer(&n)))
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.ENOENT:
			// A caller gone before it was received, or every process of
			// the jail gone: then the listener hangs up, and receiving
			// fails at once, again and again.
			if hungUp(s.fd) {
				return
			}
			continue
		default:
			return
		}
		resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		var t traced
		report := false
		switch o := opOf(n.Nr); o {
		case opExecve, opExecveat:
			if len(s.deny) == 0 && len(s.asks) == 0 {
				// Nothing to refuse: the kernel runs it or fails it.
				report = s.trace != nil && s.traceExec(&n, o, &t)
				break
			}
			inJail, errno, h := s.decide(&n, o)
			if h != nil && !s.refusedJustNow(h) {
				// Answered once a person has: not from here, where
				// every other call of the jail waits its turn.
				s.held.Add(1)
				go s.answerHeld(h)
				continue
			}
			if h != nil {
				resp.Flags, resp.Error = 0, -int32(unix.EPERM)
			}
			if errno != 0 {
				resp.Flags, resp.Error = 0, -int32(errno)
			}
			if inJail != "" {
				t = traced{kind: learn.Exec, path: [2]string{inJail}, n: 1, errno: int(errno)}
				report = s.trace != nil
			}
		default:
			report = s.trace != nil && s.decodeTrace(&n, o, &t)
		}
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_SEND), uintptr(unsafe.Pointer(&resp)))
		// The answer reached a call still waiting: the memory and /proc
		// entries read before it were the caller's (no pid reuse), as a
		// SECCOMP_IOCTL_NOTIF_ID_VALID check would have told, one call
		// fewer.
		if report && errno == 0 {
			t.report(int(n.Pid), s.trace)
		}
	}
}

// decide reads the exec's path and argv and matches them, returning the
// path (as seen in the jail, "" when unreadable) and 0 to let the exec go
// on or the error it fails with. What cannot be read is refused: a process
// that hides its exec from the supervisor does not get to run it. The
// program is the file being run, whatever it is called (see programs); a
// script is also the command its "#!" line makes of it, which the kernel
// runs without another exec call.
//
// An exec that command.ask names (and command.deny does not, at any
// interpreter of the chain) is returned as held, unanswered.
func (s *supervisor) decide(n *seccompNotif, o op) (string, unix.Errno, *heldExec) {
	pid := int(n.Pid)
	s.mem.pid = pid
	defer s.mem.release()
	c, ok := s.readExec(&s.mem, n, o, &s.strBuf)
	if !ok || !s.valid(n.ID) {
		return "", unix.EPERM, nil
	}
	inJail := c.inJail(s, pid)
	if inJail == "" {
		return "", unix.ENOENT, nil
	}
	// A file that is not there fails with ENOENT from here, not from the
	// kernel: answering "continue" would let a file created meanwhile run
	// unchecked. (Shells try every PATH directory in turn.)
	f, errno := s.fileOf(pid, c.dirfd, c.path, c.emptyPath)
	if errno != 0 {
		return inJail, errno, nil
	}
	var asked *jail.CommandRule
	argv, name, filename := c.argv, inJail, c.filename()
	for depth := 0; ; depth++ {
		norm := commandOf(f.program, name, argv)
		if denied, rule := jail.MatchCommand(norm, s.deny, s.allow); denied {
			s.refuse(pid, argv, norm, rule, inJail)
			return inJail, unix.EPERM, nil
		}
		script := s.scriptCommand(pid, norm)
		if script != nil {
			if denied, rule := jail.MatchCommand(script, s.deny, s.allow); denied {
				s.refuse(pid, argv, script, rule, inJail)
				return inJail, unix.EPERM, nil
			}
		}
		if asked == nil {
			asked = s.askRule(norm, script)
		}
		if f.interp == "" {
			if asked != nil {
				return inJail, 0, s.holdExec(n, o, c, inJail, *asked)
			}
			return inJail, 0, nil
		}
		if depth == maxInterpreters {
			return inJail, unix.ELOOP, nil
		}
		argv = interpreterArgv(f, filename, argv)
		name, filename = f.interp, f.interp
		if f, errno = s.fileOf(pid, unix.AT_FDCWD, f.interp, false); errno != 0 {
			return inJail, errno, nil // a missing interpreter fails the exec
		}
	}
}

// askRule is the command.ask rule that holds a command (or the script
// command it runs), nil when none does.
func (s *supervisor) askRule(norm, script []string) *jail.CommandRule {
	for _, cmd := range [][]string{norm, script} {
		if cmd == nil {
			continue
		}
		if asked, rule := jail.MatchAsk(cmd, s.asks, s.allow); asked {
			return &rule
		}
	}
	return nil
}

// scriptInterpreters run a file named among their arguments (`sh
// deploy.sh` runs deploy.sh), except after the flags that put code on
// their command line instead. Names starting with "python" are python.
var scriptInterpreters = map[string]map[string]bool{
	"sh": shellCode, "bash": shellCode, "dash": shellCode, "ash": shellCode, "zsh": shellCode, "ksh": shellCode, "mksh": shellCode,
	"python": {"-c": true, "-m": true},
	"node":   nodeCode, "nodejs": nodeCode,
	"perl": {"-e": true, "-E": true},
	"ruby": {"-e": true},
	"php":  {"-r": true},
	// The dynamic loader runs the program it is given (ld.so /usr/bin/git).
	"ld.so": {},
}

// loaderOptsWithValue are the dynamic loader's options that take the next
// argument: it is not the program.
var loaderOptsWithValue = map[string]bool{"--library-path": true, "--preload": true, "--audit": true, "--argv0": true, "--inhibit-rpath": true, "--glibc-hwcaps-prepend": true, "--glibc-hwcaps-mask": true}

// loaderName reports whether a program name is the dynamic loader's
// (ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ld-musl-x86_64.so.1, ld.so).
func loaderName(name string) bool {
	return name == "ld.so" || strings.HasPrefix(name, "ld-linux") || strings.HasPrefix(name, "ld-musl")
}

var (
	shellCode = map[string]bool{"-c": true, "-s": true}
	nodeCode  = map[string]bool{"-e": true, "-p": true, "--eval": true, "--print": true}
)

// maxScriptArgs is how many of an interpreter's arguments are looked at
// for a script file.
const maxScriptArgs = 3

// scriptCommand is the command an interpreter runs when one of its first
// arguments (options aside) is a denied program's file: `sh ./ship`, where
// ship is a copy of a denied script, is that program with the arguments
// after it. Nil when it is not one.
func (s *supervisor) scriptCommand(pid int, norm []string) []string {
	name := norm[0]
	switch {
	case strings.HasPrefix(name, "python"):
		name = "python"
	case loaderName(name):
		name = "ld.so"
	}
	code, ok := scriptInterpreters[name]
	if !ok || len(norm) < 2 {
		return nil
	}
	looked, skip := 0, false
	for i, a := range norm[1:] {
		if skip {
			skip = false
			continue
		}
		if code[a] || a == "-" {
			return nil
		}
		if name == "ld.so" && loaderOptsWithValue[a] {
			skip = true
			continue
		}
		if strings.HasPrefix(a, "-") || a == "" {
			continue
		}
		if looked++; looked > maxScriptArgs {
			return nil
		}
		if f, errno := s.fileOf(pid, unix.AT_FDCWD, a, false); errno == 0 && f.program != "" {
			return jail.NormalizeArgv(append([]string{f.program}, norm[i+2:]...))
		}
	}
	return nil
}

// maxInterpreters is how many "#!" interpreters in a row the supervisor
// follows; the kernel gives up (ELOOP) after about as many.
const maxInterpreters = 5

// commandOf is the normalized command an exec runs: the program is the
// denied program the file is, else the file's name, else argv[0].
func commandOf(program, path string, argv []string) []string {
	name := program
	if name == "" {
		name = jail.ProgName(path)
	}
	if name == "" && len(argv) > 0 {
		name = argv[0]
	}
	args := []string{}
	if len(argv) > 1 {
		args = argv[1:]
	}
	// A multi-call program picks what to do from the name it was called
	// by (git-push): keep that name when it is the program's own.
	if len(argv) > 0 {
		if called := jail.ProgName(argv[0]); strings.HasPrefix(called, name+"-") {
			name = called
		}
	}
	return jail.NormalizeArgv(append([]string{name}, args...))
}

// interpreterArgv is the argv the kernel gives a script's interpreter:
// the interpreter, its "#!" argument, the script's file name, and the
// script's arguments after argv[0].
func interpreterArgv(f execFile, filename string, argv []string) []string {
	out := []string{f.interp}
	if f.hasArg {
		out = append(out, f.arg)
	}
	out = append(out, filename)
	if len(argv) > 1 {
		out = append(out, argv[1:]...)
	}
	return out
}

// refuse records and logs a denied exec.
func (s *supervisor) refuse(pid int, argv, norm []string, rule jail.CommandRule, inJail string) {
	line := strings.Join(argv, " ")
	// A shell tries each PATH directory in turn: one attempt, one entry.
	key := strconv.Itoa(pid) + "\x00" + line
	s.mu.Lock()
	repeat := s.last == key
	s.last = key
	if !repeat {
		s.denied = append(s.denied, rule.String())
	}
	s.mu.Unlock()
	if !repeat && len(norm) > 0 && (s.log != nil || s.record != nil) {
		e := proxy.Entry{Time: time.Now(), Session: s.session, Client: strconv.Itoa(pid), Method: "EXEC", Scheme: "exec", Host: norm[0], Path: line, Rule: "command.deny " + rule.String(), Verdict: "deny", Reason: "exec of " + inJail}
		if s.log != nil {
			s.log.Write(e)
		}
		if s.record != nil {
			s.record(e)
		}
	}
}

// execCall is an exec's arguments as the caller passed them.
type execCall struct {
	path      string
	dirfd     int32 // AT_FDCWD for execve
	emptyPath bool  // execveat(fd, "", AT_EMPTY_PATH): the file open at dirfd
	argv      []string
}

// readExec reads an exec's path and argv from the caller's memory.
func (s *supervisor) readExec(mem io.ReaderAt, n *seccompNotif, o op, strBuf *[]byte) (execCall, bool) {
	c := execCall{dirfd: unix.AT_FDCWD}
	pathPtr, argvPtr := n.Args[0], n.Args[1]
	if o == opExecveat {
		c.dirfd, pathPtr, argvPtr = int32(uint32(n.Args[0])), n.Args[1], n.Args[2]
		c.emptyPath = n.Args[4]&unix.AT_EMPTY_PATH != 0
	}
	b, err := appendCString((*strBuf)[:0], mem, pathPtr, 4096)
	*strBuf = b[:0]
	if err != nil {
		return c, false
	}
	c.path = string(b)
	if c.argv, err = readArgv(mem, argvPtr); err != nil {
		return c, false
	}
	return c, true
}

// inJail is the exec's file as a clean path of the jail, for the log and
// the command's name: "" when it cannot be told.
func (c *execCall) inJail(s *supervisor, pid int) string {
	switch {
	case strings.HasPrefix(c.path, "/"):
		return filepath.Clean(c.path)
	case c.path == "" && c.emptyPath && c.dirfd >= 0:
		return s.procLink(pid, c.dirfd)
	case c.path == "":
		return ""
	}
	return joinPath(s.procLink(pid, c.dirfd), c.path)
}

// filename is what the kernel names the file to a script's interpreter.
func (c *execCall) filename() string {
	switch {
	case c.dirfd == unix.AT_FDCWD || strings.HasPrefix(c.path, "/"):
		return c.path
	case c.path == "":
		return "/dev/fd/" + strconv.Itoa(int(c.dirfd))
	}
	return "/dev/fd/" + strconv.Itoa(int(c.dirfd)) + "/" + c.path
}

// fileOf opens the file an exec of path (relative to dirfd) runs and tells
// what it is. The errno is the exec's when there is no file to run, EPERM
// when the file cannot be read.
func (s *supervisor) fileOf(pid int, dirfd int32, path string, emptyPath bool) (execFile, unix.Errno) {
	fd, errno := s.openExec(pid, dirfd, path, emptyPath)
	if errno != 0 {
		return execFile{}, errno
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return execFile{}, unix.ENOENT
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return execFile{}, 0 // not runnable: the kernel refuses it
	}
	f, err := s.progs.lookup(fd, &st)
	if err != nil {
		return f, unix.EPERM
	}
	return f, 0
}

// openExec opens (O_PATH) the file the kernel will run for the caller:
// the path resolved in the jail's root, where absolute symbolic links and
// ".." stay (a lexical clean, or a walk from the host's root, could name
// another file than the one run); a relative path starts at the caller's
// working directory or dirfd, as /proc shows them. The caller's own
// /proc/self/exe and /proc/self/fd/N (and /dev/fd/N) are its files as the
// host's /proc shows them; other magic links are not followed.
func (s *supervisor) openExec(pid int, dirfd int32, path string, emptyPath bool) (int, unix.Errno) {
	return s.openExecWith(pid, dirfd, path, emptyPath, s.procLink)
}

// openExecWith is openExec reading the caller's directories with link.
func (s *supervisor) openExecWith(pid int, dirfd int32, path string, emptyPath bool, link func(int, int32) string) (int, unix.Errno) {
	proc := "/proc/" + strconv.Itoa(pid) + "/"
	open := func(p string) (int, unix.Errno) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		return fd, errnoOf(err)
	}
	if path == "" {
		if !emptyPath || dirfd < 0 {
			return -1, unix.ENOENT
		}
		return open(proc + "fd/" + strconv.Itoa(int(dirfd)))
	}
	if own, ok := selfLink(path); ok {
		return open(proc + own)
	}
	if !strings.HasPrefix(path, "/") {
		base := link(pid, dirfd)
		if !strings.HasPrefix(base, "/") {
			return -1, unix.ENOENT
		}
		path = base + "/" + path
	}
	if s.rootFD < 0 {
		fd, err := unix.Open(proc+"root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, unix.ENOENT
		}
		s.rootFD = fd
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(s.rootFD, path, &how)
		if err != unix.EAGAIN || try == 8 { // EAGAIN: a rename raced the walk
			return fd, errnoOf(err)
		}
	}
}

// selfLink maps a path to the caller's own files in /proc (/proc/self/exe,
// /proc/self/fd/N, the same under /proc/thread-self, and /dev/fd/N) to
// the entry under its /proc/PID.
func selfLink(path string) (string, bool) {
	var rest string
	switch {
	case strings.HasPrefix(path, "/proc/self/"):
		rest = path[len("/proc/self/"):]
	case strings.HasPrefix(path, "/proc/thread-self/"):
		rest = path[len("/proc/thread-self/"):]
	case strings.HasPrefix(path, "/dev/fd/"):
		rest = path[len("/dev/"):]
	default:
		return "", false
	}
	if rest == "exe" {
		return rest, true
	}
	if n, ok := strings.CutPrefix(rest, "fd/"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		return rest, true
	}
	return "", false
}

func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.ENOENT
}

// hungUp reports whether the filter has no process left.
func hungUp(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n == 1 && p[0].Revents&unix.POLLHUP != 0
}

// valid reports whether the notification still refers to the same exec:
// checked after reading the target's memory, so that a pid reused in the
// meantime is not trusted.
func (s *supervisor) valid(id uint64) bool {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_ID_VALID), uintptr(unsafe.Pointer(&id)))
	return errno == 0
}

var errTooLong = errors.New("too long")

func readCString(mem io.ReaderAt, addr uint64, max int) (string, error) {
	b, err := appendCString(nil, mem, addr, max)
	return string(b), err
}

// appendCString appends the NUL-terminated string at addr to dst, reading
// it in pieces straight into dst's spare room.
func appendCString(dst []byte, mem io.ReaderAt, addr uint64, max int) ([]byte, error) {
	start := len(dst)
	for len(dst)-start < max {
		if cap(dst)-len(dst) < 256 {
			dst = append(dst[:cap(dst)], make([]byte, 256)...)[:len(dst)]
		}
		buf := dst[len(dst):cap(dst)]
		n, err := mem.ReadAt(buf, int64(addr)+int64(len(dst)-start))
		if n == 0 && err != nil {
			return dst[:start], err
		}
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return dst[:len(dst)+i], nil
		}
		dst = dst[:len(dst)+n]
	}
	return dst[:start], errTooLong
}

// readArgv reads a NULL-terminated array of string pointers.
func readArgv(mem io.ReaderAt, addr uint64) ([]string, error) {
	var argv []string
	total := 0
	ptr := make([]byte, 8)
	for i := 0; i < 4096; i++ {
		if _, err := mem.ReadAt(ptr, int64(addr)+int64(8*i)); err != nil {
			return nil, err
		}
		p := binary.NativeEndian.Uint64(ptr)
		if p == 0 {
			return argv, nil
		}
		s, err := readCString(mem, p, 128<<10)
		if err != nil {
			return nil, err
		}
		if total += len(s); total > 1<<20 {
			return nil, errTooLong
		}
		argv = append(argv, s)
	}
	return nil, errTooLong
}

// receiveListener takes the exec filter's listener that init sends.
func receiveListener(sock *os.File) (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, 0)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		return -1, fmt.Errorf("no listener received: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no listener received: %v", err)
	}
	return fds[0], nil
}

// summary is the exit line about denied commands, "" when none was.
func (s *supervisor) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.denied) == 0 {
		return ""
	}
	counts := map[string]int{}
	var order []string
	for _, d := range s.denied {
		if counts[d] == 0 {
			order = append(order, d)
		}
		counts[d]++
	}
	var parts []string
	for _, d := range order {
		if counts[d] > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", d, counts[d]))
		} else {
			parts = append(parts, d)
		}
	}
	noun := "commands"
	if len(s.denied) == 1 {
		noun = "command"
	}
	return fmt.Sprintf("%d %s denied (%s); see jail log", len(s.denied), noun, strings.Join(parts, ", "))
}
