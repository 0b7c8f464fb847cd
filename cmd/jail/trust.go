package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jailsh/jail/jail"
)

// trustCmd is `jail trust [DIR]`: trust the project's jail.json as it is
// now; a later change asks again.
func trustCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintln(stderr, "jail: usage: jail trust [DIR]")
		return 125
	}
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	home, err := jail.HomeDir()
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		if r, e := filepath.EvalSymlinks(abs); e == nil {
			abs = r
		}
	}
	cfg, _ := jail.FindProject(abs, home)
	if err != nil || cfg == "" {
		fmt.Fprintf(stderr, "jail: no jail.json in %s or above it (up to the git root)\n", dir)
		return 125
	}
	if err := jail.Trust(cfg, "", home, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "jail: trusting %s: %v\n", cfg, err)
		return 125
	}
	fmt.Fprintf(stdout, "trusted %s as it is now; a change to it asks again\n", cfg)
	return 0
}
