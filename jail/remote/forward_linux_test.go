package remote

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
	"github.com/jailsh/jail/proxy"
)

// binDir holds jail and jail-init, built once for the package's tests:
// the remote jail's init is the real one.
var fwBinDir string

func TestMain(m *testing.M) {
	if spec := os.Getenv(fwRemoteRunEnv); spec != "" {
		os.Exit(fwRemoteRun(spec))
	}
	dir, err := os.MkdirTemp("", "jail-remote-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, target := range [][2]string{{"jail", "../../cmd/jail"}, {"jail-init", "../../cmd/jail-init"}} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, target[0]), target[1])
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // init moves every thread to the capture's namespace
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", target[1], err, out)
			os.Exit(1)
		}
	}
	fwBinDir = dir
	if err := makeFwUpstreamPKI(dir); err != nil {
		fmt.Fprintln(os.Stderr, "upstream certificates:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	fwTLSHost    = "tls.example.test"    // allowed, mapped to the upstream's TLS port
	fwAPIHost    = "api.example.test"    // allowed, mapped to the loopback upstream
	fwDeniedHost = "denied.example.test" // mapped to the same upstream, never allowed
	fwRealToken  = "rt-6f1c2a9b8e7d4c3b2a1f0e9d8c7b6a5f"
)

// upstream is a plain HTTP server on the loopback recording what reaches
// it.
type fwUpstream struct {
	addr, tlsAddr string
	mu            sync.Mutex
	seen          []string // "PATH AUTHORIZATION"
}

func startFwUpstream(t *testing.T) *fwUpstream {
	u := &fwUpstream{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		u.mu.Unlock()
		fmt.Fprintf(w, "upstream saw %s\n", r.URL.Path)
	})}
	go srv.Serve(l)
	tl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{fwUpstreamCert}})
	if err != nil {
		t.Fatal(err)
	}
	u.tlsAddr = tl.Addr().String()
	go srv.Serve(tl)
	t.Cleanup(func() { srv.Close() })
	return u
}

// upstreamCert is the TLS upstream's certificate for tlsHost, issued by a
// CA that this process (the proxy's) trusts through SSL_CERT_FILE.
var fwUpstreamCert tls.Certificate

func makeFwUpstreamPKI(dir string) error {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: fwTLSHost}, DNSNames: []string{fwTLSHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	fwUpstreamCert = tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
	bundle := filepath.Join(dir, "upstream-ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return err
	}
	return os.Setenv("SSL_CERT_FILE", bundle)
}

func (u *fwUpstream) got() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// rig is one machine standing for both ends: a fake home and project, a
// user configuration allowing apiHost and binding SERVICE_TOKEN to it.
type fwRig struct {
	home, project, settings string
	up                      *fwUpstream
	noNetwork               bool // --no-network
}

func newFwRig(t *testing.T) *fwRig {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	r := &fwRig{home: filepath.Join(base, "home"), up: startFwUpstream(t)}
	r.project = filepath.Join(r.home, "proj")
	if err := os.MkdirAll(r.project, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"network": map[string]any{
			"allow": []string{fwAPIHost, fwTLSHost}, "unknown": "deny",
			"hosts": map[string]string{fwAPIHost: r.up.addr, fwDeniedHost: r.up.addr, fwTLSHost: r.up.tlsAddr},
		},
		"secrets": map[string]any{"env": map[string]any{"SERVICE_TOKEN": []string{fwAPIHost, fwTLSHost}}},
	})
	r.settings = filepath.Join(base, "settings.json")
	if err := os.WriteFile(r.settings, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", r.home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(r.home, ".config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(r.home, ".local", "state"))
	t.Setenv("SERVICE_TOKEN", fwRealToken)
	return r
}

