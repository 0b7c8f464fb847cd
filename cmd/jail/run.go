package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `jail runs a command in a deny-by-default kernel jail.

usage:
  jail [flags] [--] CMD [ARGS...]   run CMD in the jail; exit with its code
  jail [flags] -c 'STRING'          run a shell string (/bin/sh -c)
  jail --remote HOST [flags] -- CMD run CMD in the same jail on HOST over ssh
  jail check [--remote HOST]        report which protections this machine (or HOST) has
  jail plan [flags] -- CMD          print what would be applied, run nothing
  jail log [-f] [--json] [--session ID]   the proxy's decisions
  jail profiles list | show NAME    built-in and user profiles
  jail learned [list] | show NAME | rm NAME   profiles jail --learning wrote
  jail trust [DIR]                  trust the project's jail.json as it is now
  jail ps [--json]                  the running sessions
  jail allow|deny HOST [--session ID] [--project|--user]   change running sessions (and the config)
  jail pending [--json]             what running sessions hold for an answer
  jail approve|reject ID [--session|--project|--user]      answer a held request (once by default)
  jail schema                       print the JSON Schema for jail.json

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
		case "learned":
			return learnedCmd(args[1:], stdout, stderr)
		case "trust":
			return trustCmd(args[1:], stdout, stderr)
		case "schema":
			return schemaCmd(stdout)
		case "ps":
			return psCmd(args[1:], stdout, stderr)
		case "allow", "deny":
			return ruleCmd(args[0] == "allow", args[1:], stdout, stderr)
		case "pending":
			return pendingCmd(args[1:], stdout, stderr)
		case "approve", "reject":
			return answerCmd(args[0] == "approve", args[1:], stdout, stderr)
		case "remote-run":
			return remoteRunCmd(args[1:], stderr)
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
		learning    bool
		watch       bool
		yes         bool
		rf          remoteFlags
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
	fs.BoolVar(&learning, "learning", false, "run once with the real home behind a throwaway overlay and the network open, trace every access, and write a least-privilege profile")
	fs.BoolVar(&watch, "watch", false, "trace every access without blocking the network; stream it to jail log, write nothing")
	fs.BoolVarP(&yes, "yes", "y", false, "with --learning: merge the learned profile into jail.json without asking")
	fs.BoolVarP(&opts.Debug, "debug", "d", false, "print the plan before running")
	fs.StringVarP(&shellString, "command", "c", "", "run `STRING` with /bin/sh -c")
	fs.BoolVar(&showVersion, "version", false, "print the version")
	fs.StringVar(&rf.target, "remote", "", "run on `HOST` ([user@]host[:port], an ssh alias, or a name in your config's \"remote\") over ssh")
	fs.BoolVar(&rf.keep, "remote-keep", false, "with --remote: keep the remote workspace for the next run")
	fs.BoolVar(&rf.fetch, "remote-fetch", false, "with --remote: fetch the changes a run left in the remote workspace (after a dropped link), run nothing")
	help := fs.BoolP("help", "h", false, "show this help")
	platform := fs.String("platform", runtime.GOOS, "plan for `OS` (linux or darwin); jail runs only the running OS's")

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
	switch {
	case learning && watch:
		fmt.Fprintln(stderr, "jail: --learning and --watch exclude each other; pick one")
		return 125
	case learning:
		opts.Mode = "learning"
	case watch:
		opts.Mode = "watch"
	}
	if opts.Mode != "" && os.Getenv("JAIL_TRACER") != jail.TracerSeccomp {
		linux.PreloadTracer() // overlaps the probes' load with planning
	}
	argv := fs.Args()
	if fs.Changed("command") {
		if len(argv) > 0 {
			fmt.Fprintln(stderr, "jail: -c takes one string; put the whole command inside it")
			return 125
		}
		argv = []string{"/bin/sh", "-c", shellString}
	}
	if rf.fetch {
		if !fs.Changed("remote") || len(argv) > 0 || planOnly {
			fmt.Fprintln(stderr, "jail: --remote-fetch goes with --remote HOST and no command: jail --remote HOST --remote-fetch")
			return 125
		}
		return fetchRemote(rf, opts, stderr)
	}
	if len(argv) == 0 {
		fmt.Fprint(stderr, "jail: no command given\n"+usage+fs.FlagUsages())
		return 125
	}

	if fs.Changed("remote") || rf.keep {
		if planOnly || fs.Changed("platform") || !fs.Changed("remote") {
			fmt.Fprintln(stderr, "jail: --remote runs a command on a Linux host and --remote-keep goes with it; run jail plan on the remote host itself")
			return 125
		}
		return runRemote(rf, opts, argv, stderr)
	}
	if code, done := otherPlatform(*platform, opts, argv, planOnly, stdout, stderr); done {
		return code
	}
	if !planOnly {
		// Placeholders a killed jail left go before planning looks.
		if home, err := jail.HomeDir(); err == nil {
			if r, err := filepath.EvalSymlinks(home); err == nil {
				home = r
			}
			linux.SweepPlaceholders(jail.StateDir(home, os.Getenv))
		}
	}
	plan, untrusted, info, err := makePlan(opts, argv)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	if untrusted != nil {
		if planOnly {
			fmt.Fprintf(stdout, "untrusted   %s widens the jail: %s (run jail trust to accept)\n", untrusted.path, jail.Escaped(strings.Join(untrusted.widening, "; ")))
		} else if !trusted(untrusted, stderr) {
			return 125
		}
	}
	if plan.NotFound && !planOnly {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(strings.TrimPrefix(plan.Resolved, "command: ")))
		return 127 // what a shell answers for a command it cannot find
	}
	if planOnly {
		fmt.Fprint(stdout, escapedLines(plan.String()))
		return 0
	}
	if opts.Debug {
		fmt.Fprint(stderr, escapedLines(plan.String()))
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(stderr, "jail: warning: %s\n", jail.Escaped(w))
	}
	for _, g := range plan.GaveUp {
		fmt.Fprintf(stderr, "jail: --best-effort: running without %s\n", g)
	}
	if plan.Mode != "" {
		return observed(plan, info, yes, stderr)
	}
	if info.learned != "" {
		announceLearned(info.home, info.learned, stderr)
	}
	code, err := linux.Run(plan, stderr)
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

// untrustedConfig is what of the project widens the jail and has not been
// trusted as it is now: its jail.json, toolchain files naming registries.
type untrustedConfig struct {
	path     string               // the files, as shown
	dir      string               // where `jail trust` covers them all
	files    []jail.ToolchainFile // each with the hash of the content parsed and shown
	widening []string
	home     string
}

// add adds a file and what it widens.
func (u *untrustedConfig) add(path, hash string, widening []string) {
	if u.path != "" {
		u.path += ", "
	}
	u.path += jail.Shown(path)
	u.files = append(u.files, jail.ToolchainFile{Path: path, Hash: hash})
	u.widening = append(u.widening, widening...)
}

// trusted asks for the trust a widening project config needs (askTrust)
// and, refused, says how to review and accept it.
func trusted(u *untrustedConfig, stderr io.Writer) bool {
	if askTrust(u, stderr) {
		return true
	}
	fmt.Fprintf(stderr, "jail: %s widens the jail (%s); review it, then run `jail trust %s` to accept it\n",
		u.path, jail.Escaped(strings.Join(u.widening, "; ")), jail.Shown(u.dir))
	return false
}

// askTrust asks once on a terminal whether to trust a widening project
// config, and records the answer yes. Without a terminal it refuses.
func askTrust(u *untrustedConfig, stderr io.Writer) bool {
	if !isTerminal(0) || !isTerminal(2) {
		return false
	}
	fmt.Fprintf(stderr, "jail: %s widens the jail beyond your config and profiles:\n", u.path)
	for _, w := range u.widening {
		fmt.Fprintf(stderr, "  %s\n", jail.Escaped(w)) // what a project chose
	}
	fmt.Fprint(stderr, "Trust this file as it is now? [y/N] ")
	var answer string
	fmt.Fscanln(os.Stdin, &answer)
	if answer != "y" && answer != "Y" && answer != "yes" {
		return false
	}
	for _, f := range u.files {
		if err := jail.Trust(f.Path, f.Hash, u.home, os.Getenv); err != nil {
			fmt.Fprintf(stderr, "jail: recording trust: %v\n", err)
			return false
		}
	}
	return true
}

// planInfo is what the CLI keeps of planning besides the plan.
type planInfo struct {
	home, root    string
	projectConfig string   // the project's jail.json, "" when it has none
	learned       string   // the learned profile layered in, if any
	allowed       []string // literal allowRead and allowWrite paths of the policy
}

// resolvedPolicy is the policy for this directory and command, before a
// platform planner turns it into a jail.
type resolvedPolicy struct {
	pol       *jail.Policy
	untrusted *untrustedConfig
	info      *planInfo
	regs      jail.RegistryDecision
	command   *jail.CommandExposure
	home, cwd string
}

// makePlan resolves the policy for this directory and plans the jail.
func makePlan(opts jail.Options, argv []string) (*linux.Plan, *untrustedConfig, *planInfo, error) {
	r, err := resolvePolicy(opts, argv)
	if err != nil {
		return nil, nil, nil, err
	}
	facts, err := linux.Gather(r.pol, r.home, r.cwd)
	if err != nil {
		return nil, nil, nil, err
	}
	facts.Command = r.command
	plan, err := linux.Build(r.pol, facts, argv)
	if plan != nil {
		plan.Warnings = append(plan.Warnings, r.regs.Warnings...)
	}
	return plan, r.untrusted, r.info, err
}

// resolvePolicy resolves the layers, trust, registries and the command's
// install tree for this directory: what every platform's planner takes.
func resolvePolicy(opts jail.Options, argv []string) (*resolvedPolicy, error) {
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
	info := &planInfo{home: home, root: root}
	// A project jail.json may come from a stranger: what it widens needs
	// the user's trust.
	untrusted := &untrustedConfig{dir: root, home: home}
	for _, l := range layers {
		if l.FromLearning {
			info.learned = l.File
		}
		if l.Project {
			info.projectConfig = l.File
			if w := jail.Widening(l, root, home); len(w) > 0 && !jail.IsTrusted(l, home, os.Getenv) {
				untrusted.add(l.File, l.Hash, w)
				untrusted.dir = filepath.Dir(l.File)
			}
		}
	}

	pol, err := jail.Resolve(layers, root, home, opts)
	if err != nil {
		return nil, err
	}
	for _, p := range append(append([]string{}, pol.AllowRead...), pol.AllowWrite...) {
		if !jail.HasMeta(p) {
			info.allowed = append(info.allowed, p)
		}
	}
	var regs jail.RegistryDecision
	if !pol.NoNetwork && opts.Mode == "" { // learning and watch let every name through
		// Project toolchain files naming registries widen the jail as its
		// jail.json would, and need the same trust.
		regs = jail.ReadRegistries(argv, root, cwd, home, os.Getenv).Decide(jail.OwnAllow(layers), home, os.Getenv)
		pol.Registries = regs.Allow
		for _, f := range regs.Untrusted {
			untrusted.add(f.Path, f.Hash, f.Widening)
			untrusted.dir = cwd
		}
	}
	if untrusted.files == nil {
		untrusted = nil
	}
	// A command installed where the jail hides it (~/.local/bin, a
	// hidden prefix) needs its install tree shown, read-only.
	command, err := jail.ExposeCommand(pol, argv, home, cwd, os.Getenv("PATH"))
	if err != nil {
		return nil, err
	}
	command.AddTo(pol)
	return &resolvedPolicy{pol: pol, untrusted: untrusted, info: info, regs: regs, command: command, home: home, cwd: cwd}, nil
}

// reportCreated warns about delayed-escape paths the command created.
func reportCreated(plan *linux.Plan, stderr io.Writer) {
	created, err := linux.Created(plan)
	if len(created) > 0 {
		fmt.Fprintf(stderr, "jail: warning: the command created %s; review before an unjailed tool runs it\n", jail.Escaped(strings.Join(created, ", ")))
	}
	if err != nil {
		fmt.Fprintf(stderr, "jail: warning: cannot tell every protected path the command created: %v; review what it wrote before an unjailed tool runs it\n", err)
	}
}
