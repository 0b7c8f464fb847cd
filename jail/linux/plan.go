package linux

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux/inside"
	"github.com/jailsh/jail/jail/linux/seccomp"
	"github.com/jailsh/jail/proxy"
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
	CapturePort  = 3129 // where init redirects every other TCP connection
	// DNSPort is the bridge's resolver (UDP and TCP), where init
	// redirects every query to port 53.
	DNSPort = inside.DNSPort
)

// NetPlan is the network side of a plan: the host proxy's policy and where
// its sockets live, and the relays init runs inside the jail.
type NetPlan struct {
	SessionDir string // host: http.sock, socks.sock, pub/
	CADir      string // host: the per-user CA
	StateDir   string // host: the decision log
	Bundle     string // host: the host's CAs + the jail CA, written for this session; "" when the jail CA alone is bound
	Rules      jail.NetworkConfig
	Publish    []int
	Forward    []int
	Relays     []Relay  // run by init inside the jail
	Capture    Relay    // init's capture port, to the proxy's capture socket
	Registries []string // allowed because the command's toolchain uses them
	// DenyCommands are command.deny rules the proxy also enforces on the
	// wire (git push over smart HTTP and SSH, npm publish).
	DenyCommands []string
	// External is the directory of a proxy that runs elsewhere (on the
	// machine jail was started from, its sockets forwarded by ssh):
	// net/ holds the proxy's sockets, control.sock the link whose end
	// stops the jail, ca.pem the proxy's CA certificate. The jail starts
	// no proxy then, and no socket is handed over: only bytes cross the
	// forwarding. "" when the jail serves its own proxy.
	External string
}

// ExternalNet, ExternalControl and ExternalCA are the places, in a
// NetPlan's External directory, of the proxy's sockets, of the control
// socket and of the proxy's CA certificate.
func ExternalNet(dir string) string     { return filepath.Join(dir, "net") }
func ExternalControl(dir string) string { return filepath.Join(dir, "control.sock") }
func ExternalCA(dir string) string      { return filepath.Join(dir, "ca.pem") }

// ProxySockets are the names of the proxy's sockets in its directory.
var ProxySockets = []string{"http.sock", "socks.sock", "capture.sock", "dns.sock"}

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
	// HooksPaths are the directories git's core.hooksPath names for the
	// project (its .git/config) and the user (~/.gitconfig), as read from
	// those files; a trailing "/" marks each as a directory.
	HooksPaths []string
	// AgentPrograms are files in the home the agents' settings name as
	// programs to run (a status line script, a hook), read from those
	// settings: kept read-only like the settings themselves.
	AgentPrograms []string
	// Command is what the command, found on the user's PATH where the
	// jail hides it, needs shown (ExposeCommand); nil when nothing.
	Command *jail.CommandExposure

	Env []string // the host environment
	// EnvFileSecrets are the names (never the values) of the secrets in
	// each .env file, by the host path read (a symlink's target).
	EnvFileSecrets map[string][]string
	Session        string          // random session id
	SecretKey      jail.SessionKey // the session's placeholder key: never printed, never inside

	SessionDir string // host directory for this session's sockets
	CADir      string // host directory of the per-user CA
	StateDir   string // host directory of the decision log
	// External is the directory of a proxy that runs elsewhere, its
	// sockets already made (see NetPlan.External); "" for a proxy of the
	// jail's own.
	External string
}

func (f *Facts) info(p string) PathInfo { return f.Paths[p] }

