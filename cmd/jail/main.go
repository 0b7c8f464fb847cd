// Command jail runs a command in a deny-by-default kernel jail.
package main

import (
	"os"

	"github.com/jailsh/jail/jail"
)

func main() {
	if jail.IsInit(os.Args) {
		jail.InitMain()
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
