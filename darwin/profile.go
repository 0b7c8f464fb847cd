// Package darwin generates the macOS Seatbelt (SBPL) profile of a jail. It
// is pure: it turns a policy whose paths are already resolved into profile
// text and the parameters sandbox-exec binds into it, so it builds and is
// tested on any platform.
package darwin

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// SandboxExec is the fixed path of the Seatbelt launcher; it is never looked
// up in PATH, which the jailed project could influence.
const SandboxExec = "/usr/bin/sandbox-exec"

// Policy is what the profile allows. Every path is absolute and already
// resolved through symlinks (Seatbelt matches resolved paths: /tmp is
// /private/tmp on macOS). Paths are literal, whatever bytes they hold; globs
// are given apart, as a literal directory and a pattern below it.
type Policy struct {
	Project        string   // readable and writable root of the run
	Home           string   // the user's home: only its directory entry is visible
	Read           []string // readable (and executable) trees
	ReadGlobs      []Glob   // readable by pattern, each match with everything below it
	Write          []string // readable and writable trees, a private temp dir among them
	WriteGlobs     []Glob   // writable by pattern, each match with everything below it
	DenyRead       []string // masked: neither readable nor writable
	DenyGlobs      []Glob   // masked by pattern
	Protected      []string // read-only even inside writable trees, existing or not
	ProtectedGlobs []Glob   // read-only by pattern
	// NoCreate are names that cannot be created, by any spelling, when
	// missing (nor made by a rename onto them); what lies below them keeps
	// the rules above. A missing .git made by the command as a link or a
	// gitdir file would lead the host's git to hooks the command wrote.
	NoCreate []string
	// ProxyPort is the local proxy's port, reachable outbound on loopback;
	// 0 means no network at all: no outbound rule is written.
	ProxyPort int
	Published []int // loopback ports the command may listen on
	Forward   []int // the host's loopback ports the command may connect to
}

// Param is one -D NAME=value binding referenced in the profile as
// (param "NAME").
type Param struct {
	Name, Value string
}

// Profile is a generated Seatbelt profile and its parameters, in order.
type Profile struct {
	Text   string
	Params []Param
}

// Args is the sandbox-exec argument list running argv under the profile.
func (p Profile) Args(argv []string) []string {
	args := make([]string, 0, 2*len(p.Params)+3+len(argv))
	for _, prm := range p.Params {
		args = append(args, "-D", prm.Name+"="+prm.Value)
	}
	args = append(args, "-p", p.Text, "--")
	return append(args, argv...)
}

// Generate builds the profile of a policy. Rules that widen come first and
// rules that narrow last, because in SBPL the last matching rule wins.
func Generate(pol Policy) (Profile, error) {
	if err := check(pol); err != nil {
		return Profile{}, err
	}
	g := &gen{}
	g.line("(version 1)")
	g.line("(deny default)")
	g.comment("denied again by name: reading other processes and firmware variables")
	g.line("(deny process-info*)")
	g.line("(deny nvram*)")
	g.processes()
	g.system()
	g.devices()
	if err := g.userPaths(pol); err != nil {
		return Profile{}, err
	}
	g.network(pol)
	if err := g.masks(pol); err != nil {
		return Profile{}, err
	}
	if err := g.protect(pol); err != nil {
		return Profile{}, err
	}
	if err := g.ancestorsUnlink(); err != nil {
		return Profile{}, err
	}
	return Profile{Text: g.b.String(), Params: g.params}, nil
}

// check refuses a policy the profile cannot express faithfully.
func check(pol Policy) error {
	if !absClean(pol.Project) || !absClean(pol.Home) {
		return fmt.Errorf("seatbelt profile: project %q and home %q must be clean absolute paths", pol.Project, pol.Home)
	}
	for _, list := range [][]string{pol.Read, pol.Write, pol.DenyRead, pol.Protected} {
		for _, p := range list {
			if !absClean(p) {
				return fmt.Errorf("seatbelt profile: path %q is not a clean absolute path", p)
			}
		}
	}
	if pol.ProxyPort != 0 && !validPort(pol.ProxyPort) {
		return fmt.Errorf("seatbelt profile: proxy port %d out of range", pol.ProxyPort)
	}
	for _, p := range append(slices.Clone(pol.Published), pol.Forward...) {
		if !validPort(p) {
			return fmt.Errorf("seatbelt profile: port %d out of range", p)
		}
	}
	return nil
}

