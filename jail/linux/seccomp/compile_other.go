//go:build !linux || !cgo

package seccomp

import (
	"errors"
	"fmt"
)

// Compile needs libseccomp (Linux, cgo); elsewhere it returns an error
// wrapping errors.ErrUnsupported.
func Compile(rules []Rule) ([]SockFilter, error) {
	return nil, fmt.Errorf("compiling seccomp filter: needs Linux and cgo (libseccomp): %w", errors.ErrUnsupported)
}
