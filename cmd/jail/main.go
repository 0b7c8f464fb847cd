// Command jail runs a command in a deny-by-default kernel jail.
package main

import (
	"os"

	"github.com/jailsh/jail/jail/linux/inside"
)

func main() {
	if inside.IsInit(os.Args) {
		inside.Main() // jail-init is not installed beside jail: this binary is the init
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
