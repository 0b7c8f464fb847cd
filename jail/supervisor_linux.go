package jail

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

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
	deny, allow []CommandRule
	session     string
	log         *proxy.Log
	trace       func(learn.Event) // must not block: the call waits meanwhile

	// Reused by the one goroutine that answers (run).
	mem             procMem
	strBuf, procBuf []byte
	linkBuf         [4096]byte
	sockBuf         [128]byte // sizeof(struct sockaddr_storage)

	// Denied programs' executables, to know a copy or a hard link under
	// another name: inode and size, and the content hash computed once.
	programs []program
	mu       sync.Mutex
	denied   []string
	last     string // pid and argv of the last denial
}

type program struct {
	name      string
	dev, ino  uint64
	size      int64
	path      string
	hash      [32]byte
	hashReady bool
}

// newSupervisor makes the supervisor of the command rules (and the tracer,
// when trace is set); findPrograms must run before it answers.
func newSupervisor(deny, allow []string, session string, log *proxy.Log) *supervisor {
	return &supervisor{deny: ParseCommandRules(deny), allow: ParseCommandRules(allow), session: session, log: log}
}

// findPrograms records the identities of the denied programs, found in the
// jail's PATH (the jail sees the host's system directories as they are).
func (s *supervisor) findPrograms(pathEnv string) {
	seen := map[string]bool{}
	for _, r := range s.deny {
		if seen[r.Program] {
			continue
		}
		seen[r.Program] = true
		for _, dir := range filepath.SplitList(pathEnv) {
			p, err := filepath.EvalSymlinks(filepath.Join(dir, r.Program))
			if err != nil {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				s.programs = append(s.programs, program{name: r.Program, dev: st.Dev, ino: st.Ino, size: st.Size, path: p})
			}
		}
	}
}

// identify names the program a file is, when it is one of the denied
// programs under another name (hard link: same inode; copy: same content).
func (s *supervisor) identify(hostPath string) string {
	var st unix.Stat_t
	if unix.Stat(hostPath, &st) != nil {
		return ""
	}
	for i := range s.programs {
		p := &s.programs[i]
		if st.Dev == p.dev && st.Ino == p.ino {
			return p.name
		}
	}
	for i := range s.programs {
		p := &s.programs[i]
		if st.Size != p.size {
			continue
		}
		if !p.hashReady {
			h, err := hashFile(p.path)
			if err != nil {
				continue
			}
			p.hash, p.hashReady = h, true
		}
		if h, err := hashFile(hostPath); err == nil && h == p.hash {
			return p.name
		}
	}
	return ""
}

func hashFile(path string) ([32]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, err
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

// run answers notifications until the listener fails (the jail is gone).
func (s *supervisor) run() {
	defer unix.Close(s.fd)
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
			if len(s.deny) == 0 {
				// Nothing to refuse: the kernel runs it or fails it.
				report = s.trace != nil && s.traceExec(&n, o, &t)
				break
			}
			inJail, errno := s.decide(&n, o)
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
// that hides its exec from the supervisor does not get to run it.
func (s *supervisor) decide(n *seccompNotif, o op) (string, unix.Errno) {
	pid := int(n.Pid)
	s.mem.pid = pid
	defer s.mem.release()
	argvPtr := n.Args[1]
	if o == opExecveat {
		argvPtr = n.Args[2]
	}
	inJail, ok := s.execPath(&s.mem, n, o)
	argv, err := readArgv(&s.mem, argvPtr)
	if !ok || err != nil || !s.valid(n.ID) {
		return "", unix.EPERM
	}
	if inJail == "" {
		return "", unix.ENOENT
	}
	// A file that is not there fails with ENOENT from here, not from the
	// kernel: answering "continue" would let a file created meanwhile run
	// unchecked. (Shells try every PATH directory in turn.)
	hostPath := fmt.Sprintf("/proc/%d/root%s", pid, inJail)
	if _, err := os.Stat(hostPath); err != nil {
		return inJail, unix.ENOENT
	}
	// The program is the file being run, whatever argv[0] claims: a
	// denied program's copy or hard link is that program.
	name := s.identify(hostPath)
	if name == "" {
		name = progName(inJail)
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
		if called := progName(argv[0]); strings.HasPrefix(called, name+"-") {
			name = called
		}
	}
	norm := NormalizeArgv(append([]string{name}, args...))
	if len(norm) == 0 {
		return inJail, 0
	}
	denied, rule := MatchCommand(norm, s.deny, s.allow)
	if !denied {
		return inJail, 0
	}
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
	if s.log != nil && !repeat {
		s.log.Write(proxy.Entry{Time: time.Now(), Session: s.session, Client: strconv.Itoa(pid), Method: "EXEC", Scheme: "exec", Host: norm[0], Path: line, Rule: "command.deny " + rule.String(), Verdict: "deny", Reason: "exec of " + inJail})
	}
	return inJail, unix.EPERM
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
