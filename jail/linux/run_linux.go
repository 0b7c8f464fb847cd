package linux

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux/inside"
	"github.com/jailsh/jail/jail/linux/seccomp"
	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// FindBwrap returns the path of bubblewrap. Only the system's own
// directories are searched, never PATH: a PATH entry can lie in the
// project, and jail runs bubblewrap on the host.
func FindBwrap() (string, error) {
	for _, p := range []string{"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"} {
		if unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: bubblewrap (bwrap) is not installed; install it with: sudo apt-get install bubblewrap", jail.ErrUnsupported)
}

// forwarded are the signals the host relays to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

// Run executes a plan: bubblewrap builds the namespaces and mounts, jail's
// init applies Landlock and seccomp and runs the command. It returns the
// command's exit code, or an *ExitError when the jail could not be built.
func Run(plan *Plan, stderr io.Writer) (int, error) {
	return RunObserved(plan, stderr, nil)
}

// RunObserved is Run with an observer, which a learning or watch plan
// needs: every access the command makes is traced into obs. The command
// never starts unless the tracer runs.
func RunObserved(plan *Plan, stderr io.Writer, obs *Observer) (int, error) {
	bwrap, err := FindBwrap()
	if err != nil {
		return 125, &jail.ExitError{Code: 125, Err: err}
	}
	if plan.Mode != "" && obs == nil {
		return 125, &jail.ExitError{Code: 125, Err: fmt.Errorf("%s mode needs an observer", plan.Mode)}
	}
	spec := inside.InitSpec{Argv: plan.Argv, Env: plan.Env.Env, Dir: plan.Cwd, LandlockV: plan.LandlockV, Landlock: plan.Landlock, OverlayHome: plan.OverlayHome}
	for _, m := range plan.Mounts {
		spec.Mounts = append(spec.Mounts, inside.Mount{Path: m.Path, ReadOnly: m.ReadOnly})
	}
	// Live control: jail ps, allow, deny and the answers to what is
	// asked reach the run through its Hub (the tracer's events too, so
	// it is aimed before the tracer starts).
	ctl := startControl(plan, len(plan.CommandDeny)+len(plan.CommandAsk) > 0 || obs != nil)
	defer ctl.close()
	ctl.watchActivity(obs)
	if obs != nil {
		if err := obs.Start(); err != nil {
			return 125, &jail.ExitError{Code: 125, Err: err}
		}
		defer obs.stop()
		// init waits for the host's go-ahead: the tracer must be aimed at
		// the jail before the command's first syscall.
		spec.WaitProxy = true
		spec.Trace = obs.Used == jail.TracerSeccomp
	}
	if len(plan.Seccomp) > 0 {
		if spec.Seccomp, err = seccomp.Program(plan.Seccomp); err != nil {
			return 125, &jail.ExitError{Code: 125, Err: fmt.Errorf("compiling the seccomp filter: %w", err)}
		}
	}
	for _, s := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP} {
		if signal.Ignored(s) {
			spec.Ignore = append(spec.Ignore, int(s))
		}
	}
	for _, d := range plan.CreateDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return 125, &jail.ExitError{Code: 125, Err: fmt.Errorf("creating %s (allowWrite): %w", d, err)}
		}
	}
	// Protected paths missing at start are held by placeholders for the
	// life of the jail. When only init's mounts need them, they are made
	// while bubblewrap starts: init mounts nothing, and runs nothing,
	// before the host's go-ahead, which waits for them.
	var hold *placeholderHold
	defer func() {
		if hold != nil {
			hold.releaseAll()
		}
	}()
	async := placeholdersForInit(plan)
	if !async {
		if hold = startHold(plan, false); hold.wait() != nil {
			return 125, &jail.ExitError{Code: 125, Err: hold.err}
		}
	}
	if err := writeGitExclude(plan.GitExclude); err != nil {
		return 125, &jail.ExitError{Code: 125, Err: err}
	}
	if plan.Net == nil && plan.GitExclude != nil {
		defer os.RemoveAll(filepath.Dir(plan.GitExclude.Copy))
	}
	// Sign-in views: session directories holding the sign-in copies, the
	// host directory's other entries bound in; what the jail creates in
	// them is moved back once the command has exited.
	views, viewOps, err := prepareSignInViews(plan, stderr)
	if err != nil {
		return 125, &jail.ExitError{Code: 125, Err: err}
	}
	defer views.remove()
	plan.Ops = expandViews(plan.Ops, viewOps)
	// Masked .env copies must exist before bubblewrap binds them; secret
	// values go to the proxy only, never into the jail.
	secrets, err := prepareSecrets(plan, os.Getenv)
	if err != nil {
		return 125, &jail.ExitError{Code: 125, Err: err}
	}
	if err := views.noteCopies(plan.SignIn); err != nil {
		return 125, &jail.ExitError{Code: 125, Err: err}
	}
	if plan.Net == nil && len(plan.EnvFiles) > 0 {
		defer os.RemoveAll(filepath.Dir(plan.EnvFiles[0].Copy))
	}
	if i := slices.IndexFunc(plan.SignIn, func(sf jail.SignInFile) bool { return !views.holds(sf.Copy) }); plan.Net == nil && i >= 0 {
		defer os.RemoveAll(filepath.Dir(plan.SignIn[i].Copy))
	}
	// Agent files: the session copies the jail writes, merged back once
	// the command has exited (a jail killed before that leaves the host
	// files as they were).
	agentFiles, err := prepareAgentFiles(plan)
	if err != nil {
		return 125, &jail.ExitError{Code: 125, Err: err}
	}
	defer agentFiles.remove()
	var ns *netSession
	if plan.Net != nil {
		if ns, err = prepareNetwork(plan.Net); err != nil {
			return 125, &jail.ExitError{Code: 125, Err: err}
		}
		ns.ctl = ctl
		spec.Relays, spec.Capture, spec.WaitProxy = plan.Net.Relays, plan.Net.Capture, true
	}
	// Where the proxy's directories were found sound.
	if err := ctl.listen(plan, stderr); err != nil {
		ns.close()
		return 125, &jail.ExitError{Code: 125, Err: err}
	}
	// A jail run from another machine lives only as long as the link to
	// it.
	var linkLost <-chan struct{}
	if plan.Link != "" {
		link, err := dialLink(plan.Link)
		if err != nil {
			ns.close()
			return 125, &jail.ExitError{Code: 125, Err: err}
		}
		defer link.Close()
		linkLost = link.Lost()
	}
	defer func() {
		if async && hold != nil {
			// The jail is gone: its placeholders go while the proxy
			// stops (neither touches what the other does).
			go hold.releaseAll()
		}
		ctl.close() // held requests answered before the proxy stops
		if summary := ns.close(); summary != "" {
			fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(summary)) // names the jailed run chose
		}
	}()
	var args bytes.Buffer
	for _, a := range plan.BwrapArgs() {
		args.WriteString(a)
		args.WriteByte(0)
	}

	// Host end, jail end of each pipe.
	specR, specW, err1 := os.Pipe()
	statusR, statusW, err2 := os.Pipe()
	controlR, controlW, err3 := os.Pipe()
	argsR, argsW, err4 := os.Pipe()
	errR, errW, err5 := os.Pipe()
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return 125, &jail.ExitError{Code: 125, Err: fmt.Errorf("creating pipes: %w", err)}
	}
	argv := []string{bwrap, "--args", fmt.Sprint(inside.FDArgs), InitPath, "init"}
	var infoR *os.File
	// Descriptors 0..7 of bubblewrap (and so of init): stdin, stdout,
	// bubblewrap's stderr, then spec, status, control, the caller's stderr
	// for the command, and bubblewrap's arguments.
	files := []uintptr{0, 1, errW.Fd(), specR.Fd(), statusW.Fd(), controlR.Fd(), 2, argsR.Fd()}

	// Command rules: init hands the exec filter's listener over a socket
	// (fd 8) to the supervisor here, outside every filter.
	var sup *supervisor
	var notifyHost *os.File
	var closeAfterFork []*os.File
	if len(plan.CommandDeny) > 0 || len(plan.CommandAsk) > 0 || spec.Trace {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return 125, &jail.ExitError{Code: 125, Err: fmt.Errorf("creating the supervisor socket: %w", err)}
		}
		notifyHost = os.NewFile(uintptr(pair[0]), "notify")
		notifyJail := os.NewFile(uintptr(pair[1]), "notify-jail")
		defer notifyHost.Close()
		defer notifyJail.Close() // and right after the fork, below
		files = append(files, notifyJail.Fd())
		closeAfterFork = append(closeAfterFork, notifyJail)
		var log *proxy.Log
		if len(plan.CommandDeny) > 0 || len(plan.CommandAsk) > 0 {
			log = proxy.OpenLogOrWarn(plan.StateDir, stderr) // a log that cannot be written is reported
			defer log.Close()
		}
		sup = newSupervisor(plan.CommandDeny, plan.CommandAllow, plan.Session, log)
		// sup.ask, the session's control hub, answers them; without one
		// an asked exec is refused.
		sup.setAsk(plan.CommandAsk, plan.AskTimeout)
		ctl.superviseHooks(sup)
		if spec.Trace {
			sup.trace = obs.add
		}
		spec.Notify = true
	}
	// bubblewrap reports the jail's first PID on an info pipe: the eBPF
	// probes are aimed at its PID namespace, and the placeholder journal
	// records it, so that no later jail takes a placeholder away while a
	// process of this one (killed with jail) may still be running. The
	// command waits for both.
	held := len(plan.Placeholders) > 0
	if held {
		spec.WaitProxy = true
	}
	if (obs != nil && obs.ebpf != nil) || held {
		r, w, err := os.Pipe()
		if err != nil {
			return 125, &jail.ExitError{Code: 125, Err: fmt.Errorf("creating pipes: %w", err)}
		}
		infoR = r
		defer infoR.Close()
		for len(files) < fdInfo {
			files = append(files, ^uintptr(0)) // closed in bubblewrap
		}
		files = append(files, w.Fd())
		closeAfterFork = append(closeAfterFork, w)
		argv = append([]string{bwrap, "--info-fd", fmt.Sprint(fdInfo)}, argv[1:]...)
	}

	// A jailed interactive shell takes the terminal's foreground for its
	// own process group but cannot see jail's (another PID namespace) to
	// hand it back on exit: jail takes it back itself.
	if ttyFD, ok := foregroundTTY(); ok {
		defer reclaimTTY(ttyFD)
	}

	// bubblewrap must survive a Ctrl-C meant for the command: ignored
	// signals stay ignored across exec, and init restores them.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	if async {
		hold = startHold(plan, true)
	}
	// syscall.ForkExec rather than os/exec: no pidfd probe fork, and
	// nothing of the host's environment reaches init.
	pid, err := syscall.ForkExec(bwrap, argv, &syscall.ProcAttr{Env: []string{}, Files: files})
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	for _, f := range append([]*os.File{specR, statusW, controlR, argsR, errW}, closeAfterFork...) {
		f.Close()
	}
	if err != nil {
		return 125, &jail.ExitError{Code: 125, Err: fmt.Errorf("starting bubblewrap: %w", err)}
	}
	go func() { argsW.Write(args.Bytes()); argsW.Close() }()
	specBytes, _ := spec.MarshalBinary()
	go func() { specW.Write(specBytes); specW.Close() }()
	if sup != nil {
		go func() {
			// While bubblewrap builds the jail.
			sup.findPrograms(inside.EnvValue(plan.Env.Env, "PATH"), plan.ProjectRoot)
			fd, err := receiveListener(notifyHost)
			if err != nil {
				return // init failed before it: it reports why
			}
			sup.fd = fd
			sup.run()
		}()
	}

	var bwrapErr bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&bwrapErr, io.LimitReader(errR, 64<<10)); io.Copy(io.Discard, errR) }()
	var st inside.Status
	go func() {
		defer wg.Done()
		line, err := bufio.NewReader(statusR).ReadBytes('\n')
		if err == nil || len(line) > 0 {
			json.Unmarshal(line, &st)
		}
	}()

	done := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
		done <- ws
	}()
	// The proxy starts while bubblewrap builds the jail; init waits for
	// its 0 byte before starting the command, and gets EOF if it failed.
	netReady := make(chan error, 1)
	tokenEndpoints, signIns := signInEndpoints(plan)
	go func() {
		if hold != nil {
			if err := hold.wait(); err != nil {
				netReady <- err
				return
			}
		}
		if infoR != nil {
			pid, err := childPid(infoR)
			if err == nil && held {
				err = recordJailPID(plan.StateDir, plan.Session, pid)
			}
			if err == nil && obs != nil && obs.ebpf != nil {
				if err = obs.target(pid); err != nil {
					err = fmt.Errorf("starting the eBPF tracer: %w", err)
				}
			}
			if err != nil {
				netReady <- err
				return
			}
		}
		if ns != nil && plan.Net.External == "" {
			netReady <- ns.serve(plan.Net, plan.Session, secrets, tokenEndpoints)
			return
		}
		netReady <- nil
	}()
	var netErr, linkErr error
	var ws syscall.WaitStatus
	var pending []byte // signals that arrive before the proxy is up
	started := false