func absClean(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsAny(p, "\x00\n")
}

func validPort(p int) bool { return p > 0 && p < 65536 }

// gen accumulates profile lines and parameters.
type gen struct {
	b         strings.Builder
	params    []Param
	byValue   map[string]string // kind+value -> parameter name, so repeats share one
	counts    map[string]int
	ancestors []string // directories whose rename would move a protected path
}

func (g *gen) line(s string) { g.b.WriteString(s); g.b.WriteByte('\n') }

func (g *gen) comment(s string) { g.line("; " + s) }

// param binds value under a fresh name of the given kind and returns the
// (param "NAME") reference.
func (g *gen) param(kind, value string) string {
	if g.byValue == nil {
		g.byValue, g.counts = map[string]string{}, map[string]int{}
	}
	key := kind + "\x00" + value
	name, ok := g.byValue[key]
	if !ok {
		name = kind + "_" + strconv.Itoa(g.counts[kind])
		g.counts[kind]++
		g.byValue[key] = name
		g.params = append(g.params, Param{Name: name, Value: value})
	}
	return `(param "` + name + `")`
}

// rule writes (ACTION OPS FILTER...) with one filter a line.
func (g *gen) rule(head string, filters []string) {
	if len(filters) == 0 {
		return
	}
	g.line("(" + head)
	for _, f := range filters {
		g.line("  " + f)
	}
	g.line(")")
}

// paths turns paths into filters of one kind, sorted and without repeats.
func (g *gen) paths(filter, kind string, ps []string) []string {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, "("+filter+" "+g.param(kind, p)+")")
	}
	return out
}

func (g *gen) processes() {
	g.comment("processes: children inherit the profile; only processes of this jail are visible or signalled")
	g.line("(allow process-exec)")
	g.line("(allow process-fork)")
	g.line("(allow signal (target same-sandbox))")
	g.line("(allow process-info* (target same-sandbox))")
	g.line("(allow ipc-posix-sem)")
	g.line("(allow ipc-posix-shm-read-data ipc-posix-shm-write-data ipc-posix-shm-write-create)")
	g.comment("services: user lookup, logging, notifications, the per-user temp dir and certificate trust")
	filters := make([]string, 0, len(machServices))
	for _, s := range machServices {
		filters = append(filters, `(global-name "`+s+`")`)
	}
	g.rule("allow mach-lookup", filters)
	g.comment("sysctls a runtime reads about the machine, none about other processes")
	filters = filters[:0]
	for _, s := range sysctls {
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			filters = append(filters, `(sysctl-name-prefix "`+prefix+`")`)
		} else {
			filters = append(filters, `(sysctl-name "`+s+`")`)
		}
	}
	g.rule("allow sysctl-read", filters)
}

func (g *gen) system() {
	g.comment("system trees a toolchain reads")
	g.rule("allow file-read*", g.paths("subpath", "SYS", systemRead))
	g.rule("allow file-read*", g.paths("literal", "SYSFILE", systemFiles))
}

