package inside

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/jailsh/jail/jail/linux/seccomp"
	"golang.org/x/sys/unix"
)

// File descriptors the host hands to init through bubblewrap. Nothing init
// needs travels in argv or the environment.
const (
	fdSpec    = 3 // read: the InitSpec (MarshalBinary)
	fdStatus  = 4 // write: one JSON initStatus line
	fdControl = 5 // read: signal numbers to forward, one byte each
	fdStderr  = 6 // the caller's stderr, for the command
	FDArgs    = 7 // read by bubblewrap: its arguments, NUL-separated
)

// Status is init's report to the host.
type Status struct {
	Started bool   `json:"started,omitempty"`
	Code    int    `json:"code,omitempty"`
	Error   string `json:"error,omitempty"`
}

// IsInit reports whether this process is jail's init inside a jail.
func IsInit(args []string) bool {
	return len(args) == 2 && args[0] == InitPath && args[1] == "init" && os.Getpid() == 1
}

// Main runs inside the namespaces as PID 1: it applies Landlock and
// seccomp, starts the command, forwards signals, reaps orphans and exits
// with the command's status. It never returns.
func Main() {
	// Before Landlock ABI 8, each thread enters its own sibling Landlock
	// domain, and a scoped signal from one thread's domain to a process
	// forked from another's is refused. Fork the command and signal it from
	// this one locked thread.
	runtime.LockOSThread()
	status := os.NewFile(fdStatus, "status")
	fail := func(code int, err error) {
		msg, _ := json.Marshal(Status{Code: code, Error: err.Error()})
		status.Write(append(msg, '\n'))
		os.Exit(code)
	}
	if err := unix.Dup2(fdStderr, 2); err != nil {
		fail(125, fmt.Errorf("init: restoring stderr: %w", err))
	}
	unix.Close(fdStderr)
	specFile := os.NewFile(fdSpec, "spec")
	var spec InitSpec
	raw, err := io.ReadAll(io.LimitReader(specFile, 64<<20))
	if err == nil {
		err = spec.UnmarshalBinary(raw)
	}
	if err != nil {
		fail(125, fmt.Errorf("init: reading the jail spec: %w", err))
	}
	specFile.Close()
	if err := closeStrayFDs(); err != nil {
		fail(125, err)
	}
	// Transparent capture, with the CAP_NET_ADMIN bubblewrap left for it.
	// Without it (a kernel without nftables' nat), the jail still runs:
	// programs that honour the proxy variables reach the proxy, the others
	// have no route out. It needs nothing of the host's, so it goes while
	// the host finishes its part.
	captured := false
	if spec.Capture.Listen != "" {
		err := ProgramCapture(CapturePort(spec.Capture))
		if errors.Is(err, ErrNetworkLost) {
			fail(125, err)
		}
		captured = err == nil
	}
	controlPipe := os.NewFile(fdControl, "control")
	if spec.WaitProxy {
		// The host starts its proxy while bubblewrap builds the jail (and
		// the placeholders init binds, the tracer) and says 0 when all
		// serve; nothing is mounted or run without it.
		b := make([]byte, 1)
		if _, err := controlPipe.Read(b); err != nil || b[0] != 0 {
			fail(125, errors.New("the proxy did not start"))
		}
	}
	// init's own mounts, with the capabilities bubblewrap left for them,
	// which go right after: in learning and watch modes the real home
	// through a throwaway overlay, then the placeholders and pins.
	if spec.OverlayHome != "" || len(spec.Mounts) > 0 {
		if err := newMountNamespace(); err != nil {
			fail(125, err)
		}
		if spec.OverlayHome != "" {
			if err := overlayHome(spec.OverlayHome); err != nil {
				fail(125, err)
			}
		}
		if err := applyMounts(spec.Mounts); err != nil {
			fail(125, err)
		}
	}
	if spec.OverlayHome != "" || len(spec.Mounts) > 0 || spec.Capture.Listen != "" {
		if err := dropCapabilities(); err != nil {
			fail(125, err)
		}
	}
	// Nothing init holds is the command's to take: not its memory
	// (/proc/1/mem, process_vm_readv), its open files (/proc/1/fd,
	// pidfd_getfd) or its environment. A process that is not dumpable is
	// open to those only with CAP_SYS_PTRACE, which no jailed process has.
	// The command is forked undumpable too, and is dumpable again from its
	// execve on: the kernel resets it for a program that is not set-id and
	// that its user may read.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(125, fmt.Errorf("init: making itself undumpable: %w", err))
	}

	// Signal handlers and the bridge's listeners are set up while Landlock
	// and seccomp are applied; both must be ready before the fork. The
	// handlers matter to the command too: signals init catches are reset
	// to default at its exec, while those bubblewrap left ignored would
	// stay ignored.
	sigs := make(chan os.Signal, 32)
	sigReady := make(chan struct{})
	go func() {
		signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
		for _, s := range spec.Ignore {
			signal.Ignore(syscall.Signal(s))
		}
		close(sigReady)
	}()
	// The bridge: loopback ports relayed to the host proxy's sockets,
	// listening before the command starts so its first request finds it.
	relayErr := make(chan error, 1)
	go func() {
		_, err := StartRelays(spec.Relays, nil)
		if err == nil && captured {
			_, err = StartCapture(spec.Capture)
		}
		relayErr <- err
	}()

	if spec.LandlockV > 0 {
		if err := applyLandlock(spec.LandlockV, spec.Landlock); err != nil {
			fail(125, err)
		}
	}
	if len(spec.Seccomp) > 0 {
		prog, err := seccomp.Unmarshal(spec.Seccomp)
		if err != nil {
			fail(125, err)
		}
		if err := seccomp.Load(prog); err != nil {
			fail(125, err)
		}
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(125, fmt.Errorf("setting no_new_privs: %w", err))
	}

	if spec.Notify {
		if err := installNotifyFilter(spec.Trace); err != nil {
			fail(125, err)
		}
	}
	if err := <-relayErr; err != nil {
		fail(125, fmt.Errorf("init: starting the network bridge: %w", err))
	}
	<-sigReady

	path, code, err := lookPath(spec.Argv[0], EnvValue(spec.Env, "PATH"), spec.Dir)
	if err != nil {
		fail(code, err)
	}
	// syscall.ForkExec rather than os.StartProcess: the os package probes
	// for pidfd support with an extra fork, a cost paid on every jail.
	pid, err := syscall.ForkExec(path, spec.Argv, &syscall.ProcAttr{Dir: spec.Dir, Env: spec.Env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		code := 126
		if errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		fail(code, fmt.Errorf("%s: %w", spec.Argv[0], err))
	}
	status.Write([]byte("{\"started\":true}\n")) // Status{Started: true}, without reflection
	status.Close()

	control := make(chan syscall.Signal, 8)
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := controlPipe.Read(b); err != nil {
				control <- syscall.SIGKILL // the host is gone: so is the jail
				return
			}
			control <- syscall.Signal(b[0])
		}
	}()

	for {
		select {
		case s := <-control:
			syscall.Kill(pid, s)
		case s := <-sigs:
			if s != syscall.SIGCHLD {
				// Terminal signals reach the command directly (same process
				// group); host-sent ones arrive on the control pipe.
				continue
			}
			for {
				var ws syscall.WaitStatus
				wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if err != nil || wpid <= 0 {
					break
				}
				if wpid == pid {
					os.Exit(ExitCode(ws))
				}
			}
		}
	}
}

// closeStrayFDs marks every descriptor above 2 close-on-exec, so that
// nothing the host or bubblewrap left open reaches the command. One
// close_range(2) call (Linux 5.11) where the kernel has it.
func closeStrayFDs() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("init: listing open files: %w", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// EnvValue returns a variable's value from a NAME=value list.
func EnvValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds the command as a shell would, returning the exit code a
// shell would use when it cannot: 127 not found, 126 not executable.
func lookPath(name, pathEnv, dir string) (string, int, error) {
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return syscall.EISDIR
		}
		return unix.Access(p, unix.X_OK)
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := check(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", 127, fmt.Errorf("%s: no such file or directory", name)
			}
			return "", 126, fmt.Errorf("%s: cannot execute: %v", name, unwrapPathError(err))
		}
		return p, 0, nil
	}
	var denied error
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		err := check(p)
		if err == nil {
			return p, 0, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && denied == nil {
			denied = fmt.Errorf("%s: cannot execute: %v", name, unwrapPathError(err))
		}
	}
	if denied != nil {
		return "", 126, denied
	}
	return "", 127, fmt.Errorf("%s: command not found", name)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