// planAgentStartFiles holds each agent start file missing from its
// read-only directory by a placeholder with the agent's own content, so
// that the agent finds it there and carries on.
func planAgentStartFiles(p *Plan, f *Facts, root string, held map[string]bool) {
	for _, sf := range jail.AgentStartFiles {
		path := filepath.Join(root, sf.Path)
		dir := filepath.Dir(path)
		if !held[dir] || f.info(path).Exists || f.info(path).Link != "" || f.info(dir).Link != "" {
			continue
		}
		p.Placeholders = append(p.Placeholders, PathPlaceholder{Path: path, Content: sf.Content})
	}
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
	case "ro-bind", "bind", "symlink", "bind-try", "ro-bind-try":
		return []string{"--" + o.Kind, o.Src, o.Dest}
	case "view":
		return []string{"--bind", o.Src, o.Dest}
	case "ro-view":
		return []string{"--ro-bind", o.Src, o.Dest}
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
	if o.Kind == "view" || o.Kind == "ro-view" { // the tree's bind, seen through its session directory
		o.Kind, o.Src = strings.TrimSuffix(o.Kind, "view")+"bind", ""
	}
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
	Env        jail.EnvPlan
	// AgentSandbox says, per agent profile, how the agent's own sandbox
	// is handled (its flags are already in Argv).
	AgentSandbox []string
	// SignInCallback is the plan's line for a browser sign-in's callback
	// port published for the login command ("" for none).
	SignInCallback string
	Net            *NetPlan // nil: loopback only, no proxy (--no-network)
	// Link is the control socket of a jail run from another machine: when
	// its connection ends or stalls, the jail is stopped, every process
	// in it; "" for a jail of this machine's.
	Link string
	// Mode is "learning" or "watch"; OverlayHome is then the home init
	// shows through an overlay whose writes are thrown away.
	Mode        string
	OverlayHome string

	// Secrets: the variables that became placeholders and where each may
	// be injected; EnvFiles are .env files shown inside as masked copies.
	// Command rules, enforced at every exec by the host's supervisor and,
	// for git push and npm publish, on the wire by the proxy.
	CommandDeny, CommandAllow []string
	// CommandAsk are the commands whose execs the supervisor holds until
	// a person approves them.
	CommandAsk []string
	// AskTimeout is how long a held request or exec waits for an answer
	// before it is denied; 0 is the default.
	AskTimeout time.Duration
	StateDir   string // host: the decision log

	SecretKey jail.SessionKey `json:"-"` // never printed, never inside
	Secrets   []jail.SecretBinding
	SecretEnv map[string]jail.SecretEnv // secrets.env bindings, for names found in .env files
	EnvFiles  []EnvFile
	// AgentFiles are agent files shown inside as session copies and
	// merged back after exit without their command-bearing keys.
	AgentFiles []AgentFile
	// SignIn are agents' sign-in files shown inside as session copies
	// whose tokens are placeholders; SignInViews the directories holding
	// them, shown as session directories (their entries bound in at run
	// time, after each view's op).
	SignIn      []jail.SignInFile
	SignInViews []SignInView

	// Placeholders are protected paths (and their missing parents) absent
	// at start inside a writable host tree: jail creates them on the host
	// before the jail starts, so that they can be bound read-only and
	// cannot be created from inside, and removes them after the command
	// exits (or, after a kill, at the next start).
	Placeholders []PathPlaceholder
	GitExclude   *GitExclude // nil when there is nothing to hide from git
	// Mounts are made by init after bubblewrap's: placeholders held
	// read-only and directories pinned, parents first.
	Mounts []InitMount
	// CreateDirs are allowWrite directories jail creates before starting.
	CreateDirs []string
	// WatchNew are protected paths held only when present, missing at
	// start: jail names any the command created after it exits.
	WatchNew []string
	// WatchGlobs are protected glob patterns whose matches at start are
	// in Existing; new matches after exit are reported the same way.
	WatchGlobs []string
	Existing   []string
	Warnings   []string
	Notes      []string // shown by jail plan only
	GaveUp     []string // protections dropped under --best-effort

	// Resolved says where the command was found and what it made
	// readable, when it needed showing (Facts.Command); NotFound: it is
	// nowhere on the user's PATH, and Resolved says so.
	Resolved string
	NotFound bool
}

