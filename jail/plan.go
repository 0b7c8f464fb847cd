package jail

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jailsh/jail/jail/inside"
	"github.com/jailsh/jail/jail/seccomp"
)

// InitPath is where jail's init binary is bound, read-only, inside the jail.
const InitPath = inside.InitPath

// Paths and ports of the network bridge inside the jail.
const (
	NetDir       = "/run/jail/net" // the host proxy's unix sockets, read-only
	PubDir       = "/run/jail/pub" // sockets init listens on for published ports
	CABundlePath = "/run/jail/ca.pem"
	HTTPPort     = 3128 // the bridge's HTTP proxy port on the jail's loopback
	SOCKSPort    = 1080 // the bridge's SOCKS5 port
)

// NetPlan is the network side of a plan: the host proxy's policy and where
// its sockets live, and the relays init runs inside the jail.
type NetPlan struct {
	SessionDir string // host: http.sock, socks.sock, pub/
	CADir      string // host: the per-user CA
	StateDir   string // host: the decision log
	Bundle     string // host: system CAs + the jail CA
	Rules      NetworkConfig
	Publish    []int
	Forward    []int
	Relays     []Relay  // run by init inside the jail
	Registries []string // allowed because the command's toolchain uses them
	// DenyCommands are command.deny rules the proxy also enforces on the
	// wire (git push over smart HTTP and SSH, npm publish).
	DenyCommands []string
}

// PathInfo is what jail learned about one host path before planning.
type PathInfo struct {
	Exists   bool
	Dir      bool
	Link     string // the symlink's target as written, when the path is a symlink
	Resolved string // the path with every symlink resolved (bind sources use it)
	// Unreadable: the user can neither read it nor, not owning it, make
	// it readable; masking it would only cost start-up time.
	Unreadable bool
}

// Facts are everything the planner needs to know about the machine, gathered
// before planning so that planning is pure and testable.
type Facts struct {
	UID, GID    int
	Home        string
	Cwd         string
	Exe         string // host path of the jail binary, bound in as init
	LandlockABI int    // 0 when Landlock is unavailable
	Seccomp     bool   // the kernel supports seccomp filters
	// SeccompNotify: the kernel supports seccomp user notification, which
	// command rules need.
	SeccompNotify bool

	Paths     map[string]PathInfo // every literal path of interest
	Matches   map[string][]string // glob pattern -> existing matching paths
	HardLinks []string            // visible files that are hard links to denied files

	Env          []string // the host environment
	Session      string   // random session id
	SecretSuffix string   // random suffix of this session's placeholders

	SessionDir string // host directory for this session's sockets
	CADir      string // host directory of the per-user CA
	StateDir   string // host directory of the decision log
	Bundle     string // host path of the CA bundle the jail trusts
}

func (f *Facts) info(p string) PathInfo { return f.Paths[p] }

// systemPaths are bound read-only when they exist; symlinks (merged /usr)
// are recreated as symlinks.
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys/devices/system/cpu"}

// SystemDirs are the system paths every jail may read: what a learning run
// reads there needs no profile.
func SystemDirs() []string { return append([]string(nil), systemPaths...) }

// ReadOnlyHome are the home paths every jail keeps read-only, whatever a
// policy says: a learning run never proposes writing them.
func ReadOnlyHome(home string) []string {
	out := make([]string, 0, len(homeProtected))
	for _, rel := range homeProtected {
		out = append(out, filepath.Join(home, rel))
	}
	return append(out, AgentCommandPaths(home)...)
}

// systemDeny are host files that must stay unreadable even though /etc is
// visible; they matter most when jail runs as root.
var systemDeny = []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh/ssh_host_*key", "/etc/ssl/private", "/etc/security/opasswd", "/etc/sudoers", "/etc/sudoers.d"}

// homeDeny are credential stores in the home directory; they stay masked even
// when a policy makes a parent directory visible.
var homeDeny = []string{
	".ssh/**", ".aws/**", ".gnupg/**", ".kube/**", ".docker/**", ".azure/**", ".config/gcloud/**",
	".password-store/**", ".local/share/keyrings/**", ".netrc", ".git-credentials", ".npmrc", ".pypirc",
	".cargo/credentials", ".cargo/credentials.toml", ".config/gh/hosts.yml", ".config/jail/ca/**", ".local/state/jail/**",
}

// projectProtected are paths that stay read-only inside the writable project
// because a later, unjailed program would execute what they contain.
var projectProtected = []string{
	".git/hooks", ".git/config", ".git/info", ".gitmodules", ".vscode", ".idea",
	".claude/settings*.json", ".claude/commands", ".claude/agents", ".mcp.json", ".envrc", "**/jail.json",
}

// homeProtected are read-only whenever a policy makes them writable.
var homeProtected = []string{
	".ssh", ".gitconfig", ".config/git", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".config/fish", ".inputrc", ".config/jail",
}

// Interest lists the literal paths to stat and the glob patterns to expand
// for a policy; Gather uses it and so does a test that checks Build asks
// only about what it was told.
func Interest(pol *Policy, home string) (paths, patterns []string) {
	add := func(list ...string) {
		for _, p := range list {
			if HasMeta(p) {
				patterns = append(patterns, p)
			} else {
				paths = append(paths, p)
			}
		}
	}
	add(systemPaths...)
	add(systemDeny...)
	add("/etc/resolv.conf")
	add(pol.ProjectRoot, home)
	for _, p := range homeDeny {
		add(filepath.Join(home, p))
	}
	for _, p := range homeProtected {
		add(filepath.Join(home, p))
	}
	add(agentInterest(home)...)
	for _, p := range projectProtected {
		add(filepath.Join(pol.ProjectRoot, p))
	}
	add(secretFiles(pol)...)
	add(pol.AllowRead...)
	add(pol.AllowWrite...)
	add(pol.DenyRead...)
	add(pol.DenyWrite...)
	return union(nil, paths), union(nil, patterns)
}

// Op is one step of the filesystem plan, executed in order by bubblewrap.
type Op struct {
	Kind string // ro-bind, bind, symlink, tmpfs, proc, dev, remount-ro, mask
	Src  string
	Dest string
	Why  string
}

// Args renders the op as bubblewrap arguments.
func (o Op) Args() []string {
	switch o.Kind {
	case "ro-bind", "bind", "symlink":
		return []string{"--" + o.Kind, o.Src, o.Dest}
	case "mask":
		return []string{"--ro-bind", "/dev/null", o.Dest}
	case "mask-dir":
		return []string{"--perms", "0555", "--tmpfs", o.Dest, "--remount-ro", o.Dest}
	case "home":
		return []string{"--perms", "0700", "--tmpfs", o.Dest}
	}
	return []string{"--" + o.Kind, o.Dest}
}

func (o Op) String() string {
	s := fmt.Sprintf("%-10s %s", o.Kind, o.Dest)
	if o.Src != "" && o.Src != o.Dest {
		s += " <- " + o.Src
	}
	if o.Why != "" {
		s += "  # " + o.Why
	}
	return s
}

// LandlockRule grants an access class on a path inside the jail.
type LandlockRule = inside.LandlockRule

// Relay joins connections from a listening address to a dialled one.
type Relay = inside.Relay

// Plan is the complete, deterministic description of one jail.
type Plan struct {
	Argv        []string
	Session     string
	Cwd         string
	ProjectRoot string
	Sources     []string
	Profiles    []string

	Namespaces []string // bubblewrap flags before the filesystem ops
	Ops        []Op
	Landlock   []LandlockRule
	LandlockV  int // ABI version the rules are written for; 0 = not applied
	Seccomp    []seccomp.Rule
	Env        EnvPlan
	Net        *NetPlan // nil: loopback only, no proxy (--no-network)
	// Mode is "learning" or "watch"; OverlayHome is then the home init
	// shows through an overlay whose writes are thrown away.
	Mode        string
	OverlayHome string

	// Secrets: the variables that became placeholders and where each may
	// be injected; EnvFiles are .env files shown inside as masked copies.
	// Command rules, enforced at every exec by the host's supervisor and,
	// for git push and npm publish, on the wire by the proxy.
	CommandDeny, CommandAllow []string
	StateDir                  string // host: the decision log

	SecretSuffix string
	Secrets      []SecretBinding
	SecretEnv    map[string][]string // secrets.env bindings, for names found in .env files
	EnvFiles     []EnvFile
	// AgentFiles are agent files shown inside as session copies and
	// merged back after exit without their command-bearing keys.
	AgentFiles []AgentFile

	// Missing lists protected paths that did not exist at start inside a
	// writable tree; jail checks them after the command exits.
	Missing []string
	// CreateDirs are allowWrite directories jail creates before starting.
	CreateDirs []string
	// WatchGlobs are protected glob patterns whose matches at start are
	// in Existing; new matches after exit are reported the same way.
	WatchGlobs []string
	Existing   []string
	Warnings   []string
	Notes      []string // shown by jail plan only
	GaveUp     []string // protections dropped under --best-effort
}

