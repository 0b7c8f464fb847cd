// Package learn turns what a command did during a learning run (file, exec
// and connect events from the tracer, plus the proxy's decision log) into a
// least-privilege jail.json fragment.
//
// Synthesize is pure: no I/O, no clock, no map-order dependence. The same
// events in any order give byte-identical JSON and Summary output.
//
// Choices made here (see Synthesize for the full list):
//   - A successful read proposes allowRead; any write (open for writing,
//     create, mkdir, unlink, rename) proposes allowWrite, which wins over
//     read for the same collapsed path.
//   - Failed reads (any Errno, typically ENOENT from a tool probing for
//     optional config) are never proposed: probing must not widen reads.
//     Failed writes are still proposed: the tool wanted to write there.
//   - Secret paths are reported in KeptDenied whatever the Errno, and never
//     proposed.
//   - Programs lists only successful execs (execvp's PATH search produces
//     ENOENT execs of candidates that do not exist).
package learn

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jailsh/jail/jail/credstores"
)

// Kind is the traced operation.
type Kind string

// Event kinds reported by the tracers.
const (
	Open    Kind = "open"
	Create  Kind = "create"
	Mkdir   Kind = "mkdir"
	Unlink  Kind = "unlink"
	Rename  Kind = "rename"
	Exec    Kind = "exec"
	Connect Kind = "connect"
)

// Event is one traced file-system access.
type Event struct {
	Kind  Kind
	Path  string // absolute (resolved against the process cwd by the tracer)
	Write bool   // opened for writing / created / removed / renamed
	Errno int    // 0 = success
	Pid   int
	Addr  string // connect: "ip:port" of an inet socket (Path is "" then)
}

// Request is one entry of the proxy's decision log.
type Request struct {
	Host    string
	Port    int
	Allowed bool
	// Forward: a connection to the host's own port through -f, which
	// jail.json cannot grant.
	Forward bool
	// Raw: a raw stream (neither TLS nor HTTP), which only an entry
	// naming the host with its port lets through, on 80 and 443 too.
	Raw bool
}

// Facts are the host facts the synthesis needs.
type Facts struct {
	Home, Project string
	SystemDirs    []string // /usr /etc /opt /bin /lib...
	// Allowed are the literal paths the run's policy made readable or
	// writable (config, profiles, flags): what lies under one is proposed
	// as that path, no wider.
	Allowed []string
	// ReadOnly are paths every jail keeps read-only (~/.bashrc, ~/.ssh,
	// ~/.config/jail…): a write there is reported, never proposed.
	ReadOnly []string
	// Exists says whether a path exists outside the learning run (nil:
	// everything does). A file the run created only in its throwaway home
	// cannot be granted later: it is reported, not proposed.
	Exists func(path string) bool
}

// Report is the result of a learning run.
type Report struct {
	Profile    Profile
	KeptDenied []string // e.g. "tried to read ~/.aws/credentials: kept denied"
}

// Profile is rendered as a jail.json fragment by JSON.
type Profile struct {
	AllowRead, AllowWrite []string // "~/…" forms under the home
	Domains               []string
	Programs              []string // executed programs (paths as seen), informational
}

// privateDirs are always left out: per-jail or virtual file systems, and
// /run/jail, where every jail keeps its CA bundle, sockets and init.
var privateDirs = []string{"/proc", "/dev", "/tmp", "/sys", "/run/jail"}

// jailCaches is the home directory under which the profiles give each
// project's jailed builds caches of their own: what a run did there is
// never proposed, since a learned profile applies to every project and
// would open one project's caches to the others.
const jailCaches = ".cache/jail"

// appParents are home directories whose children are per-application
// directories: ~/.config/tool/a/b collapses to ~/.config/tool.
var appParents = []string{".config", ".cache", ".local/share", ".local/state"}

// errEEXIST is EEXIST on every Linux architecture.
const errEEXIST = 17

