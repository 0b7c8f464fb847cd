package linux

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/control"
	"github.com/jailsh/jail/jail/linux/inside"
	"github.com/jailsh/jail/proxy"
)

// netSession is the host side of a jail's network: the proxy serving the
// session's sockets and the relays of published and forwarded ports.
type netSession struct {
	dir       string
	ca        *proxy.CA
	srv       *proxy.Server
	log       *proxy.Log
	listeners []net.Listener
	ctl       *controlPlane // the session's live control; nil for none
}

// prepareNetwork makes what bubblewrap binds into the jail: the session
// directory, the shared resolv.conf and the CA bundle. The proxy itself
// starts later (serve), while bubblewrap builds the jail.
func prepareNetwork(n *NetPlan) (*netSession, error) {
	if n.External != "" && len(n.Publish)+len(n.Forward) > 0 {
		return nil, fmt.Errorf("published and forwarded ports do not reach a jail on a remote host; run it there without --publish and --forward")
	}
	if err := ensurePrivateDir(filepath.Dir(n.SessionDir)); err != nil {
		return nil, err
	}
	dir := n.SessionDir
	if len(n.Publish) > 0 {
		dir = filepath.Join(n.SessionDir, "pub")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the session directory: %w", err)
	}
	ns := &netSession{dir: n.SessionDir}
	if rc := ResolvConf(n.SessionDir); !sameContent(rc, resolvConf) {
		if err := proxy.WriteFileAtomic(rc, []byte(resolvConf), 0o644); err != nil {
			ns.close()
			return nil, fmt.Errorf("writing resolv.conf: %w", err)
		}
	}
	if n.External != "" && !fileExists(filepath.Join(n.CADir, "ca.pem")) {
		ns.close()
		return nil, fmt.Errorf("the CA certificate of the proxy over ssh is missing from %s; run the command again", n.CADir)
	}
	if !fileExists(filepath.Join(n.CADir, "ca.pem")) {
		ca, err := proxy.LoadOrCreateCA(n.CADir) // the first run makes the CA
		if err != nil {
			ns.close()
			return nil, fmt.Errorf("creating the jail CA in %s: %w", n.CADir, err)
		}
		ns.ca = ca
	}
	if n.Bundle != "" {
		if err := jail.WriteCABundle(n.Bundle, filepath.Join(n.CADir, "ca.pem"), hostCAFile(os.Getenv)); err != nil {
			ns.close()
			return nil, err
		}
	}
	return ns, nil
}

// resolvConf names the jail's resolver: the bridge answers port 53 of
// its loopback, for the proxy.
const resolvConf = "# jail: the jail's resolver; allowed names get addresses the proxy maps back to them, other names do not exist\nnameserver 127.0.0.1\noptions attempts:2 timeout:2\n"

// sameContent reports whether the file at path holds exactly want.
func sameContent(path, want string) bool {
	b, err := os.ReadFile(path)
	return err == nil && string(b) == want
}

