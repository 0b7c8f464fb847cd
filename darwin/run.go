package darwin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Command is the sandbox-exec invocation of a plan: the fixed launcher,
// the profile and its parameters, the command; the plan's environment and
// working directory.
func Command(p *Plan) *exec.Cmd {
	cmd := &exec.Cmd{
		Path: SandboxExec,
		Args: append([]string{SandboxExec}, p.Profile.Args(p.Argv)...),
		Env:  p.Env, Dir: p.Cwd,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
	}
	return cmd
}

// runCommand starts cmd, forwards SIGINT, SIGTERM and SIGHUP to it, and
// returns its exit code: 128+N when a signal N ended it, as a shell says.
func runCommand(cmd *exec.Cmd) (int, error) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 125, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
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
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 125, fmt.Errorf("waiting for the command: %w", err)
}
