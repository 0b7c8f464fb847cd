package tests

import (
	"bufio"
	"fmt"
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
)

// SSH and other raw TCP through the policy: a stream that is neither TLS
// nor HTTP reaches only a host:port that network.allow names with its
// port. The server is Debian's real sshd on the host's loopback, reached
// by a name that network.hosts maps to it.

const (
	sshName    = "git.example.test"  // the sshd, allowed with ":22"
	sshEvil    = "evil.example.test" // mapped to the same sshd, never allowed
	lineName   = "smtp.example.test" // a server-first line protocol
	sshAltPort = 2222
)

// sshd is a real OpenSSH server on 127.0.0.1, run as an unprivileged user
// (the test user when the tests run as root): such an sshd lets only that
// user log in, so the client logs in by its name.
type sshd struct {
	Port    int
	User    string // the login name
	Dir     string // config, keys and the served repository
	HostPub string // the host key, as known_hosts wants it after the name
	Key     string // the client's private key
	Commit  string // the commit of Dir/repo.git
	log     syncBuffer
}

// startSSHD starts sshd -D -e on a free loopback port with a host key and
// an authorized client key of its own, and a bare repository to clone.
func startSSHD(t *testing.T) *sshd {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Fatalf("sshd is not installed (tests/deps.sh --test installs openssh-server): %v", err)
	}
	u, cred := sshdUser(t)
	dir, err := os.MkdirTemp("", "jail-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	keygen := func(name string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	keygen("host_key")
	keygen("client_key")
	d := &sshd{Port: freePort(t), User: u.Username, Dir: dir, Commit: makeBareRepo(t, dir)}
	d.HostPub = strings.TrimSpace(string(mustRead(t, filepath.Join(dir, "host_key.pub"))))
	d.Key = string(mustRead(t, filepath.Join(dir, "client_key")))
	os.Rename(filepath.Join(dir, "client_key.pub"), filepath.Join(dir, "authorized_keys"))
	cfg := fmt.Sprintf(`ListenAddress 127.0.0.1:%d
HostKey %[2]s/host_key
AuthorizedKeysFile %[2]s/authorized_keys
UsePAM no
StrictModes no
PidFile none
PasswordAuthentication no
KbdInteractiveAuthentication no
LogLevel VERBOSE
`, d.Port, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, int(cred.Uid), int(cred.Gid)) })
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	cmd.Stdout, cmd.Stderr = &d.log, &d.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !waitFor(10*time.Second, func() bool { return strings.Contains(d.Log(), "Server listening") }) {
		t.Fatalf("sshd did not start:\n%s", d.Log())
	}
	return d
}

