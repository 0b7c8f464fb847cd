package remote

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jailsh/jail/jail"
)

// SpecVersion changes when Spec does: a remote-run of another version
// refuses the spec rather than misreading it.
const SpecVersion = 1

// Spec is what the local side hands the remote jail (jail remote-run
// --spec FILE): the resolved policy with the local paths, the command,
// and its environment with every secret already a placeholder (the
// session key and the values never leave the local machine).
type Spec struct {
	Version int
	Policy  *jail.Policy
	Argv    []string
	// Env is the command's environment as the local plan made it; the
	// remote replaces HOME, USER, LOGNAME, PATH and SHELL with its own.
	Env     []string
	Session string
	// LocalHome, LocalRoot and LocalCwd are the local home, project root
	// and working directory; the policy's paths under them are moved to
	// the remote home and Dir.
	LocalHome, LocalRoot, LocalCwd string
	// Dir is the project's directory on the remote (~/ for its home).
	Dir string
	// Framed says the session's stdin carries frames (WriteFrames): the
	// session has no terminal, and the link's end is told apart from the
	// input's.
	Framed bool
	// Linked says ssh forwards the local proxy's sockets (with a network)
	// and the control socket into the session directory, the spec's own:
	// the remote plan's network is the local proxy, and the jail lives as
	// long as the link. Without it the command runs without a network.
	Linked bool
	// CA is the local proxy's CA certificate (PEM), which the remote jail
	// trusts; empty without a network.
	CA []byte `json:",omitempty"`
}

// Encode is the spec as remote-run reads it.
func (s *Spec) Encode() ([]byte, error) {
	s.Version = SpecVersion
	return json.Marshal(s)
}

// DecodeSpec reads a spec, refusing one of another version.
func DecodeSpec(b []byte) (*Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading the remote spec: %w", err)
	}
	if s.Version != SpecVersion {
		return nil, fmt.Errorf("the remote spec is version %d and this jail reads %d; run the same jail on both sides", s.Version, SpecVersion)
	}
	if s.Policy == nil || len(s.Argv) == 0 {
		return nil, fmt.Errorf("the remote spec has no policy or no command")
	}
	return &s, nil
}

// RemotePaths are the remote home and project directory the spec's
// local paths move to.
type RemotePaths struct {
	Home, Root, Cwd string
}

// Paths resolves Dir against the remote home: the project's remote
// directory, and the working directory in it that matches the local one.
func (s *Spec) Paths(home string) (RemotePaths, error) {
	dir := s.Dir
	if dir == "~" || strings.HasPrefix(dir, "~/") {
		dir = filepath.Join(home, strings.TrimPrefix(dir, "~"))
	}
	if !filepath.IsAbs(dir) {
		return RemotePaths{}, fmt.Errorf("the remote directory %s is not absolute or under ~/", jail.Shown(s.Dir))
	}
	dir = filepath.Clean(dir)
	if dir == "/" || dir == filepath.Clean(home) {
		return RemotePaths{}, fmt.Errorf("the remote directory %s is the root or the home; name a directory of its own", jail.Shown(s.Dir))
	}
	p := RemotePaths{Home: home, Root: dir, Cwd: dir}
	if rel, err := filepath.Rel(s.LocalRoot, s.LocalCwd); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		p.Cwd = filepath.Join(dir, rel)
	}
	return p, nil
}

// Translate moves the policy's paths from the local machine to the
// remote: under the local project root to the remote directory, under
// the local home to the remote home. Other paths (/usr, /etc, a glob)
// mean the same on both.
func (s *Spec) Translate(pol *jail.Policy, to RemotePaths) {
	move := func(p string) string {
		if q, ok := under(p, s.LocalRoot, to.Root); ok {
			return q
		}
		if q, ok := under(p, s.LocalHome, to.Home); ok {
			return q
		}
		return p
	}
	list := func(l []string) []string {
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = move(p)
		}
		return out
	}
	pol.ProjectRoot = to.Root
	pol.AllowRead, pol.AllowWrite = list(pol.AllowRead), list(pol.AllowWrite)
	pol.DenyRead, pol.DenyWrite = list(pol.DenyRead), list(pol.DenyWrite)
	pol.Secrets.Files = list(pol.Secrets.Files)
	for k, v := range pol.Env.Set {
		pol.Env.Set[k] = move(v)
	}
}

// under rewrites p from the tree at from to the tree at to.
func under(p, from, to string) (string, bool) {
	if from == "" || from == "/" {
		return "", false
	}
	if p == from {
		return to, true
	}
	if strings.HasPrefix(p, from+"/") {
		return to + p[len(from):], true
	}
	return "", false
}