// serve starts the proxy on the session's sockets and the relays of
// published and forwarded ports.
func (ns *netSession) serve(n *NetPlan, session string, secrets []proxy.Secret, tokens []proxy.TokenEndpoint) error {
	var err error
	if ns.ca == nil {
		if ns.ca, err = proxy.LoadOrCreateCA(n.CADir); err != nil {
			return fmt.Errorf("loading the jail CA in %s: %w", n.CADir, err)
		}
	}
	// The log is a record, not the boundary: without it the run goes on,
	// warned on stderr.
	ns.log = proxy.OpenLogOrWarn(n.StateDir, os.Stderr)
	cfg := proxy.Config{
		Rules: proxy.Rules{
			Allow: n.Rules.Allow, Deny: n.Rules.Deny, Ask: n.Rules.Ask, Unknown: n.Rules.Unknown,
			Hosts: n.Rules.Hosts, Passthrough: n.Rules.Passthrough,
		},
		CA: ns.ca, Log: ns.log, Session: session, Secrets: secrets, DenyCommands: n.DenyCommands,
		TokenEndpoints: tokens,
	}
	ns.ctl.proxyHooks(&cfg)
	ns.srv, err = proxy.New(cfg)
	if err != nil {
		return fmt.Errorf("starting the proxy: %w", err)
	}
	ns.ctl.served(ns.srv)
	for _, s := range []struct {
		name  string
		serve func(net.Listener) error
	}{{"http.sock", ns.srv.ServeHTTP}, {"socks.sock", ns.srv.ServeSOCKS}, {"capture.sock", ns.srv.ServeCapture}, {"dns.sock", ns.srv.ServeDNS}} {
		l, err := net.Listen("unix", filepath.Join(n.SessionDir, s.name))
		if err != nil {
			return fmt.Errorf("starting the proxy: %w", err)
		}
		ns.listeners = append(ns.listeners, l)
		go s.serve(l)
	}
	// Published ports: the host's loopback port relayed into the jail.
	// Forwarded ports: a socket the jail dials, relayed to the host's port.
	var relays []Relay
	for _, p := range n.Publish {
		relays = append(relays, Relay{Listen: "tcp:127.0.0.1:" + strconv.Itoa(p), Dial: fmt.Sprintf("unix:%s/pub/%d.sock", n.SessionDir, p)})
	}
	for _, p := range n.Forward {
		relays = append(relays, Relay{Listen: fmt.Sprintf("unix:%s/fwd-%d.sock", n.SessionDir, p), Dial: "tcp:127.0.0.1:" + strconv.Itoa(p)})
	}
	ls, err := inside.StartRelays(relays, func(r Relay, c net.Conn) {
		method, tcp := "FORWARD", r.Dial
		if strings.HasPrefix(r.Listen, "tcp:") {
			method, tcp = "PUBLISH", r.Listen
		}
		port, _ := strconv.Atoi(tcp[strings.LastIndexByte(tcp, ':')+1:])
		ns.log.Write(proxy.Entry{Time: time.Now(), Session: session, Method: method, Scheme: "tcp", Host: "127.0.0.1", Port: port, Rule: strings.ToLower(method) + " " + strconv.Itoa(port), Verdict: "allow"})
	})
	if err != nil {
		return fmt.Errorf("ports: %w", err)
	}
	ns.listeners = append(ns.listeners, ls...)
	return nil
}

// Proxy is the proxy of a jail that runs on another machine: served here
// on the unix sockets of the plan's session directory (Dir), which ssh
// forwards to the remote jail, with the plan's rules and the real values
// of its secrets, which never leave this machine.
type Proxy struct {
	Dir string // http.sock, socks.sock, capture.sock, dns.sock
	ns  *netSession
}

// StartProxy starts the proxy of plan (a plan made on this machine for a
// jail that runs on another one) as a local jail's: the session directory,
// the CA, the masked .env copies and the secrets, then the sockets. Close
// stops it. Published and forwarded ports are refused: they would relay
// this machine's ports, not the remote jail's.
func StartProxy(plan *Plan) (*Proxy, error) {
	n := plan.Net
	switch {
	case n == nil:
		return nil, fmt.Errorf("starting the proxy: the plan has no network")
	case n.External != "":
		return nil, fmt.Errorf("starting the proxy: the plan's proxy runs elsewhere")
	case len(n.Publish)+len(n.Forward) > 0:
		return nil, fmt.Errorf("published and forwarded ports do not reach a jail on a remote host; run it there without --publish and --forward")
	}
	ns, err := prepareNetwork(n)
	if err != nil {
		return nil, err
	}
	secrets, err := prepareSecrets(plan, os.Getenv)
	if err != nil {
		ns.close()
		return nil, err
	}
	tokens, _ := signInEndpoints(plan)
	// The remote jail's connections are decided here: so is their live
	// control.
	ns.ctl = startControl(plan, false)
	if err := ns.ctl.listen(plan, os.Stderr); err != nil {
		ns.close()
		return nil, err
	}
	if err := ns.serve(n, plan.Session, secrets, tokens); err != nil {
		ns.close()
		return nil, err
	}
	return &Proxy{Dir: n.SessionDir, ns: ns}, nil
}

// Close stops the proxy, removes its session directory and returns the
// one-line summary of what was denied ("" when nothing was).
func (p *Proxy) Close() string { return p.ns.close() }

// close stops the proxy and the relays, removes the session's sockets and
// returns the one-line summary of what was denied ("" when nothing was).
func (ns *netSession) close() string {
	if ns == nil {
		return ""
	}
	ns.ctl.close() // held requests answered before the proxy stops
	for _, l := range ns.listeners {
		l.Close()
	}
	summary := ""
	if ns.srv != nil {
		summary = proxy.Summary(ns.srv.Denied())
		ns.srv.Close()
	}
	if ns.log != nil {
		ns.log.Close()
	}
	os.RemoveAll(ns.dir)
	return summary
}