// sshdUser is the account sshd runs as: the test user under root, else
// the current user.
func sshdUser(t *testing.T) (*user.User, *syscall.Credential) {
	t.Helper()
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		return u, nil
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatalf("user %q does not exist; `make test` creates it: %v", testUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return u, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Log is what sshd wrote so far.
func (d *sshd) Log() string { return d.log.String() }

// Conns counts the connections sshd accepted.
func (d *sshd) Conns() int { return strings.Count(d.Log(), "Connection from ") }

// Addr is the sshd's address, for network.hosts.
func (d *sshd) Addr() string { return fmt.Sprintf("127.0.0.1:%d", d.Port) }

// install writes the client's key and known_hosts into the project (the
// real ~/.ssh is hidden inside the jail) and the client helpers.
func (d *sshd) install(s *Sandbox) {
	s.WriteFile(s.Project+"/sshtest/client.key", d.Key, 0o600)
	s.WriteFile(s.Project+"/sshtest/known_hosts", fmt.Sprintf("%s %s\n[%s]:%d %s\n", sshName, d.HostPub, sshName, sshAltPort, d.HostPub), 0o644)
	s.WriteFile(s.Project+"/sshtest/socks5pipe.py", socks5PipePy, 0o644)
	s.WriteFile(s.Project+"/sshtest/rawline.py", rawLinePy, 0o644)
}

// sshOpts are the jailed client's options: its key and known hosts from
// the project, the host key checked, nothing asked.
const sshOpts = `-F /dev/null -i sshtest/client.key -o IdentitiesOnly=yes -o UserKnownHostsFile=sshtest/known_hosts -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=20`

// sshSh defines, for scripts run in the jail, `viaconnect` and `viasocks`
// (ProxyCommand values that reach %h:%p through the proxy's HTTP CONNECT
// with socat, and its SOCKS5 port with python3) and `try NAME CMD...`,
// which prints "##NAME=EXIT" and keeps the command's stderr in
// /tmp/NAME.err.
const sshSh = `
hp=${HTTP_PROXY#*://}; hp=${hp%%/*}
viaconnect="ProxyCommand=socat - PROXY:${hp%:*}:%h:%p,proxyport=${hp##*:}"
viasocks="ProxyCommand=python3 sshtest/socks5pipe.py %h %p"
try() {
	n=$1; shift
	"$@" >/tmp/$n.out 2>/tmp/$n.err </dev/null; echo "##$n=$?"
	sed "s/^/$n: /" /tmp/$n.out /tmp/$n.err
}
echo session=$JAIL_SESSION
`

// socks5PipePy connects to HOST PORT through the SOCKS5 proxy in ALL_PROXY
// and relays stdin and stdout: an ssh ProxyCommand.
const socks5PipePy = `
import os, socket, struct, sys, threading, urllib.parse
host, port = sys.argv[1], int(sys.argv[2])
u = urllib.parse.urlsplit(os.environ["ALL_PROXY"])
s = socket.create_connection((u.hostname, u.port), timeout=20)
def recvn(n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            sys.exit("socks5: closed")
        b += d
    return b
s.sendall(b"\x05\x01\x00")
if recvn(2) != b"\x05\x00":
    sys.exit("socks5: no acceptable method")
h = host.encode()
s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
rep = recvn(10)
if rep[1] != 0:
    sys.exit("socks5: reply %d" % rep[1])
s.settimeout(None)
def up():
    while True:
        b = os.read(0, 65536)
        if not b:
            break
        s.sendall(b)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while True:
    b = s.recv(65536)
    if not b:
        break
    os.write(1, b)
`

// rawLinePy speaks a server-first line protocol through the SOCKS5 proxy
// in ALL_PROXY: it reads the greeting, sends one line and QUIT, and prints
// "##NAME=GREETING|ANSWER|BYE" (or the error).
const rawLinePy = `
import os, socket, struct, sys, urllib.parse
name, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
u = urllib.parse.urlsplit(os.environ["ALL_PROXY"])
out = []
try:
    s = socket.create_connection((u.hostname, u.port), timeout=20)
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    h = host.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
    rep = s.recv(10)
    if rep[1] != 0:
        raise Exception("socks reply %d" % rep[1])
    f = s.makefile("rb")
    out.append(f.readline().decode(errors="replace").strip())
    s.sendall(b"HELO jail\r\n")
    out.append(f.readline().decode(errors="replace").strip())
    s.sendall(b"QUIT\r\n")
    out.append(f.readline().decode(errors="replace").strip())
except Exception as e:
    out.append("error %r" % e)
print("##%s=%s" % (name, "|".join(out)))
`

// lineServer is a server-first line protocol on the host's loopback, as
// SMTP greets: "220 ready", then "250 LINE" for each line, "221 bye" on
// QUIT. It counts its connections.
func startLineServer(t *testing.T) (addr string, conns func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				fmt.Fprintf(c, "220 %s ready\r\n", lineName)
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line = strings.TrimSpace(line); line == "QUIT" {
						fmt.Fprintf(c, "221 bye\r\n")
						return
					}
					fmt.Fprintf(c, "250 %s\r\n", line)
				}
			}()
		}
	}()
	return l.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// sshConfig writes jail.json: allow and deny as given, the sshd mapped
// for sshName and sshEvil, the line server for lineName.
func sshConfig(t *testing.T, s *Sandbox, d *sshd, line string, allow []string, denyCommands []string) {
	t.Helper()
	cfg := map[string]any{"network": map[string]any{
		"allow": allow,
		"hosts": map[string]string{sshName: d.Addr(), sshEvil: d.Addr(), lineName: line},
	}}
	if denyCommands != nil {
		cfg["command"] = map[string]any{"deny": denyCommands}
	}
	writeJailJSON(t, s, cfg)
}

// findRaw returns the first entry for host:port with the verdict.
func findRaw(ds []decision, host string, port int, verdict string) (decision, bool) {
	for _, d := range ds {
		if d.Host == host && d.Port == port && d.Verdict == verdict {
			return d, true
		}
	}
	return decision{}, false
}

