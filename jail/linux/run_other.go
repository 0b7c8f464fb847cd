//go:build !linux

package linux

import (
	"fmt"
	"io"
	"runtime"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/learn"
)

var errPlatform = fmt.Errorf("%w: this build of jail runs commands on Linux only (%s has no bubblewrap, Landlock or seccomp)", jail.ErrUnsupported, runtime.GOOS)

// LandlockABI is 0: Landlock is a Linux feature.
func LandlockABI() int { return 0 }

// SeccompAvailable is false: seccomp is a Linux feature.
func SeccompAvailable() bool { return false }

// SeccompNotifyAvailable is false: seccomp is a Linux feature.
func SeccompNotifyAvailable() bool { return false }

// FindBwrap fails: bubblewrap is a Linux tool.
func FindBwrap() (string, error) { return "", errPlatform }

// Run fails off Linux.
func Run(plan *Plan, stderr io.Writer) (int, error) {
	return 125, &jail.ExitError{Code: 125, Err: errPlatform}
}

// Observer traces learning and watch runs, on Linux only.
type Observer struct {
	Want           string
	OnEvent        func(learn.Event)
	Used, Fallback string
}

// Start fails: there is no tracer on this platform.
func (o *Observer) Start() error { return errPlatform }

// Events returns nothing on this platform.
func (o *Observer) Events() []learn.Event { return nil }

// RunObserved fails: jail runs commands on Linux only.
func RunObserved(plan *Plan, stderr io.Writer, obs *Observer) (int, error) {
	return 125, &jail.ExitError{Code: 125, Err: errPlatform}
}

// PreloadTracer does nothing on this platform.
func PreloadTracer() {}

// SweepPlaceholders has nothing to sweep where jail makes no placeholders.
func SweepPlaceholders(stateDir string) {}
