package jail

import (
	"errors"
)

// ErrUnsupported marks a protection the machine lacks.
var ErrUnsupported = errors.New("unsupported")

// ExitError is a failure of jail itself (or of starting the command) that
// carries the exit code jail should end with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }
