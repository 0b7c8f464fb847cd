package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jailsh/jail/jail"
)

// trustCmd is `jail trust [DIR]`: trust the project's jail.json and its
// toolchain files that can name registries (.npmrc, uv.toml, …, in DIR and
// each directory up to the project root) as they are now, printing what
// each widens; a later change asks again. A project without a jail.json is
// trusted the same way.
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
	if r, e := filepath.EvalSymlinks(home); e == nil {
		home = r
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		if r, e := filepath.EvalSymlinks(abs); e == nil {
			abs = r
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "jail: %s: %v; name an existing directory\n", dir, err)
		return 125
	}
	cfg, root := jail.FindProject(abs, home)
	regs := jail.ToolchainFiles(root, abs, home, os.Getenv)
	files, widening := regs.Files, regs.FileWidening()
	if cfg != "" {
		c, err := jail.LoadConfigFile(cfg, cfg)
		f := jail.ToolchainFile{Path: cfg}
		if err == nil {
			f.Hash, widening[cfg] = c.Hash, jail.Widening(c, root, home)
		}
		files = append([]jail.ToolchainFile{f}, files...)
	}
	if len(files) == 0 {
		fmt.Fprintf(stderr, "jail: no jail.json or toolchain config (.npmrc, uv.toml, …) in %s or above it (up to the git root); nothing to trust\n", jail.Shown(dir))
		return 125
	}
	for _, f := range files {
		if err := jail.Trust(f.Path, f.Hash, home, os.Getenv); err != nil {
			fmt.Fprintf(stderr, "jail: trusting %s: %v\n", jail.Shown(f.Path), err)
			return 125
		}
		showTrusted(stdout, f.Path, widening[f.Path])
	}
	fmt.Fprintln(stdout, "a change to any of them asks again")
	return 0
}

// showTrusted prints a file trust records and what it widens, one line
// each, so nothing is trusted that the user was not shown.
func showTrusted(w io.Writer, path string, widening []string) {
	if len(widening) == 0 {
		fmt.Fprintf(w, "trusted %s as it is now (it widens nothing now)\n", jail.Shown(path))
		return
	}
	fmt.Fprintf(w, "trusted %s as it is now; it widens the jail with:\n", jail.Shown(path))
	for _, x := range widening {
		fmt.Fprintf(w, "  %s\n", jail.Escaped(x)) // what a project chose
	}
}
