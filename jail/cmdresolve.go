package jail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxCommandTree bounds the entries of an install tree jail makes readable
// by itself for the command: a wider tree is the user's call to allow.
var maxCommandTree = 20000

// maxCommandInterps bounds how many "#!" interpreters are followed from the
// command (a script run by a venv's python run by a managed python).
const maxCommandInterps = 4

// CommandExposure is what jail makes visible so that a command the user's
// PATH finds in a place the jail hides (~/.local/bin, a hidden prefix)
// runs inside: the symlinks leading to it, recreated as symlinks, and the
// install trees they end in, bound read-only.
type CommandExposure struct {
	Name     string        // the command as given
	Found    string        // where the user's PATH finds it
	Resolved string        // the file it resolves to
	Links    []CommandLink // symlinks of the chain that the jail would hide
	Trees    []string      // host trees made readable: the program's, its interpreter's
	// NotFound: no directory of the user's PATH has the command, so it
	// cannot run inside either.
	NotFound bool
}

// CommandLink is one symlink of a command's chain, recreated inside.
type CommandLink struct{ Path, Target string }

// String is the plan's line for the exposure.
func (c *CommandExposure) String() string {
	if c.NotFound {
		return fmt.Sprintf("command: %s is in no directory of your PATH; install it, or give its path", c.Name)
	}
	shown := "made readable: " + strings.Join(c.Trees, " ")
	if len(c.Trees) == 0 {
		shown = "made readable by the policy"
	}
	if len(c.Links) > 0 {
		shown += "; links recreated: " + c.Links[0].Path
		for _, l := range c.Links[1:] {
			shown += " " + l.Path
		}
	}
	return fmt.Sprintf("command: %s resolves to %s (%s)", c.Name, c.Resolved, shown)
}

// ExposeCommand resolves the command (argv[0] without a slash) on the
// user's PATH, as the host environment gives it, to decide what the jail
// must show for it to run; it never runs anything. It returns nil when
// nothing needs showing. Relative PATH entries are ignored, and a chain
// that passes through a tree the jail can write (the project, allowWrite)
// is not followed: what a jailed command could have planted there exposes
// nothing. A tree too wide to show safely, or inside a credential store,
// is an error naming it and the fix. A command no PATH entry has is
// reported NotFound.
func ExposeCommand(pol *Policy, argv []string, home, cwd, pathEnv string) (*CommandExposure, error) {
	if len(argv) == 0 || argv[0] == "" || strings.Contains(argv[0], "/") || pol.Mode != "" {
		return nil, nil
	}
	name := argv[0]
	found := hostLookPath(name, pathEnv, "")
	if found == "" {
		if _, set := pol.Env.Set["PATH"]; set || hostLookPath(name, pathEnv, cwd) != "" {
			return nil, nil // the PATH inside differs, or a relative entry may find it
		}
		return &CommandExposure{Name: name, NotFound: true}, nil
	}
	r := &cmdResolver{pol: pol, home: home, path: pathEnv, exp: &CommandExposure{Name: name, Found: found}}
	if err := r.expose(found, 0); err != nil {
		return nil, err
	}
	r.dropCovered()
	if len(r.exp.Links)+len(r.exp.Trees) == 0 {
		return nil, nil
	}
	return r.exp, nil
}

// AddTo makes the exposure's trees readable in the policy, where the
// planner masks credential stores and hard links in them as in any
// allowRead tree.
func (c *CommandExposure) AddTo(pol *Policy) {
	if c != nil {
		pol.AllowRead = Union(pol.AllowRead, c.Trees)
	}
}

// xOK asks access(2) whether a file may be executed.
const xOK = 1

