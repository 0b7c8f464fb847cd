//go:build !linux

package seccomp

import (
	"errors"
	"fmt"
)

// Load is only supported on Linux; elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func Load(prog []SockFilter) error {
	return fmt.Errorf("loading seccomp filter: seccomp is Linux-only: %w", errors.ErrUnsupported)
}
