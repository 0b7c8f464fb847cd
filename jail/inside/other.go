//go:build !linux

package inside

import (
	"errors"
	"syscall"
)

// IsInit is false: jail's init runs only inside a Linux jail.
func IsInit(args []string) bool { return false }

// Main is never called off Linux.
func Main() { panic(errors.ErrUnsupported) }

// ExitCode is the shell's code for a wait status.
func ExitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