// Synthesize turns a learning run's events and proxy log into a report.
//
// Path rules, in order, for each event with an absolute path:
//  1. paths under Facts.SystemDirs, /proc, /dev, /tmp, /sys are left out;
//  2. secret paths (the credential stores the jail masks, credstores.Home:
//     ~/.ssh, ~/.aws, ~/.netrc, browser profiles…; and anywhere: .env,
//     .env.*) go to KeptDenied, never
//     to the profile, whatever the Errno;
//  3. the project (and anything in it), $HOME itself, strict ancestors
//     of the project or home, and the jail's per-project caches
//     (~/.cache/jail/…, which the profiles grant each project) are left out;
//  4. failed reads are dropped; failed writes are kept, except a mkdir or
//     exclusive create that failed with EEXIST, which only probed;
//  5. home paths collapse: ~/.config/<app>/… → ~/.config/<app> (likewise
//     ~/.cache, ~/.local/share, ~/.local/state; the parents themselves are
//     never proposed), ~/.local/<dir>/… → ~/.local/<dir>, ~/.<entry>/… →
//     ~/.<entry> (~/.toolrc stays a file), ~/<dir>/<sub>/… → ~/<dir>/<sub>;
//     paths under a path the policy allows are proposed as that path;
//     other paths outside the home collapse to the directory holding
//     them, at most three levels deep.
//
// The secret list mirrors the jail's default masks; a collapsed directory
// such as ~/.config/gh may contain a secret (hosts.yml), which the jail
// still masks at run time.
//
// exec events count as reads of the program (a program under the home must
// be readable) and, when successful and not secret, are listed in Programs. connect events
// with a path (unix sockets) count as reads. Domains are the allowed
// requests' hosts, with ":port" unless the port is 80 or 443 (or 0); a
// raw stream's host always has its port, which the strict run's proxy
// wants named for it; denied requests are reported in KeptDenied.
func Synthesize(events []Event, reqs []Request, f Facts) Report {
	home := cleanAbs(f.Home)
	project := cleanAbs(f.Project)
	excluded := append(append([]string(nil), privateDirs...), f.SystemDirs...)

	access := map[string]bool{} // collapsed path → written
	files := map[string]bool{}  // keys the command named itself, not as a directory
	dirs := map[string]bool{}   // keys made by mkdir or holding other paths
	var seen []string           // every path that reached the profile
	secrets := map[string]string{}
	programs := map[string]bool{}
	var kept []string

	for _, ev := range events {
		p := cleanAbs(ev.Path)
		if p == "" || p == "/" {
			continue
		}
		write := ev.Write || ev.Kind == Create || ev.Kind == Mkdir || ev.Kind == Unlink || ev.Kind == Rename
		if ev.Errno == errEEXIST && (ev.Kind == Mkdir || ev.Kind == Create) {
			// mkdir -p and O_EXCL creates probe for what exists: that
			// needs no write access.
			write = false
		}
		if ev.Kind == Exec && ev.Errno == 0 && !isSecret(p, home) {
			programs[p] = true
		}
		if underAny(p, excluded) && (home == "" || !under(p, home)) {
			continue // a home under /tmp is still the home
		}
		if isSecret(p, home) {
			verb := "read"
			switch {
			case write:
				verb = "write"
			case ev.Kind == Exec:
				verb = "run"
			}
			shown := display(p, home)
			if rank(verb) > rank(secrets[shown]) {
				secrets[shown] = verb
			}
			continue
		}
		if project != "" && (under(p, project) || under(project, p)) {
			continue
		}
		if rel, ok := homeRel(p, home); ok && under(rel, jailCaches) {
			continue
		}
		if home != "" && under(home, p) {
			continue // $HOME itself or one of its ancestors
		}
		if ev.Errno != 0 && !write {
			continue
		}
		if write && underAny(p, f.ReadOnly) {
			// Not even a read is proposed: only a read event says one
			// is needed.
			kept = append(kept, fmt.Sprintf("tried to write %s: kept read-only", display(p, home)))
			continue
		}
		key := ""
		for _, a := range f.Allowed {
			if a = cleanAbs(a); a != "" && a != home && under(p, a) && len(a) > len(key) {
				key = a
			}
		}
		if key == "" {
			key = collapse(p, home)
		}
		if key == "" {
			continue
		}
		access[key] = access[key] || write
		seen = append(seen, p)
		if key != p || ev.Kind == Mkdir {
			dirs[key] = true
		} else {
			files[key] = true
		}
	}
	// A key the command named itself is a file unless it was made by
	// mkdir or something else was reached below it.
	sort.Strings(seen)
	for k := range files {
		if i := sort.SearchStrings(seen, k+"/"); i < len(seen) && strings.HasPrefix(seen[i], k+"/") {
			dirs[k] = true
		}
	}
	for k, w := range access {
		if files[k] && !dirs[k] && f.Exists != nil && !f.Exists(k) {
			verb := "read"
			if w {
				verb = "wrote"
			}
			kept = append(kept, fmt.Sprintf("%s %s, which exists only in the learning run: not proposed (every jail's throwaway home lets the command write it again)", verb, display(k, home)))
			delete(access, k)
		}
	}

	var read, written []string
	for k, w := range access {
		if w {
			written = append(written, k)
		} else {
			read = append(read, k)
		}
	}
	written = minimize(written, nil)
	read = minimize(read, written)

	for p, verb := range secrets {
		kept = append(kept, fmt.Sprintf("tried to %s %s: kept denied", verb, p))
	}

	domains := map[string]bool{}
	for _, r := range reqs {
		h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(r.Host)), ".")
		if h == "" {
			continue
		}
		d := h
		if r.Port != 0 && (r.Raw || r.Port != 80 && r.Port != 443) {
			if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
				h = "[" + h + "]"
			}
			d = h + ":" + strconv.Itoa(r.Port)
		}
		switch {
		case r.Forward:
			kept = append(kept, fmt.Sprintf("reached the host's port %d through -f: not proposed (jail.json cannot grant it; pass -f %d again)", r.Port, r.Port))
		case r.Allowed:
			domains[d] = true
		default:
			kept = append(kept, fmt.Sprintf("tried to reach %s: kept denied", d))
		}
	}

	return Report{
		Profile: Profile{
			AllowRead:  toHome(read, home),
			AllowWrite: toHome(written, home),
			Domains:    keys(domains),
			Programs:   keys(programs),
		},
		KeptDenied: dedupSorted(kept),
	}
}

