//go:build !linux && !darwin

package main

import (
	"errors"
	"io"
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