// ssh and git clone over SSH reach the real sshd through an allowed
// name:port, by HTTP CONNECT and by SOCKS5; the relay is logged with its
// byte counts. A name that is not allowed never reaches the server, and a
// server-first line protocol goes through its own allowed host:port.
func TestSSHThroughTheProxy(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		d := startSSHD(t)
		d.install(s)
		line, lineConns := startLineServer(t)
		_, linePort, _ := net.SplitHostPort(line)
		sshConfig(t, s, d, line, []string{sshName + ":22", lineName + ":" + linePort}, nil)
		r := s.Sh(sshSh + fmt.Sprintf(`
			try connect ssh %[1]s -o "$viaconnect" %[2]s@%[3]s echo ok-connect
			try socks ssh %[1]s -o "$viasocks" %[2]s@%[3]s echo ok-socks
			export GIT_SSH_COMMAND="ssh %[1]s -o 'ProxyCommand=python3 sshtest/socks5pipe.py %%h %%p'"
			try clone git clone -q %[2]s@%[3]s:%[4]s/repo.git /tmp/clone
			unset GIT_SSH_COMMAND
			echo "##head=$(git -C /tmp/clone rev-parse HEAD 2>&1)"
			echo "##file=$(cat /tmp/clone/served.txt 2>&1)"
			try evil ssh %[1]s -o "$viasocks" -o StrictHostKeyChecking=no %[2]s@%[5]s echo evil-reached
			python3 sshtest/rawline.py line %[6]s %[7]s`,
			sshOpts, d.User, sshName, d.Dir, sshEvil, lineName, linePort))
		wantKV(t, r, "connect", is("0"), "0 (ssh through HTTP CONNECT)")
		wantKV(t, r, "socks", is("0"), "0 (ssh through SOCKS5)")
		for _, want := range []string{"connect: ok-connect", "socks: ok-socks"} {
			if !strings.Contains(r.Stdout, want+"\n") {
				t.Errorf("ssh did not print %q:\n%s\nsshd:\n%s", want, r, d.Log())
			}
		}
		wantKV(t, r, "clone", is("0"), "0 (git clone over ssh)")
		wantKV(t, r, "head", is(d.Commit), "the served repository's commit")
		wantKV(t, r, "file", is("served by git http-backend"), "the served file")
		wantKV(t, r, "evil", func(v string) bool { return v != "0" }, "a failure (the name is not allowed)")
		if strings.Contains(r.Stdout, "evil-reached") {
			t.Errorf("ssh to %s, which no entry allows, ran its command:\n%s", sshEvil, r)
		}
		wantKV(t, r, "line", is(fmt.Sprintf("220 %s ready|250 HELO jail|221 bye", lineName)), "the server-first protocol's three lines")
		if strings.Count(d.Log(), "Connection from ") != 3 {
			t.Errorf("sshd accepted %d connections, want 3 (two ssh, one clone; none for %s):\n%s", d.Conns(), sshEvil, d.Log())
		}
		if lineConns() != 1 {
			t.Errorf("the line server saw %d connections, want 1", lineConns())
		}

		ds := decisions(t, s, sessionOf(t, r))
		n := 0
		for _, e := range ds {
			if e.Host == sshName && e.Port == 22 && e.Verdict == "allow" {
				n++
				if e.Scheme != "tcp" && e.Scheme != "socks5" || e.BytesUp <= 0 || e.BytesDown <= 0 || e.Rule != "allow "+sshName+":22" {
					t.Errorf("an ssh relay logged without its byte counts or rule: %s up=%d down=%d", e, e.BytesUp, e.BytesDown)
				}
			}
		}
		if n != 3 {
			t.Errorf("want 3 allowed ssh relays to %s:22 in the log (one entry each), got %d:\n%s", sshName, n, dumpDecisions(ds))
		}
		if e, ok := findRaw(ds, sshEvil, 22, "deny"); !ok || !strings.Contains(e.Reason, "not in network.allow") {
			t.Errorf("want %s:22 denied as not in network.allow; got %v in:\n%s", sshEvil, e, dumpDecisions(ds))
		}
		if e, ok := findRaw(ds, lineName, mustAtoi(t, linePort), "allow"); !ok || e.BytesUp <= 0 || e.BytesDown <= 0 {
			t.Errorf("want the line protocol's relay logged with its byte counts; got %v up=%d down=%d in:\n%s", e, e.BytesUp, e.BytesDown, dumpDecisions(ds))
		}
	})
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// An entry without the port allows the host's HTTPS, not a raw stream to
// it: ssh and the line protocol are refused, with the entry to add in the
// log and in the line the client is sent; sshd never sees the client.
// With git push denied, ssh to port 22 of a host allowed without ":22" is
// refused before any dial, and SSH to another port as soon as the client
// speaks it. "unknown": "allow" needs no entry with the port.
func TestSSHNeedsThePort(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		d := startSSHD(t)
		d.install(s)
		line, _ := startLineServer(t)
		_, linePort, _ := net.SplitHostPort(line)
		sshConfig(t, s, d, line, []string{sshName, lineName}, nil)
		r := s.Sh(sshSh + fmt.Sprintf(`
			try noport ssh -v %[1]s -o "$viasocks" %[2]s@%[3]s echo reached
			python3 sshtest/rawline.py line %[4]s %[5]s`, sshOpts, d.User, sshName, lineName, linePort))
		wantKV(t, r, "noport", func(v string) bool { return v != "0" }, "a failure (allowed without the port)")
		if strings.Contains(r.Stdout, "noport: reached") {
			t.Errorf("ssh ran its command through an entry without the port:\n%s", r)
		}
		hint := fmt.Sprintf(`add "%s:22"`, sshName)
		if !strings.Contains(r.Stdout, "jail: "+sshName+":22:") || !strings.Contains(r.Stdout, fmt.Sprintf(`"%s:22"`, sshName)) {
			t.Errorf("ssh -v does not show the proxy's line naming the entry to add:\n%s", r)
		}
		wantKV(t, r, "line", func(v string) bool {
			return !strings.Contains(v, "220 ") && strings.Contains(v, fmt.Sprintf(`"%s:%s"`, lineName, linePort))
		}, "the jail's refusal instead of the greeting")
		ds := decisions(t, s, sessionOf(t, r))
		if e, ok := findRaw(ds, sshName, 22, "deny"); !ok || !strings.Contains(e.Reason, hint) {
			t.Errorf("want ssh to %s:22 denied with the hint %q; got %v in:\n%s", sshName, hint, e, dumpDecisions(ds))
		}
		if e, ok := findRaw(ds, lineName, mustAtoi(t, linePort), "deny"); !ok || !strings.Contains(e.Reason, "network.allow") {
			t.Errorf("want the line protocol denied; got %v in:\n%s", e, dumpDecisions(ds))
		}
		if d.Conns() != 0 {
			t.Errorf("sshd accepted %d connections through an entry without the port:\n%s", d.Conns(), d.Log())
		}

		// git push denied: port 22 needs the explicit entry, SSH on
		// another port too.
		sshConfig(t, s, d, line, []string{sshName}, []string{"git push"})
		r = s.Sh(sshSh + fmt.Sprintf(`
			try port22 ssh %[1]s -o "$viaconnect" %[2]s@%[3]s echo reached22
			try alt ssh -v %[1]s -p %[4]d -o "$viasocks" %[2]s@%[3]s echo reached-alt`, sshOpts, d.User, sshName, sshAltPort))
		wantKV(t, r, "port22", func(v string) bool { return v != "0" }, "a failure (git push denied)")
		wantKV(t, r, "alt", func(v string) bool { return v != "0" }, "a failure (git push denied)")
		if strings.Contains(r.Stdout, "reached") {
			t.Errorf("ssh ran its command with git push denied:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "ssh while git push is denied") {
			t.Errorf("ssh -v to port %d does not show why it was refused:\n%s", sshAltPort, r)
		}
		ds = decisions(t, s, sessionOf(t, r))
		for _, port := range []int{22, sshAltPort} {
			if e, ok := findRaw(ds, sshName, port, "deny"); !ok || e.Rule != "command.deny git push" {
				t.Errorf("want ssh to %s:%d denied by command.deny git push; got %v in:\n%s", sshName, port, e, dumpDecisions(ds))
			}
		}
		if d.Conns() != 0 {
			t.Errorf("sshd accepted %d connections with git push denied:\n%s", d.Conns(), d.Log())
		}

		// "unknown": "allow" opens every name on every port, raw streams
		// included.
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"unknown": "allow", "hosts": map[string]string{sshName: d.Addr()},
		}})
		r = s.Sh(sshSh + fmt.Sprintf(`
			try open ssh %[1]s -o "$viasocks" %[2]s@%[3]s echo ok-open`, sshOpts, d.User, sshName))
		wantKV(t, r, "open", is("0"), `0 ("unknown": "allow")`)
		if !strings.Contains(r.Stdout, "open: ok-open\n") {
			t.Errorf("ssh with \"unknown\": \"allow\" did not run its command:\n%s", r)
		}

		// The explicit entry lets ssh through despite the git push rule.
		sshConfig(t, s, d, line, []string{sshName + ":22"}, []string{"git push"})
		r = s.Sh(sshSh + fmt.Sprintf(`
			try explicit ssh %[1]s -o "$viaconnect" %[2]s@%[3]s echo ok-explicit`, sshOpts, d.User, sshName))
		wantKV(t, r, "explicit", is("0"), "0 (allowed with :22)")
		if !strings.Contains(r.Stdout, "explicit: ok-explicit\n") {
			t.Errorf("ssh with %s:22 allowed did not run its command:\n%s\nsshd:\n%s", sshName, r, d.Log())
		}
	})
}

