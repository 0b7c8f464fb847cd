package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
	"github.com/jailsh/jail/jail/remote"
	"golang.org/x/sys/unix"
)

// hangupExit is remote-run's exit when the session's link ends first.
const hangupExit = 129

// remoteRunCmd is the remote side of jail --remote (jail remote-run
// --spec FILE, not for people): it plans the spec's policy for this
// machine and runs it, and ends the jail when the session's link ends.
func remoteRunCmd(args []string, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "--spec" {
		fmt.Fprintln(stderr, "jail: remote-run is the remote side of jail --remote; it takes only --spec FILE")
		return 125
	}
	specPath := args[1]
	cleanup := func() {}
	if dir := filepath.Dir(specPath); strings.HasPrefix(filepath.Base(dir), "jail-r.") {
		cleanup = func() { os.RemoveAll(dir) } // the session's own directory, made by the probe
		defer cleanup()
	}
	lost := func() {
		cleanup()
		os.Exit(hangupExit)
	}
	watchHangup(lost)
	code, err := remoteRun(specPath, lost, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		var ee *jail.ExitError
		if errors.As(err, &ee) {
			return ee.Code
		}
	}
	return code
}

// remoteRun reads the spec, plans it here and runs it; lost ends it all
// when the link to the local jail ends.
func remoteRun(specPath string, lost func(), stderr io.Writer) (int, error) {
	b, err := os.ReadFile(specPath)
	if err != nil {
		return 125, fmt.Errorf("reading the remote spec: %w", err)
	}
	spec, err := remote.DecodeSpec(b)
	if err != nil {
		return 125, err
	}
	plan, code, err := remotePlan(spec, filepath.Dir(specPath), stderr)
	if plan == nil {
		return code, err
	}
	if spec.Framed {
		if err := framedStdin(lost); err != nil {
			return 125, err
		}
	}
	return linux.Run(plan, stderr)
}

// remotePlan plans the spec's policy on this machine: its paths moved to
// this home and the project's remote directory, the command found on
// this PATH, the environment as the local side made it.
func remotePlan(spec *remote.Spec, dir string, stderr io.Writer) (*linux.Plan, int, error) {
	home, err := jail.HomeDir()
	if err != nil {
		return nil, 125, err
	}
	if r, err := filepath.EvalSymlinks(home); err == nil {
		home = r
	}
	paths, err := spec.Paths(home)
	if err != nil {
		return nil, 125, err
	}
	if err := os.MkdirAll(paths.Cwd, 0o700); err != nil {
		return nil, 125, fmt.Errorf("making the remote project directory: %w", err)
	}
	pol := spec.Policy
	spec.Translate(pol, paths)
	if !spec.Linked {
		pol.NoNetwork = true
	}
	keepEnv(pol, spec.Env)
	command, err := jail.ExposeCommand(pol, spec.Argv, home, paths.Cwd, os.Getenv("PATH"))
	if err != nil {
		return nil, 125, err
	}
	if command != nil && command.NotFound {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(strings.TrimPrefix(command.String(), "command: ")))
		return nil, 127, nil
	}
	command.AddTo(pol)
	facts, err := linux.Gather(pol, home, paths.Cwd)
	if err != nil {
		return nil, 125, err
	}
	facts.Command = command
	facts.Env = remoteEnv(spec.Env, spec.LocalHome, home)
	facts.Session = spec.Session
	if spec.Linked {
		if err := linkTo(facts, dir, spec.CA); err != nil {
			return nil, 125, err
		}
	}
	plan, err := linux.Build(pol, facts, spec.Argv)
	if err != nil {
		return nil, 125, err
	}
	keepSyncedEnvFiles(plan)
	for _, w := range plan.Warnings {
		fmt.Fprintf(stderr, "jail: warning: %s\n", jail.Escaped(w))
	}
	for _, g := range plan.GaveUp {
		fmt.Fprintf(stderr, "jail: --best-effort: running without %s\n", g)
	}
	return plan, 0, nil
}

// linkTo points the plan at the local proxy's sockets and the control
// socket that ssh forwards into the session directory dir, with the
// proxy's CA beside them.
func linkTo(facts *linux.Facts, dir string, ca []byte) error {
	if err := remote.ValidRemoteDir(dir); err != nil {
		return err
	}
	if len(ca) > 0 {
		if err := os.WriteFile(linux.ExternalCA(dir), ca, 0o644); err != nil {
			return fmt.Errorf("writing the proxy's CA certificate: %w", err)
		}
	}
	facts.External = dir
	return nil
}

// keepSyncedEnvFiles shows each .env file read-only as it was synced,
// already masked with the placeholders the local proxy knows: masking it
// again here would give it placeholders of this jail's own key, which
// nothing could inject.
func keepSyncedEnvFiles(plan *linux.Plan) {
	synced := map[string]string{}
	for _, ef := range plan.EnvFiles {
		synced[ef.Copy] = ef.Path
	}
	for i, op := range plan.Ops {
		if p, ok := synced[op.Src]; ok && op.Kind == "ro-bind" {
			plan.Ops[i].Src = p
		}
	}
	plan.EnvFiles = nil
}

// keepEnv makes the remote plan keep the environment the local side
// made: its placeholders stand for values only the local proxy holds,
// and masking them again here would make placeholders of placeholders.
func keepEnv(pol *jail.Policy, env []string) {
	pol.SecretNames = nil
	pol.Secrets.Env = nil
	for _, kv := range env {
		if name, _, ok := strings.Cut(kv, "="); ok {
			pol.Env.Pass = append(pol.Env.Pass, name)
		}
	}
}

// remoteEnv is the local side's environment for this machine: this
// machine's own HOME, USER, LOGNAME, PATH and SHELL, no local directory
// variables, and the local home moved to this one in the values.
func remoteEnv(env []string, localHome, home string) []string {
	own := map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "PATH": true, "SHELL": true}
	var out []string
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case own[name], name == "PWD", name == "OLDPWD", name == "TMPDIR", strings.HasPrefix(name, "XDG_"):
			continue
		case localHome != "" && localHome != "/" && (value == localHome || strings.HasPrefix(value, localHome+"/")):
			value = home + strings.TrimPrefix(value, localHome)
		}
		out = append(out, name+"="+value)
	}
	for name := range own {
		if v, ok := os.LookupEnv(name); ok {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// framedStdin gives the command, as its stdin, the input the frames on
// remote-run's stdin carry, and calls lost when the link ends.
func framedStdin(lost func()) error {
	link, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return fmt.Errorf("taking the session's stdin: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the command's stdin: %w", err)
	}
	if err := unix.Dup2(int(r.Fd()), 0); err != nil {
		return fmt.Errorf("creating the command's stdin: %w", err)
	}
	r.Close()
	go func() {
		remote.ReadFrames(os.NewFile(uintptr(link), "link"), w, remote.LinkTimeout)
		lost()
	}()
	return nil
}

// watchHangup ends remote-run, and with it the jail (bubblewrap dies
// with its parent, and the jail's processes with its PID namespace),
// when the session's link ends: ssh closes the command's stderr pipe, or
// hangs up its terminal.
func watchHangup(lost func()) {
	go func() {
		fds := []unix.PollFd{{Fd: 2}}
		for {
			fds[0].Revents = 0
			n, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return // nothing to watch: the jail still ends with ssh's signal
			}
			if n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				break
			}
			time.Sleep(50 * time.Millisecond) // an event that is no hang-up: do not spin
		}
		lost()
	}()
}