// EnvFile is a .env file the jail sees as a masked copy.
type EnvFile struct {
	Path string // host path, and where the copy is bound inside
	Copy string // host path of the masked copy, written before the jail starts
}

// ErrUnsupported marks a protection the machine lacks.
var ErrUnsupported = errors.New("unsupported")

// ExitError is a failure of jail itself (or of starting the command) that
// carries the exit code jail should end with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Build turns a resolved policy and the gathered facts into a plan.
func Build(pol *Policy, f *Facts, argv []string) (*Plan, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command given; usage: jail [flags] [--] CMD [ARGS...] or jail -c 'STRING'")
	}
	root := pol.ProjectRoot
	if root == "/" || under(f.Home, root) {
		return nil, fmt.Errorf("refusing to use %s as the project root: it contains your home directory; run jail from inside a project directory (or put a jail.json there)", root)
	}
	p := &Plan{Argv: argv, Session: f.Session, Cwd: f.Cwd, ProjectRoot: root, Sources: pol.Sources, Profiles: pol.Profiles}
	if !under(f.Cwd, root) {
		p.Cwd = root
	}

	p.Namespaces = []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup",
		"--disable-userns", "--die-with-parent", "--as-pid-1", "--cap-drop", "ALL",
		"--uid", fmt.Sprint(f.UID), "--gid", fmt.Sprint(f.GID), "--hostname", "jail",
	}
	if pol.Mode != "" {
		// init mounts the home overlay in a mount namespace of its own,
		// then drops these before anything else runs.
		p.Mode, p.OverlayHome = pol.Mode, f.Home
		p.Namespaces = append(p.Namespaces, "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_DAC_OVERRIDE", "--cap-add", "CAP_SETPCAP")
	}

	switch {
	case f.LandlockABI >= 1:
		p.LandlockV = min(f.LandlockABI, 7)
	case pol.BestEffort:
		p.GaveUp = append(p.GaveUp, "Landlock (the kernel has none; only the mount namespace limits files)")
	default:
		return nil, fmt.Errorf("%w: Landlock is not available on this kernel; use Linux >= 5.13 with Landlock enabled (lsm=landlock,...), or run with --best-effort to accept weaker isolation", ErrUnsupported)
	}
	if !f.Seccomp {
		if !pol.BestEffort {
			return nil, fmt.Errorf("%w: seccomp filters are not available on this kernel; enable CONFIG_SECCOMP_FILTER, or run with --best-effort to accept weaker isolation", ErrUnsupported)
		}
		p.GaveUp = append(p.GaveUp, "seccomp (no syscall filter: ptrace, mount, bpf, TIOCSTI… stay reachable)")
	} else {
		p.Seccomp = seccomp.DefaultRules()
	}

	// allowWrite directories under the home that do not exist yet (an
	// agent's state directory on first use) are created before the jail
	// starts, so that what the agent writes there persists as the policy
	// says; a path that looks like a file is not guessed at.
	if fresh := creatableDirs(pol.AllowWrite, f); len(fresh) > 0 {
		g := *f
		g.Paths = make(map[string]PathInfo, len(f.Paths)+len(fresh))
		for k, v := range f.Paths {
			g.Paths[k] = v
		}
		for _, d := range fresh {
			g.Paths[d] = PathInfo{Exists: true, Dir: true}
		}
		f = &g
		p.CreateDirs = fresh
	}

	var base, protect, masks []Op
	type bind struct {
		dest, src string
		writable  bool
	}
	var binds []bind // host-backed trees, for visibility checks

	for _, sp := range systemPaths {
		in := f.info(sp)
		switch {
		case !in.Exists:
		case in.Link != "":
			base = append(base, Op{Kind: "symlink", Src: in.Link, Dest: sp})
		case in.Dir:
			base = append(base, Op{Kind: "ro-bind", Src: sp, Dest: sp, Why: "system"})
			binds = append(binds, bind{sp, sp, false})
			p.Landlock = append(p.Landlock, LandlockRule{Path: sp, Access: "read"})
		}
	}
	base = append(base,
		Op{Kind: "proc", Dest: "/proc"},
		Op{Kind: "dev", Dest: "/dev"},
		Op{Kind: "tmpfs", Dest: "/tmp", Why: "private"},
		Op{Kind: "home", Dest: f.Home, Why: "throwaway home"},
		Op{Kind: "ro-bind", Src: f.Exe, Dest: InitPath, Why: "jail init"},
	)
	if p.OverlayHome != "" {
		base = append(base,
			Op{Kind: "ro-bind", Src: f.Home, Dest: inside.OverlayLower, Why: "real home: the overlay's lower layer, covered by init"},
			Op{Kind: "dir", Dest: inside.OverlayWork, Why: "the overlay's upper layer (memory)"},
		)
	}
	p.Landlock = append(p.Landlock,
		// Listing directories reveals only names the mount view already shows.
		LandlockRule{Path: "/", Access: "list"},
		LandlockRule{Path: "/proc", Access: "proc"},
		LandlockRule{Path: "/dev", Access: "dev"},
		LandlockRule{Path: "/dev/shm", Access: "write"},
		LandlockRule{Path: "/dev/pts", Access: "tty"},
		LandlockRule{Path: "/dev/ptmx", Access: "tty", File: true},
		LandlockRule{Path: "/dev/tty", Access: "tty", File: true},
		LandlockRule{Path: "/tmp", Access: "write"},
		LandlockRule{Path: f.Home, Access: "write"},
		LandlockRule{Path: InitPath, Access: "read", File: true},
	)

	expand := func(list []string) []string {
		var out []string
		for _, pat := range list {
			if HasMeta(pat) {
				out = append(out, f.Matches[pat]...)
			} else if f.info(pat).Exists {
				out = append(out, pat)
			}
		}
		return out
	}
	addBind := func(path string, writable bool, why string) {
		in := f.info(path)
		src := path
		if in.Resolved != "" {
			src = in.Resolved
		}
		if path == "/" || src == "/" {
			p.Warnings = append(p.Warnings, fmt.Sprintf("ignored %s: exposing / is not allowed", path))
			return
		}
		kind, access := "ro-bind", "read"
		if writable {
			kind, access = "bind", "write"
		}
		base = append(base, Op{Kind: kind, Src: src, Dest: path, Why: why})
		binds = append(binds, bind{path, src, writable})
		p.Landlock = append(p.Landlock, LandlockRule{Path: path, Access: access, File: !in.Dir && in.Exists})
	}
	if p.OverlayHome != "" {
		// The whole real home is visible (through the overlay, writable
		// but thrown away): every credential store in it is masked and
		// every delayed-escape file re-bound read-only, as in any
		// writable tree.
		binds = append(binds, bind{f.Home, f.Home, true})
	}
	writeSet := map[string]bool{}
	addBind(root, true, "project")
	writeSet[root] = true
	for _, w := range expand(pol.AllowWrite) {
		if !writeSet[w] && !coveredBy(w, writeSet) {
			addBind(w, true, "allowWrite")
			writeSet[w] = true
		}
	}
	for _, r := range expand(pol.AllowRead) {
		if !writeSet[r] && !coveredBy(r, writeSet) {
			addBind(r, false, "allowRead")
		}
	}
	for _, pat := range pol.AllowWrite {
		if !HasMeta(pat) && !f.info(pat).Exists {
			p.Notes = append(p.Notes, fmt.Sprintf("allowWrite %s does not exist; skipped", pat))
		}
	}

	// cover returns the bind that covers a path inside the jail: the
	// deepest one containing it (later, deeper mounts hide earlier ones).
	cover := func(path string) (bind, bool) {
		var best bind
		found := false
		for _, b := range binds {
			if under(path, b.dest) && (!found || len(b.dest) > len(best.dest)) {
				best, found = b, true
			}
		}
		return best, found
	}
	visible := func(path string) (seen, writable bool) {
		b, ok := cover(path)
		return ok, ok && b.writable
	}
	// inJail returns where a host path that must be masked or made
	// read-only appears inside the jail. Symlinks are resolved on the
	// host: the jail mirrors host paths, so a link's target is protected
	// where it is mounted, and a target outside every bind needs nothing
	// (the link dangles inside). A path under a bind made through a
	// symlink (allowRead ~/.config/gh -> /data/gh) keeps its own path.
	inJail := func(path string) (dest, src string, ok bool) {
		in := f.info(path)
		if !in.Exists {
			return "", "", false
		}
		if in.Resolved == "" || in.Resolved == path {
			_, ok := cover(path)
			return path, path, ok
		}
		if _, ok := cover(in.Resolved); ok {
			return in.Resolved, in.Resolved, true
		}
		if b, ok := cover(path); ok && b.src != b.dest && in.Link == "" {
			return path, in.Resolved, true
		}
		return "", "", false
	}

	// Read-only re-binds: denyWrite and the delayed-escape paths.
	var roPaths []string
	var protectedLiteral []string
	for _, rel := range projectProtected {
		protectedLiteral = append(protectedLiteral, filepath.Join(root, rel))
	}
	for _, rel := range homeProtected {
		protectedLiteral = append(protectedLiteral, filepath.Join(f.Home, rel))
	}
	protectedLiteral = append(protectedLiteral, AgentCommandPaths(f.Home)...)
	for _, pp := range protectedLiteral {
		if HasMeta(pp) {
			if _, w := visible(GlobBase(pp)); w {
				p.WatchGlobs = append(p.WatchGlobs, pp)
				p.Existing = append(p.Existing, f.Matches[pp]...)
			}
			roPaths = append(roPaths, f.Matches[pp]...)
			continue
		}
		if _, w := visible(pp); w {
			if f.info(pp).Exists {
				roPaths = append(roPaths, pp)
			} else if p.OverlayHome == "" || !under(pp, f.Home) {
				// (What a learning run creates in the home stays in the
				// overlay: it cannot reach the disk to be reported.)
				p.Missing = append(p.Missing, pp)
			}
		}
	}
	roPaths = append(roPaths, expand(pol.DenyWrite)...)
	roSet := map[string]bool{}
	for _, rp := range roPaths {
		dest, src, ok := inJail(rp)
		if _, w := visible(dest); ok && w && !roSet[dest] {
			roSet[dest] = true
			protect = append(protect, Op{Kind: "ro-bind", Src: src, Dest: dest, Why: "read-only"})
		}
	}

	// Masks: denyRead, the system and home credential stores, hard links.
	denyPats := deniedPatterns(pol, f.Home, f.CADir, f.StateDir)
	maskSet := map[string]bool{}
	var maskPaths []string
	candidates := append(expand(denyPats), f.HardLinks...)
	sort.Strings(candidates) // parents first, so a masked directory covers its contents
	for i, m := range candidates {
		if dest, _, ok := inJail(m); ok && !f.info(m).Unreadable {
			candidates[i] = dest
		} else {
			candidates[i] = ""
		}
	}
	sort.Strings(candidates)
	for _, m := range candidates {
		if m != "" && !maskSet[m] && !coveredBy(m, maskSet) {
			maskSet[m] = true
			maskPaths = append(maskPaths, m)
		}
	}
	for _, m := range maskPaths {
		kind := "mask"
		if f.info(m).Dir {
			kind = "mask-dir"
		}
		masks = append(masks, Op{Kind: kind, Dest: m, Why: "denyRead"})
	}

	var jailVars map[string]string
	if !pol.NoNetwork {
		var netOps []Op
		p.Net, netOps, jailVars = planNetwork(pol, f)
		base = append(base, netOps...)
		p.Landlock = append(p.Landlock,
			LandlockRule{Path: NetDir, Access: "read"},
			LandlockRule{Path: PubDir, Access: "write"},
			LandlockRule{Path: CABundlePath, Access: "read", File: true},
		)
	}

	sortOps(base)
	sortOps(protect)
	p.Ops = append(append(base, protect...), masks...)
	sort.SliceStable(p.Landlock, func(i, j int) bool { return p.Landlock[i].Path < p.Landlock[j].Path })

	p.CommandDeny, p.CommandAllow = pol.Command.Deny, pol.Command.Allow
	if len(p.CommandDeny) > 0 && !f.SeccompNotify {
		if !pol.BestEffort {
			return nil, fmt.Errorf("%w: command.deny needs seccomp user notification, which this kernel lacks (Linux >= 5.0); remove the rules or run with --best-effort", ErrUnsupported)
		}
		p.GaveUp = append(p.GaveUp, "command rules (no seccomp user notification: "+strings.Join(p.CommandDeny, ", ")+" not enforced at exec)")
		p.CommandDeny, p.CommandAllow = nil, nil
	}
	p.StateDir = f.StateDir
	p.Env = PlanEnv(f.Env, pol, f.SecretSuffix, f.Session, jailVars)
	p.SecretSuffix = f.SecretSuffix
	p.SecretEnv = pol.Secrets.Env
	p.Secrets = Bindings(p.Env.Placeholders, pol)

	// .env files: a masked copy bound read-only over each visible one that
	// denyRead does not already hide entirely.
	var envFiles []string
	for _, pat := range secretFiles(pol) {
		if HasMeta(pat) {
			envFiles = append(envFiles, f.Matches[pat]...)
		} else {
			envFiles = append(envFiles, pat)
		}
	}
	sort.Strings(envFiles)
	for _, ef := range union(nil, envFiles) {
		in := f.info(ef)
		if !in.Exists || in.Dir || in.Link != "" || in.Unreadable || maskSet[ef] || coveredBy(ef, maskSet) {
			continue
		}
		if _, ok := cover(ef); !ok {
			continue
		}
		cp := filepath.Join(f.SessionDir, fmt.Sprintf("env-%d", len(p.EnvFiles)))
		p.EnvFiles = append(p.EnvFiles, EnvFile{Path: ef, Copy: cp})
		p.Ops = append(p.Ops, Op{Kind: "ro-bind", Src: cp, Dest: ef, Why: "secrets masked"})
	}

	// Agent files the agent rewrites as it runs: a session copy wherever
	// the jail may write the file.
	var agentOps []Op
	p.AgentFiles, agentOps = planAgentFiles(f.Home, f.SessionDir, func(path string) (string, string, bool) {
		in := f.info(path)
		dest, host := path, path
		if in.Resolved != "" {
			host = in.Resolved
		}
		b, ok := cover(path)
		if ok && b.dest != path && host != path {
			dest = host // a symlink in a visible tree: the jail writes its target
			b, ok = cover(dest)
		}
		shut := roSet[dest] || coveredBy(dest, roSet) || maskSet[dest] || coveredBy(dest, maskSet)
		thrownAway := p.OverlayHome != "" && b.dest == f.Home
		return dest, host, ok && b.writable && in.Exists && !in.Dir && !in.Unreadable && !shut && !thrownAway
	})
	p.Ops = append(p.Ops, agentOps...)
	return p, nil
}