// Captured, with no proxy variables: plain `ssh` and `git clone` over SSH
// reach the sshd by its name, which the jail's resolver gives them (a
// name allowed with a port resolves), and a name not allowed resolves to
// nothing. With git push denied and the host allowed without the port,
// ssh is refused on port 22 and on another port.
func TestSSHCaptured(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		d := startSSHD(t)
		d.install(s)
		line, _ := startLineServer(t)
		sshConfig(t, s, d, line, []string{sshName + ":22"}, nil)
		if r := s.Sh("getent hosts " + sshName); r.Code != 0 {
			t.Fatalf("the jail's resolver does not resolve %s, allowed with a port, so a captured ssh cannot name the host:\n%s", sshName, r)
		}
		r := s.Sh(unsetProxy + sshSh + fmt.Sprintf(`
			try plain ssh %[1]s -p 22 %[2]s@%[3]s echo ok-captured
			export GIT_SSH_COMMAND="ssh %[1]s"
			try clone git clone -q %[2]s@%[3]s:%[4]s/repo.git /tmp/clone
			unset GIT_SSH_COMMAND
			echo "##head=$(git -C /tmp/clone rev-parse HEAD 2>&1)"
			try evil ssh %[1]s -o StrictHostKeyChecking=no %[2]s@%[5]s echo evil-reached`, sshOpts, d.User, sshName, d.Dir, sshEvil))
		wantKV(t, r, "plain", is("0"), "0 (captured ssh)")
		if !strings.Contains(r.Stdout, "plain: ok-captured\n") {
			t.Errorf("captured ssh did not run its command:\n%s\nsshd:\n%s", r, d.Log())
		}
		wantKV(t, r, "clone", is("0"), "0 (captured git clone over ssh)")
		wantKV(t, r, "head", is(d.Commit), "the served repository's commit")
		wantKV(t, r, "evil", func(v string) bool { return v != "0" }, "a failure")
		if strings.Contains(r.Stdout, "evil-reached") {
			t.Errorf("captured ssh to %s, which no entry allows, ran its command:\n%s", sshEvil, r)
		}
		ds := decisions(t, s, sessionOf(t, r))
		if e, ok := findDecision(ds, sshEvil, ""); !ok || e.Verdict != "deny" {
			t.Errorf("want %s refused and logged; got %v in:\n%s", sshEvil, e, dumpDecisions(ds))
		}
		if d.Conns() != 2 {
			t.Errorf("sshd accepted %d connections, want 2 (ssh and clone; none for %s):\n%s", d.Conns(), sshEvil, d.Log())
		}
		if e, ok := findRaw(ds, sshName, 22, "allow"); !ok || e.Method != "CAPTURE" || e.BytesUp <= 0 || e.BytesDown <= 0 {
			t.Errorf("want the captured ssh logged by name with byte counts; got %v up=%d down=%d in:\n%s", e, e.BytesUp, e.BytesDown, dumpDecisions(ds))
		}

		// git push denied, allowed without the port: refused on 22.
		sshConfig(t, s, d, line, []string{sshName}, []string{"git push"})
		r = s.Sh(unsetProxy + sshSh + fmt.Sprintf(`
			try port22 ssh %[1]s %[2]s@%[3]s echo reached22
			try alt ssh %[1]s -p %[4]d %[2]s@%[3]s echo reached-alt`, sshOpts, d.User, sshName, sshAltPort))
		wantKV(t, r, "port22", func(v string) bool { return v != "0" }, "a failure (git push denied)")
		wantKV(t, r, "alt", func(v string) bool { return v != "0" }, "a failure (git push denied)")
		ds = decisions(t, s, sessionOf(t, r))
		for _, port := range []int{22, sshAltPort} {
			if e, ok := findRaw(ds, sshName, port, "deny"); !ok || e.Rule != "command.deny git push" || e.Method != "CAPTURE" {
				t.Errorf("want captured ssh to %s:%d denied by command.deny git push; got %v in:\n%s", sshName, port, e, dumpDecisions(ds))
			}
		}
	})
}

