//go:build darwin

package main

import (
	"fmt"
	"io"
	"net"

	"github.com/jailsh/jail/darwin"
	"github.com/jailsh/jail/jail"
)

// runOnMac starts the proxy, plans the jail with its port, and runs the
// command under sandbox-exec.
func runOnMac(r *resolvedPolicy, f *darwin.Facts, argv []string, opts jail.Options, stderr io.Writer) int {
	var l net.Listener
	if !r.pol.NoNetwork {
		var err error
		if l, f.ProxyPort, err = darwin.Listen(); err != nil {
			fmt.Fprintf(stderr, "jail: %v; check that 127.0.0.1 accepts listeners\n", err)
			return 125
		}
		defer l.Close()
	}
	p, err := darwin.Build(r.pol, f, argv)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	if opts.Debug {
		fmt.Fprint(stderr, escapedLines(darwinPlanText(p, r.regs.Warnings)))
	}
	for _, w := range append(p.Notes, r.regs.Warnings...) {
		fmt.Fprintf(stderr, "jail: warning: %s\n", jail.Escaped(w))
	}
	code, err := darwin.Run(p, l, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
	}
	return code
}
