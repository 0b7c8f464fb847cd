package linux

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/jailsh/jail/jail"
)

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
