package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Path is the ssh client jail runs: a fixed path, never one found through
// PATH, which a project's tooling could have put a program first in.
const Path = "/usr/bin/ssh"

// maxControlPath bounds the control socket's path: a unix socket path has
// at most 107 bytes, and ssh adds a random suffix of 17 while it binds.
const maxControlPath = 107 - 17

// SSH builds the command lines of the system ssh for a target. Host keys
// are always checked against the user's own known_hosts; a control
// master in ControlDir lets every later connection to the host within
// ControlPersist cost one round trip.
type SSH struct {
	Target Target
	// ControlDir holds the control sockets ("" for none): jail's state
	// directory, which no jail can see.
	ControlDir string
	// ConfigFile replaces ~/.ssh/config when set (ssh -F).
	ConfigFile string
	// Env is the environment ssh runs with (nil for this process's): one
	// without the secrets, which an ssh config's SendEnv would hand to
	// the remote.
	Env []string
}

// Args is the ssh command line (without Path) that runs command on the
// target; extra options go before the destination. batch refuses every
// prompt (for steps that must not ask); tty asks for a terminal.
func (s *SSH) Args(command string, batch, tty bool, extra ...string) []string {
	args := s.Options(batch)
	if tty {
		args = append(args, "-t")
	} else {
		args = append(args, "-T")
	}
	args = append(args, extra...)
	return append(args, "--", s.Target.String(), command)
}

// Options are the options every ssh of a session takes: on the command
// line, they win over anything in ssh's config files (ssh keeps the
// first value it reads for each), so a StrictHostKeyChecking no there is
// overridden.
func (s *SSH) Options(batch bool) []string {
	var args []string
	if s.ConfigFile != "" {
		args = append(args, "-F", s.ConfigFile)
	}
	args = append(args,
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UpdateHostKeys=no",
		"-o", "ForwardAgent=no",
		"-o", "ForwardX11=no",
		"-o", "PermitLocalCommand=no",
		"-o", "RemoteCommand=none",
		"-o", "ServerAliveInterval=15",
		"-o", "ServerAliveCountMax=3",
		"-o", "ExitOnForwardFailure=yes",
	)
	if batch {
		args = append(args, "-o", "BatchMode=yes")
	}
	if p := s.controlPath(); p != "" {
		args = append(args, "-o", "ControlMaster=auto", "-o", "ControlPath="+p, "-o", "ControlPersist=60s")
	} else {
		args = append(args, "-o", "ControlMaster=no", "-o", "ControlPath=none")
	}
	if s.Target.Port != 0 {
		args = append(args, "-p", strconv.Itoa(s.Target.Port))
	}
	return args
}

// controlPath is the control socket's path: a short hash of the
// destination, port and config file (ssh's own %C is 40 characters, too
// many under a deep home), "" when ControlDir is unset, cannot be made
// private, or would make a path too long for a unix socket.
func (s *SSH) controlPath() string {
	if s.ControlDir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%s", s.Target.String(), s.Target.Port, s.ConfigFile)))
	p := filepath.Join(s.ControlDir, hex.EncodeToString(sum[:8]))
	if len(p) > maxControlPath || strings.ContainsAny(p, "%\"' \t\n=") {
		return ""
	}
	if err := os.MkdirAll(s.ControlDir, 0o700); err != nil {
		return ""
	}
	fi, err := os.Lstat(s.ControlDir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return ""
	}
	return p
}