// InitMount is a mount jail's init makes after bubblewrap's: the tree at
// Path bound onto itself (read-only when ReadOnly), so that it cannot be
// renamed, removed or replaced from inside. Host is the host path behind
// Path. init needs three calls a mount where bubblewrap reads the whole
// mount table for each, which made start-up pay for every placeholder.
type InitMount struct {
	Path, Host string
	ReadOnly   bool
	Why        string
}

func (m InitMount) String() string {
	kind := "bind"
	if m.ReadOnly {
		kind = "ro-bind"
	}
	s := fmt.Sprintf("%-10s %s", kind, m.Path)
	if m.Host != m.Path {
		s += " <- " + m.Host
	}
	return s + "  # " + m.Why
}

// GitExclude is the .git/info/exclude the jail sees: the project's (Path,
// when it exists) with Lines added, written to Copy before the jail starts.
type GitExclude struct {
	Path, Copy string
	Lines      []string
}

// PathPlaceholder is one path jail creates on the host for the life of a
// jail: a directory, or a file holding Content.
type PathPlaceholder struct {
	Path    string
	Dir     bool
	Content string
}

// EnvFile is a .env file the jail sees as a masked copy.
type EnvFile struct {
	Path  string   // host path of the file read (a symlink's target), and where the copy is bound inside
	Copy  string   // host path of the masked copy, written before the jail starts
	Names []string // the secrets' names the file held while facts were gathered
}

// deniedAt reports whether a deny list names path, a directory above
// it, or a pattern matching either.
func deniedAt(path string, list []string) bool {
	for _, d := range list {
		for q := path; ; q = filepath.Dir(q) {
			if q == d || (jail.HasMeta(d) && jail.MatchPath(d, q)) {
				return true
			}
			if q == "/" {
				break
			}
		}
	}
	return false
}

// dropBind removes the binds at dest.
func dropBind(ops []Op, dest string) []Op {
	out := ops[:0:0]
	for _, o := range ops {
		if o.Dest != dest || o.Kind != "bind" {
			out = append(out, o)
		}
	}
	return out
}

// commandWhy is why an allowRead tree is bound: for the command when the
// command's exposure brought it.
func commandWhy(f *Facts, path, why string) string {
	if f.Command == nil {
		return why
	}
	for _, t := range f.Command.Trees {
		if t == path {
			return "command " + f.Command.Name
		}
	}
	return why
}

// planGitExclude hides the project's placeholders from git inside the
// jail (so `git add -A` does not commit them): the jail's
// .git/info/exclude is a copy of the project's with one line per
// placeholder.
func planGitExclude(p *Plan, root string, f *Facts) (Op, bool) {
	git := filepath.Join(root, ".git")
	if in := f.info(git); !in.Exists || !in.Dir || in.Link != "" {
		return Op{}, false
	}
	var lines []string
	for _, ph := range p.Placeholders {
		if rel, ok := strings.CutPrefix(ph.Path, root+"/"); ok && !jail.Under(ph.Path, git) {
			lines = append(lines, "/"+rel)
		}
	}
	if len(lines) == 0 {
		return Op{}, false
	}
	exclude := filepath.Join(git, "info", "exclude")
	if !f.info(exclude).Exists {
		p.Placeholders = append(p.Placeholders, PathPlaceholder{Path: exclude})
	}
	p.GitExclude = &GitExclude{Path: exclude, Copy: filepath.Join(f.SessionDir, "git-exclude"), Lines: lines}
	return Op{Kind: "ro-bind", Src: p.GitExclude.Copy, Dest: exclude, Why: "the project's, and the placeholders"}, true
}

// placeholderContent is what a file placeholder holds: "{}" where a JSON
// reader would choke on an empty file, "." for git's commondir (git reads
// it; the common directory is then .git itself, as without one).
func placeholderContent(path string, dir bool) string {
	switch {
	case dir:
		return ""
	case strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".jsonc"):
		return "{}\n"
	case filepath.Base(path) == "commondir":
		return ".\n"
	}
	return ""
}