// hostLookPath finds an executable file called name on pathEnv. With dir
// "" only absolute entries are searched; otherwise only relative ones,
// taken from dir.
func hostLookPath(name, pathEnv, dir string) string {
	for _, d := range filepath.SplitList(pathEnv) {
		if filepath.IsAbs(d) != (dir == "") {
			continue
		}
		p := filepath.Join(dir, d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && syscall.Access(p, xOK) == nil {
			return p
		}
	}
	return ""
}

type cmdResolver struct {
	pol  *Policy
	home string
	path string
	exp  *CommandExposure
}

// expose follows p to the file it names, plans its install tree, and does
// the same for its "#!" interpreter.
func (r *cmdResolver) expose(p string, depth int) error {
	final, err := r.follow(p)
	if err != nil || final == "" {
		return err
	}
	if depth == 0 {
		r.exp.Resolved = final
	}
	if !r.shown(final) {
		for _, t := range installTrees(final, r.home) {
			if err := r.check(t); err != nil {
				return err
			}
			r.exp.Trees = Union(r.exp.Trees, []string{t})
		}
	}
	if depth >= maxCommandInterps {
		return nil
	}
	interp, arg := readShebang(final)
	if filepath.Base(interp) == "env" && arg != "" && !strings.HasPrefix(arg, "-") && !strings.Contains(arg, "/") {
		if q := hostLookPath(arg, r.path, ""); q != "" {
			return r.expose(q, depth+1)
		}
		return nil
	}
	if filepath.IsAbs(interp) {
		if err := r.expose(interp, depth+1); err != nil {
			return err
		}
	}
	if !shellInterp(interp, arg) {
		return nil
	}
	for _, target := range r.shimTargets(final) {
		if err := r.expose(target, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// maxShimScript bounds how much of a shell script is read for the
// programs it execs.
const maxShimScript = 8 << 10

// shellInterp reports whether a "#!" line runs a POSIX shell.
func shellInterp(interp, arg string) bool {
	if filepath.Base(interp) == "env" {
		interp = arg
	}
	switch filepath.Base(interp) {
	case "sh", "bash", "dash", "zsh", "ksh":
		return true
	}
	return false
}

// shimTargets are the programs a shell shim execs (the wrapper an
// installer leaves on PATH: npm's and pnpm's cmd-shims, an older Claude
// Code's ~/.claude/local/claude): the words of its `exec` lines that name
// an existing file, with $basedir or the script's own directory resolved,
// and the bare program names its PATH finds. It only reads the script;
// what it names is shown read-only and checked like any install tree.
func (r *cmdResolver) shimTargets(script string) []string {
	b := readPrefix(script, maxShimScript)
	dir := filepath.Dir(script)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		words := strings.Fields(strings.TrimSpace(line))
		if len(words) < 2 || words[0] != "exec" {
			continue
		}
		for i, w := range words[1:] {
			w = strings.Trim(w, `"'`)
			for _, v := range []string{"$basedir", "${basedir}"} {
				if strings.HasPrefix(w, v+"/") {
					w = dir + w[len(v):]
				}
			}
			switch {
			case filepath.IsAbs(w):
				if fi, err := os.Stat(w); err == nil && fi.Mode().IsRegular() {
					out = append(out, filepath.Clean(w))
				}
			case i == 0 && !strings.ContainsAny(w, "/$`"):
				if q := hostLookPath(w, r.path, ""); q != "" {
					out = append(out, q)
				}
			}
		}
	}
	return out
}

// readPrefix reads at most n bytes of a regular file: a long script's
// head is where a shim's exec lines are.
func readPrefix(path string, n int) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	buf := make([]byte, n)
	m, _ := io.ReadFull(f, buf)
	return buf[:m]
}

// follow walks p's symlink chain to the file it ends in, recording the
// links the jail would hide. It returns "" when the chain enters a tree
// the jail can write, or breaks.
func (r *cmdResolver) follow(p string) (string, error) {
	p = filepath.Clean(p)
	for range 40 {
		if r.writable(p) {
			return "", nil
		}
		if store := r.credStore(p); store != "" {
			return "", r.storeRefusal(p, store)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return "", nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", nil
		}
		next := target
		if !filepath.IsAbs(target) {
			dir := filepath.Dir(p)
			real, err := filepath.EvalSymlinks(dir)
			if err != nil {
				return "", nil
			}
			next = filepath.Join(real, target)
			if real != dir { // the link inside sits in a real directory
				target = next
			}
		}
		if !r.shown(p) {
			r.exp.Links = append(r.exp.Links, CommandLink{Path: p, Target: target})
		}
		p = filepath.Clean(next)
	}
	return "", fmt.Errorf("resolving %s: too many levels of symbolic links", r.exp.Name)
}

// dropCovered drops the links that lie in a tree made readable: the tree
// brings them.
func (r *cmdResolver) dropCovered() {
	var keep []CommandLink
	for _, l := range r.exp.Links {
		if !underAny(l.Path, r.exp.Trees) {
			keep = append(keep, l)
		}
	}
	r.exp.Links = keep
}

// shown reports whether the jail shows a host path as it is: system
// directories, the project, literal allowed paths, trees already planned.
func (r *cmdResolver) shown(p string) bool {
	if underAny(p, SystemPaths) || r.writable(p) || underAny(p, r.exp.Trees) {
		return true
	}
	for _, a := range r.pol.AllowRead {
		if !HasMeta(a) && Under(p, a) || HasMeta(a) && matchesOrParent(a, p) {
			return true
		}
	}
	return false
}

// matchesOrParent reports whether the pattern matches p or a directory
// above it.
func matchesOrParent(pattern, p string) bool {
	for q := p; q != "/" && q != "."; q = filepath.Dir(q) {
		if MatchPath(pattern, q) {
			return true
		}
	}
	return false
}

// writable reports whether p lies in a tree the jail may write (an
// allowWrite glob by its fixed part, to err on the side of not following).
func (r *cmdResolver) writable(p string) bool {
	if Under(p, r.pol.ProjectRoot) {
		return true
	}
	for _, w := range r.pol.AllowWrite {
		if HasMeta(w) {
			w = GlobBase(w)
		}
		if Under(p, w) {
			return true
		}
	}
	return false
}

// credStore returns the credential store or denied path p lies in (a
// denied glob by what it matches: p or a parent of p), "" if none.
func (r *cmdResolver) credStore(p string) string {
	lits, globs := r.denied()
	for _, d := range lits {
		if Under(p, d) {
			return d
		}
	}
	for _, g := range globs {
		if matchesOrParent(g, p) {
			return g
		}
	}
	return ""
}

// denied are the paths and patterns the jail masks.
func (r *cmdResolver) denied() (lits, globs []string) {
	ca := filepath.Join(UserConfigDir(r.home, os.Getenv), "ca")
	for _, d := range DeniedPatterns(r.pol, r.home, ca, StateDir(r.home, os.Getenv)) {
		if HasMeta(d) {
			globs = append(globs, d)
		} else {
			lits = append(lits, filepath.Clean(d))
		}
	}
	return lits, globs
}

// check refuses a tree too wide to show by itself: the home or above, one
// holding a masked or protected path, or one with more than
// maxCommandTree entries.
func (r *cmdResolver) check(tree string) error {
	if store := r.credStore(tree); store != "" {
		return r.storeRefusal(tree, store)
	}
	why := ""
	switch {
	case tree == "/" || Under(r.home, tree):
		why = "it would show your whole home"
	case r.holdsProtected(tree) != "":
		why = "it holds " + r.holdsProtected(tree)
	case !treeWithin(tree, maxCommandTree):
		why = fmt.Sprintf("it has more than %d entries", maxCommandTree)
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("command %s resolves to %s, whose install tree %s jail does not show by itself (%s); allow what it needs with --allow-read PATH (or allowRead in jail.json)", r.exp.Name, r.exp.resolvedOr(tree), tree, why)
}

// holdsProtected returns a masked or protected path strictly inside tree.
func (r *cmdResolver) holdsProtected(tree string) string {
	paths, _ := r.denied() // denied globs' matches are masked in the tree anyway
	for _, rel := range HomeProtected {
		paths = append(paths, filepath.Join(r.home, rel))
	}
	for _, p := range paths {
		if p != tree && Under(p, tree) {
			return p
		}
	}
	return ""
}

func (r *cmdResolver) storeRefusal(p, store string) error {
	return fmt.Errorf("command %s resolves to %s, in %s, which jail keeps masked; move the program out of it, or run it by a path the jail shows", r.exp.Name, p, store)
}

func (c *CommandExposure) resolvedOr(p string) string {
	if c.Resolved != "" {
		return c.Resolved
	}
	return p
}

// installTrees are the host trees a program file needs: the package
// directory for a node package under a global prefix (lib/node_modules),
// the install prefix holding a local node_modules, a Python environment
// or installation for a file in its bin directory, else the file alone.
func installTrees(file, home string) []string {
	parts := strings.Split(file, "/")
	for i := 1; i < len(parts)-2; i++ {
		if parts[i] != "node_modules" {
			continue
		}
		if parts[i-1] != "lib" {
			return []string{strings.Join(parts[:i], "/")}
		}
		j := i + 1
		if strings.HasPrefix(parts[j], "@") && j+1 < len(parts)-1 {
			j++
		}
		return []string{strings.Join(parts[:j+1], "/")}
	}
	dir := filepath.Dir(file)
	if filepath.Base(dir) != "bin" {
		return []string{file}
	}
	prefix := filepath.Dir(dir)
	if _, err := os.Stat(filepath.Join(prefix, "pyvenv.cfg")); err == nil {
		return []string{prefix}
	}
	libs, _ := filepath.Glob(filepath.Join(prefix, "lib", "python3*"))
	if len(libs) == 0 {
		return []string{file}
	}
	if prefix == filepath.Join(home, ".local") { // pip --user: its site-packages, not all of ~/.local
		return append([]string{file}, libs...)
	}
	return []string{prefix}
}

// treeWithin reports whether tree has at most limit entries.
func treeWithin(tree string, limit int) bool {
	n := 0
	errStop := errors.New("stop")
	err := filepath.WalkDir(tree, func(string, fs.DirEntry, error) error {
		if n++; n > limit {
			return errStop
		}
		return nil
	})
	return err == nil
}

// readShebang returns the interpreter and optional argument of a "#!"
// line, "" when the file has none.
func readShebang(path string) (interp, arg string) {
	// As much as the kernel reads of a "#!" line; a FIFO or device under
	// the name reads as nothing rather than blocking.
	line, ok := bytes.CutPrefix(readPrefix(path, 256), []byte("#!"))
	if !ok {
		return "", ""
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(string(line))
	switch len(fields) {
	case 0:
		return "", ""
	case 1:
		return fields[0], ""
	}
	return fields[0], fields[1]
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if Under(p, d) {
			return true
		}
	}
	return false
}
