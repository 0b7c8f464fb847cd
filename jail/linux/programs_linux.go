package linux

import (
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jailsh/jail/jail"
	"golang.org/x/sys/unix"
)

// programs knows the denied programs by what they are rather than by what
// they are called: for each deny rule's program, the files that are that
// program when the jail starts (its name on PATH, the path the rule wrote,
// a file of that name in the project or its node_modules/.bin), by device
// and inode and by the SHA-256 of their content. A file exec'd in the jail
// is that program when it is one of those inodes (a hard link) or has the
// same content (a copy, a renamed copy, a copy in /tmp or a copy of a copy
// made during the session), and the rule's arguments are checked against
// it whatever its name: a copy of git called g runs `g status` but not `g
// push`.
//
// What it does not know: a program rebuilt from source, or changed by a
// single byte, is another program; so is another program that does the
// same thing (git-http-push, a library speaking the protocol). A script
// is also known when a shell, python, node, perl, ruby or php is given it
// among its first arguments (`sh ship`, `node npm-cli.js publish`), and
// through the kernel's own "#!" handling, not through binfmt_misc handlers
// the host may have registered or code an interpreter loads by itself.
// The file is checked before the kernel runs it, and a process that
// replaces it in between runs the replacement: command rules are policy,
// the boundary for pushes and publishes is that credentials never enter
// the jail.
type programs struct {
	byInode map[fileID]string
	byHash  map[[32]byte]string
	sizes   map[int64]bool // of the known contents: only these are hashed
	// cache is what an exec'd file turned out to be, by everything that
	// changes when it is written to, so that exec'ing it again costs one
	// stat. Files changed less than settle ago are not cached: a write
	// within the same timestamp tick would not change the key.
	cache map[fileKey]execFile
}

type fileID struct{ dev, ino uint64 }

type fileKey struct {
	fileID
	size         int64
	mtime, ctime unix.Timespec
}

// execFile is what an exec'd file is to the command rules.
type execFile struct {
	program string // the denied program it is, "" when none
	interp  string // from its "#!" line: the interpreter the kernel runs
	arg     string // and the interpreter's optional argument
	hasArg  bool
}

const (
	settle         = time.Second
	maxCache       = 4096
	maxProjectWalk = 20000 // project entries looked at for a rule's bare name
	shebangBytes   = 256   // the kernel reads this much of a file (BINPRM_BUF_SIZE)
)

func newPrograms() *programs {
	return &programs{byInode: map[fileID]string{}, byHash: map[[32]byte]string{}, sizes: map[int64]bool{}, cache: map[fileKey]execFile{}}
}

// find records the files that are the rules' programs: on PATH, at the
// path a rule wrote (relative to the project), and under the project by
// name. Every file is hashed now: a project script changed later in the
// session is still known by what it was.
func (p *programs) find(rules []jail.CommandRule, pathEnv, project string) {
	bare := map[string]bool{}
	for _, r := range rules {
		for _, dir := range filepath.SplitList(pathEnv) {
			if filepath.IsAbs(dir) {
				p.add(r.Program, filepath.Join(dir, r.Program))
			}
		}
		switch {
		case filepath.IsAbs(r.Path):
			p.add(r.Program, r.Path)
		case r.Path != "" && project != "":
			p.add(r.Program, filepath.Join(project, r.Path))
		case project != "":
			p.add(r.Program, filepath.Join(project, "node_modules", ".bin", r.Program))
			bare[r.Program] = true
		}
	}
	if len(bare) > 0 && project != "" {
		p.walk(project, bare)
	}
}

