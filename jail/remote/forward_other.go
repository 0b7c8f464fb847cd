//go:build !linux

package remote

import (
	"errors"

	"github.com/jailsh/jail/jail/linux"
)

// StartForward makes the link of a remote jail without network; the
// proxy of one with network is served, for now, only from a Linux
// machine.
func StartForward(plan *linux.Plan) (*Forward, error) {
	if plan.Net == nil {
		return startLink()
	}
	return nil, errors.New("running a jail on a remote host is supported from Linux only for now; run jail from a Linux machine")
}
