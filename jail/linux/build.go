package linux

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux/inside"
	"github.com/jailsh/jail/jail/linux/seccomp"
)

// Build turns a resolved policy and the gathered facts into a plan. Each
// step adds one part of the jail; later steps see the trees the earlier
// ones bound, masked and made read-only.
func Build(pol *jail.Policy, f *Facts, argv []string) (*Plan, error) {
	b, err := newBuilder(pol, f, argv)
	if err != nil {
		return nil, err
	}
	b.namespaces()
	if err := b.kernelProtections(); err != nil {
		return nil, err
	}
	b.createDirs()
	b.systemBinds()
	b.projectAndHome()
	if err := b.protectedPaths(); err != nil {
		return nil, err
	}
	planAgentStartFiles(b.p, b.f, b.root, b.held)
	b.missingCredentialStores()
	b.readOnly()
	b.pinGuarded()
	b.maskDenied()
	b.hideControl()
	b.network()
	b.assemble()
	if err := b.commandRules(); err != nil {
		return nil, err
	}
	if err := b.environment(); err != nil {
		return nil, err
	}
	b.envFiles()
	b.agentFiles()
	b.signIn()
	return b.p, nil
}

// bind is a host-backed tree inside the jail: dest inside, src on the
// host.
type bind struct {
	dest, src string
	writable  bool
}

// builder is what the steps of Build share: the plan being made, the
// facts, and the trees bound, held, masked and pinned so far.
type builder struct {
	pol  *jail.Policy
	f    *Facts
	p    *Plan
	root string

	base, protect, masks []Op
	binds                []bind // host-backed trees, for visibility checks

	// protectedLiteral are the delayed-escape paths and globs; guards what
	// of them (and of the git directories) is held read-only.
	protectedLiteral, guards []string
	roPaths, pins            []string
	madeDir, held            map[string]bool
	roSet, maskSet, pinned   map[string]bool
	jailVars                 map[string]string
}

// newBuilder refuses a missing command and a project root that holds the
// home, and starts the plan.
func newBuilder(pol *jail.Policy, f *Facts, argv []string) (*builder, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command given; usage: jail [flags] [--] CMD [ARGS...] or jail -c 'STRING'")
	}
	root := pol.ProjectRoot
	if root == "/" || jail.Under(f.Home, root) {
		return nil, fmt.Errorf("refusing to use %s as the project root: it contains your home directory; run jail from inside a project directory (or put a jail.json there)", root)
	}
	p := &Plan{Argv: argv, Session: f.Session, Cwd: f.Cwd, ProjectRoot: root, Sources: pol.Sources, Profiles: pol.Profiles}
	if !jail.Under(f.Cwd, root) {
		p.Cwd = root
	}
	return &builder{pol: pol, f: f, p: p, root: root, madeDir: map[string]bool{}, held: map[string]bool{},
		roSet: map[string]bool{}, maskSet: map[string]bool{}, pinned: map[string]bool{}}, nil
}

// namespaces unshares everything bubblewrap can; a learning run keeps the
// capabilities init needs to mount the home overlay.
func (b *builder) namespaces() {
	p, f := b.p, b.f
	p.Namespaces = []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup",
		"--disable-userns", "--die-with-parent", "--as-pid-1", "--cap-drop", "ALL",
		"--uid", fmt.Sprint(f.UID), "--gid", fmt.Sprint(f.GID), "--hostname", "jail",
	}
	if b.pol.Mode != "" {
		// init mounts the home overlay in a mount namespace of its own,
		// then drops these before anything else runs.
		p.Mode, p.OverlayHome = b.pol.Mode, f.Home
		p.Namespaces = append(p.Namespaces, "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_DAC_OVERRIDE", "--cap-add", "CAP_SETPCAP")
	}
}

// kernelProtections takes Landlock and seccomp, or with best effort
// records what is given up without them.
func (b *builder) kernelProtections() error {
	p, f, pol := b.p, b.f, b.pol
	switch {
	case f.LandlockABI >= 1:
		p.LandlockV = min(f.LandlockABI, 7)
	case pol.BestEffort:
		p.GaveUp = append(p.GaveUp, "Landlock (the kernel has none; only the mount namespace limits files)")
	default:
		return fmt.Errorf("%w: Landlock is not available on this kernel; use Linux >= 5.13 with Landlock enabled (lsm=landlock,...), or run with --best-effort to accept weaker isolation", jail.ErrUnsupported)
	}
	if !f.Seccomp {
		if !pol.BestEffort {
			return fmt.Errorf("%w: seccomp filters are not available on this kernel; enable CONFIG_SECCOMP_FILTER, or run with --best-effort to accept weaker isolation", jail.ErrUnsupported)
		}
		p.GaveUp = append(p.GaveUp, "seccomp (no syscall filter: ptrace, mount, bpf, TIOCSTI… stay reachable)")
	} else {
		p.Seccomp = seccomp.DefaultRules()
	}
	return nil
}

