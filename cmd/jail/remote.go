package main

import (
	"context"
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
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
	"github.com/jailsh/jail/jail/remote"
)

// remoteFlags are what jail --remote takes besides the jail's own flags.
type remoteFlags struct {
	target string // --remote [user@]host[:port] or a named host
	keep   bool   // --remote-keep: keep the remote workspace
	fetch  bool   // --remote-fetch: fetch what a run left there
}

// linkGrace is how long ssh has to exit once the link ended.
const linkGrace = 5 * time.Second

// runScript starts the uploaded jail on the spec the probe wrote.
const runScript = `exec "$HOME/` + remote.BinDir + `/jail" remote-run --spec "$1"`

// checkScript runs the uploaded jail's checks.
const checkScript = `exec "$HOME/` + remote.BinDir + `/jail" check "$@"`

// runRemote runs argv in a jail on the remote host: the policy resolved
// and planned here, the proxy here (ssh forwards its sockets there), the
// project synced there and back, the command and its environment (secrets
// already placeholders of a key that stays here) sent as a spec, the jail
// binary installed there when it differs.
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
	if u := r.untrusted; u != nil && !trusted(u, stderr) {
		return 125
	}
	if root := r.pol.ProjectRoot; root == "/" || jail.Under(r.home, root) {
		fmt.Fprintf(stderr, "jail: refusing to use %s as the project root on a remote: it contains your home directory; run jail --remote from inside a project directory (or put a jail.json there)\n", jail.Shown(root))
		return 125
	}
	conn, err := remoteConn(rf.target, r.home, r.pol)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	plan, err := localPlan(r, argv)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	fw, err := remote.StartForward(plan)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	defer func() {
		if summary := fw.Close(); summary != "" {
			fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(summary)) // names the jailed run chose
		}
	}()
	ca, err := fw.CACert()
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	s := &session{conn: conn, fw: fw, plan: plan, keep: rf.keep, debug: opts.Debug, stderr: stderr}
	s.spec = remoteSpec(r, argv, conn.SSH.Target, plan, ca)
	s.sync = syncConfig(conn, r, envCopies(plan))
	return s.run(context.Background())
}

// localPlan plans the jail here, as for a local run: its network and
// secrets are the proxy's, which runs here; the remote plans the rest.
func localPlan(r *resolvedPolicy, argv []string) (*linux.Plan, error) {
	facts, err := linux.Gather(r.pol, r.home, r.cwd)
	if err != nil {
		return nil, err
	}
	facts.Command = r.command
	return linux.Build(r.pol, facts, argv)
}

// remoteConn is the connection to --remote's target: a named host of
// the user's config, else [user@]host[:port] for ssh to resolve. Its ssh
// runs without the secrets of pol in its environment.
func remoteConn(arg, home string, pol *jail.Policy) (*remote.Conn, error) {
	named, err := jail.RemoteHosts(home, os.Getenv)
	if err != nil {
		return nil, err
	}
	t, err := remote.ParseTarget(arg, named)
	if err != nil {
		return nil, err
	}
	s := &remote.SSH{Target: t, ControlDir: filepath.Join(jail.StateDir(home, os.Getenv), "ssh"), ConfigFile: os.Getenv("JAIL_SSH_CONFIG"), Env: sshEnv(pol)}
	return &remote.Conn{SSH: s, Interactive: isTerminal(0) && isTerminal(2)}, nil
}

// sshEnv is the environment of a session's ssh and rsync: this
// process's without the variables whose values the jailed command sees
// only as placeholders. An ssh config's SendEnv (SendEnv *, say) would
// otherwise hand their real values to the remote.
func sshEnv(pol *jail.Policy) []string {
	host := os.Environ()
	ep := jail.PlanEnv(host, pol, jail.NewSessionKey(), "", nil)
	secret := map[string]bool{}
	for _, n := range append(ep.Placeholders, ep.Whole...) {
		secret[n] = true
	}
	out := []string{}
	for _, kv := range host {
		if name, _, _ := strings.Cut(kv, "="); !secret[name] {
			out = append(out, kv)
		}
	}
	return out
}

// remoteSpec is the spec of this run: the policy, the command, and the
// local plan's environment, every secret a placeholder of the key the
// local proxy holds.
func remoteSpec(r *resolvedPolicy, argv []string, t remote.Target, plan *linux.Plan, ca []byte) *remote.Spec {
	return &remote.Spec{
		Policy: r.pol, Argv: argv, Env: plan.Env.Env, Session: plan.Session,
		LocalHome: r.home, LocalRoot: r.pol.ProjectRoot, LocalCwd: r.cwd,
		Dir:    t.RemoteDir(r.pol.ProjectRoot),
		Framed: !isTerminal(0) || !isTerminal(2),
		Linked: true, CA: ca,
	}
}

// syncConfig is how the project goes to the remote workspace and back:
// masked files as the masked copies the local proxy knows the
// placeholders of, by rsync over the same ssh when both ends have it.
func syncConfig(conn *remote.Conn, r *resolvedPolicy, copies map[string]string) remote.SyncConfig {
	t := conn.SSH.Target
	return remote.SyncConfig{
		Conn: conn, Host: t.Shown(), Dir: t.RemoteDir(r.pol.ProjectRoot),
		Policy: r.pol, Home: r.home, StateDir: jail.StateDir(r.home, os.Getenv),
		Mask: remote.MaskedCopies(copies),
		Rsh:  append([]string{remote.Path}, conn.SSH.Options(true)...), RshHost: t.String(),
		Env: conn.SSH.Env,
	}
}