loop:
	for {
		select {
		case netErr = <-netReady:
			if netErr != nil {
				controlW.Close()
				continue
			}
			if spec.WaitProxy {
				controlW.Write([]byte{0})
			}
			controlW.Write(pending)
			started, netReady = true, nil
		case s := <-sigs:
			if _, fg := foregroundTTY(); fg && (s == syscall.SIGINT || s == syscall.SIGQUIT) {
				continue // the terminal delivered it to the command already
			}
			if b := byte(s.(syscall.Signal)); started {
				controlW.Write([]byte{b})
			} else {
				pending = append(pending, b)
			}
		case <-linkLost:
			// bubblewrap's death takes the whole jail with it (its
			// child dies with it, and with that PID 1 every process).
			syscall.Kill(pid, syscall.SIGKILL)
			linkErr, linkLost = errLinkLost, nil
		case ws = <-done:
			break loop
		}
	}
	controlW.Close()
	wg.Wait()
	statusR.Close()
	errR.Close()
	agentFiles.mergeBack(stderr)
	views.moveBack(stderr)
	keepSignIns(signIns, stderr)

	if sup != nil {
		if line := sup.summary(); line != "" {
			fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(line))
		}
	}
	if obs != nil {
		obs.stop() // the events still in flight
	}
	if linkErr != nil {
		return 125, &jail.ExitError{Code: 125, Err: linkErr}
	}
	if netErr != nil {
		if !st.Started && st.Error == "" && bwrapErr.Len() > 0 {
			return 125, &jail.ExitError{Code: 125, Err: bwrapFailure(bwrapErr.String(), ws)}
		}
		return 125, &jail.ExitError{Code: 125, Err: netErr}
	}
	if st.Error != "" {
		return st.Code, &jail.ExitError{Code: st.Code, Err: errors.New(st.Error)}
	}
	if !st.Started {
		return 125, &jail.ExitError{Code: 125, Err: bwrapFailure(bwrapErr.String(), ws)}
	}
	if bwrapErr.Len() > 0 {
		stderr.Write(bwrapErr.Bytes())
	}
	return inside.ExitCode(ws), nil
}

