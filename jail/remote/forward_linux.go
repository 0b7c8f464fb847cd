package remote

import (
	"path/filepath"

	"github.com/jailsh/jail/jail/linux"
)

// StartForward starts, on this machine, the proxy of plan (made here for a
// jail that runs on a remote host) on the unix sockets of the plan's
// session directory, as a local jail's, and the control socket beside
// them (the control socket alone for a jail without network). Close
// stops both.
func StartForward(plan *linux.Plan) (*Forward, error) {
	if plan.Net == nil {
		return startLink()
	}
	p, err := linux.StartProxy(plan)
	if err != nil {
		return nil, err
	}
	f := &Forward{LocalDir: p.Dir, CAFile: filepath.Join(plan.Net.CADir, "ca.pem"), stop: p.Close}
	if err := f.listenControl(); err != nil {
		p.Close()
		return nil, err
	}
	return f, nil
}
