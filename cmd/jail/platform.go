package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/jailsh/jail/darwin"
	"github.com/jailsh/jail/jail"
)

// otherPlatform handles --platform: linux on Linux is the caller's to
// plan (done is false); darwin is planned here on any OS and run only on
// macOS; anything else is refused.
func otherPlatform(platform string, opts jail.Options, argv []string, planOnly bool, stdout, stderr io.Writer) (code int, done bool) {
	switch platform {
	case "darwin":
		return darwinJail(opts, argv, planOnly, stdout, stderr), true
	case "linux":
		if runtime.GOOS != "linux" && !planOnly {
			fmt.Fprintf(stderr, "jail: a Linux jail runs on Linux only, and this is %s; drop --platform, or review it with jail plan --platform linux\n", runtime.GOOS)
			return 125, true
		}
		return 0, false
	}
	fmt.Fprintf(stderr, "jail: --platform %s is not one jail plans; use linux or darwin\n", jail.Escaped(platform))
	return 125, true
}

// darwinJail plans a macOS jail from the same policy as the Linux one, and
// prints it (jail plan) or runs it (on macOS).
func darwinJail(opts jail.Options, argv []string, planOnly bool, stdout, stderr io.Writer) int {
	if opts.Mode != "" {
		fmt.Fprintf(stderr, "jail: --%s needs a tracer, and macOS has none that jail can use (no eBPF, no seccomp); run jail --%s on Linux and copy the profile it writes to the Mac\n", opts.Mode, opts.Mode)
		return 125
	}
	r, err := resolvePolicy(opts, argv)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	if u := r.untrusted; u != nil {
		if planOnly {
			fmt.Fprintf(stdout, "# untrusted: %s widens the jail: %s (run jail trust to accept)\n", u.path, jail.Escaped(strings.Join(u.widening, "; ")))
		} else if !trusted(u, stderr) {
			return 125
		}
	}
	if c := r.command; c != nil && c.NotFound && !planOnly {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(strings.TrimPrefix(c.String(), "command: ")))
		return 127
	}
	f, err := darwin.Gather(r.pol, r.home, r.cwd, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	if planOnly {
		f.ProxyPort = darwin.PlanPort
		p, err := darwin.Build(r.pol, f, argv)
		if err != nil {
			fmt.Fprintf(stderr, "jail: %v\n", err)
			return 125
		}
		fmt.Fprint(stdout, escapedLines(darwinPlanText(p, r.regs.Warnings)))
		return 0
	}
	return runOnMac(r, f, argv, opts, stderr)
}

// darwinPlanText is what jail plan --platform darwin prints: the
// sandbox-exec command line with its -D parameters, then the profile.
func darwinPlanText(p *darwin.Plan, warnings []string) string {
	var b strings.Builder
	b.WriteString("# macOS jail: sandbox-exec runs the command under the Seatbelt profile below (passed with -p)\n")
	if p.NoNetwork {
		b.WriteString("# no network: no proxy, no connection in or out\n")
	} else {
		fmt.Fprintf(&b, "# the proxy port is shown as %d; a run uses the port its proxy listener gets\n", darwin.PlanPort)
	}
	if len(p.Placeholders) > 0 {
		fmt.Fprintf(&b, "# secrets passed as placeholders: %s\n", strings.Join(p.Placeholders, " "))
	}
	for _, n := range append(append([]string{}, p.Notes...), warnings...) {
		fmt.Fprintf(&b, "# note: %s\n", n)
	}
	b.WriteString(p.CommandLine() + "\n")
	b.WriteString("# profile:\n")
	b.WriteString(p.Profile.Text)
	return b.String()
}
