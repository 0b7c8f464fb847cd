package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/jailsh/jail/jail"
)

// Conn runs fixed scripts on a target over ssh.
type Conn struct {
	SSH *SSH
	// Interactive lets ssh ask (a key's passphrase) on the terminal;
	// otherwise every prompt is refused.
	Interactive bool
}

// Script is a fixed sh script with its arguments: each argument is
// quoted, so user data reaches the script only as "$1", "$2", ..., never
// as shell text.
func Script(script string, args ...string) string {
	var b strings.Builder
	b.WriteString("set --")
	for _, a := range args {
		b.WriteString(" " + quote(a))
	}
	b.WriteString("\n")
	b.WriteString(script)
	return b.String()
}

// quote is s in single quotes for a POSIX shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// remoteCommand is the command line the remote login shell runs: sh
// with the script as one quoted argument, whatever the user's shell.
func remoteCommand(script string) string { return "exec /bin/sh -c " + quote(script) }

// MaxOutput bounds what Run reads of a remote script's stdout and
// stderr together: a remote taken over could otherwise fill this
// machine's disk and memory. The sync's steps bound theirs closer
// (RunLimit): a fetch to the sizes the listing gave.
const MaxOutput = 16 << 30

// Run runs script on the target with /bin/sh, without a terminal,
// reading at most MaxOutput of its output. A script's non-zero exit is an
// *exec.ExitError; ssh's own failure is an *SSHError.
func (c *Conn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	return c.RunLimit(ctx, MaxOutput, script, stdin, stdout, stderr)
}

// RunLimit is Run reading at most limit bytes of stdout and stderr
// together: past it, ssh is ended and the run fails.
func (c *Conn) RunLimit(ctx context.Context, limit int64, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, Path, c.SSH.Args(remoteCommand(script), !c.Interactive, false)...)
	cmd.Stdin, cmd.Env = stdin, c.SSH.Env
	// Files, not pipes: a control master ssh leaves behind holds what it
	// was given for as long as it persists, and a pipe would not end.
	outF, err1 := os.CreateTemp("", "jail-ssh-out-")
	errF, err2 := os.CreateTemp("", "jail-ssh-err-")
	for _, f := range []*os.File{outF, errF} {
		if f != nil {
			os.Remove(f.Name())
			defer f.Close()
		}
	}
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("ssh output: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outF, errF
	runErr, over := runBounded(cmd, limit, outF, errF)
	if over {
		return fmt.Errorf("%s sent more than %d MiB of output, more than jail reads for this step; the remote host may be compromised", c.SSH.Target.Shown(), limit>>20)
	}
	tail := &tailBuffer{}
	outF.Seek(0, io.SeekStart)
	io.Copy(orDiscard(stdout), io.LimitReader(outF, limit))
	errF.Seek(0, io.SeekStart)
	io.Copy(io.MultiWriter(tail, orDiscard(stderr)), io.LimitReader(errF, limit))
	return classify(c.SSH.Target, runErr, tail.String())
}

// outputPoll is how often runBounded looks at the output's size.
const outputPoll = 20 * time.Millisecond

// runBounded runs cmd, ending it once its output files together hold
// more than limit bytes; over says it was ended for that. (A control
// master writes into the files itself, past the client ssh: their size,
// not a pipe's count, is what the remote sent.)
func runBounded(cmd *exec.Cmd, limit int64, files ...*os.File) (err error, over bool) {
	if err := cmd.Start(); err != nil {
		return err, false
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(outputPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err, outputSize(files) > limit
		case <-tick.C:
			if outputSize(files) > limit {
				cmd.Process.Kill()
				<-done
				return nil, true
			}
		}
	}
}

// outputSize is the files' total size.
func outputSize(files []*os.File) int64 {
	var n int64
	for _, f := range files {
		if fi, err := f.Stat(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Command is the ssh command that runs script on the target for a
// session: with a terminal when tty, extra ssh options (forwards) before
// the destination.
func (c *Conn) Command(ctx context.Context, script string, tty bool, extra ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, Path, c.SSH.Args(remoteCommand(script), false, tty, extra...)...)
	cmd.Env = c.SSH.Env
	return cmd
}

// SSHError is ssh failing to connect or to run anything: ssh's exit 255.
type SSHError struct {
	Target  Target
	HostKey bool   // the host key is unknown or has changed
	Detail  string // ssh's last line
}

func (e *SSHError) Error() string {
	host := e.Target.Shown()
	if e.HostKey {
		add := "ssh " + e.Target.String()
		if e.Target.Port != 0 {
			add = fmt.Sprintf("ssh -p %d %s", e.Target.Port, e.Target.String())
		}
		return fmt.Sprintf("the host key of %s is not in your known_hosts, or has changed (%s); jail checks it strictly: check the host's fingerprint out of band, then add it with `%s` (or ssh-keyscan, after comparing the fingerprint)",
			host, jail.Escaped(e.Detail), add)
	}
	return fmt.Sprintf("ssh to %s failed: %s; check that `ssh %s true` works without asking", host, jail.Escaped(e.Detail), e.Target.String())
}

// classify turns ssh's exit 255 into an *SSHError naming what failed.
func classify(t Target, err error, stderr string) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 {
		return err
	}
	e := &SSHError{Target: t, Detail: lastLine(stderr)}
	for _, s := range []string{"Host key verification failed", "host key is known for", "REMOTE HOST IDENTIFICATION HAS CHANGED", "HOST KEY HAS CHANGED"} {
		if strings.Contains(stderr, s) {
			e.HostKey = true
			if i := strings.Index(stderr, "No "); i >= 0 && strings.Contains(stderr[i:], "host key is known for") {
				e.Detail = firstLine(stderr[i:])
			}
		}
	}
	if e.Detail == "" {
		e.Detail = "exit 255"
	}
	return e
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if t.b.Len() > 8<<10 {
		t.b.Next(t.b.Len() - 8<<10)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