func rank(verb string) int {
	switch verb {
	case "read":
		return 1
	case "run":
		return 2
	case "write":
		return 3
	}
	return 0
}

// cleanAbs cleans an absolute path; relative or empty paths give "".
func cleanAbs(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	return path.Clean(p)
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	if dir == "" {
		return false
	}
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if d = cleanAbs(d); d != "" && under(p, d) {
			return true
		}
	}
	return false
}

// homeRel returns p relative to home and whether p is strictly inside it.
func homeRel(p, home string) (string, bool) {
	if home == "" || home == "/" || !strings.HasPrefix(p, home+"/") {
		return "", false
	}
	return p[len(home)+1:], true
}

// IsSecret reports whether p is a secret path learning never proposes
// (see Synthesize).
func IsSecret(p, home string) bool { return isSecret(cleanAbs(p), cleanAbs(home)) }

func isSecret(p, home string) bool {
	base := path.Base(p)
	if base == ".env" || strings.HasPrefix(base, ".env.") {
		return true
	}
	rel, ok := homeRel(p, home)
	if !ok {
		return false
	}
	return credstores.IsHomeStore(rel)
}

// collapse maps p to the entry to propose, or "" for none.
func collapse(p, home string) string {
	rel, ok := homeRel(p, home)
	if !ok {
		// Outside the home: the directory holding the file, at most three
		// levels deep (/srv/data/a → /srv/data, /var/cache/app/x/y →
		// /var/cache/app), never a top-level directory.
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		switch {
		case len(parts) > 3:
			parts = parts[:3]
		case len(parts) >= 3:
			parts = parts[:len(parts)-1]
		}
		return "/" + strings.Join(parts, "/")
	}
	for _, parent := range appParents {
		if rel == parent {
			return ""
		}
		if strings.HasPrefix(rel, parent+"/") {
			app := strings.SplitN(rel[len(parent)+1:], "/", 2)[0]
			return home + "/" + parent + "/" + app
		}
	}
	parts := strings.Split(rel, "/")
	switch {
	case parts[0] == ".local":
		if len(parts) == 1 {
			return ""
		}
		return home + "/.local/" + parts[1]
	case strings.HasPrefix(parts[0], "."):
		return home + "/" + parts[0]
	case len(parts) > 2:
		return home + "/" + parts[0] + "/" + parts[1]
	}
	return p
}

