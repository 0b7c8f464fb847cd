package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteUnknownHostKeyRefused: a host whose key is not in the user's
// known_hosts is refused with one line naming how to add it, even when
// the user's ssh config turns strict checking off and points known_hosts
// at /dev/null; a host whose key changed is refused the same way. No
// command runs and no key is accepted on the way.
func TestRemoteUnknownHostKeyRefused(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		marker := filepath.Join(d.remoteDir(s), "ran-marker")
		os.Remove(marker)
		// The user's own config says not to check; jail's command line wins.
		d.client(s, false, "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n")
		r := s.Jail("--remote", d.Target(), "--", "touch", "ran-marker")
		if r.Code != 125 {
			t.Fatalf("an unknown host key: want 125:\n%s", r)
		}
		oneLine(t, r, "host key", "not in your known_hosts", "ssh-keyscan", fmt.Sprintf("ssh -p %d", d.Port))
		if strings.Contains(d.Log(), "Accepted publickey") {
			t.Errorf("the client logged in to a host it does not know:\n%s", d.Log())
		}

		// A changed key: known_hosts holds another host's key for it.
		other := startRemoteSSHD(t, "")
		s.Env = nil
		d.client(s, true, "")
		s.WriteFile(filepath.Join(s.Base, "sshc/known_hosts"), fmt.Sprintf("[127.0.0.1]:%d %s\n", d.Port, other.HostPub), 0o644)
		r = s.Jail("--remote", d.Target(), "--", "touch", "ran-marker")
		if r.Code != 125 {
			t.Fatalf("a changed host key: want 125:\n%s", r)
		}
		oneLine(t, r, "host key", "has changed", "ssh-keyscan")
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the command ran on a host whose key is not known")
		}
	})
}

// TestRemoteProjectCannotPickHost: a project's jail.json naming a remote
// host is refused before any connection, trusted or not; the same host
// named in the user's own config works.
func TestRemoteProjectCannotPickHost(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		host := fmt.Sprintf(`{"remote": {"box": {"host": "127.0.0.1", "user": %q, "port": %d}}}`, remoteUser, d.Port)
		s.WriteFile(s.Project+"/jail.json", host, 0o644)
		r := s.Jail("--remote", "box", "--", "true")
		if r.Code != 125 {
			t.Fatalf("a project naming a remote host: want 125:\n%s", r)
		}
		oneLine(t, r, `jail.json names "remote" hosts`, "only your own config.json")
		if n := strings.Count(d.Log(), "Connection from"); n != 0 {
			t.Errorf("jail connected (%d times) to a host a project named", n)
		}

		os.Remove(s.Project + "/jail.json")
		s.WriteFile(s.Home+"/.config/jail/config.json", host, 0o644)
		if r := s.Jail("--remote", "box", "--", "sh", "-c", "id -u"); r.Code != 0 || strings.TrimSpace(r.Stdout) != fmt.Sprint(d.UID) {
			t.Fatalf("the user's own named host:\n%s", r)
		}
	})
}

// TestRemoteRefusesHomeAsProject: run from the home directory, jail
// --remote refuses before connecting: the project would be the whole home.
func TestRemoteRefusesHomeAsProject(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		r := s.JailIn(s.Home, "", "--remote", d.Target(), "--", "true")
		if r.Code != 125 {
			t.Fatalf("jail --remote from the home directory: want 125:\n%s", r)
		}
		oneLine(t, r, "refusing to use", "contains your home directory")
		if n := strings.Count(d.Log(), "Connection from"); n != 0 {
			t.Errorf("jail connected (%d times) for a project that is the home", n)
		}
	})
}