// symlinkAt returns path or the first of its parents below top that is a
// symlink on the host, or "": a link inside a writable tree can be
// replaced from inside, whatever is mounted at its target.
func symlinkAt(path, top string, f *Facts) string {
	for _, d := range append(jail.ParentsBelow(path, top), path) {
		if f.info(d).Link != "" {
			return d
		}
	}
	return ""
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
	if p.Resolved != "" {
		fmt.Fprintf(&b, "            %s\n", p.Resolved)
	}
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
	for _, a := range p.AgentSandbox {
		fmt.Fprintf(&b, "agent sandbox: %s\n", a)
	}
	if p.SignInCallback != "" {
		fmt.Fprintf(&b, "%s\n", p.SignInCallback)
	}
	b.WriteString("namespaces  user pid ipc uts net(loopback only) cgroup; no capabilities; no new user namespaces\n")
	if p.Mode != "" {
		fmt.Fprintf(&b, "mode        %s: %s seen through an overlay whose writes are thrown away (init mounts it, then drops its capabilities); network unknown: allow, logged; every access traced\n", p.Mode, p.OverlayHome)
	}
	b.WriteString("\nfilesystem (bubblewrap, in order)\n")
	for _, op := range p.Ops {
		fmt.Fprintf(&b, "  %s\n", op)
	}
	if len(p.Mounts) > 0 {
		b.WriteString("\ninit mounts (in its own mount namespace, then it drops every capability)\n")
		for _, m := range p.Mounts {
			fmt.Fprintf(&b, "  %s\n", m)
		}
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
		if n.External != "" {
			b.WriteString("\nnetwork (the proxy of the machine jail was started from, over ssh; every connection decided and logged there; the jail stops when the link does)\n")
		} else {
			b.WriteString("\nnetwork (host proxy; every connection decided and logged)\n")
		}
		unknown := n.Rules.Unknown
		if unknown == "" {
			unknown = "deny"
		}
		fmt.Fprintf(&b, "  allow:   %s\n", orNone(n.Rules.Allow))
		if len(n.Registries) > 0 {
			fmt.Fprintf(&b, "           (registries from the toolchain's configuration: %s)\n", strings.Join(n.Registries, " "))
		}
		fmt.Fprintf(&b, "  deny:    %s\n", orNone(n.Rules.Deny))
		if len(n.Rules.Ask) > 0 {
			fmt.Fprintf(&b, "  ask:     %s\n", strings.Join(n.Rules.Ask, " "))
		}
		fmt.Fprintf(&b, "  unknown: %s\n", unknown)
		for _, h := range jail.SortedKeys(n.Rules.Hosts) {
			fmt.Fprintf(&b, "  hosts:   %s -> %s\n", h, n.Rules.Hosts[h])
		}
		if len(n.Rules.Passthrough) > 0 {
			fmt.Fprintf(&b, "  not intercepted: %s\n", strings.Join(n.Rules.Passthrough, " "))
		}
		for _, r := range n.Relays {
			fmt.Fprintf(&b, "  relay    %s\n", r)
		}
		fmt.Fprintf(&b, "  capture  every other TCP connection -> %s\n", n.Capture.Dial)
		fmt.Fprintf(&b, "  resolver every query to port 53 -> unix:%s/dns.sock (allowed names: addresses in %s and %s; others: NXDOMAIN; nothing forwarded)\n", NetDir, proxy.SyntheticNet, proxy.SyntheticNet6)
		b.WriteString("  udp      other datagrams outside the loopback refused\n")
	} else {
		b.WriteString("\nnetwork: none (loopback only)\n")
	}
	if p.Link != "" {
		fmt.Fprintf(&b, "  link     %s: the jail and every process in it stop when it ends or stalls\n", p.Link)
	}
	b.WriteString("\nenvironment\n")
	fmt.Fprintf(&b, "  placeholders: %s\n", orNone(p.Env.Placeholders))
	fmt.Fprintf(&b, "  dropped:      %s\n", orNone(p.Env.Dropped))
	if len(p.CommandDeny)+len(p.CommandAsk) > 0 {
		b.WriteString("\ncommands (checked at every exec of every process; denied ones fail with EPERM)\n")
		deny := "(none)"
		if len(p.CommandDeny) > 0 {
			deny = strings.Join(p.CommandDeny, ", ")
		}
		fmt.Fprintf(&b, "  deny:  %s\n", deny)
		fmt.Fprintf(&b, "  allow: %s\n", orNone(p.CommandAllow))
		if len(p.CommandAsk) > 0 {
			fmt.Fprintf(&b, "  ask:   %s (held until a person answers)\n", strings.Join(p.CommandAsk, ", "))
		}
	}
	if p.asks() {
		fmt.Fprintf(&b, "\nask timeout %s: a held request or exec without an answer is denied\n", p.askTimeout())
	}
	if len(p.Secrets) > 0 || len(p.EnvFiles) > 0 {
		b.WriteString("\nsecrets (placeholders inside; the proxy injects real values only toward these hosts)\n")
		writeSecrets(&b, p)
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
		b.WriteString(" " + jail.ShellQuote(a))
	}
	fmt.Fprintf(&b, " -- %s init\n", InitPath)
	return b.String()
}

