package linux

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jailsh/jail/jail"
)

// SignInView is a host directory that holds sign-in files, shown inside
// as a session directory of its own rather than bound itself.
//
// A bind of one file over a name in a host directory hangs on that name:
// when a process on the host renames a new file over it, or unlinks it,
// the kernel detaches every mount on the name in every mount namespace,
// and the jail then sees the host's new file (an agent refreshing its
// tokens outside the jail does exactly this). A session directory holds
// no host name at all: the sign-in files are plain files in it (session
// copies, or empty and read-only where the host has none); every other
// file of the host directory is a hard link to it, the same file written
// in place by either side, unless it is protected (then an empty stub
// with the host file bound over it read-only), masked (the stub left
// unbound, the mask mounted over it) or cannot be linked (bound like a
// protected one, writable); every directory is bound onto a stub; a
// symlink is copied. A host-side rename, unlink or replacement of any
// name then replaces a host name that no mount of the jail hangs on: the
// jail keeps the entry it was shown, or the session directory's stub,
// never the host's new file.
//
// After exit, what the jail changed at the top of the directory is
// applied to the host directory (see moveBack): a new entry is moved in
// when the host has no entry of that name (else kept beside it under a
// suffixed name, reported); a file renamed over, renamed away or removed
// inside is so on the host unless the host changed it meanwhile. A bound
// name (a directory, a protected file) cannot be removed or renamed
// inside: rmdir, unlink and rename give EBUSY, as for any mount point.
// The sign-in files' names, the protected and the masked ones never reach
// the host, whatever the jail left there.
type SignInView struct {
	Path     string // the directory inside
	Host     string // the host directory behind it
	Dir      string // the session directory on the host, bound at Path
	Writable bool
	// SignIn are the names of the sign-in files copied into Dir; Held
	// those missing on the host: missing in Dir too, so that what a
	// sign-in inside writes there stays in the session, or held read-only
	// with the content HeldAs gives them. Neither is ever bound from the
	// host nor moved back.
	SignIn, Held []string
	HeldAs       map[string]string `json:",omitempty"`
	// ReadOnly are the names bound read-only whatever Writable says;
	// Hidden those masked, whose stub is left unbound. Neither is moved
	// back.
	ReadOnly, Hidden []string
}

// viewSpot is what the planner knows of a directory holding a sign-in
// file: its host path, whether the jail may write it, and the names the
// policy protects or masks in it.
type viewSpot struct {
	Host             string
	Writable         bool
	Bound            bool // the directory is a bind of its own, which the view replaces
	ReadOnly, Hidden []string
}

// signInViewDir is the session directory of view n: in jail's state
// directory on disk, so that what the jail created in it outlives a
// crash of jail.
func signInViewDir(stateDir, session string, n int) string {
	return filepath.Join(stateDir, "views", session, fmt.Sprint(n))
}

// planSignInView adds the sign-in file at path to the view of its
// directory, planning the view when the directory has none yet. exists
// tells whether the host has the file.
func planSignInView(p *Plan, stateDir, path string, exists bool, spot viewSpot) *SignInView {
	dir, name := filepath.Dir(path), filepath.Base(path)
	i := slices.IndexFunc(p.SignInViews, func(v SignInView) bool { return v.Path == dir })
	if i < 0 {
		p.SignInViews = append(p.SignInViews, SignInView{Path: dir, Host: spot.Host, Writable: spot.Writable,
			Dir: signInViewDir(stateDir, p.Session, len(p.SignInViews)), ReadOnly: spot.ReadOnly, Hidden: spot.Hidden})
		i = len(p.SignInViews) - 1
		p.Ops = insertViewOp(p.Ops, Op{Kind: "view", Src: p.SignInViews[i].Dir, Dest: dir}, spot.Bound)
	}
	v := &p.SignInViews[i]
	if exists {
		v.SignIn = append(v.SignIn, name)
	} else {
		v.Held = append(v.Held, name)
	}
	for j := range p.Ops {
		if p.Ops[j].Dest == dir && p.Ops[j].Kind == "view" {
			p.Ops[j].Why = v.why()
			if !v.Writable {
				p.Ops[j].Kind = "ro-view"
			}
		}
	}
	return v
}

// holdAs makes the held file name hold content.
func (v *SignInView) holdAs(name, content string) {
	if v.HeldAs == nil {
		v.HeldAs = map[string]string{}
	}
	v.HeldAs[name] = content
}

// why is the view's line in jail plan.
func (v *SignInView) why() string {
	var parts []string
	if len(v.SignIn) > 0 {
		parts = append(parts, "sign-in tokens: placeholders inside")
	}
	if len(v.Held) > 0 {
		parts = append(parts, "sign-in tokens: none; "+strings.Join(v.Held, ", ")+" made inside stays in the session")
	}
	return "session view (" + strings.Join(parts, "; ") + "; the host's other entries shown in it, what the jail changes there applied after exit)"
}