// envCopies are the masked copies of the plan's .env files, by path.
func envCopies(plan *linux.Plan) map[string]string {
	copies := map[string]string{}
	for _, e := range plan.EnvFiles {
		copies[e.Path] = e.Copy
	}
	return copies
}

// fetchRemote brings back what a run left in the remote workspace (its
// link dropped before the changes came back), then removes the workspace
// unless --remote-keep.
func fetchRemote(rf remoteFlags, opts jail.Options, stderr io.Writer) int {
	r, err := resolvePolicy(opts, []string{"true"})
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	conn, err := remoteConn(rf.target, r.home, r.pol)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	cfg := syncConfig(conn, r, nil)
	ctx := context.Background()
	back, err := remote.SyncBack(ctx, cfg)
	if back != nil {
		for _, l := range back.Lines() {
			fmt.Fprintf(stderr, "jail: %s\n", l)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(err.Error())) // names the remote chose
		return 125
	}
	if !rf.keep {
		if err := remote.RemoveWorkspace(ctx, cfg); err != nil {
			fmt.Fprintf(stderr, "jail: warning: %v\n", err)
		}
	}
	return 0
}

// session is one jail --remote run.
type session struct {
	conn   *remote.Conn
	fw     *remote.Forward
	plan   *linux.Plan
	spec   *remote.Spec
	sync   remote.SyncConfig
	keep   bool
	debug  bool
	stderr io.Writer
}

// run probes the remote and writes the spec there (one round trip),
// installs jail when its checksum differs, syncs the project, runs the
// command there with the forwards, brings the changes back and cleans up.
func (s *session) run(ctx context.Context) int {
	t := s.conn.SSH.Target
	b, err := s.spec.Encode()
	if err != nil {
		return s.fail("encoding the remote spec: %v", err)
	}
	facts, err := remote.Probe(ctx, s.conn, b)
	if err == nil {
		err = facts.CanJail(t)
	}
	if err != nil {
		return s.fail("%v", err)
	}
	defer s.cleanup(ctx, facts.SessionDir)
	if err := installJail(ctx, s.conn, facts, s.debug, s.stderr); err != nil {
		return s.fail("%v", err)
	}
	if _, err := remote.Sync(ctx, s.sync); err != nil {
		return s.fail("syncing the project to %s: %s", t.Shown(), jail.Escaped(err.Error())) // names the remote chose
	}
	fwd, err := s.fw.SSHArgs(facts.SessionDir)
	if err != nil {
		return s.fail("%v", err)
	}
	cmd := s.conn.Command(ctx, remote.Script(runScript, facts.SessionDir+"/spec.json"), !s.spec.Framed, fwd...)
	code := relay(cmd, s.spec.Framed, s.fw.Lost(), s.stderr)
	back, err := remote.SyncBack(ctx, s.sync)
	if back != nil {
		for _, l := range back.Lines() {
			fmt.Fprintf(s.stderr, "jail: %s\n", l)
		}
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "jail: %s\n", jail.Escaped(err.Error())) // names the remote chose
		if code == 0 {
			code = 125
		}
		return code
	}
	if !s.keep {
		if err := remote.RemoveWorkspace(ctx, s.sync); err != nil {
			fmt.Fprintf(s.stderr, "jail: warning: %v\n", err)
		}
	}
	return code
}

func (s *session) fail(format string, args ...any) int {
	fmt.Fprintf(s.stderr, "jail: "+format+"\n", args...)
	return 125
}

// cleanup removes the remote session directory and ends the session's
// forwardings in the control master, which would keep them.
func (s *session) cleanup(ctx context.Context, dir string) {
	if script, err := remote.CleanupScript(dir); err == nil {
		s.conn.Run(ctx, script, nil, nil, nil)
	}
	if args, err := s.fw.CancelArgs(dir); err == nil {
		cancel := exec.CommandContext(ctx, remote.Path, append(s.conn.SSH.Options(true), append(args, "--", s.conn.SSH.Target.String())...)...)
		cancel.Env = s.conn.SSH.Env
		cancel.Run()
	}
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
func relay(cmd *exec.Cmd, framed bool, lost <-chan struct{}, stderr io.Writer) int {
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
	var cut atomic.Bool
	done := make(chan struct{})
	go func() {
		var grace <-chan time.Time
		for {
			select {
			case s := <-sigs:
				got.Store(int32(s.(syscall.Signal)))
				cmd.Process.Signal(s)
			case <-lost:
				// The remote jail closed the link (done: its status is on
				// its way), or the link was cut: ssh may hang on a dead
				// connection.
				lost, grace = nil, time.After(linkGrace)
			case <-grace:
				cut.Store(true)
				cmd.Process.Kill()
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	switch {
	case cut.Load():
		fmt.Fprintf(stderr, "jail: the link to the remote jail ended and ssh did not; the remote jail stopped itself (no network, nothing left running)\n")
		return 125
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
	conn, err := remoteConn(target, home, &jail.Policy{})
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
