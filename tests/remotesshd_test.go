package tests

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
)

// remoteUser is the account jail --remote logs in as on the tests' sshd:
// a user of its own with its own home, as on a rented host
// (tests/setup-user.sh creates it).
const remoteUser = "jailremote"

// remoteSSHD is a real OpenSSH server on 127.0.0.1, run as root so that
// it logs in the remote user, with a throwaway host key and one
// authorized client key.
type remoteSSHD struct {
	Port    int
	Dir     string
	HostPub string // the host key, as known_hosts wants it after the name
	key     string // the client's private key
	User    *user.User
	UID     int
	logPath string
}

// startRemoteSSHD starts sshd -D -e for the remote user; extra is more
// sshd_config (SetEnv PATH=... for a remote without bubblewrap).
func startRemoteSSHD(t *testing.T, extra string) *remoteSSHD {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the remote tests run sshd as root so that it can log in the remote user " + remoteUser + "; run them as root (make test)")
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Fatalf("sshd is not installed (tests/deps.sh --test installs openssh-server): %v", err)
	}
	u, err := user.Lookup(remoteUser)
	if err != nil {
		t.Fatalf("user %q does not exist; tests/setup-user.sh (make test) creates it: %v", remoteUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	dir, err := os.MkdirTemp("", "jail-rsshd-")
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
	d := &remoteSSHD{Port: freePort(t), Dir: dir, User: u, UID: uid}
	d.HostPub = strings.TrimSpace(string(mustRead(t, filepath.Join(dir, "host_key.pub"))))
	d.key = string(mustRead(t, filepath.Join(dir, "client_key")))
	os.Rename(filepath.Join(dir, "client_key.pub"), filepath.Join(dir, "authorized_keys"))
	os.Chmod(filepath.Join(dir, "authorized_keys"), 0o644)
	cfg := fmt.Sprintf(`ListenAddress 127.0.0.1:%d
HostKey %[2]s/host_key
AuthorizedKeysFile %[2]s/authorized_keys
AllowUsers %[3]s
PermitRootLogin no
UsePAM no
StrictModes no
PidFile none
PasswordAuthentication no
KbdInteractiveAuthentication no
LogLevel VERBOSE
%[4]s
`, d.Port, dir, remoteUser, extra)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file, not a pipe: the connection a control master keeps open
	// would hold a pipe, and Wait with it, for as long as it persists.
	d.logPath = filepath.Join(dir, "sshd.log")
	logf, err := os.Create(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	t.Cleanup(func() {
		killChildren(cmd.Process.Pid) // the connections a control master keeps
		cmd.Process.Kill()
		cmd.Wait()
	})
	if !waitFor(10*time.Second, func() bool { return strings.Contains(d.Log(), "Server listening") }) {
		t.Fatalf("sshd did not start:\n%s", d.Log())
	}
	return d
}

// killChildren kills the processes descended from pid, the deepest last
// found first gone (their parents may not outlive them to be found).
func killChildren(pid int) {
	parent := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		fields := strings.Fields(string(b[i+1:]))
		child, err1 := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, err2 := strconv.Atoi(fields[1])
		if len(fields) > 1 && err1 == nil && err2 == nil {
			parent[child] = ppid
		}
	}
	descends := func(p int) bool {
		for n := 0; p > 1 && n < 64; n++ {
			if p = parent[p]; p == pid {
				return true
			}
		}
		return false
	}
	for child := range parent {
		if descends(child) {
			syscall.Kill(child, syscall.SIGKILL)
		}
	}
}

// Log is what sshd wrote so far.
func (d *remoteSSHD) Log() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}

// Target is jail --remote's argument for this server.
func (d *remoteSSHD) Target() string { return fmt.Sprintf("%s@127.0.0.1:%d", remoteUser, d.Port) }

// Home is the remote user's home.
func (d *remoteSSHD) Home() string { return d.User.HomeDir }

// client gives the sandbox's runner an ssh config of its own (jail reads
// JAIL_SSH_CONFIG in place of ~/.ssh/config, which ssh finds through the
// password database, not $HOME): the client key, and a known_hosts
// holding the host key when known. config is more ssh config, read after
// jail's own command-line options.
func (d *remoteSSHD) client(s *Sandbox, known bool, config string) {
	dir := filepath.Join(s.Base, "sshc")
	s.WriteFile(dir+"/key", d.key, 0o600)
	hosts := ""
	if known {
		hosts = fmt.Sprintf("[127.0.0.1]:%d %s\n", d.Port, d.HostPub)
	}
	s.WriteFile(dir+"/known_hosts", hosts, 0o644)
	s.WriteFile(dir+"/config", config+fmt.Sprintf(`
Host *
  IdentityFile %[1]s/key
  IdentitiesOnly yes
  UserKnownHostsFile %[1]s/known_hosts
  GlobalKnownHostsFile /dev/null
  ConnectTimeout 20
`, dir), 0o600)
	s.Env = append(s.Env, "JAIL_SSH_CONFIG="+dir+"/config")
	s.t.Cleanup(func() { closeMasters(s) })
}

// closeMasters ends the control masters jail left for the sandbox: they
// would hold their connection for a minute after the test.
func closeMasters(s *Sandbox) {
	socks, _ := filepath.Glob(filepath.Join(s.Home, ".local/state/jail/ssh/*"))
	for _, sock := range socks {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			exec.Command("/usr/bin/ssh", "-o", "ControlPath="+sock, "-O", "exit", "x").Run()
		}
	}
}

// remoteDir is where the sandbox's project goes on the remote.
func (d *remoteSSHD) remoteDir(s *Sandbox) string {
	return filepath.Join(d.Home(), ".local/share/jail/work", jail.ProjectKey(s.Project))
}

// asRemote runs a shell script on this machine as the remote user (the
// test's view of the remote host), failing the test when it fails.
func (d *remoteSSHD) asRemote(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	gid, _ := strconv.Atoi(d.User.Gid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(d.UID), Gid: uint32(gid), Groups: []uint32{}}}
	cmd.Env = []string{"HOME=" + d.Home(), "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %s: %v\n%s", remoteUser, script, err, out)
	}
	return string(out)
}

// resetRemote removes what earlier runs left in the remote home: the
// installed jail and the workspaces.
func (d *remoteSSHD) resetRemote(t *testing.T) {
	t.Helper()
	os.RemoveAll(filepath.Join(d.Home(), ".local/share/jail"))
}

// oneLine checks that stderr is one line saying all of want.
func oneLine(t *testing.T, r Result, want ...string) {
	t.Helper()
	if strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.HasPrefix(r.Stderr, "jail: ") {
		t.Errorf("want one line on stderr, got:\n%s", r)
	}
	for _, w := range want {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r)
		}
	}
}
