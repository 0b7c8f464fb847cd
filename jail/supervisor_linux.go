package jail

import (
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
// with EPERM. It lives in the host process, outside every filter; when it
// is gone, the jail's execs fail.
type supervisor struct {
	fd          int
	deny, allow []CommandRule
	session     string
	log         *proxy.Log

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

// newSupervisor prepares the identities of the denied programs, found in
// the jail's PATH (the jail sees the host's system directories as they
// are).
func newSupervisor(deny, allow []string, pathEnv, session string, log *proxy.Log) *supervisor {
	s := &supervisor{deny: ParseCommandRules(deny), allow: ParseCommandRules(allow), session: session, log: log}
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
	return s
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
	for {
		var n seccompNotif
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_RECV), uintptr(unsafe.Pointer(&n)))
		switch errno {
		case 0:
		case unix.EINTR, unix.ENOENT:
			continue
		default:
			return
		}
		resp := seccompNotifResp{ID: n.ID}
		if errno := s.decide(&n); errno == 0 {
			resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		} else {
			resp.Error = -int32(errno)
		}
		unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_SEND), uintptr(unsafe.Pointer(&resp)))
	}
}

// decide reads the exec's path and argv and matches them, returning 0 to
// let the exec go on or the error it fails with. What cannot be read is
// refused: a process that hides its exec from the supervisor does not get
// to run it.
func (s *supervisor) decide(n *seccompNotif) unix.Errno {
	pid := int(n.Pid)
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return unix.EPERM
	}
	defer mem.Close()
	var pathPtr, argvPtr uint64
	dirfd := int64(unix.AT_FDCWD)
	var flags uint64
	switch n.Nr {
	case 59, 221: // execve (amd64, arm64)
		pathPtr, argvPtr = n.Args[0], n.Args[1]
	default: // execveat
		dirfd, pathPtr, argvPtr, flags = int64(int32(n.Args[0])), n.Args[1], n.Args[2], n.Args[4]
	}
	path, err1 := readCString(mem, pathPtr, 4096)
	argv, err2 := readArgv(mem, argvPtr)
	if err1 != nil || err2 != nil || !s.valid(n.ID) {
		return unix.EPERM
	}
	// Where the executable is, seen from the host: through the process's
	// root, relative to its working directory or to dirfd.
	inJail := path
	switch {
	case path == "" && flags&unix.AT_EMPTY_PATH != 0:
		inJail, _ = os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, dirfd))
	case !filepath.IsAbs(path) && dirfd == unix.AT_FDCWD:
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		inJail = filepath.Join(cwd, path)
	case !filepath.IsAbs(path):
		dir, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, dirfd))
		inJail = filepath.Join(dir, path)
	}
	// A file that is not there fails with ENOENT from here, not from the
	// kernel: answering "continue" would let a file created meanwhile run
	// unchecked. (Shells try every PATH directory in turn.)
	hostPath := fmt.Sprintf("/proc/%d/root%s", pid, inJail)
	if _, err := os.Stat(hostPath); err != nil {
		return unix.ENOENT
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
		return 0
	}
	denied, rule := MatchCommand(norm, s.deny, s.allow)
	if !denied {
		return 0
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
	return unix.EPERM
}

// valid reports whether the notification still refers to the same exec:
// checked after reading the target's memory, so that a pid reused in the
// meantime is not trusted.
func (s *supervisor) valid(id uint64) bool {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_ID_VALID), uintptr(unsafe.Pointer(&id)))
	return errno == 0
}

var errTooLong = errors.New("too long")

func readCString(mem *os.File, addr uint64, max int) (string, error) {
	var out []byte
	buf := make([]byte, 256)
	for len(out) < max {
		n, err := mem.ReadAt(buf, int64(addr)+int64(len(out)))
		if n == 0 && err != nil {
			return "", err
		}
		if i := indexByte(buf[:n], 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		out = append(out, buf[:n]...)
	}
	return "", errTooLong
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// readArgv reads a NULL-terminated array of string pointers.
func readArgv(mem *os.File, addr uint64) ([]string, error) {
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