// deniedPatterns are the paths and globs the jail masks: the system and
// home credential stores, the policy's denyRead, and jail's own CA key and
// decision log, wherever XDG puts them.
func deniedPatterns(pol *Policy, home, caDir, stateDir string) []string {
	out := append([]string{}, systemDeny...)
	for _, rel := range homeDeny {
		out = append(out, filepath.Join(home, rel))
	}
	out = append(out, pol.DenyRead...)
	for _, d := range []string{caDir, stateDir} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// coveredBy reports whether p lies strictly below one of the set's paths.
func coveredBy(p string, set map[string]bool) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if set[d] {
			return true
		}
		if d == "/" || d == "." {
			return false
		}
	}
}

// sortOps orders ops so that every parent is mounted before its children.
func sortOps(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Dest < ops[j].Dest })
}

// BwrapArgs is the bubblewrap command line of the plan, without the command.
func (p *Plan) BwrapArgs() []string {
	args := append([]string{}, p.Namespaces...)
	for _, op := range p.Ops {
		args = append(args, op.Args()...)
	}
	return append(args, "--chdir", p.Cwd)
}

// String renders the plan for `jail plan` and golden files.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "command     %s\n", strings.Join(quoteAll(p.Argv), " "))
	fmt.Fprintf(&b, "project     %s\n", p.ProjectRoot)
	if p.Cwd != p.ProjectRoot {
		fmt.Fprintf(&b, "cwd         %s\n", p.Cwd)
	}
	if len(p.Profiles) > 0 {
		fmt.Fprintf(&b, "profiles    %s\n", strings.Join(p.Profiles, ", "))
	}
	for _, s := range p.Sources {
		fmt.Fprintf(&b, "config      %s\n", s)
	}
	b.WriteString("namespaces  user pid ipc uts net(loopback only) cgroup; no capabilities; no new user namespaces\n")
	if p.Mode != "" {
		fmt.Fprintf(&b, "mode        %s: %s seen through an overlay whose writes are thrown away (init mounts it, then drops its capabilities); network unknown: allow, logged; every access traced\n", p.Mode, p.OverlayHome)
	}
	b.WriteString("\nfilesystem (bubblewrap, in order)\n")
	for _, op := range p.Ops {
		fmt.Fprintf(&b, "  %s\n", op)
	}
	if p.LandlockV > 0 {
		fmt.Fprintf(&b, "\nlandlock (ABI %d; everything else denied; abstract unix sockets and signals scoped)\n", p.LandlockV)
		for _, r := range p.Landlock {
			fmt.Fprintf(&b, "  %-6s %s\n", r.Access, r.Path)
		}
	}
	if len(p.Seccomp) > 0 {
		b.WriteString("\nseccomp (native architecture only; default allow)\n")
		for _, r := range p.Seccomp {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	if n := p.Net; n != nil {
		b.WriteString("\nnetwork (host proxy; every connection decided and logged)\n")
		unknown := n.Rules.Unknown
		if unknown == "" {
			unknown = "deny"
		}
		fmt.Fprintf(&b, "  allow:   %s\n", orNone(n.Rules.Allow))
		if len(n.Registries) > 0 {
			fmt.Fprintf(&b, "           (registries from the toolchain's configuration: %s)\n", strings.Join(n.Registries, " "))
		}
		fmt.Fprintf(&b, "  deny:    %s\n", orNone(n.Rules.Deny))
		fmt.Fprintf(&b, "  unknown: %s\n", unknown)
		for _, h := range sortedKeys(n.Rules.Hosts) {
			fmt.Fprintf(&b, "  hosts:   %s -> %s\n", h, n.Rules.Hosts[h])
		}
		if len(n.Rules.Passthrough) > 0 {
			fmt.Fprintf(&b, "  not intercepted: %s\n", strings.Join(n.Rules.Passthrough, " "))
		}
		for _, r := range n.Relays {
			fmt.Fprintf(&b, "  relay    %s\n", r)
		}
	} else {
		b.WriteString("\nnetwork: none (loopback only)\n")
	}
	b.WriteString("\nenvironment\n")
	fmt.Fprintf(&b, "  placeholders: %s\n", orNone(p.Env.Placeholders))
	fmt.Fprintf(&b, "  dropped:      %s\n", orNone(p.Env.Dropped))
	if len(p.CommandDeny) > 0 {
		b.WriteString("\ncommands (checked at every exec of every process; denied ones fail with EPERM)\n")
		fmt.Fprintf(&b, "  deny:  %s\n", strings.Join(p.CommandDeny, ", "))
		fmt.Fprintf(&b, "  allow: %s\n", orNone(p.CommandAllow))
	}
	if len(p.Secrets) > 0 || len(p.EnvFiles) > 0 {
		b.WriteString("\nsecrets (placeholders inside; the proxy injects real values only toward these hosts)\n")
		for _, s := range p.Secrets {
			where := strings.Join(s.Hosts, " ")
			if where == "" {
				where = `nowhere (bind it with "secrets": {"env": {"` + s.Name + `": ["HOST"]}})`
			}
			fmt.Fprintf(&b, "  %-24s -> %s\n", s.Name, where)
		}
		for _, e := range p.EnvFiles {
			fmt.Fprintf(&b, "  file %s: secret values masked (bound by name as above, or by secrets.env)\n", e.Path)
		}
	}
	for _, d := range p.CreateDirs {
		fmt.Fprintf(&b, "\ncreates    %s (allowWrite, missing)\n", d)
	}
	if len(p.GaveUp) > 0 {
		b.WriteString("\nbest effort: gave up\n")
		for _, g := range p.GaveUp {
			fmt.Fprintf(&b, "  %s\n", g)
		}
	}
	if len(p.Warnings)+len(p.Notes) > 0 {
		b.WriteString("\nwarnings\n")
		for _, w := range append(append([]string{}, p.Warnings...), p.Notes...) {
			fmt.Fprintf(&b, "  %s\n", w)
		}
	}
	b.WriteString("\nbubblewrap\n  bwrap")
	for _, a := range p.BwrapArgs() {
		b.WriteString(" " + shellQuote(a))
	}
	fmt.Fprintf(&b, " -- %s init\n", InitPath)
	return b.String()
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "(none)"
	}
	return strings.Join(list, " ")
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = shellQuote(s)
	}
	return out
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// caVars are the variables toolchains read for extra or replacement CA
// bundles; all name the combined bundle (system CAs + the jail CA).
var caVars = []string{
	"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
	"PIP_CERT", "DENO_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "NIX_SSL_CERT_FILE", "HEX_CACERTS_PATH",
	"npm_config_cafile", "BUNDLE_SSL_CA_CERT", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
}

