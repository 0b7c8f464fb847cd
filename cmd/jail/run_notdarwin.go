//go:build !darwin

package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/jailsh/jail/darwin"
	"github.com/jailsh/jail/jail"
)

// runOnMac refuses: a Seatbelt jail runs on macOS only.
func runOnMac(r *resolvedPolicy, f *darwin.Facts, argv []string, opts jail.Options, stderr io.Writer) int {
	fmt.Fprintf(stderr, "jail: a macOS jail runs on macOS only, and this is %s; review it with jail plan --platform darwin -- CMD\n", runtime.GOOS)
	return 125
}