// walk adds the files under the project named like a rule's program,
// leaving out .git and node_modules, up to maxProjectWalk entries.
func (p *programs) walk(project string, names map[string]bool) {
	seen := 0
	filepath.WalkDir(project, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if seen++; seen > maxProjectWalk {
			return filepath.SkipAll
		}
		if d.IsDir() {
			if n := d.Name(); path != project && (n == ".git" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if names[d.Name()] {
			p.add(d.Name(), path)
		}
		return nil
	})
}

// add records path, followed to the file it names, as the program name.
func (p *programs) add(name, path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	id := fileID{st.Dev, st.Ino}
	if _, ok := p.byInode[id]; ok {
		return
	}
	p.byInode[id] = name
	if st.Size == 0 {
		return // nothing to know a copy by
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if _, ok := p.byHash[sum]; !ok {
		p.byHash[sum] = name
	}
	p.sizes[st.Size] = true
}

// lookup tells what the regular file open at fd (O_PATH will do) with
// status st is: by inode first, then by content when its size is a denied
// program's, and its "#!" line. It fails when the file cannot be read: a
// file the supervisor cannot look into is not let run.
func (p *programs) lookup(fd int, st *unix.Stat_t) (execFile, error) {
	key := fileKey{fileID{st.Dev, st.Ino}, st.Size, st.Mtim, st.Ctim}
	if f, ok := p.cache[key]; ok {
		return f, nil
	}
	f := execFile{program: p.byInode[key.fileID]}
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return f, err
	}
	r := os.NewFile(uintptr(rfd), "exec")
	defer r.Close()
	var head [shebangBytes]byte
	n, err := io.ReadFull(r, head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return f, err
	}
	f.interp, f.arg, f.hasArg = parseShebang(head[:n])
	if f.program == "" && p.sizes[st.Size] {
		h := sha256.New()
		h.Write(head[:n])
		if _, err := io.Copy(h, r); err != nil {
			return f, err
		}
		var sum [32]byte
		h.Sum(sum[:0])
		f.program = p.byHash[sum]
	}
	if time.Since(time.Unix(st.Ctim.Unix())) > settle && time.Since(time.Unix(st.Mtim.Unix())) > settle {
		if len(p.cache) >= maxCache {
			clear(p.cache)
		}
		p.cache[key] = f
	}
	return f, nil
}

// parseShebang reads a "#!" line the way the kernel does (binfmt_script):
// within the first 256 bytes, NUL-padded; the interpreter is the first
// word, the rest of the line with surrounding blanks trimmed is one
// optional argument; no newline and no blank after the interpreter within
// the buffer is no script (a name that may be cut off).
func parseShebang(b []byte) (interp, arg string, hasArg bool) {
	if len(b) < 2 || b[0] != '#' || b[1] != '!' {
		return "", "", false
	}
	var buf [shebangBytes]byte
	copy(buf[:], b)
	last := len(buf) - 1 // the kernel's buf_end, which it never reads past
	spacetab := func(c byte) bool { return c == ' ' || c == '\t' }
	nonBlank := func(i, j int) int { // first non-blank in [i, j], or -1
		for ; i <= j; i++ {
			if !spacetab(buf[i]) {
				return i
			}
		}
		return -1
	}
	terminator := func(i, j int) int { // first blank or NUL in [i, j], or -1
		for ; i <= j; i++ {
			if spacetab(buf[i]) || buf[i] == 0 {
				return i
			}
		}
		return -1
	}
	end := -1 // the newline, looked for up to the first NUL (strnchr)
	for i, c := range buf {
		if c == '\n' || c == 0 {
			if c == '\n' {
				end = i
			}
			break
		}
	}
	if end < 0 {
		i := nonBlank(2, last)
		if i < 0 || terminator(i, last) < 0 {
			return "", "", false
		}
		end = last
	}
	for spacetab(buf[end-1]) {
		end--
	}
	name := nonBlank(2, end)
	if name < 0 || name == end {
		return "", "", false
	}
	sep := terminator(name, end)
	argAt := -1
	if sep >= 0 && buf[sep] != 0 {
		argAt = nonBlank(sep, end)
	}
	buf[end] = 0
	cstr := func(i int) string {
		j := i
		for j < len(buf) && buf[j] != 0 {
			j++
		}
		return string(buf[i:j])
	}
	if argAt >= 0 {
		arg, hasArg = cstr(argAt), true
		buf[sep] = 0
	}
	return cstr(name), arg, hasArg
}