func (g *gen) devices() {
	g.comment("devices: the null, random and terminal devices; pseudo-terminals for interactive tools")
	g.rule("allow file-read* file-write-data file-ioctl", g.paths("literal", "DEV", devices))
	g.line("(allow pseudo-tty)")
	g.rule("allow file-read* file-write-data file-ioctl", []string{
		"(literal " + g.param("DEV", "/dev/ptmx") + ")",
		"(subpath " + g.param("DEV", "/dev/fd") + ")",
	})
	ttys := "(regex " + g.param("DEVRE", `^/dev/ttys[0-9]+$`) + ")"
	g.comment("terminals opened by name: read only the pseudo-terminals this jail made (the kernel gives their")
	g.comment("opener the pty extension), so no other terminal's typing can be read; written and controlled")
	g.comment("all, as the terminal the jail was started on was opened before the profile")
	g.line(`(allow file-read* file-write-data file-ioctl (require-all ` + ttys + ` (extension "com.apple.sandbox.pty")))`)
	g.rule("allow file-write-data file-ioctl", []string{ttys})
	g.comment("terminal: no typing into the terminal's input queue (TIOCSTI)")
	g.line("(deny file-ioctl (ioctl-command " + strconv.FormatUint(TIOCSTI, 10) + "))")
}

// TIOCSTI is _IOW('t', 114, char) on macOS: the ioctl that pushes bytes into a
// terminal's input queue.
const TIOCSTI = 0x80017472

func (g *gen) userPaths(pol Policy) error {
	g.comment("directory entries on the way to what is allowed, so path resolution works")
	var dirs []string
	for _, p := range append(append([]string{pol.Project, pol.Home}, pol.Read...), pol.Write...) {
		dirs = append(dirs, ancestors(p)...)
	}
	for _, gl := range append(slices.Clone(pol.ReadGlobs), pol.WriteGlobs...) {
		dirs = append(dirs, gl.base())
		dirs = append(dirs, ancestors(gl.base())...)
	}
	dirs = append(dirs, pol.Home)
	g.rule("allow file-read-metadata", g.paths("literal", "DIR", slices.DeleteFunc(dirs, func(d string) bool { return d == "/" })))
	g.comment("readable trees")
	read, err := g.globs("READRE", pol.ReadGlobs, false)
	if err != nil {
		return fmt.Errorf("seatbelt profile: allowRead: %w", err)
	}
	g.rule("allow file-read*", append(g.paths("subpath", "READ", pol.Read), read...))
	g.comment("the project and writable trees")
	g.rule("allow file-read* file-write*", []string{"(subpath " + g.param("PROJECT", pol.Project) + ")"})
	write, err := g.globs("WRITERE", pol.WriteGlobs, false)
	if err != nil {
		return fmt.Errorf("seatbelt profile: allowWrite: %w", err)
	}
	g.rule("allow file-read* file-write*", append(g.paths("subpath", "WRITE", pol.Write), write...))
	return nil
}

// globs turns globs into regex filters matching each match and everything
// below it (in every case when fold), sorted and without repeats.
func (g *gen) globs(kind string, globs []Glob, fold bool) ([]string, error) {
	res := make([]string, 0, len(globs))
	for _, gl := range globs {
		re, err := gl.treeRegex(fold)
		if err != nil {
			return nil, err
		}
		res = append(res, re)
	}
	return g.regexes(kind, res), nil
}

// regexes turns regexes into filters, sorted and without repeats.
func (g *gen) regexes(kind string, res []string) []string {
	res = slices.Clone(res)
	slices.Sort(res)
	out := make([]string, 0, len(res))
	for _, re := range slices.Compact(res) {
		out = append(out, "(regex "+g.param(kind, re)+")")
	}
	return out
}

