//go:build darwin

package darwin

import (
	"fmt"
	"io"
	"net"
	"os"
)

// Run runs a plan: the proxy on its listener l (unused with no network),
// then the command under /usr/bin/sandbox-exec. It returns the command's exit code;
// an error means the jail could not start, and nothing ran.
func Run(p *Plan, l net.Listener, stderr io.Writer) (int, error) {
	if err := Prepare(p); err != nil {
		return 125, err
	}
	defer os.RemoveAll(p.SessionDir)
	var n *Network
	if !p.NoNetwork {
		var err error
		if n, err = StartNetwork(p, l, stderr); err != nil {
			return 125, err
		}
	}
	code, err := runCommand(Command(p))
	if s := n.Close(); s != "" {
		fmt.Fprintf(stderr, "jail: %s\n", s)
	}
	return code, err
}
