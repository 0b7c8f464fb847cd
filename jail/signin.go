package jail

import (
	"fmt"
	"path/filepath"
	"slices"
)

// signInRule is an agent's sign-in file: the file its CLI keeps its
// tokens in, where each token sits in it, and where the provider takes
// them.
type signInRule struct {
	Profile string // the profile that makes the file the agent's
	Rel     string // relative to the home
	Format  string // "claude"
	// Tokens are the JSON paths of the tokens in the file and the secret
	// each is.
	Tokens []signInToken
	// Endpoint is the provider's token endpoint (host and path), where a
	// refresh token is sent and new tokens come from.
	EndpointHost, EndpointPath string
	// Providers makes the file one keyed by provider id: a token's path
	// starting with "*" stands for that path under every key, and the
	// key's entry here says where its tokens go (see expandSignInRule).
	// A key missing here gets placeholders bound nowhere.
	Providers map[string]signInProvider
	// Key is, in a rule expanded for one key of a keyed file, that key.
	Key string
	// Missing is what a missing file is held as in a session view: its
	// content, for a CLI that cannot read an empty file (empty by default).
	Missing string
	// Issued are the provider's other endpoints that make a new
	// credential for a request carrying the file's token (Claude Code's
	// API key, made with its access token): the new one is swapped for a
	// placeholder like a refreshed token, and never saved.
	Issued []issuedToken
}

// issuedToken is an endpoint (host and path) whose answer's Token.Field
// is a new credential.
type issuedToken struct {
	Host, Path string
	Token      signInToken
}

// signInProvider is where one provider of a keyed sign-in file takes its
// tokens: its API key and access token to Hosts at Inject, its refresh
// token to its token endpoint, if it has one.
type signInProvider struct {
	Hosts, Inject []string // the API key's
	// AccessHosts and AccessInject are the OAuth access token's; nil
	// takes Hosts and Inject.
	AccessHosts, AccessInject  []string
	EndpointHost, EndpointPath string
}

// signInToken is one token of a sign-in file.
type signInToken struct {
	Path   []string // JSON keys from the top
	Field  string   // the token endpoint's answer field that replaces it
	Name   string   // the secret's name
	Hosts  []string // where the real value is injected
	Inject []string // where in a request to Hosts
	// Type, in a keyed file, is the entry's "type" the token is taken
	// from: an entry of another type holds no such token.
	Type string
	// Shaped, for a path ending in "**" (every string under the path
	// before it, at any depth), takes only the values of a known
	// credential shape.
	Shaped bool
}

// SignInFile is an agent's sign-in file shown inside as a session copy
// whose tokens are placeholders. The host file is never bound into the
// jail; only the proxy's refresh path writes it.
type SignInFile struct {
	Path string // inside
	Host string // the host file (a symlink's target)
	Copy string // host path of the session copy, written before the jail starts
	// InPlace: the copy is bound over the host file's name (no session
	// view), so the host file is saved in place, never renamed over.
	InPlace bool
	// Missing: the host has no such file, so nothing is copied; a sign-in
	// made inside still gets placeholders, and Keep says whether the host
	// may keep it after exit (with the person's yes).
	Missing, Keep bool
	Rule          signInRule
	// rules are the rules the file's tokens were taken by, once its copy
	// is written: Rule's expansion for the file (expandSignInRule).
	rules []signInRule
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
	for _, rule := range signInRules {
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
			p.SignIn = append(p.SignIn, SignInFile{Path: path, Host: spot.Host, Copy: filepath.Join(v.Dir, filepath.Base(path)),
				Missing: !spot.Exists, Keep: true, Rule: rule})
			continue
		}
		switch {
		case spot.Exists:
			if spot.Bound { // the host file's own bind would lie under the copy, its name the host's
				p.Ops = slices.DeleteFunc(p.Ops, func(o Op) bool { return o.Dest == path && (o.Kind == "bind" || o.Kind == "ro-bind") })
			}
			cp := filepath.Join(sessionDir, fmt.Sprintf("signin-%d%s", len(p.SignIn), filepath.Ext(rule.Rel)))
			p.SignIn = append(p.SignIn, SignInFile{Path: path, Host: spot.Host, Copy: cp, InPlace: !spot.Bound, Rule: rule})
			kind := "ro-bind"
			if spot.Writable {
				kind = "bind"
			}
			p.Ops = append(p.Ops, Op{Kind: kind, Src: cp, Dest: path, Why: "sign-in tokens: placeholders inside"})
		case spot.Writable:
			p.SignIn = append(p.SignIn, SignInFile{Path: path, Host: spot.Host, Missing: true, Rule: rule})
			p.Placeholders = append(p.Placeholders, PathPlaceholder{Path: spot.Host})
			p.Ops = append(p.Ops, Op{Kind: "mask", Dest: path, Why: "sign-in tokens: none; a placeholder on the host while the jail runs"})
		}
	}
}

// signInInterest are the sign-in files, and their directories, whose
// facts a plan needs.
func signInInterest(home string) []string {
	var out []string
	for _, r := range signInRules {
		out = append(out, filepath.Join(home, r.Rel), filepath.Dir(filepath.Join(home, r.Rel)))
	}
	return out
}