// foldedPaths are the case-folded regexes of literal paths, each path alone
// or (tree) with everything below it.
func foldedPaths(ps []string, tree bool) ([]string, error) {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		re, err := pathRegex(p, tree, true)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

func (g *gen) network(pol Policy) {
	if pol.ProxyPort == 0 {
		g.comment("no connections in or out at all")
		return
	}
	g.comment("network: outbound only to the local proxy and forwarded ports; inbound only on published loopback ports")
	g.rule("allow network-outbound", portFilters("remote", append([]int{pol.ProxyPort}, pol.Forward...)))
	g.rule("allow network-bind network-inbound", portFilters("local", pol.Published))
}

// portFilters are (remote|local tcp "localhost:N") filters, sorted and
// without repeats.
func portFilters(side string, ports []int) []string {
	ports = slices.Clone(ports)
	slices.Sort(ports)
	var out []string
	for _, p := range slices.Compact(ports) {
		out = append(out, `(`+side+` tcp "localhost:`+strconv.Itoa(p)+`")`)
	}
	return out
}

func (g *gen) masks(pol Policy) error {
	g.comment("masks: denied to read and to write, whatever allowed them above")
	f, err := g.pathsAndGlobs("MASK", append(slices.Clone(systemMasks), pol.DenyRead...), pol.DenyGlobs)
	if err != nil {
		return fmt.Errorf("seatbelt profile: denyRead: %w", err)
	}
	g.rule("deny file-read* file-write*", f)
	return nil
}

func (g *gen) protect(pol Policy) error {
	g.comment("protected: read-only even inside writable trees, and not creatable when missing")
	f, err := g.pathsAndGlobs("PROTECT", pol.Protected, pol.ProtectedGlobs)
	if err != nil {
		return fmt.Errorf("seatbelt profile: protected: %w", err)
	}
	g.rule("deny file-write*", f)
	res, err := foldedPaths(createGuards(pol), false)
	if err != nil {
		return fmt.Errorf("seatbelt profile: not creatable: %w", err)
	}
	for _, p := range pol.NoCreate {
		g.ancestors = append(g.ancestors, ancestors(p)...)
	}
	if len(res) > 0 {
		g.comment("not creatable when missing, in any case: a directory renamed there, a link or a file would bring or redirect what the host runs")
		g.rule("deny file-write-create", g.regexes("NOCREATE", res))
	}
	return nil
}

// createGuards are NoCreate and the directories in a writable tree above
// each protected path (and each protected pattern's literal base): a rule
// follows names, and a rename checks only the names it moves, so a
// directory prepared elsewhere in the tree and renamed into a missing
// .claude or .git/modules would bring a settings file or hooks the rules
// below that name never saw written.
func createGuards(pol Policy) []string {
	writable := append([]string{pol.Project}, pol.Write...)
	dirs := slices.Clone(pol.NoCreate)
	for _, p := range pol.Protected {
		dirs = append(dirs, ancestors(p)...)
	}
	for _, gl := range pol.ProtectedGlobs {
		dirs = append(dirs, gl.base())
		dirs = append(dirs, ancestors(gl.base())...)
	}
	return slices.DeleteFunc(dirs, func(d string) bool {
		for _, w := range writable {
			if strings.HasPrefix(d, strings.TrimSuffix(w, "/")+"/") {
				return false
			}
		}
		return !slices.Contains(pol.NoCreate, d)
	})
}

// pathsAndGlobs turns paths and globs into case-folded regex filters, each
// matching the path and everything below it, and records the directories
// above each so they cannot be renamed to carry the path out from under
// its rule. A deny rule matched byte for byte would not hold on the default
// macOS volume, where .GIT/hooks or .Env opens the same file as
// .git/hooks or .env.
func (g *gen) pathsAndGlobs(kind string, ps []string, globs []Glob) ([]string, error) {
	for _, p := range ps {
		g.ancestors = append(g.ancestors, ancestors(p)...)
	}
	res, err := foldedPaths(ps, true)
	if err != nil {
		return nil, err
	}
	for _, gl := range globs {
		g.ancestors = append(g.ancestors, gl.base())
		g.ancestors = append(g.ancestors, ancestors(gl.base())...)
		re, err := gl.treeRegex(true)
		if err != nil {
			return nil, err
		}
		res = append(res, re)
	}
	return g.regexes(kind+"RE", res), nil
}

func (g *gen) ancestorsUnlink() error {
	g.comment("no renaming a directory above a masked or protected path, in any case")
	dirs := slices.DeleteFunc(slices.Clone(g.ancestors), func(d string) bool { return d == "/" })
	res, err := foldedPaths(dirs, false)
	if err != nil {
		return fmt.Errorf("seatbelt profile: %w", err)
	}
	g.rule("deny file-write-unlink", g.regexes("ABOVE", res))
	return nil
}

// ancestors lists the directories above p, root excluded.
func ancestors(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append(out, d)
	}
	return out
}