// startPostgres runs a PostgreSQL server unprivileged on a free loopback
// port, trusting every local connection, or skips the test when this
// machine has no server binaries (psql through the proxy is optional).
func startPostgres(t *testing.T) (addr, user string) {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		t.Skipf("no PostgreSQL server binaries (initdb) on this machine: %v", err)
	}
	postgres := filepath.Join(filepath.Dir(initdb), "postgres")
	u, cred := sshdUser(t)
	dir, err := os.MkdirTemp("", "jail-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}
	if out, err := run(initdb, "-D", dir+"/data", "-A", "trust", "-U", u.Username, "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	var log syncBuffer
	cmd := run(postgres, "-D", dir+"/data", "-k", dir, "-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() })
	if !waitFor(20*time.Second, func() bool { return strings.Contains(log.String(), "ready to accept connections") }) {
		t.Fatalf("postgres did not start:\n%s", log.String())
	}
	return fmt.Sprintf("127.0.0.1:%d", port), u.Username
}

// psql, whose protocol begins with the client's binary SSL request,
// reaches PostgreSQL through a host:port allowed with its port, by a relay
// the jailed command starts (psql knows no proxy); the same server behind
// a name allowed without the port is refused.
func TestRawTCPPsql(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		addr, user := startPostgres(t)
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{"db.example.test:5432", "noport.example.test"},
			"hosts": map[string]string{"db.example.test": addr, "noport.example.test": addr},
		}})
		r := s.Sh(sshSh + fmt.Sprintf(`
			relay() { socat TCP-LISTEN:$1,bind=127.0.0.1,reuseaddr PROXY:${hp%%:*}:$2:5432,proxyport=${hp##*:} & sleep 0.5; }
			relay 15432 db.example.test
			try psql psql "host=127.0.0.1 port=15432 user=%[1]s dbname=postgres connect_timeout=15" -Atc "select 'ok-' || 40+2"
			relay 15433 noport.example.test
			try noport psql "host=127.0.0.1 port=15433 user=%[1]s dbname=postgres connect_timeout=15" -Atc "select 'reached'"
			wait`, user))
		wantKV(t, r, "psql", is("0"), "0 (psql through db.example.test:5432)")
		if !strings.Contains(r.Stdout, "psql: ok-42\n") {
			t.Errorf("psql did not get its answer:\n%s", r)
		}
		wantKV(t, r, "noport", func(v string) bool { return v != "0" }, "a failure (allowed without the port)")
		if strings.Contains(r.Stdout, "noport: reached") {
			t.Errorf("psql got through an entry without the port:\n%s", r)
		}
		ds := decisions(t, s, sessionOf(t, r))
		if e, ok := findRaw(ds, "db.example.test", 5432, "allow"); !ok || e.BytesUp <= 0 || e.BytesDown <= 0 {
			t.Errorf("want the psql relay logged with byte counts; got %v up=%d down=%d in:\n%s", e, e.BytesUp, e.BytesDown, dumpDecisions(ds))
		}
		if e, ok := findRaw(ds, "noport.example.test", 5432, "deny"); !ok || !strings.Contains(e.Reason, `add "noport.example.test:5432"`) {
			t.Errorf("want psql to noport.example.test:5432 denied with the entry to add; got %v in:\n%s", e, dumpDecisions(ds))
		}
	})
}

