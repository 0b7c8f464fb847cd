package linux

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// An approved exec goes on with SECCOMP_USER_NOTIF_FLAG_CONTINUE, and the
// kernel then reads its path and argv from the caller's memory again, and
// resolves the path against its working directory and descriptors again.
// Whatever can change those between the supervisor's last look and the
// kernel's read could run a command nobody was shown. These checks refuse
// an approved exec unless nothing but the caller itself, blocked in the
// exec, can change them: it is its process's only thread; no other
// process shares its memory (but a single-threaded parent waiting in
// vfork, which cannot run until the exec has read what it needs), its
// working directory or its descriptor table; and the path, the argv array
// and every argument lie in private memory no other process maps (an
// anonymous mapping, or its own executable, which cannot be written while
// it runs). Ptrace, process_vm_writev and writes to /proc/PID/mem are
// refused in the jail by seccomp and Landlock.

// kcmp resource types (linux/kcmp.h).
const (
	kcmpVM    = 1
	kcmpFiles = 2
	kcmpFS    = 3
)

// procStatus reads the fields of /proc/PID/status that sharedTasks needs.
type procStatus struct {
	threads, ppid int
	state         byte
}

// readStatus reads /proc/PID/status.
func readStatus(pid int) (procStatus, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procStatus{}, false
	}
	var st procStatus
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "Threads":
			st.threads, _ = strconv.Atoi(v)
		case "PPid":
			st.ppid, _ = strconv.Atoi(v)
		case "State":
			if v != "" {
				st.state = v[0]
			}
		}
	}
	return st, st.threads > 0
}

// sharedTasks is why another task could change the caller's memory,
// working directory or descriptors ("" when none can).
func sharedTasks(pid int) string {
	self, ok := readStatus(pid)
	if !ok {
		return "the held exec's process could not be read"
	}
	if self.threads != 1 {
		return "the held exec's process has other threads, which could change what it runs after it was shown; run it from a single-threaded process such as a shell"
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return "the held exec's process could not be read"
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return "the processes of the jail could not be listed"
	}
	for _, e := range ents {
		q, err := strconv.Atoi(e.Name())
		if err != nil || q == pid {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || l != ns {
			continue // gone, or not of this jail
		}
		if why := sharesWith(pid, q, self.ppid); why != "" {
			return why
		}
	}
	return ""
}

// sharesWith is why process q could change what pid's exec runs.
func sharesWith(pid, q, ppid int) string {
	for _, kind := range []int{kcmpFS, kcmpFiles, kcmpVM} {
		r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(pid), uintptr(q), uintptr(kind), 0, 0, 0)
		if errno == unix.ESRCH {
			return "" // q is gone
		}
		if errno != 0 {
			return fmt.Sprintf("whether another process shares the held exec's memory could not be told (kcmp: %v)", errno)
		}
		if r != 0 {
			continue
		}
		if kind != kcmpVM {
			return "another process shares the held exec's working directory or descriptors, and could change what it runs after it was shown"
		}
		// vfork: the parent sleeps (state D) until the child's exec has
		// read its arguments and left the shared memory.
		if st, ok := readStatus(q); !ok || q != ppid || st.threads != 1 || st.state != 'D' {
			return "another process or thread shares the held exec's memory, and could change what it runs after it was shown; run it from a single-threaded process such as a shell"
		}
	}
	return ""
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end uint64
	private    bool
	dev        string
	inode      uint64
}

// sharedMemory is why the memory the exec reads (its path, its argv array
// and every argument) may be written by another process ("" when none
// may).
func sharedMemory(pid int, mem io.ReaderAt, n *seccompNotif, o op) string {
	maps, exe, ok := readMaps(pid)
	if !ok {
		return "the held exec's memory map could not be read"
	}
	pathPtr, argvPtr := n.Args[0], n.Args[1]
	if o == opExecveat {
		pathPtr, argvPtr = n.Args[1], n.Args[2]
	}
	ranges, ok := execRanges(mem, pathPtr, argvPtr)
	if !ok {
		return "the held exec could not be read again"
	}
	for _, r := range ranges {
		if !privateRange(maps, exe, r[0], r[1]) {
			return "the held exec's arguments are in memory another process may write, and could change after they were shown"
		}
	}
	return ""
}

// execRanges are the byte ranges [start, end) of the path, the argv array
// and each argument, each string with its NUL.
func execRanges(mem io.ReaderAt, pathPtr, argvPtr uint64) ([][2]uint64, bool) {
	var out [][2]uint64
	add := func(p uint64) bool {
		s, err := readCString(mem, p, 128<<10)
		if err != nil {
			return false
		}
		out = append(out, [2]uint64{p, p + uint64(len(s)) + 1})
		return true
	}
	if !add(pathPtr) {
		return nil, false
	}
	ptr := make([]byte, 8)
	for i := uint64(0); i < 4096; i++ {
		if _, err := mem.ReadAt(ptr, int64(argvPtr+8*i)); err != nil {
			return nil, false
		}
		p := binary.NativeEndian.Uint64(ptr)
		if p == 0 {
			out = append(out, [2]uint64{argvPtr, argvPtr + 8*(i+1)})
			return out, true
		}
		if !add(p) {
			return nil, false
		}
	}
	return nil, false
}

// readMaps parses /proc/PID/maps, and names the process's executable by
// the "dev inode" its mappings show.
func readMaps(pid int) ([]mapping, string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, "", false
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &st); err != nil {
		return nil, "", false
	}
	exe := fmt.Sprintf("%02x:%02x %d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	var maps []mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		inode, err3 := strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || len(f[1]) < 4 {
			return nil, "", false
		}
		maps = append(maps, mapping{start: start, end: end, private: f[1][3] == 'p', dev: f[3], inode: inode})
	}
	return maps, exe, sc.Err() == nil
}

// privateRange reports whether every byte of [start, end) is in a private
// mapping that is anonymous or of the process's own executable.
func privateRange(maps []mapping, exe string, start, end uint64) bool {
	for at := start; at < end; {
		i := -1
		for j, m := range maps {
			if m.start <= at && at < m.end {
				i = j
				break
			}
		}
		if i < 0 {
			return false
		}
		m := maps[i]
		own := fmt.Sprintf("%s %d", m.dev, m.inode) == exe
		if !m.private || (m.inode != 0 && !own) {
			return false
		}
		at = m.end
	}
	return true
}
