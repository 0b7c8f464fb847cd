package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jailsh/jail/jail"
)

// learnedCmd is `jail learned [list]`, `jail learned show NAME` and
// `jail learned rm NAME`: the profiles jail --learning wrote, which later
// runs of NAME use.
func learnedCmd(args []string, stdout, stderr io.Writer) int {
	home, err := jail.HomeDir()
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	dir := filepath.Dir(jail.LearnedPath(home, os.Getenv, []string{"x"}))
	path := func(name string) (string, bool) {
		p := jail.LearnedPath(home, os.Getenv, []string{name})
		if p == "" || jail.LearnedName([]string{name}) != name {
			fmt.Fprintf(stderr, "jail: %q is not a learned profile's name (see jail learned list)\n", name)
			return "", false
		}
		return p, true
	}
	switch {
	case len(args) == 0 || len(args) == 1 && args[0] == "list":
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			fmt.Fprintf(stderr, "jail: %v\n", err)
			return 125
		}
		var names []string
		for _, e := range entries {
			if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() && !strings.HasPrefix(n, ".") {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			fmt.Fprintf(stdout, "no learned profiles in %s; jail --learning -- CMD writes one\n", dir)
			return 0
		}
		for _, n := range names {
			p := filepath.Join(dir, n+".json")
			c, err := jail.LoadConfigFile(p, p)
			if err != nil {
				fmt.Fprintf(stdout, "%-14s error: %v\n", n, err)
				continue
			}
			fmt.Fprintf(stdout, "%-14s %d read-only, %d writable, %d domains (tracer %s)\n", n,
				len(c.Filesystem.AllowRead), len(c.Filesystem.AllowWrite), len(c.Network.Allow), c.Learned.Tracer)
		}
		return 0
	case len(args) == 2 && args[0] == "show":
		p, ok := path(args[1])
		if !ok {
			return 125
		}
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(stderr, "jail: no learned profile for %s (%v)\n", args[1], err)
			return 125
		}
		stdout.Write(b)
		return 0
	case len(args) == 2 && args[0] == "rm":
		p, ok := path(args[1])
		if !ok {
			return 125
		}
		if err := os.Remove(p); err != nil {
			fmt.Fprintf(stderr, "jail: %v\n", err)
			return 125
		}
		forgetAnnounced(home, p)
		fmt.Fprintf(stdout, "removed %s; runs of %s no longer use it\n", p, args[1])
		return 0
	}
	fmt.Fprintln(stderr, "jail: usage: jail learned [list] | jail learned show NAME | jail learned rm NAME")
	return 125
}
