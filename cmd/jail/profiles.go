package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/jailsh/jail/jail"
)

// profilesCmd is `jail profiles list` and `jail profiles show NAME`.
func profilesCmd(args []string, stdout, stderr io.Writer) int {
	home, err := jail.HomeDir()
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	switch {
	case len(args) == 1 && args[0] == "list":
		for _, p := range jail.ProfileNames(home, os.Getenv) {
			c, err := jail.LoadProfile(p.Name, home, os.Getenv)
			desc := ""
			if err != nil {
				desc = "error: " + err.Error()
			} else {
				desc = c.Description
			}
			from := "built-in"
			if p.Path != "" {
				from = "user"
			}
			fmt.Fprintf(stdout, "%-14s %-9s %s\n", p.Name, from, desc)
		}
		return 0
	case len(args) == 2 && args[0] == "show":
		c, err := jail.LoadProfile(args[1], home, os.Getenv)
		if err != nil {
			fmt.Fprintf(stderr, "jail: %v\n", err)
			return 125
		}
		c.File, c.Dir = "", ""
		b, _ := json.MarshalIndent(c, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintln(stderr, "jail: usage: jail profiles list | jail profiles show NAME")
	return 125
}
