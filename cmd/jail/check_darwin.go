//go:build darwin

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/jailsh/jail/darwin"
	"github.com/jailsh/jail/jail"
)

const probeSeccompArg = "--probe-seccomp"

var errNoSeccomp = errors.New("seccomp is a Linux feature")

func runSeccompProbe() seccompReport {
	return seccompReport{Filter: errNoSeccomp, Enforce: errNoSeccomp, Notify: errNoSeccomp}
}

func probeSeccomp(w io.Writer) int { return 125 }

const probeCaptureArg = "--probe-capture"

func probeCapture(w io.Writer) int { return 125 }

func addCapture(add func(ok, required bool, name, detail string)) {
	add(false, false, "capture", "transparent capture is a Linux feature")
}

// platformCheck is jail check on macOS: what the Seatbelt jail has, and
// what it lacks compared with Linux. Exit codes are Linux's: 1 when the
// default jail cannot run.
func platformCheck(verbose bool, stdout io.Writer) (int, bool) {
	var rows []checkRow
	add := func(ok, required bool, name, detail string) {
		rows = append(rows, checkRow{ok, required, name, detail})
	}
	if err := sandboxProbe("(version 1) (allow default)"); err != nil {
		add(false, true, "sandbox-exec", fmt.Sprintf("%s cannot run a profile: %v; fix: use macOS 11 or newer, where it ships with the system", darwin.SandboxExec, err))
	} else {
		add(true, true, "sandbox-exec", darwin.SandboxExec+" runs a Seatbelt profile")
	}
	if l, port, err := darwin.Listen(); err != nil {
		add(false, true, "proxy", err.Error()+"; fix: allow listeners on 127.0.0.1")
	} else {
		l.Close()
		add(true, true, "proxy", fmt.Sprintf("listens on 127.0.0.1 (this time port %d), HTTP and SOCKS5 on one port", port))
	}
	home, _ := jail.HomeDir()
	ca := darwin.CADir(home, os.Getenv)
	if _, err := os.Stat(ca + "/ca.pem"); err == nil {
		add(true, true, "CA", "per-user CA in "+ca)
	} else {
		add(true, true, "CA", "made on first use in "+ca)
	}
	if err := sandboxProbe(fmt.Sprintf("(version 1) (allow default) (deny file-ioctl (ioctl-command %d))", darwin.TIOCSTI)); err != nil {
		add(false, false, "TIOCSTI", fmt.Sprintf("this system rejects the ioctl-command filter (%v): a jailed command could type into your terminal", err))
	} else {
		add(true, false, "TIOCSTI", "typing into the terminal is denied by an ioctl-command filter")
	}
	add(false, false, "PID namespace", "macOS has none: the jailed command shares the machine's process table (it cannot read or signal processes outside the jail)")
	add(false, false, "exec supervision", "no exec-time command rules: command.deny and command.ask are not checked at exec (git push and npm publish are still refused on the wire)")
	add(false, false, "learning", "no eBPF or seccomp tracer: --learning and --watch are refused; run them on Linux")
	addAgentSandboxes(add)
	code := printRows(rows, stdout,
		"the macOS jail cannot run on this machine; fix what is marked MISS",
		"the macOS jail runs on this machine, with what is marked opt missing compared with Linux")
	if verbose {
		printLists(stdout)
	}
	return code, true
}

// sandboxProbe runs /usr/bin/true under a profile.
func sandboxProbe(profile string) error {
	out, err := exec.Command(darwin.SandboxExec, "-p", profile, "/usr/bin/true").CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
	}
	return err
}