// minimize sorts ps, drops entries covered by another entry of ps or of
// cover.
func minimize(ps, cover []string) []string {
	sort.Strings(ps)
	var out []string
	for _, p := range ps {
		covered := false
		for _, c := range cover {
			if under(p, c) {
				covered = true
				break
			}
		}
		if !covered && len(out) > 0 && under(p, out[len(out)-1]) {
			covered = true
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

func display(p, home string) string {
	if rel, ok := homeRel(p, home); ok {
		return "~/" + rel
	}
	return p
}

func toHome(ps []string, home string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, display(p, home))
	}
	sort.Strings(out)
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func dedupSorted(ss []string) []string {
	sort.Strings(ss)
	out := make([]string, 0, len(ss))
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

const description = "learned by jail --learning; review before merging"

// JSON renders the profile as a jail.json fragment: sorted lists, 2-space
// indent, trailing newline, empty lists as [].
func (p Profile) JSON() []byte { return render(p, nil) }

// File renders the report as the profile jail --learning writes: the
// jail.json fragment of Profile.JSON plus a "learned" record of the
// command, the tracer, the programs run and what was kept denied, which
// informs the reader and grants nothing.
func (r Report) File(command, tracer string) []byte {
	return render(r.Profile, &record{Command: command, Tracer: tracer, Programs: sorted(r.Profile.Programs), KeptDenied: sorted(r.KeptDenied)})
}

type record struct {
	Command    string   `json:"command"`
	Tracer     string   `json:"tracer"`
	Programs   []string `json:"programs"`
	KeptDenied []string `json:"keptDenied"`
}

func render(p Profile, learned *record) []byte {
	type fs struct {
		AllowRead  []string `json:"allowRead"`
		AllowWrite []string `json:"allowWrite"`
	}
	type network struct {
		Allow []string `json:"allow"`
	}
	doc := struct {
		Description string  `json:"description"`
		Filesystem  fs      `json:"filesystem"`
		Network     network `json:"network"`
		Learned     *record `json:"learned,omitempty"`
	}{
		Description: description,
		Filesystem:  fs{AllowRead: sorted(p.AllowRead), AllowWrite: sorted(p.AllowWrite)},
		Network:     network{Allow: sorted(p.Domains)},
		Learned:     learned,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // only strings: cannot fail
	}
	return append(b, '\n')
}

func sorted(ss []string) []string {
	out := append([]string{}, ss...)
	sort.Strings(out)
	return out
}

// Summary is a readable multi-line summary of the report.
func (r Report) Summary() string {
	var b strings.Builder
	section := func(title string, items []string) {
		fmt.Fprintf(&b, "%s:\n", title)
		if len(items) == 0 {
			b.WriteString("  (none)\n")
		}
		for _, it := range sorted(items) {
			fmt.Fprintf(&b, "  %s\n", it)
		}
	}
	p := r.Profile
	fmt.Fprintf(&b, "Learned profile: %d read-only, %d writable, %d domains, %d programs\n",
		len(p.AllowRead), len(p.AllowWrite), len(p.Domains), len(p.Programs))
	section("Read-only (allowRead)", p.AllowRead)
	section("Writable (allowWrite)", p.AllowWrite)
	section("Domains (network.allow)", p.Domains)
	section("Programs run", p.Programs)
	section("Kept denied or not proposed", r.KeptDenied)
	return b.String()
}