// insertViewOp puts a view's op where the bind of its directory stood
// (bound), or else before the first op below the directory: whatever is
// mounted below it (read-only binds, masks) is mounted over the view.
func insertViewOp(ops []Op, op Op, bound bool) []Op {
	for i, o := range ops {
		if bound && o.Dest == op.Dest && (o.Kind == "bind" || o.Kind == "ro-bind") {
			ops[i] = op // the first at the path: the tree's bind, before any read-only re-bind
			return ops
		}
	}
	for i, o := range ops {
		if o.Dest != op.Dest && jail.Under(o.Dest, op.Dest) {
			return slices.Insert(ops, i, op)
		}
	}
	return append(ops, op)
}

// expandViews inserts, right after each view's op, the binds of its
// entries (made by prepareSignInViews), before anything else mounted
// below the view.
func expandViews(ops []Op, entries map[string][]Op) []Op {
	if len(entries) == 0 {
		return ops
	}
	out := make([]Op, 0, len(ops))
	for _, o := range ops {
		out = append(out, o)
		if o.Kind == "view" || o.Kind == "ro-view" {
			out = append(out, entries[o.Dest]...)
		}
	}
	return out
}

// topNames are the names directly in dir of the paths in list.
func topNames(dir string, list []string) []string {
	var out []string
	for _, p := range list {
		if filepath.Dir(p) == dir && !slices.Contains(out, filepath.Base(p)) {
			out = append(out, filepath.Base(p))
		}
	}
	slices.Sort(out)
	return out
}

// readOnlyPaths are the paths a plan keeps read-only: re-bound read-only
// (roSet), or held by a placeholder bound read-only.
func readOnlyPaths(p *Plan, roSet map[string]bool) []string {
	var out []string
	for rp := range roSet {
		out = append(out, rp)
	}
	for _, m := range p.Mounts {
		if m.ReadOnly {
			out = append(out, m.Path)
		}
	}
	return out
}

// hiddenPaths are the paths a plan shows something else at: masks, and
// masked copies from the session directory.
func hiddenPaths(p *Plan, sessionDir string) []string {
	var out []string
	for _, o := range p.Ops {
		if o.Kind == "mask" || o.Kind == "mask-dir" || jail.Under(o.Src, sessionDir) {
			out = append(out, o.Dest)
		}
	}
	return out
}

// signInSpot is where a sign-in file stands for the plan.
type signInSpot struct {
	Host     string // the host file
	Exists   bool   // a readable regular file
	Writable bool   // inside a tree the jail may write
	Bound    bool   // bound by itself (the bind of the file is the only one)
}

// planSignIn adds to p, for each sign-in file of p's profiles visible
// inside, a session copy in its place. Where its directory is a host
// directory the jail sees, that directory is shown as a session view
// (SignInView) holding the copy, or, for a missing file, an empty one
// held read-only. Elsewhere the copy is bound over the file, and a
// missing one in a writable tree is held by a placeholder bound
// read-only, so that nothing can plant it.
func planSignIn(p *Plan, home, sessionDir, stateDir string, where func(path string) (signInSpot, bool), view func(dir string) (viewSpot, bool)) {
	for _, rule := range jail.SignInRules {
		if !slices.Contains(p.Profiles, rule.Profile) {
			continue
		}
		path := filepath.Join(home, rule.Rel)
		spot, ok := where(path)
		if !ok {
			continue
		}
		if vs, ok := view(filepath.Dir(path)); ok {
			v := planSignInView(p, stateDir, path, spot.Exists, vs)
			if !spot.Exists && rule.Missing != "" {
				v.holdAs(filepath.Base(path), rule.Missing)
			}
			p.SignIn = append(p.SignIn, jail.SignInFile{Path: path, Host: spot.Host, Copy: filepath.Join(v.Dir, filepath.Base(path)),
				Missing: !spot.Exists, Keep: true, Rule: rule})
			continue
		}
		switch {
		case spot.Exists:
			if spot.Bound { // the host file's own bind would lie under the copy, its name the host's
				p.Ops = slices.DeleteFunc(p.Ops, func(o Op) bool { return o.Dest == path && (o.Kind == "bind" || o.Kind == "ro-bind") })
			}
			cp := filepath.Join(sessionDir, fmt.Sprintf("signin-%d%s", len(p.SignIn), filepath.Ext(rule.Rel)))
			p.SignIn = append(p.SignIn, jail.SignInFile{Path: path, Host: spot.Host, Copy: cp, InPlace: !spot.Bound, Rule: rule})
			kind := "ro-bind"
			if spot.Writable {
				kind = "bind"
			}
			p.Ops = append(p.Ops, Op{Kind: kind, Src: cp, Dest: path, Why: "sign-in tokens: placeholders inside"})
		case spot.Writable:
			p.SignIn = append(p.SignIn, jail.SignInFile{Path: path, Host: spot.Host, Missing: true, Rule: rule})
			p.Placeholders = append(p.Placeholders, PathPlaceholder{Path: spot.Host})
			p.Ops = append(p.Ops, Op{Kind: "mask", Dest: path, Why: "sign-in tokens: none; a placeholder on the host while the jail runs"})
		}
	}
}
