//go:build !linux

package remote

import (
	"errors"

	"github.com/jailsh/jail/jail/linux"
)

// StartForward refuses: the proxy of a remote jail is served, for now,
// only from a Linux machine.
func StartForward(plan *linux.Plan) (*Forward, error) {
	if plan.Net == nil {
		return nil, errNoProxy
	}
	return nil, errors.New("running a jail on a remote host is supported from Linux only for now; run jail from a Linux machine")
}