// errLinkLost ends a jail whose proxy runs on another machine when the
// link to that machine ends.
var errLinkLost = errors.New("the link to the machine jail was started from was lost, so the jail and every process in it were stopped; run the command again")

// dialLink connects to the control socket path and watches the link. The
// link is made once the other end's first beat has come: a forwarding
// that accepts but reaches nothing (the other side gone) fails here,
// before the command starts.
func dialLink(path string) (*Link, error) {
	// Another user who could write the directory could stand in for the
	// other machine (its proxy, its CA) and keep the link up.
	if err := privateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("the link to the machine jail was started from: %w", err)
	}
	c, err := net.DialTimeout("unix", path, linkTimeout)
	if err == nil {
		c.SetReadDeadline(time.Now().Add(linkTimeout))
		_, err = c.Read(make([]byte, 1))
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to the machine jail was started from: %w; run the command again", err)
	}
	return WatchLink(c), nil
}

// placeholderHold is the making of a plan's placeholders, perhaps still
// going on beside bubblewrap's start.
type placeholderHold struct {
	done     chan struct{}
	release  func()
	err      error
	once     sync.Once
	released chan struct{}
}

// startHold makes the plan's placeholders, in the background when async,
// else before it returns.
func startHold(plan *Plan, async bool) *placeholderHold {
	h := &placeholderHold{done: make(chan struct{}), released: make(chan struct{})}
	run := func() {
		defer close(h.done)
		h.release, h.err = holdPlaceholders(plan)
	}
	if async {
		go run()
	} else {
		run()
	}
	return h
}