// asks reports whether any rule of p holds a request or exec for a
// person's answer.
func (p *Plan) asks() bool {
	return len(p.CommandAsk) > 0 || p.Net != nil && (len(p.Net.Rules.Ask) > 0 || p.Net.Rules.Unknown == "ask")
}

// DefaultAskTimeout is how long a held request or exec waits for an
// answer when the policy does not say.
const DefaultAskTimeout = 60 * time.Second

// askTimeout is how long p's held requests and execs wait for an answer.
func (p *Plan) askTimeout() time.Duration {
	if p.AskTimeout > 0 {
		return p.AskTimeout
	}
	return DefaultAskTimeout
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
		out[i] = jail.ShellQuote(s)
	}
	return out
}

// ResolvConf is the resolv.conf bound over the jail's, shared by every
// session of the user (it sits beside the session directories).
func ResolvConf(sessionDir string) string {
	return filepath.Join(filepath.Dir(sessionDir), "resolv.conf")
}

// addCaps adds to the capabilities bubblewrap leaves init those it does
// not leave yet.
func (p *Plan) addCaps(caps ...string) {
	for _, c := range caps {
		if !slices.Contains(p.Namespaces, c) {
			p.Namespaces = append(p.Namespaces, "--cap-add", c)
		}
	}
}

