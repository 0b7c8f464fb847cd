package jail

import (
	"path/filepath"
)

// SignInRule is an agent's sign-in file: the file its CLI keeps its
// tokens in, where each token sits in it, and where the provider takes
// them.
type SignInRule struct {
	Profile string // the profile that makes the file the agent's
	Rel     string // relative to the home
	Format  string // "claude"
	// Tokens are the JSON paths of the tokens in the file and the secret
	// each is.
	Tokens []SignInToken
	// Endpoint is the provider's token endpoint (host and path), where a
	// refresh token is sent and new tokens come from.
	EndpointHost, EndpointPath string
	// Providers makes the file one keyed by provider id: a token's path
	// starting with "*" stands for that path under every key, and the
	// key's entry here says where its tokens go (see expandSignInRule).
	// A key missing here gets placeholders bound nowhere.
	Providers map[string]SignInProvider
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
	Token      SignInToken
}

// SignInProvider is where one provider of a keyed sign-in file takes its
// tokens: its API key and access token to Hosts at Inject, its refresh
// token to its token endpoint, if it has one.
type SignInProvider struct {
	Hosts, Inject []string // the API key's
	// AccessHosts and AccessInject are the OAuth access token's; nil
	// takes Hosts and Inject.
	AccessHosts, AccessInject  []string
	EndpointHost, EndpointPath string
}

// SignInToken is one token of a sign-in file.
type SignInToken struct {
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
	Rule          SignInRule
	// Rules are the rules the file's tokens were taken by, once its copy
	// is written: Rule's expansion for the file (expandSignInRule).
	Rules []SignInRule
}

// signInInterest are the sign-in files, and their directories, whose
// facts a plan needs.
func signInInterest(home string) []string {
	var out []string
	for _, r := range SignInRules {
		out = append(out, filepath.Join(home, r.Rel), filepath.Dir(filepath.Join(home, r.Rel)))
	}
	return out
}