// ResolvConf is the resolv.conf bound over the jail's, shared by every
// session of the user (it sits beside the session directories).
func ResolvConf(sessionDir string) string {
	return filepath.Join(filepath.Dir(sessionDir), "resolv.conf")
}

// planNetwork wires the jail to the host proxy: the proxy's sockets and the
// CA bundle bound in, a resolver that resolves nothing, the bridge relays
// from loopback ports to the sockets, and the variables that point
// clients at them.
func planNetwork(pol *Policy, f *Facts) (*NetPlan, []Op, map[string]string) {
	n := &NetPlan{
		SessionDir: f.SessionDir, CADir: f.CADir, StateDir: f.StateDir, Bundle: f.Bundle,
		Rules: pol.Network, Publish: pol.Publish, Forward: pol.Forward,
	}
	n.Rules.Allow = union(n.Rules.Allow, pol.Registries)
	// On the wire only what the exec rules decide for a plain "git push"
	// and "npm publish": an allow rule that wins there lifts the wire
	// check too.
	deny, allow := ParseCommandRules(pol.Command.Deny), ParseCommandRules(pol.Command.Allow)
	for _, probe := range [][]string{{"git", "push"}, {"npm", "publish"}} {
		if denied, _ := MatchCommand(probe, deny, allow); denied {
			n.DenyCommands = append(n.DenyCommands, strings.Join(probe, " "))
		}
	}
	n.Registries = pol.Registries
	ops := []Op{
		{Kind: "ro-bind", Src: f.SessionDir, Dest: NetDir, Why: "proxy sockets"},
		{Kind: "ro-bind", Src: f.Bundle, Dest: CABundlePath, Why: "system CAs + jail CA"},
	}
	if in := f.info("/etc/resolv.conf"); in.Exists && in.Link == "" {
		// The namespace has no route to the host's name servers anyway;
		// this says so and names none. (A symlink, as with
		// systemd-resolved, already dangles inside: /run is hidden.)
		ops = append(ops, Op{Kind: "ro-bind", Src: ResolvConf(f.SessionDir), Dest: "/etc/resolv.conf", Why: "no resolver: names resolve at the proxy"})
	}
	if len(pol.Publish) > 0 {
		ops = append(ops, Op{Kind: "bind", Src: filepath.Join(f.SessionDir, "pub"), Dest: PubDir, Why: "published ports"})
	}
	n.Relays = []Relay{
		{Listen: fmt.Sprintf("tcp:127.0.0.1:%d", HTTPPort), Dial: "unix:" + NetDir + "/http.sock"},
		{Listen: fmt.Sprintf("tcp:127.0.0.1:%d", SOCKSPort), Dial: "unix:" + NetDir + "/socks.sock"},
	}
	for _, port := range pol.Publish {
		n.Relays = append(n.Relays, Relay{Listen: fmt.Sprintf("unix:%s/%d.sock", PubDir, port), Dial: fmt.Sprintf("tcp:127.0.0.1:%d", port)})
	}
	for _, port := range pol.Forward {
		n.Relays = append(n.Relays, Relay{Listen: fmt.Sprintf("tcp:127.0.0.1:%d", port), Dial: fmt.Sprintf("unix:%s/fwd-%d.sock", NetDir, port)})
	}
	httpProxy := fmt.Sprintf("http://127.0.0.1:%d", HTTPPort)
	vars := map[string]string{
		"HTTP_PROXY": httpProxy, "HTTPS_PROXY": httpProxy, "ALL_PROXY": fmt.Sprintf("socks5h://127.0.0.1:%d", SOCKSPort),
		"NO_PROXY": "localhost,127.0.0.1,::1",
	}
	for k, v := range vars {
		vars[strings.ToLower(k)] = v
	}
	for _, k := range caVars {
		vars[k] = CABundlePath
	}
	return n, ops, vars
}

// secretFiles are the absolute glob patterns of files whose secret values
// are masked: secrets.files, or .env and .env.* anywhere in the project.
func secretFiles(pol *Policy) []string {
	if len(pol.Secrets.Files) > 0 {
		return pol.Secrets.Files
	}
	var out []string
	for _, p := range defaultSecretFiles {
		out = append(out, filepath.Join(pol.ProjectRoot, p))
	}
	return out
}

// creatableDirs are the literal allowWrite paths strictly below the home
// that do not exist and name a directory (no file extension): jail makes
// them so that writes there persist.
func creatableDirs(allowWrite []string, f *Facts) []string {
	var out []string
	for _, w := range allowWrite {
		if HasMeta(w) || f.info(w).Exists || w == f.Home || !under(w, f.Home) {
			continue
		}
		base := filepath.Base(w)
		if strings.Contains(strings.TrimPrefix(base, "."), ".") {
			continue // ~/.claude.json: a file, not created
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}
