package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteInstallsJailOnce: the first run installs jail and jail-init
// in the remote home, byte for byte the local ones; a second run sends
// nothing (the same inode and time); a binary changed on the remote is
// noticed by its checksum and replaced. The control socket that makes
// the second run cheap is out of reach of a local jail.
func TestRemoteInstallsJailOnce(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		d.resetRemote(t)
		bin := filepath.Join(d.Home(), ".local/share/jail/bin")
		if r := s.Jail("--remote", d.Target(), "--", "true"); r.Code != 0 {
			t.Fatalf("first run:\n%s", r)
		}
		first := map[string]os.FileInfo{}
		for _, name := range []string{"jail", "jail-init"} {
			local := mustRead(t, filepath.Join(filepath.Dir(jailBin), name))
			if !bytes.Equal(mustRead(t, filepath.Join(bin, name)), local) {
				t.Fatalf("the remote %s is not the local one", name)
			}
			fi, err := os.Stat(filepath.Join(bin, name))
			if err != nil {
				t.Fatal(err)
			}
			first[name] = fi
		}
		if r := s.Jail("--remote", d.Target(), "--", "true"); r.Code != 0 {
			t.Fatalf("second run:\n%s", r)
		}
		for name, fi := range first {
			again, err := os.Stat(filepath.Join(bin, name))
			if err != nil || !os.SameFile(fi, again) || !again.ModTime().Equal(fi.ModTime()) {
				t.Errorf("the second run installed %s again (%v, %v -> %v)", name, err, fi.ModTime(), again.ModTime())
			}
		}
		// A remote binary changed there (by anything with the remote
		// user's rights) is replaced before it runs.
		d.asRemote(t, `printf 'x' >>"$HOME/.local/share/jail/bin/jail"`)
		if r := s.Jail("--remote", d.Target(), "--", "true"); r.Code != 0 {
			t.Fatalf("run after the remote binary changed:\n%s", r)
		}
		if !bytes.Equal(mustRead(t, filepath.Join(bin, "jail")), mustRead(t, jailBin)) {
			t.Errorf("a changed remote jail was not replaced by the local one")
		}
		if leftovers, _ := filepath.Glob(filepath.Join(bin, ".jail*")); len(leftovers) > 0 {
			t.Errorf("upload left temporary files: %v", leftovers)
		}
		// The control master's socket gives a shell on the remote without
		// a jail: a local jail must not reach it.
		sockDir := filepath.Join(s.Home, ".local/state/jail/ssh")
		socks, _ := filepath.Glob(filepath.Join(sockDir, "*"))
		var sock string
		for _, p := range socks {
			if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
				sock = p
			}
		}
		if sock == "" {
			t.Fatalf("no control socket in %s (%v): every run pays a new ssh handshake", sockDir, socks)
		}
		r := s.Sh(`test -S ` + sock + ` && echo VISIBLE; /usr/bin/ssh -o ControlPath=` + sock + ` -O check x 2>&1; echo done`)
		if strings.Contains(r.Stdout, "Master running") || strings.Contains(r.Stdout, "VISIBLE") || !strings.Contains(r.Stdout, "done") {
			t.Errorf("a local jail reaches the control socket:\n%s", r)
		}
	})
}

// TestRemoteWithoutBubblewrapRefused: a remote whose PATH has no bwrap is
// refused with one line naming the fix, and the command never runs there,
// jailed or not.
func TestRemoteWithoutBubblewrapRefused(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		tools := filepath.Join(s.Base, "nobwrap")
		os.MkdirAll(tools, 0o755)
		for _, tool := range []string{"sh", "uname", "sha256sum", "cut", "cat", "mktemp", "tr", "head", "mkdir", "chmod", "mv", "rm", "touch", "id"} {
			os.Symlink("/usr/bin/"+tool, filepath.Join(tools, tool))
		}
		d := startRemoteSSHD(t, "SetEnv PATH="+tools)
		d.client(s, true, "")
		marker := filepath.Join(d.remoteDir(s), "ran-marker")
		os.Remove(marker)
		r := s.Jail("--remote", d.Target(), "--", "touch", "ran-marker")
		if r.Code != 125 {
			t.Fatalf("a remote without bubblewrap: want 125:\n%s", r)
		}
		oneLine(t, r, "no bubblewrap", "apt-get install bubblewrap", "never runs a command there unjailed")
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the command ran on a remote without bubblewrap")
		}
	})
}
