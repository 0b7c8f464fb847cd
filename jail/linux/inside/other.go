//go:build !linux

package inside

import "errors"

// IsInit is false: jail's init runs only inside a Linux jail.
func IsInit(args []string) bool { return false }

// Main is never called off Linux.
func Main() { panic(errors.ErrUnsupported) }