// createDirs plans the allowWrite directories under the home that do not
// exist yet (an agent's state directory on first use): created before the
// jail starts, so that what the agent writes there persists as the policy
// says; a path that looks like a file is not guessed at. The later steps
// see them as existing.
func (b *builder) createDirs() {
	fresh := creatableDirs(b.pol.AllowWrite, b.root, b.f)
	if len(fresh) == 0 {
		return
	}
	g := *b.f
	g.Paths = make(map[string]PathInfo, len(b.f.Paths)+len(fresh))
	for k, v := range b.f.Paths {
		g.Paths[k] = v
	}
	for _, d := range fresh {
		g.Paths[d] = PathInfo{Exists: true, Dir: true}
	}
	b.f = &g
	b.p.CreateDirs = fresh
}

// systemBinds binds the system paths read-only, makes /proc, /dev, /tmp
// and the throwaway home, binds init, and lets Landlock reach them.
func (b *builder) systemBinds() {
	p, f := b.p, b.f
	for _, sp := range jail.SystemPaths {
		in := f.info(sp)
		switch {
		case !in.Exists:
		case in.Link != "":
			b.base = append(b.base, Op{Kind: "symlink", Src: in.Link, Dest: sp})
		case in.Dir:
			b.base = append(b.base, Op{Kind: "ro-bind", Src: sp, Dest: sp, Why: "system"})
			b.binds = append(b.binds, bind{sp, sp, false})
			p.Landlock = append(p.Landlock, LandlockRule{Path: sp, Access: "read"})
		}
	}
	b.base = append(b.base,
		Op{Kind: "proc", Dest: "/proc"},
		Op{Kind: "dev", Dest: "/dev"},
		Op{Kind: "tmpfs", Dest: "/tmp", Why: "private"},
		Op{Kind: "home", Dest: f.Home, Why: "throwaway home"},
		Op{Kind: "ro-bind", Src: f.Exe, Dest: InitPath, Why: "jail init"},
	)
	if p.OverlayHome != "" {
		b.base = append(b.base,
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
}

// projectAndHome binds the project and the allowWrite trees writable, the
// allowRead trees read-only, and what the command needs shown.
func (b *builder) projectAndHome() {
	p, f, pol := b.p, b.f, b.pol
	if p.OverlayHome != "" {
		// The whole real home is visible (through the overlay, writable
		// but thrown away): every credential store in it is masked and
		// every delayed-escape file re-bound read-only, as in any
		// writable tree.
		b.binds = append(b.binds, bind{f.Home, f.Home, true})
	}
	writeSet := map[string]bool{}
	b.addBind(b.root, true, "project")
	writeSet[b.root] = true
	for _, w := range b.expand(pol.AllowWrite) {
		if !writeSet[w] && !jail.CoveredBy(w, writeSet) {
			b.addBind(w, true, "allowWrite")
			writeSet[w] = true
		}
	}
	for _, r := range b.expand(pol.AllowRead) {
		if !writeSet[r] && !jail.CoveredBy(r, writeSet) {
			b.addBind(r, false, commandWhy(f, r, "allowRead"))
		}
	}
	if c := f.Command; c != nil {
		for _, l := range c.Links {
			b.base = append(b.base, Op{Kind: "symlink", Src: l.Target, Dest: l.Path, Why: "command " + c.Name})
		}
		p.Resolved, p.NotFound = c.String(), c.NotFound
	}
	for _, pat := range pol.AllowWrite {
		if !jail.HasMeta(pat) && !f.info(pat).Exists {
			p.Notes = append(p.Notes, fmt.Sprintf("allowWrite %s does not exist; skipped", pat))
		}
	}
}

// expand replaces each glob of a list by its matches and drops the
// literal paths that do not exist.
func (b *builder) expand(list []string) []string {
	var out []string
	for _, pat := range list {
		if jail.HasMeta(pat) {
			out = append(out, b.f.Matches[pat]...)
		} else if b.f.info(pat).Exists {
			out = append(out, pat)
		}
	}
	return out
}

// addBind binds a host path at its own place, from where its symlinks
// lead; / itself is never exposed.
func (b *builder) addBind(path string, writable bool, why string) {
	p := b.p
	in := b.f.info(path)
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
	b.base = append(b.base, Op{Kind: kind, Src: src, Dest: path, Why: why})
	b.binds = append(b.binds, bind{path, src, writable})
	p.Landlock = append(p.Landlock, LandlockRule{Path: path, Access: access, File: !in.Dir && in.Exists})
}

// cover returns the bind that covers a path inside the jail: the deepest
// one containing it (later, deeper mounts hide earlier ones).
func (b *builder) cover(path string) (bind, bool) {
	var best bind
	found := false
	for _, c := range b.binds {
		if jail.Under(path, c.dest) && (!found || len(c.dest) > len(best.dest)) {
			best, found = c, true
		}
	}
	return best, found
}

// visible reports whether a path inside the jail is seen, and writable.
func (b *builder) visible(path string) (seen, writable bool) {
	c, ok := b.cover(path)
	return ok, ok && c.writable
}

// host is the host path behind a path inside the jail under this bind.
func (c bind) host(path string) string { return c.src + strings.TrimPrefix(path, c.dest) }

// inJail returns where a host path that must be masked or made read-only
// appears inside the jail. Symlinks are resolved on the host: the jail
// mirrors host paths, so a link's target is protected where it is
// mounted, and a target outside every bind needs nothing (the link
// dangles inside). A path under a bind made through a symlink (allowRead
// ~/.config/gh -> /data/gh) keeps its own path.
func (b *builder) inJail(path string) (dest, src string, ok bool) {
	in := b.f.info(path)
	if !in.Exists {
		return "", "", false
	}
	if in.Resolved == "" || in.Resolved == path {
		_, ok := b.cover(path)
		return path, path, ok
	}
	if _, ok := b.cover(in.Resolved); ok {
		return in.Resolved, in.Resolved, true
	}
	if c, ok := b.cover(path); ok && c.src != c.dest && in.Link == "" {
		return path, in.Resolved, true
	}
	return "", "", false
}

// makeDir plans a missing directory on the way to a placeholder: made on
// the host, writable, pinned with the rest of the way.
func (b *builder) makeDir(c bind, d string) {
	if !b.f.info(d).Exists && !b.madeDir[d] {
		b.madeDir[d] = true
		b.p.Placeholders = append(b.p.Placeholders, PathPlaceholder{Path: c.host(d), Dir: true})
	}
}

// shut reports whether a path inside the jail is read-only or masked.
func (b *builder) shut(path string) bool {
	return b.roSet[path] || jail.CoveredBy(path, b.roSet) || b.isMasked(path)
}

// isMasked reports whether a path inside the jail is masked.
func (b *builder) isMasked(path string) bool {
	return b.maskSet[path] || jail.CoveredBy(path, b.maskSet)
}

// protectedPaths holds the delayed-escape paths read-only where the jail
// could write them: the project's and the home's, the agents' programs,
// git's hooks and config of every repository in the project.
func (b *builder) protectedPaths() error {
	b.protectedNames()
	b.guardGlobs()
	b.guardGit()
	b.guards = append(b.guards, b.f.HooksPaths...)
	sort.Strings(b.guards) // parents first: a read-only directory covers its contents
	for _, gp := range b.guards {
		if err := b.hold(gp); err != nil {
			return err
		}
	}
	return nil
}

// protectedNames lists the delayed-escape paths of the project and the
// home; the ones a tool reads only when present are watched when missing.
func (b *builder) protectedNames() {
	p, f, root := b.p, b.f, b.root
	for _, rel := range jail.ProjectProtected {
		b.protectedLiteral = append(b.protectedLiteral, jail.JoinRel(root, rel))
	}
	lefthook := false
	for _, rel := range jail.ProjectProtectedPresent {
		if pp := jail.JoinRel(root, rel); f.info(strings.TrimSuffix(pp, "/")).Exists {
			b.protectedLiteral = append(b.protectedLiteral, pp)
			lefthook = lefthook || strings.Contains(rel, "lefthook")
		} else {
			p.WatchNew = append(p.WatchNew, strings.TrimSuffix(pp, "/"))
		}
	}
	if lefthook {
		// lefthook merges a local config into the project's without a
		// step outside the jail: held even when missing.
		for _, rel := range []string{"lefthook-local.yml", "lefthook-local.yaml", ".lefthook-local.yml", ".lefthook-local.yaml"} {
			b.protectedLiteral = append(b.protectedLiteral, filepath.Join(root, rel))
		}
	}
	for _, rel := range jail.HomeProtected {
		b.protectedLiteral = append(b.protectedLiteral, jail.JoinRel(f.Home, rel))
	}
	for _, rel := range jail.AgentCommandRel {
		b.protectedLiteral = append(b.protectedLiteral, jail.JoinRel(f.Home, rel))
	}
	b.protectedLiteral = append(b.protectedLiteral, f.AgentPrograms...)
}

// guardGlobs turns the protected paths into guards: a glob guards its
// matches and, under a writable tree, is watched for new ones.
func (b *builder) guardGlobs() {
	p, f := b.p, b.f
	for _, pp := range b.protectedLiteral {
		if jail.HasMeta(pp) {
			if _, w := b.visible(jail.GlobBase(pp)); w {
				p.WatchGlobs = append(p.WatchGlobs, pp)
				p.Existing = append(p.Existing, f.Matches[pp]...)
			}
			b.guards = append(b.guards, f.Matches[pp]...)
			continue
		}
		b.guards = append(b.guards, pp)
	}
}

// guardGit guards the .git of the project and of repositories nested in
// it: pinned, their hooks, config and info guarded. A new nested
// repository is reported after exit.
func (b *builder) guardGit() {
	p, f, root := b.p, b.f, b.root
	nested := filepath.Join(root, jail.NestedGit)
	p.WatchGlobs = append(p.WatchGlobs, nested)
	p.Existing = append(p.Existing, f.Matches[nested]...)
	for _, g := range jail.Union([]string{filepath.Join(root, ".git")}, f.Matches[nested]) {
		switch in := f.info(g); {
		case in.Exists && in.Dir && in.Link == "":
			// commondir would take git's config and hooks from elsewhere;
			// a HEAD beside .git holds the work tree from passing for a
			// bare repository (with a config of its own) once .git is
			// made invalid.
			b.pins = append(b.pins, g)
			b.guards = append(b.guards, g+"/hooks/", g+"/config", g+"/info/", g+"/commondir", filepath.Join(filepath.Dir(g), "HEAD"))
		default: // a gitdir file, a link, or missing: read-only
			b.guards = append(b.guards, g+"/")
		}
	}
}

// hold keeps one guarded path (a trailing "/" marks a directory) read-only
// where a writable tree shows it: re-bound when it exists, a read-only
// placeholder when missing. A symlink on the way is refused.
func (b *builder) hold(gp string) error {
	p, f := b.p, b.f
	path, dir := strings.TrimSuffix(gp, "/"), strings.HasSuffix(gp, "/")
	c, ok := b.cover(path)
	if !ok || !c.writable || b.held[path] || jail.CoveredBy(path, b.held) {
		return nil
	}
	if p.OverlayHome != "" && jail.Under(path, f.Home) && !f.info(path).Exists {
		return nil // what a learning run creates in the home stays in the overlay
	}
	if link := symlinkAt(path, c.dest, f); link != "" {
		return fmt.Errorf("%s is a symlink inside a writable tree, so %s cannot be kept read-only (the link could be replaced from inside the jail); make it a real file or directory, or remove it", link, path)
	}
	b.held[path] = true
	if f.info(path).Exists {
		b.roPaths = append(b.roPaths, path)
		b.pins = append(b.pins, jail.ParentsBelow(path, c.dest)...)
		return nil
	}
	// Missing: a placeholder on the host while the jail runs, bound
	// read-only. In the project, when a directory on the way is missing
	// too, that directory is the placeholder (.claude for
	// .claude/settings.json): one entry in the project instead of several.
	// Elsewhere (a writable home) the missing directories on the way are
	// made writable and pinned: ~/.config must stay usable.
	for _, d := range jail.ParentsBelow(path, c.dest) {
		if c.dest == b.root && !f.info(d).Exists && !b.madeDir[d] {
			path, dir = d, true
			break
		}
		b.makeDir(c, d)
	}
	b.held[path] = true
	ph := PathPlaceholder{Path: c.host(path), Dir: dir, Content: placeholderContent(path, dir)}
	p.Placeholders = append(p.Placeholders, ph)
	p.Mounts = append(p.Mounts, InitMount{Path: path, Host: ph.Path, ReadOnly: true, Why: "read-only; a placeholder on the host while the jail runs"})
	b.pins = append(b.pins, jail.ParentsBelow(path, c.dest)...)
	return nil
}

// missingCredentialStores masks the credential stores missing from a
// writable tree on disk: a masked placeholder holds the name, so that a
// planted ~/.aws/config (credential_process) or ~/.npmrc (script-shell)
// cannot appear.
func (b *builder) missingCredentialStores() {
	p, f := b.p, b.f
	for _, rel := range jail.HomeDeny {
		path, dir := filepath.Join(f.Home, rel), strings.HasSuffix(rel, "/")
		c, ok := b.cover(path)
		if !ok || !c.writable || f.info(path).Exists || b.held[path] || jail.CoveredBy(path, b.held) ||
			(p.OverlayHome != "" && jail.Under(path, f.Home)) || symlinkAt(path, c.dest, f) != "" {
			continue
		}
		for _, d := range jail.ParentsBelow(path, c.dest) {
			b.makeDir(c, d)
		}
		b.held[path] = true
		p.Placeholders = append(p.Placeholders, PathPlaceholder{Path: c.host(path), Dir: dir})
		kind := "mask"
		if dir {
			kind = "mask-dir"
		}
		b.masks = append(b.masks, Op{Kind: kind, Dest: path, Why: "denyRead; a placeholder on the host while the jail runs"})
		b.pins = append(b.pins, jail.ParentsBelow(path, c.dest)...)
	}
}

// readOnly re-binds read-only, where the jail could write them, the held
// paths that exist, the protected paths inside allowWrite trees and
// denyWrite; git's exclude file gains the project's placeholders.
func (b *builder) readOnly() {
	p, pol := b.p, b.pol
	if op, ok := planGitExclude(p, b.root, b.f); ok {
		b.protect = append(b.protect, op)
	}
	b.roPaths = append(b.roPaths, jail.WritableBelow(b.expand(pol.AllowWrite), b.protectedLiteral)...)
	b.roPaths = append(b.roPaths, b.expand(pol.DenyWrite)...)
	for _, rp := range b.roPaths {
		dest, src, ok := b.inJail(rp)
		if _, w := b.visible(dest); ok && w && !b.roSet[dest] {
			b.roSet[dest] = true
			if src == dest { // init binds it cheaper than bubblewrap
				p.Mounts = append(p.Mounts, InitMount{Path: dest, Host: src, ReadOnly: true, Why: "read-only"})
			} else {
				b.protect = append(b.protect, Op{Kind: "ro-bind", Src: src, Dest: dest, Why: "read-only"})
			}
		}
	}
}

// pinGuarded binds each directory on the way to a guarded path onto
// itself, so that it cannot be renamed away or replaced (a mount point
// cannot be the source or target of a rename, nor be removed).
func (b *builder) pinGuarded() {
	for _, d := range jail.Union(nil, b.pins) {
		if c, ok := b.cover(d); ok && c.writable && !b.roSet[d] && !jail.CoveredBy(d, b.roSet) && !b.pinned[d] && d != c.dest {
			b.pinned[d] = true
			b.p.Mounts = append(b.p.Mounts, InitMount{Path: d, Host: c.host(d), Why: "pinned: cannot be renamed or replaced"})
		}
	}
}

// maskDenied masks denyRead, the system and home credential stores and the
// hard links to them, and pins the directories above each mask.
func (b *builder) maskDenied() {
	for _, m := range b.maskPaths() {
		kind := "mask"
		if b.f.info(m).Dir {
			kind = "mask-dir"
		}
		b.masks = append(b.masks, Op{Kind: kind, Dest: m, Why: "denyRead"})
		b.pinAboveMask(m)
	}
}

// maskPaths are the paths inside the jail to mask, outermost only: a
// masked directory covers its contents.
func (b *builder) maskPaths() []string {
	f := b.f
	denyPats := jail.DeniedPatterns(b.pol, f.Home, f.CADir, f.StateDir)
	candidates := append(b.expand(denyPats), f.HardLinks...)
	// A path allowed inside a denied directory (allowRead ~/.aws/config,
	// ~/.ssh denied whole) is bound over the directory's mask: it is
	// masked itself, since deny beats allow.
	for _, c := range b.binds {
		for _, d := range denyPats {
			if !jail.HasMeta(d) && c.dest != d && jail.Under(c.dest, d) && f.info(d).Exists {
				candidates = append(candidates, c.dest)
			}
		}
	}
	sort.Strings(candidates) // parents first, so a masked directory covers its contents
	for i, m := range candidates {
		if dest, _, ok := b.inJail(m); ok && !f.info(m).Unreadable {
			candidates[i] = dest
		} else {
			candidates[i] = ""
		}
	}
	sort.Strings(candidates)
	var out []string
	for _, m := range candidates {
		if m != "" && !b.maskSet[m] && !jail.CoveredBy(m, b.maskSet) {
			b.maskSet[m] = true
			out = append(out, m)
		}
	}
	return out
}

// pinAboveMask pins the directories above a mask in a writable tree on
// disk: renaming one would carry the mask away and free the name for a
// planted file (jail's own state directory among them). The learning
// overlay keeps no such rename.
func (b *builder) pinAboveMask(m string) {
	c, ok := b.cover(m)
	if !ok || !c.writable || (b.p.OverlayHome != "" && jail.Under(m, b.f.Home)) {
		return
	}
	for _, d := range jail.ParentsBelow(m, c.dest) {
		if !b.pinned[d] && !b.roSet[d] && !jail.CoveredBy(d, b.roSet) {
			b.pinned[d] = true
			b.p.Mounts = append(b.p.Mounts, InitMount{Path: d, Host: c.host(d), Why: "pinned: a mask lies below"})
		}
	}
}

// network plans the proxy, the bridge inside the jail and the sign-in
// callback, unless the policy has no network.
func (b *builder) network() {
	p := b.p
	if b.f.External != "" {
		p.Link = ExternalControl(b.f.External)
	}
	if b.pol.NoNetwork {
		return
	}
	p.SignInCallback = planSignInCallback(b.pol, p.Argv)
	var netOps []Op
	p.Net, netOps, b.jailVars = planNetwork(b.pol, b.f)
	b.base = append(b.base, netOps...)
	// init programs the capture in the jail's network namespace, then
	// drops it before anything else runs.
	p.addCaps("CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_SETPCAP")
	p.Landlock = append(p.Landlock,
		LandlockRule{Path: NetDir, Access: "read"},
		LandlockRule{Path: PubDir, Access: "write"},
		LandlockRule{Path: CABundlePath, Access: "read", File: true},
	)
}

// assemble orders the ops so that every parent is mounted before its
// children, then read-only re-binds, then masks.
func (b *builder) assemble() {
	p := b.p
	sortOps(b.base)
	sortOps(b.protect)
	sort.SliceStable(p.Mounts, func(i, j int) bool { return p.Mounts[i].Path < p.Mounts[j].Path })
	if len(p.Mounts) > 0 && p.Mode == "" {
		// init makes them in a mount namespace of its own, then drops
		// these before anything else runs.
		p.addCaps("CAP_SYS_ADMIN", "CAP_SETPCAP")
	}
	p.Ops = append(append(b.base, b.protect...), b.masks...)
	sort.SliceStable(p.Landlock, func(i, j int) bool { return p.Landlock[i].Path < p.Landlock[j].Path })
}

// commandRules takes the command rules, which need seccomp user
// notification.
func (b *builder) commandRules() error {
	p, pol := b.p, b.pol
	p.CommandDeny, p.CommandAllow = pol.Command.Deny, pol.Command.Allow
	p.CommandAsk = slices.Clone(pol.Command.Ask)
	p.AskTimeout = time.Duration(pol.AskTimeout) * time.Second
	if len(p.CommandAsk) > 0 && !execAsk {
		return fmt.Errorf("%w: command.ask is not enforced at exec yet; use command.deny for %s", jail.ErrUnsupported, strings.Join(p.CommandAsk, ", "))
	}
	if len(p.CommandDeny)+len(p.CommandAsk) > 0 && !b.f.SeccompNotify {
		if !pol.BestEffort {
			return fmt.Errorf("%w: %s seccomp user notification, which this kernel lacks (Linux >= 5.0); remove the rules or run with --best-effort", jail.ErrUnsupported, commandKeys(p))
		}
		p.GaveUp = append(p.GaveUp, "command rules (no seccomp user notification: "+strings.Join(append(slices.Clone(p.CommandDeny), p.CommandAsk...), ", ")+" not enforced at exec)")
		p.CommandDeny, p.CommandAllow, p.CommandAsk = nil, nil, nil
	}
	return nil
}

// commandKeys names the command rule keys p has, with their verb.
func commandKeys(p *Plan) string {
	switch {
	case len(p.CommandAsk) == 0:
		return "command.deny needs"
	case len(p.CommandDeny) == 0:
		return "command.ask needs"
	}
	return "command.deny and command.ask need"
}

// execAsk says whether the exec supervisor holds the execs command.ask
// names (it does: each until the session's control hub has an answer);
// were it not, a policy with command.ask would be refused rather than run
// with its commands unasked.
var execAsk = true

// environment plans the agents' sandbox settings, the command's
// environment and the secrets behind its placeholders.
func (b *builder) environment() error {
	p, f, pol := b.p, b.f, b.pol
	p.StateDir = f.StateDir
	jailVars, err := planAgentSandbox(p, pol, b.jailVars)
	if err != nil {
		return err
	}
	p.Env = jail.PlanEnv(f.Env, pol, f.SecretKey, f.Session, jailVars)
	p.SecretKey = f.SecretKey
	p.SecretEnv = pol.Secrets.Env
	p.Secrets = jail.Bindings(p.Env.Placeholders, pol)
	return nil
}

// envFiles binds a masked copy read-only over each visible .env file
// that denyRead does not already hide entirely: one copy per file read,
// bound at each of its names.
func (b *builder) envFiles() {
	p, f := b.p, b.f
	var envFiles []string
	for _, pat := range jail.SecretFiles(b.pol) {
		if jail.HasMeta(pat) {
			envFiles = append(envFiles, f.Matches[pat]...)
		} else {
			envFiles = append(envFiles, pat)
		}
	}
	sort.Strings(envFiles)
	copied := map[string]bool{}
	copies := map[string]string{} // host file read -> its masked copy
	for _, ef := range jail.Union(nil, envFiles) {
		in := f.info(ef)
		if !in.Exists || in.Dir || in.Unreadable {
			continue
		}
		for _, v := range b.views(ef) {
			dest, src := v[0], v[1]
			if copied[dest] || b.isMasked(dest) {
				continue
			}
			copied[dest] = true
			cp, ok := copies[src]
			if !ok {
				cp = filepath.Join(f.SessionDir, fmt.Sprintf("env-%d", len(p.EnvFiles)))
				copies[src] = cp
				p.EnvFiles = append(p.EnvFiles, EnvFile{Path: src, Copy: cp, Names: f.EnvFileSecrets[src]})
			}
			p.Ops = append(p.Ops, Op{Kind: "ro-bind", Src: cp, Dest: dest, Why: "secrets masked"})
		}
	}
}

// views are the places inside the jail where a host file appears, each
// with the host file read there. A symlink appears at its host path and
// under every bind whose source holds its target (allowRead ~/link-dir ->
// ~/real-dir shows ~/real-dir/x as ~/link-dir/x, where a link may lead);
// a target outside every bind dangles inside.
func (b *builder) views(path string) [][2]string {
	var out [][2]string
	if dest, src, ok := b.inJail(path); ok {
		out = append(out, [2]string{dest, src})
	}
	in := b.f.info(path)
	if in.Link == "" {
		return out
	}
	for _, c := range b.binds {
		if c.src == c.dest || !jail.Under(in.Resolved, c.src) {
			continue
		}
		d := c.dest + strings.TrimPrefix(in.Resolved, c.src)
		if cc, ok := b.cover(d); ok && cc == c {
			out = append(out, [2]string{d, in.Resolved})
		}
	}
	return out
}

// agentFiles gives the agent files the agent rewrites as it runs a
// session copy wherever the jail may write the file, and the agents'
// private state directories a throwaway tmpfs.
func (b *builder) agentFiles() {
	p, f := b.p, b.f
	var agentOps []Op
	p.AgentFiles, agentOps = planAgentFiles(f.Home, f.SessionDir, b.agentFileSpot)
	for _, a := range p.AgentFiles {
		if a.Dir != "" {
			p.Ops = dropBind(p.Ops, a.Path) // the symlink takes the file's place
			if a.Missing {
				p.Notes = slices.DeleteFunc(p.Notes, func(n string) bool { return n == "allowWrite "+a.Path+" does not exist; skipped" })
			}
			p.Landlock = append(p.Landlock, LandlockRule{Path: a.Inside, Access: "write"})
		}
	}
	for _, rel := range agentPrivateDirs {
		path := filepath.Join(f.Home, rel)
		if c, ok := b.cover(path); ok && c.writable && p.OverlayHome == "" && !b.shut(path) {
			p.Ops = append(p.Ops, Op{Kind: "tmpfs", Dest: path, Why: "agent session state: private, thrown away after exit"})
		}
	}
	p.Ops = append(p.Ops, agentOps...)
}

// agentFileSpot is where an agent file is inside the jail and on the host,
// and whether the jail may write it there.
func (b *builder) agentFileSpot(path string) (agentSpot, bool) {
	p, f, pol := b.p, b.f, b.pol
	in := f.info(path)
	_, inTree := b.cover(filepath.Dir(path))
	if !in.Exists && in.Link == "" {
		// Missing: the agent creates it, in the throwaway home when
		// allowWrite names the file itself.
		ok := slices.Contains(pol.AllowWrite, path) && !inTree && p.OverlayHome == "" && !b.shut(path) &&
			!deniedAt(path, pol.DenyWrite) && !deniedAt(path, pol.DenyRead)
		return agentSpot{Dest: path, Host: path, Alone: true, Missing: true}, ok
	}
	dest, host := path, path
	if in.Resolved != "" {
		host = in.Resolved
	}
	c, ok := b.cover(path)
	if ok && c.dest != path && host != path {
		dest = host // a symlink in a visible tree: the jail writes its target
		c, ok = b.cover(dest)
	}
	thrownAway := p.OverlayHome != "" && c.dest == f.Home
	alone := c.dest == path && dest == path && !inTree
	return agentSpot{Dest: dest, Host: host, Alone: alone},
		ok && c.writable && in.Exists && !in.Dir && !in.Unreadable && !b.shut(dest) && !thrownAway
}

// signIn plans the agents' sign-in files and directories.
func (b *builder) signIn() {
	planSignIn(b.p, b.f.Home, b.f.SessionDir, b.f.StateDir, b.signInFileSpot, b.signInDirSpot)
}

// signInFileSpot is where a sign-in file is on the host and what the jail
// may do with it.
func (b *builder) signInFileSpot(path string) (signInSpot, bool) {
	in := b.f.info(path)
	c, ok := b.cover(path)
	if !ok || in.Dir || in.Unreadable || b.isMasked(path) {
		return signInSpot{}, false
	}
	host := c.host(path)
	if in.Resolved != "" {
		host = in.Resolved
	}
	return signInSpot{Host: host, Exists: in.Exists, Writable: c.writable && b.p.OverlayHome == "", Bound: c.dest == path}, true
}

// signInDirSpot is where a sign-in directory is on the host and what inside
// it is read-only or hidden.
func (b *builder) signInDirSpot(dir string) (viewSpot, bool) {
	p, f := b.p, b.f
	in := f.info(dir)
	c, ok := b.cover(dir)
	if !ok || !in.Exists || !in.Dir || in.Link != "" || in.Unreadable || (p.OverlayHome != "" && jail.Under(dir, f.Home)) ||
		b.isMasked(dir) || (c.writable && symlinkAt(dir, c.dest, f) != "") {
		return viewSpot{}, false
	}
	return viewSpot{Host: c.host(dir), Writable: c.writable && !b.roSet[dir] && !jail.CoveredBy(dir, b.roSet), Bound: c.dest == dir,
		ReadOnly: topNames(dir, readOnlyPaths(p, b.roSet)), Hidden: topNames(dir, hiddenPaths(p, f.SessionDir))}, true
}

// planAgentSandbox applies each agentSandbox of the policy to the plan:
// the command line may gain the agent's own flags, jailVars (returned,
// made when nil) the agent's variables, and p.AgentSandbox a line each
// for jail plan.
func planAgentSandbox(p *Plan, pol *jail.Policy, jailVars map[string]string) (map[string]string, error) {
	argv, lines, jailVars, err := jail.ApplyAgentSandboxes(pol, p.Argv, jailVars)
	if err != nil {
		return nil, err
	}
	p.Argv = argv
	p.AgentSandbox = append(p.AgentSandbox, lines...)
	return jailVars, nil
}