// wait waits until the placeholders are in place, or could not be made.
func (h *placeholderHold) wait() error {
	<-h.done
	return h.err
}

// releaseAll removes what the hold made, once it is done; a second call
// waits for the first.
func (h *placeholderHold) releaseAll() {
	h.once.Do(func() {
		defer close(h.released)
		if h.wait() == nil {
			h.release()
		}
	})
	<-h.released
}

// placeholdersForInit reports whether nothing but init's mounts needs the
// plan's placeholders: each lies in a tree init binds, and bubblewrap
// binds nothing from or onto a path at or below one (host or jail side).
// Sign-in views list host directories that placeholders may be in: with
// them, the placeholders are made first.
func placeholdersForInit(plan *Plan) bool {
	if len(plan.Placeholders) == 0 || len(plan.SignInViews) > 0 {
		return false
	}
	for _, ph := range plan.Placeholders {
		i := slices.IndexFunc(plan.Mounts, func(m InitMount) bool { return jail.Under(ph.Path, m.Host) })
		if i < 0 {
			return false
		}
		m := plan.Mounts[i]
		inJail := m.Path + strings.TrimPrefix(ph.Path, m.Host)
		for _, op := range plan.Ops {
			for _, p := range []string{ph.Path, inJail} {
				if (op.Src != "" && jail.Under(op.Src, p)) || jail.Under(op.Dest, p) {
					return false
				}
			}
		}
	}
	return true
}