// planNetwork wires the jail to the host proxy: the proxy's sockets and the
// CA bundle bound in, the jail's resolver, the bridge relays
// from loopback ports to the sockets, and the variables that point
// clients at them.
func planNetwork(pol *jail.Policy, f *Facts) (*NetPlan, []Op, map[string]string) {
	n := &NetPlan{
		SessionDir: f.SessionDir, CADir: f.CADir, StateDir: f.StateDir,
		Rules: pol.Network, Publish: pol.Publish, Forward: pol.Forward,
		External: f.External,
	}
	sockets, handOff := f.SessionDir, true
	if n.External != "" {
		// A socket handed over would be lost in the forwarding: the
		// bridge relays bytes, and the CA is the remote proxy's.
		sockets, handOff, n.CADir = ExternalNet(n.External), false, n.External
	}
	n.Rules.Allow = jail.Union(n.Rules.Allow, pol.Registries)
	n.DenyCommands = jail.WireCommands(pol.Command, false)
	n.Registries = pol.Registries
	ops := []Op{
		{Kind: "ro-bind", Src: sockets, Dest: NetDir, Why: "proxy sockets"},
		trustOp(pol, f, n),
	}
	if in := f.info("/etc/resolv.conf"); in.Exists && in.Link == "" {
		// The jail's resolver: queries to port 53 reach the bridge, which
		// relays them to the proxy's DNS socket. (A symlink, as with
		// systemd-resolved, already dangles inside: /run is hidden.)
		ops = append(ops, Op{Kind: "ro-bind", Src: ResolvConf(f.SessionDir), Dest: "/etc/resolv.conf", Why: "resolver: the jail's, answered by the proxy"})
	}
	if len(pol.Publish) > 0 {
		ops = append(ops, Op{Kind: "bind", Src: filepath.Join(f.SessionDir, "pub"), Dest: PubDir, Why: "published ports"})
	}
	n.Relays = []Relay{
		{Listen: fmt.Sprintf("tcp:127.0.0.1:%d", HTTPPort), Dial: "unix:" + NetDir + "/http.sock", HandOff: handOff},
		{Listen: fmt.Sprintf("tcp:127.0.0.1:%d", SOCKSPort), Dial: "unix:" + NetDir + "/socks.sock", HandOff: handOff},
		{Listen: fmt.Sprintf("udp:127.0.0.1:%d", DNSPort), Dial: "unix:" + NetDir + "/dns.sock"},
		{Listen: fmt.Sprintf("tcp:127.0.0.1:%d", DNSPort), Dial: "unix:" + NetDir + "/dns.sock"},
	}
	n.Capture = Relay{Listen: fmt.Sprintf("tcp:127.0.0.1:%d", CapturePort), Dial: "unix:" + NetDir + "/capture.sock", HandOff: handOff}
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
	for _, k := range jail.CAVars {
		vars[k] = CABundlePath
	}
	return n, ops, vars
}

// writeSecrets writes the secrets section of the plan: where each secret
// of the environment may be injected, what each .env file masks, and
// where the secrets found only in .env files may be injected. An unbound
// secret is still a placeholder inside; its line says what to add to
// jail.json to bind it.
func writeSecrets(b *strings.Builder, p *Plan) {
	line := func(name, label string, hosts, inject []string) {
		where := strings.Join(hosts, " ")
		if where == "" {
			where = `nowhere; to bind it add to jail.json: "secrets": {"env": {"` + name + `": ["HOST"]}}`
		} else {
			where += " in " + injectionPlaces(inject)
		}
		fmt.Fprintf(b, "  %-24s -> %s\n", label, where)
	}
	listed := map[string]bool{}
	for _, s := range p.Secrets {
		listed[s.Name] = true
		line(s.Name, s.Name, s.Hosts, s.Inject)
	}
	var fileOnly []string
	for _, e := range p.EnvFiles {
		masked := ""
		if len(e.Names) > 0 {
			masked = ": " + strings.Join(e.Names, " ")
		}
		fmt.Fprintf(b, "  file %s: secret values masked%s\n", e.Path, masked)
		for _, n := range e.Names {
			if !listed[n] {
				listed[n] = true
				fileOnly = append(fileOnly, n)
			}
		}
	}
	sort.Strings(fileOnly)
	for _, n := range fileOnly {
		line(n, n+" (.env)", jail.SecretHosts(n, p.SecretEnv), jail.SecretInject(n, p.SecretEnv))
	}
}

// injectionPlaces says where in a request a binding's value is injected:
// its locations, or any request header field when it names none.
func injectionPlaces(inject []string) string {
	if len(inject) == 0 {
		return "request headers"
	}
	return strings.Join(inject, ", ")
}

// creatableDirs are the literal allowWrite paths strictly below the home
// that do not exist and name a directory (no file extension): jail makes
// them so that writes there persist. Paths in the project are left alone:
// the project is writable already, and a directory the command made there
// could be a symlink leading jail to create one elsewhere.
func creatableDirs(allowWrite []string, root string, f *Facts) []string {
	var out []string
	for _, w := range allowWrite {
		if jail.HasMeta(w) || f.info(w).Exists || w == f.Home || !jail.Under(w, f.Home) || jail.Under(w, root) {
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
