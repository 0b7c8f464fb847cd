package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/jailsh/jail/jail"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `jail runs a command in a deny-by-default kernel jail.

usage:
  jail [flags] [--] CMD [ARGS...]   run CMD in the jail; exit with its code
  jail [flags] -c 'STRING'          run a shell string (/bin/sh -c)
  jail check                        report which protections this machine has
  jail plan [flags] -- CMD          print what would be applied, run nothing
  jail log [-f] [--json] [--session ID]   the proxy's decisions
  jail profiles list | show NAME    built-in and user profiles

flags:
`

// run is the whole CLI; it reports errors once, here.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return check(args[1:], stdout, stderr)
		case "plan":
			return runJail(args[1:], true, stdout, stderr)
		case "log":
			return logCmd(args[1:], stdout, stderr)
		case "profiles":
			return profilesCmd(args[1:], stdout, stderr)
		}
	}
	return runJail(args, false, stdout, stderr)
}

func runJail(args []string, planOnly bool, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("jail", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SetOutput(io.Discard)
	var (
		opts        jail.Options
		shellString string
		showVersion bool
	)
	fs.StringVarP(&opts.Settings, "settings", "s", "", "extra config `FILE` layered over jail.json")
	fs.StringSliceVar(&opts.Profiles, "profile", nil, "apply profiles `a,b` instead of the one named after the command")
	fs.BoolVar(&opts.NoProfile, "no-profile", false, "apply no profile picked from the command's name")
	fs.StringArrayVar(&opts.AllowRead, "allow-read", nil, "make `PATH` readable (repeatable)")
	fs.StringArrayVar(&opts.AllowWrite, "allow-write", nil, "make `PATH` readable and writable (repeatable)")
	fs.StringArrayVar(&opts.DenyRead, "deny-read", nil, "hide `PATH` even inside allowed trees (repeatable)")
	fs.StringArrayVar(&opts.Secrets, "secret", nil, "treat environment variable `VAR` as a secret (repeatable)")
	fs.StringArrayVar(&opts.AllowDomain, "allow-domain", nil, "allow connections to `HOST[:PORT]` (repeatable; *.example.com for subdomains)")
	fs.StringArrayVar(&opts.DenyDomain, "deny-domain", nil, "deny connections to `HOST` even when allowed elsewhere (repeatable)")
	fs.BoolVar(&opts.NoNetwork, "no-network", false, "no network at all: loopback only, no proxy")
	fs.IntSliceVarP(&opts.Publish, "publish", "p", nil, "let the host connect to `PORT` the jailed command listens on (repeatable)")
	fs.IntSliceVarP(&opts.Forward, "forward", "f", nil, "let the jailed command reach the host's localhost `PORT` (repeatable)")
	fs.BoolVar(&opts.BestEffort, "best-effort", false, "run even when the kernel lacks a protection, saying which")
	fs.BoolVarP(&opts.Debug, "debug", "d", false, "print the plan before running")
	fs.StringVarP(&shellString, "command", "c", "", "run `STRING` with /bin/sh -c")
	fs.BoolVar(&showVersion, "version", false, "print the version")
	help := fs.BoolP("help", "h", false, "show this help")

	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "jail: %v; see jail --help\n", err)
		return 125
	}
	if *help {
		fmt.Fprint(stdout, usage+fs.FlagUsages())
		return 0
	}
	if showVersion {
		fmt.Fprintf(stdout, "jail %s\n", version)
		return 0
	}
	argv := fs.Args()
	if fs.Changed("command") {
		if len(argv) > 0 {
			fmt.Fprintln(stderr, "jail: -c takes one string; put the whole command inside it")
			return 125
		}
		argv = []string{"/bin/sh", "-c", shellString}
	}
	if len(argv) == 0 {
		fmt.Fprint(stderr, "jail: no command given\n"+usage+fs.FlagUsages())
		return 125
	}

	plan, err := makePlan(opts, argv)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	if planOnly {
		fmt.Fprint(stdout, plan)
		return 0
	}
	if opts.Debug {
		fmt.Fprint(stderr, plan)
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(stderr, "jail: warning: %s\n", w)
	}
	for _, g := range plan.GaveUp {
		fmt.Fprintf(stderr, "jail: --best-effort: running without %s\n", g)
	}
	code, err := jail.Run(plan, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		var ee *jail.ExitError
		if errors.As(err, &ee) {
			return ee.Code
		}
		return 125
	}
	reportCreated(plan, stderr)
	return code
}

// makePlan resolves the policy for this directory and plans the jail.
func makePlan(opts jail.Options, argv []string) (*jail.Plan, error) {
	home, err := jail.HomeDir()
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("reading the working directory: %w", err)
	}
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = r
	}
	if r, err := filepath.EvalSymlinks(home); err == nil {
		home = r
	}
	layers, root, err := jail.LoadLayers(opts, argv, cwd, home, os.Getenv)
	if err != nil {
		return nil, err
	}
	pol, err := jail.Resolve(layers, root, home, opts)
	if err != nil {
		return nil, err
	}
	if !pol.NoNetwork {
		pol.Registries = jail.RegistryHosts(argv, root, home, os.Getenv)
	}
	facts, err := jail.Gather(pol, home, cwd)
	if err != nil {
		return nil, err
	}
	return jail.Build(pol, facts, argv)
}

// reportCreated warns about delayed-escape paths the command created.
func reportCreated(plan *jail.Plan, stderr io.Writer) {
	if created := jail.Created(plan); len(created) > 0 {
		fmt.Fprintf(stderr, "jail: warning: the command created %s; review before an unjailed tool runs it\n", strings.Join(created, ", "))
	}
}