// holdPy opens a raw stream through the SOCKS5 proxy, exchanges a line
// and keeps it open: the jailed command exits with it still open.
const holdPy = `
import os, socket, struct, sys, time, urllib.parse
host, port = sys.argv[1], int(sys.argv[2])
u = urllib.parse.urlsplit(os.environ["ALL_PROXY"])
s = socket.create_connection((u.hostname, u.port), timeout=20)
s.sendall(b"\x05\x01\x00")
s.recv(2)
h = host.encode()
s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
s.recv(10)
f = s.makefile("rb")
f.readline()
s.sendall(b"HELO held\r\n")
print("##held=" + f.readline().decode().strip(), flush=True)
time.sleep(60)
`

// A raw relay still open when the command exits is logged all the same,
// once, with what it carried.
func TestRawRelayLoggedWhenTheJailEnds(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		line, _ := startLineServer(t)
		_, linePort, _ := net.SplitHostPort(line)
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{lineName + ":" + linePort},
			"hosts": map[string]string{lineName: line},
		}})
		s.WriteFile(s.Project+"/hold.py", holdPy, 0o644)
		r := s.Sh(fmt.Sprintf(`echo session=$JAIL_SESSION
			python3 hold.py %s %s > /tmp/hold.out &
			for i in $(seq 100); do grep -q held /tmp/hold.out && break; sleep 0.1; done
			cat /tmp/hold.out`, lineName, linePort))
		wantKV(t, r, "held", is("250 HELO held"), "the server's answer")
		ds := decisions(t, s, sessionOf(t, r))
		n := 0
		for _, e := range ds {
			if e.Host == lineName {
				n++
				if e.Verdict != "allow" || e.BytesUp != int64(len("HELO held\r\n")) || e.BytesDown != int64(len("220 "+lineName+" ready\r\n250 HELO held\r\n")) {
					t.Errorf("the held relay logged as %s up=%d down=%d", e, e.BytesUp, e.BytesDown)
				}
			}
		}
		if n != 1 {
			t.Errorf("want the held relay logged once, got %d entries:\n%s", n, dumpDecisions(ds))
		}
	})
}