// ensurePrivateDir makes dir (mode 0700) or checks that an existing one is
// a real directory owned by this user and closed to others, so that another
// local user cannot plant sockets where jail looks for them.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return privateDir(dir)
}

// privateDir checks that dir is a directory of this user's that no one
// else may write (or read), and not a symlink.
func privateDir(dir string) error { return control.OwnDir(dir, 0o077) }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// prepareSecrets writes the masked copies of the plan's .env files and
// returns every secret the proxy may inject: the environment's (read here,
// in the host process, never in the plan) and the .env files'. The
// placeholders are the plan's: the same session key, the environment's
// values first, so that a .env value equal to the environment's gets the
// environment's placeholder and another value another one.
func prepareSecrets(plan *Plan, hostEnv func(string) string) ([]proxy.Secret, error) {
	phs := jail.NewPlaceholders(plan.SecretKey, plan.Env.Whole...)
	secrets := envSecrets(plan, hostEnv, phs)
	files, err := maskEnvFiles(plan, phs, secrets)
	if err != nil {
		return nil, err
	}
	tokens, err := prepareSignIn(plan)
	if err != nil {
		return nil, err
	}
	return append(append(secrets, files...), tokens...), nil
}

// envSecrets are the secrets of the environment the plan made
// placeholders of, in the plan's order.
func envSecrets(plan *Plan, hostEnv func(string) string, phs *jail.Placeholders) []proxy.Secret {
	var out []proxy.Secret
	for _, b := range plan.Secrets {
		v := hostEnv(b.Name)
		_, pieces := phs.Mask(b.Name, v) // an empty value too: it holds its ordinal, as in PlanEnv
		for _, piece := range pieces {
			if v != "" {
				out = append(out, proxy.Secret{Name: b.Name, Placeholder: piece.Placeholder, Value: piece.Value, Hosts: b.Hosts, Inject: b.Inject})
			}
		}
	}
	return out
}

// maskEnvFiles writes the masked copy of each of the plan's .env files and
// returns the secrets found in them that known does not already hold.
func maskEnvFiles(plan *Plan, phs *jail.Placeholders, known []proxy.Secret) ([]proxy.Secret, error) {
	if len(plan.EnvFiles) == 0 {
		return nil, nil
	}
	dir := filepath.Dir(plan.EnvFiles[0].Copy)
	if err := ensurePrivateDir(filepath.Dir(dir)); err != nil {
		return nil, err
	}
	if err := ensurePrivateDir(dir); err != nil {
		return nil, err
	}
	forced := map[string]bool{}
	for n := range plan.SecretEnv {
		forced[n] = true
	}
	seen := map[string]bool{}
	for _, s := range known {
		seen[s.Placeholder] = true
	}
	var out []proxy.Secret
	pieces := secretPieces(known)
	masked := make([][]byte, len(plan.EnvFiles))
	for i, ef := range plan.EnvFiles {
		var found []jail.SecretPiece
		masked[i], found = jail.MaskEnvFile(jail.ReadEnvFile(ef.Path), forced, phs.Mask)
		for _, fv := range found {
			if !seen[fv.Placeholder] {
				seen[fv.Placeholder] = true
				pieces = append(pieces, fv)
				out = append(out, proxy.Secret{Name: fv.Name, Placeholder: fv.Placeholder, Value: fv.Value, Hosts: jail.SecretHosts(fv.Name, plan.SecretEnv),
					Inject: jail.SecretInject(fv.Name, plan.SecretEnv)})
			}
		}
	}
	// Every secret's value is masked in every file, wherever it stands:
	// a value copied under an innocent name or into a comment is still
	// the credential.
	for i, ef := range plan.EnvFiles {
		if err := os.WriteFile(ef.Copy, []byte(jail.MaskRepeated(string(masked[i]), pieces)), 0o600); err != nil {
			return nil, fmt.Errorf("writing the masked copy of %s: %w", ef.Path, err)
		}
	}
	return out, nil
}

// secretPieces are the values and placeholders of secrets.
func secretPieces(secrets []proxy.Secret) []jail.SecretPiece {
	out := make([]jail.SecretPiece, len(secrets))
	for i, s := range secrets {
		out[i] = jail.SecretPiece{Name: s.Name, Value: s.Value, Placeholder: s.Placeholder}
	}
	return out
}