// foregroundTTY returns the terminal among stdin, stdout and stderr and
// whether jail runs in its foreground, where Ctrl-C reaches the whole
// process group, the command included.
func foregroundTTY() (int, bool) {
	for _, fd := range []int{0, 1, 2} {
		pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		if err == nil {
			return fd, pgrp == unix.Getpgrp()
		}
	}
	return -1, false
}

// reclaimTTY makes jail's process group the terminal's foreground again.
func reclaimTTY(fd int) {
	if pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil && pgrp != unix.Getpgrp() {
		signal.Ignore(syscall.SIGTTOU) // a background tcsetpgrp would stop jail
		unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
		signal.Reset(syscall.SIGTTOU)
	}
}

// bwrapFailure turns bubblewrap's complaint into one line with a fix.
func bwrapFailure(msg string, ws syscall.WaitStatus) error {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		msg = fmt.Sprintf("exited with status %d", inside.ExitCode(ws))
	}
	hint := ""
	switch {
	case strings.Contains(msg, "uid map") || strings.Contains(msg, "RTM_NEWADDR") || strings.Contains(msg, "No permissions to create new namespace"):
		hint = " (unprivileged user namespaces are blocked on this machine; run `jail check` for the fix)"
	case strings.Contains(msg, "Unknown option"):
		hint = " (this bubblewrap is too old: jail needs 0.8.0 or newer; run `jail check`)"
	case strings.Contains(msg, "Can't find source path"):
		hint = " (a path in the policy vanished while jail started; try again)"
	}
	return fmt.Errorf("bubblewrap failed: %s%s", strings.TrimPrefix(msg, "bwrap: "), hint)
}