// plan plans argv in the project: for this machine's own proxy when
// external is "", else for the proxy whose forwarded sockets are there.
func (r *fwRig) plan(t *testing.T, external string, argv ...string) *linux.Plan {
	t.Helper()
	opts := jail.Options{Settings: r.settings, NoNetwork: r.noNetwork}
	layers, root, err := jail.LoadLayers(opts, argv, r.project, r.home, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := jail.Resolve(layers, root, r.home, opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := linux.Gather(pol, r.home, r.project)
	if err != nil {
		t.Fatal(err)
	}
	f.Exe, f.External = filepath.Join(fwBinDir, "jail-init"), external
	p, err := linux.Build(pol, f, argv)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// remoteEnd is the remote half of a session on this machine: the
// directory PrepareScript made, and one byte relay per forwarding, each a
// process of its own as ssh's are (no descriptor crosses it).
type fwRemoteEnd struct {
	dir    string
	relays map[string]*exec.Cmd // by the remote socket's name
}

func startFwRemoteEnd(t *testing.T, fw *Forward) *fwRemoteEnd {
	t.Helper()
	ca, err := fw.CACert()
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("/bin/sh", "-c", PrepareScript)
	sh.Stdin = bytes.NewReader(ca)
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("PrepareScript: %v", err)
	}
	dir, err := ParseRemoteDir(string(out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the remote session directory %s is not private: %v %v", dir, fi.Mode(), err)
	}
	if b, err := os.ReadFile(linux.ExternalCA(dir)); err != nil || !bytes.Equal(b, ca) {
		t.Fatalf("the remote session directory holds no copy of the proxy's CA: %v", err)
	}
	args, err := fw.SSHArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &fwRemoteEnd{dir: dir, relays: map[string]*exec.Cmd{}}
	for i := 0; i < len(args); i++ {
		if args[i] != "-R" {
			continue
		}
		remote, local, _ := strings.Cut(args[i+1], ":")
		c := exec.Command("socat", "UNIX-LISTEN:"+remote+",fork,umask=077", "UNIX-CONNECT:"+local)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		e.relays[filepath.Base(remote)] = c
		t.Cleanup(func() { e.cut(filepath.Base(remote)) })
		fwWaitFor(t, 5*time.Second, "socat listening on "+remote, func() bool { return fwListening(remote) })
	}
	return e
}

// fwListening reports whether a unix socket at path listens: socat makes
// the file when it binds, a moment before it listens, and a jail that
// dials in between is refused. /proc/net/unix marks a listening socket
// with the flag __SO_ACCEPTCON (00010000); dialling to find out would be
// relayed to the local socket as a connection of its own.
func fwListening(path string) bool {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && f[len(f)-1] == path && f[3] == "00010000" {
			return true
		}
	}
	return false
}

// cut kills the relay of the remote socket name, the connections it
// relays with it: the link of that forwarding is gone.
func (e *fwRemoteEnd) cut(name string) {
	if c := e.relays[name]; c != nil && c.Process != nil {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Wait()
	}
}

func fwWaitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// startSession starts the local proxy and the remote end, and plans argv
// for the remote jail, its environment the local plan's (placeholders
// made here: the session key never leaves).
func startFwSession(t *testing.T, r *fwRig, argv ...string) (*Forward, *fwRemoteEnd, *linux.Plan, *linux.Plan) {
	t.Helper()
	local := r.plan(t, "", argv...)
	fw, err := StartForward(local)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	e := startFwRemoteEnd(t, fw)
	remote := r.plan(t, e.dir, argv...)
	remote.Env = local.Env
	return fw, e, local, remote
}

// TestRemoteJailThroughForwardedProxy: a jail whose proxy runs in another
// process, reached only through byte relays as ssh -R makes them, is
// decided by that proxy: curl through the proxy variables and curl
// captured without them reach the loopback upstream by its allowed name,
// over plain HTTP and over HTTPS intercepted with the local proxy's CA
// (which the remote jail trusts from its session directory), the real
// token injected there while the jail holds a placeholder; a
// denied name is refused and logged on the proxy's side; no socket is
// handed over the relays (a handed one would be lost and the request
// would hang).
func TestRemoteJailThroughForwardedProxy(t *testing.T) {
	r := newFwRig(t)
	out := filepath.Join(r.project, "out.txt")
	script := `exec >` + out + ` 2>&1
echo "token=$SERVICE_TOKEN"
curl -sS -m 10 -H "Authorization: Bearer $SERVICE_TOKEN" http://` + fwAPIHost + `/proxied
curl -sS -m 10 --noproxy '*' -H "Authorization: Bearer $SERVICE_TOKEN" http://` + fwAPIHost + `/captured
curl -sS -m 10 -H "Authorization: Bearer $SERVICE_TOKEN" https://` + fwTLSHost + `/tls
curl -sS -m 10 --noproxy '*' -H "Authorization: Bearer $SERVICE_TOKEN" https://` + fwTLSHost + `/tls-captured
curl -sS -m 10 -o /dev/null -w 'denied-status=%{http_code}\n' http://` + fwDeniedHost + `/denied || echo denied-failed
curl -sS -m 10 --noproxy '*' http://` + fwDeniedHost + `/denied-captured || echo denied-captured-failed
`
	fw, e, local, remote := startFwSession(t, r, "sh", "-c", script)
	_ = e
	if !strings.Contains(remote.String(), "over ssh") {
		t.Fatalf("the remote plan does not say its proxy is over ssh:\n%s", remote.String())
	}
	var stderr bytes.Buffer
	code, err := linux.Run(remote, &stderr)
	b, _ := os.ReadFile(out)
	if code != 0 || err != nil {
		t.Fatalf("remote jail: exit %d, %v\nstderr: %s\nout: %s", code, err, stderr.String(), b)
	}
	select {
	case <-fw.Lost(): // the remote jail, done, closed its link
	case <-time.After(2 * time.Second):
		t.Error("the local side did not see the finished remote jail close its link")
	}
	o := string(b)
	if strings.Contains(o, fwRealToken) {
		t.Errorf("the jail saw the real token:\n%s", o)
	}
	if !strings.Contains(o, "token=") || strings.Contains(o, "token=\n") {
		t.Errorf("the jail printed no placeholder for the token:\n%s", o)
	}
	for _, want := range []string{"upstream saw /proxied", "upstream saw /captured", "upstream saw /tls", "upstream saw /tls-captured", "denied-status=403"} {
		if !strings.Contains(o, want) {
			t.Errorf("the jail's output lacks %q:\n%s", want, o)
		}
	}
	got := r.up.got()
	for _, p := range []string{"/proxied", "/captured", "/tls", "/tls-captured"} {
		if !fwContains(got, p+" Bearer "+fwRealToken) {
			t.Errorf("the upstream did not get %s with the real token injected: %q", p, got)
		}
	}
	for _, s := range got {
		if strings.HasPrefix(s, "/denied") {
			t.Errorf("a denied request reached the upstream: %q", s)
		}
	}
	fw.Close()
	var denied []string
	proxy.ReadSession(local.Net.StateDir, local.Session, proxy.LogPos{}, func(en proxy.Entry) bool {
		if en.Host == fwDeniedHost && en.Verdict == "deny" {
			denied = append(denied, en.Method)
		}
		return true
	})
	if len(denied) < 2 {
		t.Errorf("the proxy logged %d denials of %s (want the proxied and the captured one): %q", len(denied), fwDeniedHost, denied)
	}
}

func fwContains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// markerScript appends to marker every 50ms, from a child of the shell as
// well as the shell itself, until killed.
func fwMarkerScript(marker string) string {
	return `(while :; do echo child >>` + marker + `; sleep 0.05; done) &
while :; do echo loop >>` + marker + `; sleep 0.05; done`
}

// runUntilCut runs the remote jail of a marker loop, cuts the link with
// cut once the marker grows, and checks that the jail ends within a
// second with 125 and the link named, and that nothing writes the marker
// after.
func fwRunUntilCut(t *testing.T, r *fwRig, cut func(e *fwRemoteEnd, fw *Forward)) {
	marker := filepath.Join(r.project, "marker")
	fw, e, _, remote := startFwSession(t, r, "sh", "-c", fwMarkerScript(marker))
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	var stderr bytes.Buffer
	go func() {
		code, err := linux.Run(remote, &stderr)
		done <- result{code, err}
	}()
	size := func() int64 {
		fi, err := os.Stat(marker)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	for end := time.Now().Add(20 * time.Second); size() <= 64; time.Sleep(20 * time.Millisecond) {
		select {
		case res := <-done:
			t.Fatalf("the remote jail ended before its link was cut: %d, %v\n%s", res.code, res.err, stderr.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for the jailed loop to write its marker (%d bytes)\n%s", size(), stderr.String())
		}
	}
	select {
	case <-fw.Linked():
	case <-time.After(5 * time.Second):
		t.Fatal("the remote jail never connected to the control socket")
	}
	cut(e, fw)
	start := time.Now()
	var res result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the remote jail kept running 5s after its link was cut")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the remote jail took %v to stop after its link was cut, want under a second", d)
	}
	if res.code != 125 || res.err == nil || !strings.Contains(res.err.Error(), "link") {
		t.Errorf("the remote jail ended with %d, %v; want 125 and the lost link named", res.code, res.err)
	}
	before := size()
	time.Sleep(700 * time.Millisecond)
	if after := size(); after != before {
		t.Errorf("the marker grew from %d to %d bytes after the jail was stopped: a process of the jail lives on", before, after)
	}
	select {
	case <-fw.Lost():
	case <-time.After(2 * time.Second):
		t.Error("the local side did not see the link lost")
	}
}

// TestRemoteJailStopsWhenTheLinkIsCut: the relay of the control socket is
// killed (ssh gone): the jail, a background child included, is stopped
// within a second and the run fails.
func TestRemoteJailStopsWhenTheLinkIsCut(t *testing.T) {
	fwRunUntilCut(t, newFwRig(t), func(e *fwRemoteEnd, _ *Forward) { e.cut("control.sock") })
}

// TestRemoteJailWithoutNetworkStopsWhenTheLinkIsCut: a jail without
// network has no proxy to lose, and still its link: cut, the jail stops
// the same way.
func TestRemoteJailWithoutNetworkStopsWhenTheLinkIsCut(t *testing.T) {
	r := newFwRig(t)
	r.noNetwork = true
	fwRunUntilCut(t, r, func(e *fwRemoteEnd, fw *Forward) {
		if len(e.relays) != 1 || fw.CAFile != "" {
			t.Errorf("a jail without network forwards %d sockets (CA %q), want the control socket alone", len(e.relays), fw.CAFile)
		}
		e.cut("control.sock")
	})
}

// TestRemoteJailStopsWhenTheLocalSideEnds: the local side closing the
// forward (its run interrupted) stops the remote jail the same way.
func TestRemoteJailStopsWhenTheLocalSideEnds(t *testing.T) {
	fwRunUntilCut(t, newFwRig(t), func(_ *fwRemoteEnd, fw *Forward) { fw.Close() })
}

// TestRemoteJailRefusesWithoutLink: a remote jail whose control socket
// cannot be reached never runs its command.
func TestRemoteJailRefusesWithoutLink(t *testing.T) {
	r := newFwRig(t)
	marker := filepath.Join(r.project, "ran")
	_, e, _, remote := startFwSession(t, r, "sh", "-c", "touch "+marker)
	e.cut("control.sock")
	os.Remove(linux.ExternalControl(e.dir))
	var stderr bytes.Buffer
	code, err := linux.Run(remote, &stderr)
	if code != 125 || err == nil {
		t.Errorf("without its link the remote jail ended with %d, %v; want 125", code, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran without the link")
	}
}

// TestRemoteJailRefusesSharedDir: a session directory others may enter
// (where another user could put sockets and a CA of their own) is refused
// before the command runs.
func TestRemoteJailRefusesSharedDir(t *testing.T) {
	r := newFwRig(t)
	marker := filepath.Join(r.project, "ran")
	_, e, _, remote := startFwSession(t, r, "sh", "-c", "touch "+marker)
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code, err := linux.Run(remote, &stderr)
	if code != 125 || err == nil || !strings.Contains(err.Error(), "private") {
		t.Errorf("with a shared session directory the remote jail ended with %d, %v; want 125 naming it", code, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran with a shared session directory")
	}
}

// TestRemoteJailRefusesWithoutProxySide: the control forwarding accepts
// but the local side is gone (its control socket closed): the remote jail
// never runs its command.
func TestRemoteJailRefusesWithoutProxySide(t *testing.T) {
	r := newFwRig(t)
	marker := filepath.Join(r.project, "ran")
	fw, _, _, remote := startFwSession(t, r, "sh", "-c", "touch "+marker)
	fw.control.Close()
	var stderr bytes.Buffer
	code, err := linux.Run(remote, &stderr)
	if code != 125 || err == nil {
		t.Errorf("without the local side the remote jail ended with %d, %v; want 125", code, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran without the local side")
	}
}

// TestRemotePortsRefused: published and forwarded ports would relay this
// machine's ports, not the remote jail's: the local side refuses to serve
// such a plan, and a remote plan with them never runs its command.
func TestRemotePortsRefused(t *testing.T) {
	r := newFwRig(t)
	for _, opts := range []jail.Options{{Publish: []int{8080}}, {Forward: []int{5432}}} {
		opts.Settings = r.settings
		layers, root, err := jail.LoadLayers(opts, []string{"true"}, r.project, r.home, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		pol, err := jail.Resolve(layers, root, r.home, opts)
		if err != nil {
			t.Fatal(err)
		}
		f, err := linux.Gather(pol, r.home, r.project)
		if err != nil {
			t.Fatal(err)
		}
		f.Exe = filepath.Join(fwBinDir, "jail-init")
		p, err := linux.Build(pol, f, []string{"true"})
		if err != nil {
			t.Fatal(err)
		}
		if fw, err := StartForward(p); err == nil {
			fw.Close()
			t.Errorf("%+v: the local side served a remote plan with ports", opts)
		}
		marker := filepath.Join(r.project, "ran")
		f.External = t.TempDir()
		p, err = linux.Build(pol, f, []string{"touch", marker})
		if err != nil {
			t.Fatal(err)
		}
		if code, err := linux.Run(p, io.Discard); code != 125 || err == nil || !strings.Contains(err.Error(), "ports") {
			t.Errorf("%+v: a remote plan with ports ran: %d, %v", opts, code, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%+v: the command ran", opts)
		}
	}
}