// Captured, with no relay and no proxy variables: psql reaches PostgreSQL
// by the name allowed with its port, which the jail's resolver gives it,
// and not through a name allowed without the port.
func TestRawTCPPsqlCaptured(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		addr, user := startPostgres(t)
		writeJailJSON(t, s, map[string]any{"network": map[string]any{
			"allow": []string{"db.example.test:5432", "noport.example.test"},
			"hosts": map[string]string{"db.example.test": addr, "noport.example.test": addr},
		}})
		if r := s.Sh("getent hosts db.example.test"); r.Code != 0 {
			t.Fatalf("the jail's resolver does not resolve db.example.test, allowed with a port, so a captured psql cannot name the host:\n%s", r)
		}
		r := s.Sh(unsetProxy + sshSh + fmt.Sprintf(`
			try psql psql "host=db.example.test port=5432 user=%[1]s dbname=postgres connect_timeout=15" -Atc "select 'ok-' || 40+2"
			try noport psql "host=noport.example.test port=5432 user=%[1]s dbname=postgres connect_timeout=15" -Atc "select 'reached'"`, user))
		wantKV(t, r, "psql", is("0"), "0 (captured psql to db.example.test:5432)")
		if !strings.Contains(r.Stdout, "psql: ok-42\n") {
			t.Errorf("captured psql did not get its answer:\n%s", r)
		}
		wantKV(t, r, "noport", func(v string) bool { return v != "0" }, "a failure (allowed without the port)")
		ds := decisions(t, s, sessionOf(t, r))
		if e, ok := findRaw(ds, "db.example.test", 5432, "allow"); !ok || e.Method != "CAPTURE" || e.BytesUp <= 0 || e.BytesDown <= 0 {
			t.Errorf("want the captured psql logged by name with byte counts; got %v up=%d down=%d in:\n%s", e, e.BytesUp, e.BytesDown, dumpDecisions(ds))
		}
		if e, ok := findRaw(ds, "noport.example.test", 5432, "deny"); !ok || !strings.Contains(e.Reason, `add "noport.example.test:5432"`) {
			t.Errorf("want captured psql to noport.example.test:5432 denied with the entry to add; got %v in:\n%s", e, dumpDecisions(ds))
		}
	})
}
