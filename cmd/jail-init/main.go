// Command jail-init is jail's init inside the jail: Landlock, seccomp, the
// network bridge, signals and reaping, nothing else. Installed beside jail
// it replaces the jail binary's own re-exec, which carries the planner and
// the proxy and so starts slower. It refuses to run anywhere else.
package main

import (
	"fmt"
	"os"

	"github.com/jailsh/jail/jail/linux/inside"
)

func main() {
	if inside.IsInit(os.Args) {
		inside.Main()
	}
	fmt.Fprintln(os.Stderr, "jail-init: this is jail's init; it runs only inside a jail that jail builds")
	os.Exit(125)
}
