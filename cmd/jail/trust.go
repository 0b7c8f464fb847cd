package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/jailsh/jail/jail"
)

// trustCmd is `jail trust [DIR]`: trust the project's jail.json and its
// toolchain files that can name registries (.npmrc, uv.toml, …, in DIR and
// each directory up to the project root) as they are now; a later change
// asks again. A project without a jail.json is trusted the same way.
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
	files := jail.ToolchainFiles(root, abs, home, os.Getenv)
	if cfg != "" {
		files = append([]jail.ToolchainFile{{Path: cfg}}, files...)
	}
	if len(files) == 0 {
		fmt.Fprintf(stderr, "jail: no jail.json or toolchain config (.npmrc, uv.toml, …) in %s or above it (up to the git root); nothing to trust\n", dir)
		return 125
	}
	var names []string
	for _, f := range files {
		if err := jail.Trust(f.Path, f.Hash, home, os.Getenv); err != nil {
			fmt.Fprintf(stderr, "jail: trusting %s: %v\n", f.Path, err)
			return 125
		}
		names = append(names, f.Path)
	}
	fmt.Fprintf(stdout, "trusted %s as it is now; a change to it asks again\n", strings.Join(names, ", "))
	return 0
}
