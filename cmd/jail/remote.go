package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/remote"
)

// remoteFlags are what jail --remote takes besides the jail's own flags.
type remoteFlags struct {
	target string // --remote [user@]host[:port] or a named host
	keep   bool   // --remote-keep: keep the remote workspace
}

// runScript starts the uploaded jail on the spec the probe wrote.
const runScript = `exec "$HOME/` + remote.BinDir + `/jail" remote-run --spec "$1"`

// checkScript runs the uploaded jail's checks.
const checkScript = `exec "$HOME/` + remote.BinDir + `/jail" check "$@"`

// runRemote runs argv in a jail on the remote host: the policy resolved
// here, the command and its environment (secrets already placeholders)
// sent as a spec, the jail binary installed there when it differs.
func runRemote(rf remoteFlags, opts jail.Options, argv []string, stderr io.Writer) int {
	if opts.Mode != "" {
		fmt.Fprintf(stderr, "jail: --%s does not run over --remote yet (its tracer would run on the remote, its profile here); run jail --%s on the remote host itself\n", opts.Mode, opts.Mode)
		return 125
	}
	r, err := resolvePolicy(opts, argv)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	if u := r.untrusted; u != nil && !askTrust(u, stderr) {
		fmt.Fprintf(stderr, "jail: %s widens the jail (%s); review it, then run `jail trust %s` to accept it\n",
			u.path, jail.Escaped(strings.Join(u.widening, "; ")), jail.Shown(u.dir))
		return 125
	}
	if root := r.pol.ProjectRoot; root == "/" || jail.Under(r.home, root) {
		fmt.Fprintf(stderr, "jail: refusing to use %s as the project root on a remote: it contains your home directory; run jail --remote from inside a project directory (or put a jail.json there)\n", jail.Shown(root))
		return 125
	}
	conn, err := remoteConn(rf.target, r.home)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	spec := remoteSpec(r, argv, conn.SSH.Target)
	return remoteSession(context.Background(), conn, spec, opts.Debug, stderr)
}

// remoteConn is the connection to --remote's target: a named host of
// the user's config, else [user@]host[:port] for ssh to resolve.
func remoteConn(arg, home string) (*remote.Conn, error) {
	named, err := jail.RemoteHosts(home, os.Getenv)
	if err != nil {
		return nil, err
	}
	t, err := remote.ParseTarget(arg, named)
	if err != nil {
		return nil, err
	}
	s := &remote.SSH{Target: t, ControlDir: filepath.Join(jail.StateDir(home, os.Getenv), "ssh"), ConfigFile: os.Getenv("JAIL_SSH_CONFIG")}
	return &remote.Conn{SSH: s, Interactive: isTerminal(0) && isTerminal(2)}, nil
}

// remoteSpec is the spec of this run: the policy, the command, and its
// environment with every secret a placeholder of a key that stays here.
func remoteSpec(r *resolvedPolicy, argv []string, t remote.Target) *remote.Spec {
	session := randomID()
	env := jail.PlanEnv(os.Environ(), r.pol, jail.NewSessionKey(), session, nil)
	return &remote.Spec{
		Policy: r.pol, Argv: argv, Env: env.Env, Session: session,
		Framed:    !isTerminal(0) || !isTerminal(2),
		LocalHome: r.home, LocalRoot: r.pol.ProjectRoot, LocalCwd: r.cwd,
		Dir: t.RemoteDir(r.pol.ProjectRoot),
	}
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// remoteSession probes the remote and writes the spec there (one round
// trip), installs jail when its checksum differs, then runs the command
// there and relays its exit code.
func remoteSession(ctx context.Context, conn *remote.Conn, spec *remote.Spec, debug bool, stderr io.Writer) int {
	t := conn.SSH.Target
	b, err := spec.Encode()
	if err != nil {
		fmt.Fprintf(stderr, "jail: encoding the remote spec: %v\n", err)
		return 125
	}
	facts, err := remote.Probe(ctx, conn, b)
	if err == nil {
		err = facts.CanJail(t)
	}
	if err == nil {
		err = installJail(ctx, conn, facts, debug, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	if spec.Net == nil && !spec.Policy.NoNetwork {
		fmt.Fprintf(stderr, "jail: warning: the command runs on %s without a network (loopback only): the network over ssh is not part of this jail yet\n", t.Shown())
	}
	cmd := conn.Command(ctx, remote.Script(runScript, facts.SessionDir+"/spec.json"), !spec.Framed)
	return relay(cmd, spec.Framed, stderr)
}

// installJail uploads the binaries the remote lacks.
func installJail(ctx context.Context, conn *remote.Conn, facts *remote.RemoteFacts, debug bool, stderr io.Writer) error {
	home, _ := jail.HomeDir()
	bins, err := remote.LocalBinaries(remote.GoArch(facts.Arch), filepath.Join(jail.StateDir(home, os.Getenv), "ssh"))
	if err != nil {
		return fmt.Errorf("finding jail for %s: %w", conn.SSH.Target.Shown(), err)
	}
	sent, err := remote.Upload(ctx, conn, bins, facts)
	if err == nil && len(sent) > 0 && debug {
		fmt.Fprintf(stderr, "jail: installed %s in ~/%s on %s\n", strings.Join(sent, " and "), remote.BinDir, conn.SSH.Target.Shown())
	}
	return err
}

// relay runs the session's ssh on this terminal and returns the remote
// command's exit code. Without a terminal, stdin goes as frames with a
// heartbeat. A signal to jail goes to ssh, whose end ends the remote
// command; jail then exits 128+N.
func relay(cmd *exec.Cmd, framed bool, stderr io.Writer) int {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = sshAttr()
	stop := make(chan struct{})
	defer close(stop)
	if framed {
		cmd.Stdin = nil
		in, err := cmd.StdinPipe()
		if err != nil {
			fmt.Fprintf(stderr, "jail: ssh: %v\n", err)
			return 125
		}
		go remote.WriteFrames(in, os.Stdin, remote.Heartbeat, stop)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "jail: starting ssh: %v\n", err)
		return 125
	}
	var got atomic.Int32
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				got.Store(int32(s.(syscall.Signal)))
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case got.Load() != 0 && (!errors.As(err, &ee) || ee.ExitCode() == 255 || ee.ExitCode() < 0):
		return 128 + int(got.Load())
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
	}
	fmt.Fprintf(stderr, "jail: ssh: %v\n", err)
	return 125
}

// checkRemote runs the remote jail's checks there (installing jail
// first when it differs) and prints them, with their exit code.
func checkRemote(target string, args []string, stdout, stderr io.Writer) int {
	home, err := jail.HomeDir()
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	conn, err := remoteConn(target, home)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	ctx := context.Background()
	facts, err := remote.Probe(ctx, conn, nil)
	if err == nil {
		err = facts.CanRun(conn.SSH.Target)
	}
	if err == nil {
		err = installJail(ctx, conn, facts, false, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	fmt.Fprintf(stdout, "jail check on %s:\n", conn.SSH.Target.Shown())
	err = conn.Run(ctx, remote.Script(checkScript, args...), nil, stdout, stderr)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "jail: %v\n", err)
	return 125
}
