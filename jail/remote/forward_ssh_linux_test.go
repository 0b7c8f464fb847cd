package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
	"github.com/jailsh/jail/proxy"
)

// The same session over the real OpenSSH: sshd on the loopback, run as
// the unprivileged test user (the remote account), the proxy and ssh
// here as the user running the tests. The remote end of the session is
// this test binary run by ssh as a minimal remote jail runner
// (remoteRunEnv): it plans the command for the forwarded sockets and runs
// it, as the jail binary's remote runner does.

const (
	fwRemoteUser   = "jailtest"
	fwRemoteRunEnv = "JAIL_TEST_REMOTE_RUN"
)

// remoteSpec is what the local side tells the test's remote runner.
type fwRemoteSpec struct {
	Dir, Settings, Home, Project string
	Argv                         []string
	Init                         string
	Env                          map[string]string // placeholders made on the local side
}

// remoteRun plans and runs the spec's command in a jail whose proxy is the
// one forwarded into the spec's directory, and returns its exit code.
func fwRemoteRun(specJSON string) int {
	var s fwRemoteSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		fmt.Fprintln(os.Stderr, "remote run:", err)
		return 125
	}
	opts := jail.Options{Settings: s.Settings}
	layers, root, err := jail.LoadLayers(opts, s.Argv, s.Project, s.Home, os.Getenv)
	if err == nil {
		var pol *jail.Policy
		if pol, err = jail.Resolve(layers, root, s.Home, opts); err == nil {
			var f *linux.Facts
			if f, err = linux.Gather(pol, s.Home, s.Project); err == nil {
				f.Exe, f.External = s.Init, s.Dir
				var p *linux.Plan
				if p, err = linux.Build(pol, f, s.Argv); err == nil {
					p.Env.Env = fwWithEnv(p.Env.Env, s.Env)
					code, err := linux.Run(p, os.Stderr)
					if err != nil {
						fmt.Fprintln(os.Stderr, "jail:", err)
					}
					return code
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, "jail:", err)
	return 125
}

// withEnv is env with the variables of set in place of its own.
func fwWithEnv(env []string, set map[string]string) []string {
	var out []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); set[name] == "" {
			out = append(out, kv)
		}
	}
	for name, v := range set {
		out = append(out, name+"="+v)
	}
	return out
}

// sshRig is the sshd of the remote account and the ssh client options
// that reach it, with its host key pinned.
type fwSSHD struct {
	port       int
	opts       []string
	cred       *syscall.Credential
	remoteHome string // the remote account's fake home, with the project
	bin        string // this test binary and jail-init, where the remote account can run them
	log        *fwBuffer
}

type fwBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *fwBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *fwBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startFwSSHD(t *testing.T) *fwSSHD {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the real-sshd session needs root to run sshd as the remote account " + fwRemoteUser + " (make test runs it as root)")
	}
	u, err := user.Lookup(fwRemoteUser)
	if err != nil {
		t.Fatalf("user %q does not exist; `make test` creates it: %v", fwRemoteUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	r := &fwSSHD{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, log: &fwBuffer{}}
	dir, err := os.MkdirTemp("", "jail-remote-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for _, name := range []string{"host_key", "client_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	os.Rename(filepath.Join(dir, "client_key.pub"), filepath.Join(dir, "authorized_keys"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := fmt.Sprintf("ListenAddress 127.0.0.1:%d\nHostKey %[2]s/host_key\nAuthorizedKeysFile %[2]s/authorized_keys\nUsePAM no\nStrictModes no\nPidFile none\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nLogLevel VERBOSE\n", r.port, dir)
	fwWrite(t, filepath.Join(dir, "sshd_config"), cfg, 0o644)
	hostPub, _ := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	fwWrite(t, filepath.Join(dir, "known_hosts"), fmt.Sprintf("[127.0.0.1]:%d %s", r.port, hostPub), 0o644)
	for _, n := range []string{"host_key", "host_key.pub", "authorized_keys", "sshd_config"} {
		os.Lchown(filepath.Join(dir, n), uid, gid)
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	fwWaitFor(t, 10*time.Second, "sshd to listen", func() bool { return strings.Contains(r.log.String(), "Server listening") })
	r.opts = []string{"-F", "none", "-p", strconv.Itoa(r.port), "-i", filepath.Join(dir, "client_key"), "-o", "IdentitiesOnly=yes",
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + filepath.Join(dir, "known_hosts")}
	// What the remote account runs and owns.
	r.bin = filepath.Join(dir, "bin")
	r.remoteHome = filepath.Join(dir, "home")
	for _, d := range []string{r.bin, filepath.Join(r.remoteHome, "proj")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, _ := os.Executable()
	fwCopyFile(t, self, filepath.Join(r.bin, "remote.test"))
	fwCopyFile(t, filepath.Join(fwBinDir, "jail-init"), filepath.Join(r.bin, "jail-init"))
	filepath.Walk(r.remoteHome, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	return r
}

func fwWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func fwCopyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	fwWrite(t, to, string(b), 0o755)
}

// ssh runs ssh with the rig's options, extra, and the remote command.
func (r *fwSSHD) ssh(extra []string, command string) *exec.Cmd {
	args := append(append(append([]string{}, r.opts...), extra...), fwRemoteUser+"@127.0.0.1", command)
	cmd := exec.Command("/usr/bin/ssh", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// sshSession is one remote run over ssh: the local proxy, the remote
// directory made by PrepareScript over ssh, and the ssh running the test's
// remote runner with SSHArgs' forwardings.
type fwSSHSession struct {
	fw      *Forward
	local   *linux.Plan
	dir     string
	cmd     *exec.Cmd
	project string
	stderr  bytes.Buffer
}

func startFwSSHSession(t *testing.T, r *fwRig, s *fwSSHD, argv ...string) *fwSSHSession {
	t.Helper()
	local := r.plan(t, "", argv...)
	fw, err := StartForward(local)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	ca, err := fw.CACert()
	if err != nil {
		t.Fatal(err)
	}
	prep := s.ssh(nil, "sh -c "+jail.ShellQuote(PrepareScript))
	prep.Stdin = bytes.NewReader(ca)
	out, err := prep.Output()
	if err != nil {
		t.Fatalf("PrepareScript over ssh: %v\n%s", err, s.log.String())
	}
	dir, err := ParseRemoteDir(string(out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if script, err := CleanupScript(dir); err == nil {
			s.ssh(nil, "sh -c "+jail.ShellQuote(script)).Run()
		}
	})
	ss := &fwSSHSession{fw: fw, local: local, dir: dir, project: filepath.Join(s.remoteHome, "proj")}
	env := map[string]string{}
	for _, kv := range local.Env.Env {
		if name, v, _ := strings.Cut(kv, "="); name == "SERVICE_TOKEN" {
			env[name] = v
		}
	}
	settings := filepath.Join(s.bin, "settings.json")
	fwCopyFile(t, r.settings, settings)
	spec, _ := json.Marshal(fwRemoteSpec{Dir: dir, Settings: settings, Home: s.remoteHome, Project: ss.project, Argv: argv,
		Init: filepath.Join(s.bin, "jail-init"), Env: env})
	fwd, err := fw.SSHArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	ss.cmd = s.ssh(fwd, "env "+fwRemoteRunEnv+"="+jail.ShellQuote(string(spec))+" "+filepath.Join(s.bin, "remote.test"))
	ss.cmd.Stderr = &ss.stderr
	ss.cmd.Stdout = io.Discard
	if err := ss.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-ss.cmd.Process.Pid, syscall.SIGKILL); ss.cmd.Wait() })
	return ss
}

// TestSSHRemoteJailThroughForwardedProxy: over the real ssh -R, the remote
// jail's requests are decided by the local proxy: allowed and captured
// ones reach the loopback upstream with the real token injected, the jail
// holding a placeholder; a denied one is refused and logged locally; the
// command's exit code comes back through ssh.
func TestSSHRemoteJailThroughForwardedProxy(t *testing.T) {
	s := startFwSSHD(t)
	r := newFwRig(t)
	out := filepath.Join(s.remoteHome, "proj", "out.txt")
	script := `exec >` + out + ` 2>&1
echo "token=$SERVICE_TOKEN"
curl -sS -m 10 -H "Authorization: Bearer $SERVICE_TOKEN" http://` + fwAPIHost + `/proxied
curl -sS -m 10 --noproxy '*' -H "Authorization: Bearer $SERVICE_TOKEN" http://` + fwAPIHost + `/captured
curl -sS -m 10 --noproxy '*' -H "Authorization: Bearer $SERVICE_TOKEN" https://` + fwTLSHost + `/tls-captured
curl -sS -m 10 -o /dev/null -w 'denied-status=%{http_code}\n' http://` + fwDeniedHost + `/denied || echo denied-failed
exit 7
`
	ss := startFwSSHSession(t, r, s, "sh", "-c", script)
	err := ss.cmd.Wait()
	b, _ := os.ReadFile(out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("ssh: %v, want the command's exit 7\nstderr: %s\nout: %s\nsshd: %s", err, ss.stderr.String(), b, s.log.String())
	}
	o := string(b)
	if strings.Contains(o, fwRealToken) || !strings.Contains(o, "token=") || strings.Contains(o, "token=\n") {
		t.Errorf("the jail saw the real token, or no placeholder:\n%s", o)
	}
	for _, want := range []string{"upstream saw /proxied", "upstream saw /captured", "upstream saw /tls-captured", "denied-status=403"} {
		if !strings.Contains(o, want) {
			t.Errorf("the jail's output lacks %q:\n%s", want, o)
		}
	}
	got := r.up.got()
	for _, p := range []string{"/proxied", "/captured", "/tls-captured"} {
		if !fwContains(got, p+" Bearer "+fwRealToken) {
			t.Errorf("the upstream did not get %s with the real token injected: %q", p, got)
		}
	}
	ss.fw.Close()
	denied := 0
	proxy.ReadSession(ss.local.Net.StateDir, ss.local.Session, proxy.LogPos{}, func(en proxy.Entry) bool {
		if en.Host == fwDeniedHost && en.Verdict == "deny" {
			denied++
		}
		return true
	})
	if denied == 0 {
		t.Errorf("the local proxy logged no denial of %s", fwDeniedHost)
	}
}

// TestSSHRemoteJailStopsWhenSSHDies: the ssh client is killed mid-run (the
// laptop's side of the link gone): the remote jail, a background child
// included, stops writing its marker within a second, and no process of
// it is left on the remote.
func TestSSHRemoteJailStopsWhenSSHDies(t *testing.T) {
	s := startFwSSHD(t)
	r := newFwRig(t)
	marker := filepath.Join(s.remoteHome, "proj", "marker")
	ss := startFwSSHSession(t, r, s, "sh", "-c", fwMarkerScript(marker))
	size := func() int64 {
		fi, err := os.Stat(marker)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	fwWaitFor(t, 30*time.Second, "the remote jail to write its marker", func() bool { return size() > 64 })
	syscall.Kill(-ss.cmd.Process.Pid, syscall.SIGKILL)
	ss.cmd.Wait()
	cut := time.Now()
	var last int64 = -1
	for time.Since(cut) < 3*time.Second {
		if n := size(); n == last && time.Since(cut) > 300*time.Millisecond {
			break
		} else {
			last = n
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopped := time.Since(cut)
	before := size()
	time.Sleep(700 * time.Millisecond)
	if after := size(); after != before {
		t.Fatalf("the marker still grows %v after ssh was killed (%d -> %d bytes): the remote jail lives on", stopped, before, after)
	}
	if stopped > 1500*time.Millisecond {
		t.Errorf("the remote jail took %v to stop after ssh was killed, want about a second", stopped)
	}
	if pids := fwProcessesNaming(marker); len(pids) > 0 {
		t.Errorf("processes of the remote jail left after ssh was killed: %v", pids)
	}
}

// processesNaming lists the processes whose command line holds s.
func fwProcessesNaming(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// TestSSHSharedConnectionStopsWithTheLocalSide: over a shared connection
// (ControlMaster, kept after each session), which holds the control
// forwarding rather than the session's own ssh, the link still ends with
// the local side: the local run ending (its Forward closed, its ssh left
// running) stops the remote jail within a second; CancelArgs then remove
// the session's forwardings from the shared connection.
func TestSSHSharedConnectionStopsWithTheLocalSide(t *testing.T) {
	s := startFwSSHD(t)
	r := newFwRig(t)
	ctl := filepath.Join(s.bin, "..", "cm.sock")
	master := s.ssh([]string{"-o", "ControlMaster=yes", "-o", "ControlPath=" + ctl, "-o", "ControlPersist=60", "-N", "-f"}, "")
	master.Args = master.Args[:len(master.Args)-1] // -N: no command
	if out, err := master.CombinedOutput(); err != nil {
		t.Fatalf("starting the shared connection: %v\n%s", err, out)
	}
	t.Cleanup(func() { s.ssh([]string{"-o", "ControlPath=" + ctl, "-O", "exit"}, "").Run() })
	s.opts = append(s.opts, "-o", "ControlPath="+ctl, "-o", "ControlMaster=no")
	marker := filepath.Join(s.remoteHome, "proj", "marker")
	ss := startFwSSHSession(t, r, s, "sh", "-c", fwMarkerScript(marker))
	size := func() int64 {
		fi, err := os.Stat(marker)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	fwWaitFor(t, 30*time.Second, "the remote jail to write its marker", func() bool { return size() > 64 })
	ss.fw.Close()
	done := make(chan error, 1)
	go func() { done <- ss.cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
			t.Errorf("the remote run ended with %v, want 125 (the link lost)\n%s", err, ss.stderr.String())
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("the remote run kept going 3s after the local side ended")
	}
	before := size()
	time.Sleep(700 * time.Millisecond)
	if after := size(); after != before {
		t.Errorf("the marker grew from %d to %d bytes after the local side ended: the remote jail lives on", before, after)
	}
	cancel, err := ss.fw.CancelArgs(ss.dir)
	if err != nil {
		t.Fatal(err)
	}
	c := s.ssh(cancel, "")
	c.Args = c.Args[:len(c.Args)-1]
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("ssh -O cancel of the session's forwardings: %v\n%s", err, out)
	}
}
