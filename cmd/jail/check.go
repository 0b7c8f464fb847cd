package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
)

// check reports each protection the machine has or lacks, with the fix.
// It exits non-zero when the default (strict) jail cannot run. With
// --verbose it also lists the paths every jail masks or keeps read-only.
func check(args []string, stdout, stderr io.Writer) int {
	verbose := false
	if i := slices.Index(args, "--remote"); i >= 0 && i+1 < len(args) {
		return checkRemote(args[i+1], slices.Delete(slices.Clone(args), i, i+2), stdout, stderr)
	}
	for _, a := range args {
		switch a {
		case "--verbose", "-v":
			verbose = true
		case probeSeccompArg:
			return probeSeccomp(stdout) // the child runSeccompProbe starts
		case probeCaptureArg:
			return probeCapture(stdout) // the child runCaptureProbe starts
		default:
			fmt.Fprintf(stderr, "jail: check takes only --verbose, got %q\n", a)
			return 125
		}
	}
	if code, done := platformCheck(verbose, stdout); done {
		return code
	}
	var rows []checkRow
	add := func(ok, required bool, name, detail string) {
		rows = append(rows, checkRow{ok, required, name, detail})
	}

	bwrap, err := linux.FindBwrap()
	if err != nil {
		add(false, true, "bubblewrap", "not installed; fix: sudo apt-get install bubblewrap")
	} else {
		out, _ := exec.Command(bwrap, "--version").Output()
		version := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "bubblewrap "))
		if versionAtLeast(version, 0, 8) {
			add(true, true, "bubblewrap", version+" ("+bwrap+")")
		} else {
			add(false, true, "bubblewrap", fmt.Sprintf("%q at %s is older than 0.8.0 (no --disable-userns, --perms); fix: install bubblewrap 0.8 or newer from your distribution's backports", version, bwrap))
		}
		probe := exec.Command(bwrap, "--unshare-user", "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "true")
		if msg, err := probe.CombinedOutput(); err != nil {
			add(false, true, "user namespaces", strings.TrimSpace(string(msg))+"; fix: "+usernsFix())
		} else {
			add(true, true, "user namespaces", "unprivileged bubblewrap sandbox starts")
		}
	}
	if abi := linux.LandlockABI(); abi > 0 {
		detail := fmt.Sprintf("ABI %d", abi)
		if abi < 5 {
			detail += " (device ioctls not limited before ABI 5; signals and abstract sockets not scoped before ABI 6)"
		} else if abi < 6 {
			detail += " (signals and abstract sockets not scoped before ABI 6)"
		}
		add(true, true, "Landlock", detail)
	} else {
		add(false, true, "Landlock", "not available; fix: Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot list, or run jail with --best-effort")
	}
	addSeccomp(runSeccompProbe(), add)
	addCapture(add)
	if hasEBPFCaps() {
		add(true, false, "eBPF (learning)", "CAP_BPF and CAP_PERFMON present")
	} else {
		add(false, false, "eBPF (learning)", "no CAP_BPF+CAP_PERFMON; --learning will use the slower unprivileged tracer; fix: sudo setcap cap_bpf,cap_perfmon+ep $(command -v jail)")
	}

	addAgentSandboxes(add)

	defer func() {
		if verbose {
			printLists(stdout)
		}
	}()
	return printRows(rows, stdout,
		"the default (strict) jail cannot run on this machine; fix what is marked MISS, or use --best-effort",
		"the default (strict) jail runs on this machine")
}

// checkRow is one line of jail check.
type checkRow struct {
	ok, required bool
	name, detail string
}

// printRows prints the rows, a mark for each (ok, MISS for a missing
// required protection, opt for a missing optional one), then the verdict
// line, and returns check's exit code: 1 when a required row is missing.
func printRows(rows []checkRow, stdout io.Writer, missing, runs string) int {
	failed := false
	for _, r := range rows {
		mark := "ok  "
		if !r.ok {
			mark = "MISS"
			if !r.required {
				mark = "opt "
			} else {
				failed = true
			}
		}
		fmt.Fprintf(stdout, "%s  %-17s %s\n", mark, r.name, r.detail)
	}
	if failed {
		fmt.Fprintln(stdout, "\n"+missing)
		return 1
	}
	fmt.Fprintln(stdout, "\n"+runs)
	return 0
}

// seccompReport is what the probe child found; a nil error is a step that
// worked.
type seccompReport struct {
	Filter  error  // loading jail's own filter for this architecture
	Detail  string // about the filter that loaded
	Enforce error  // the loaded filter refusing what it lists
	Notify  error  // installing the exec supervisor's notify filter
}

var errNotReported = errors.New("not reported by the probe")

// parseSeccompProbe reads the probe's lines: "STEP ok [DETAIL]" or
// "STEP ERROR".
func parseSeccompProbe(out string) seccompReport {
	rep := seccompReport{Filter: errNotReported, Enforce: errNotReported, Notify: errNotReported}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		step, rest, _ := strings.Cut(sc.Text(), " ")
		var err error
		detail, ok := strings.CutPrefix(rest, "ok")
		if !ok {
			err = errors.New(rest)
		}
		switch step {
		case "filter":
			rep.Filter, rep.Detail = err, strings.TrimSpace(detail)
		case "enforce":
			rep.Enforce = err
		case "notify":
			rep.Notify = err
		}
	}
	return rep
}

// addSeccomp turns the probe's report into check's rows: seccomp as every
// jail loads it (required), and user notification for command rules.
func addSeccomp(rep seccompReport, add func(ok, required bool, name, detail string)) {
	switch {
	case rep.Filter != nil:
		add(false, true, "seccomp", fmt.Sprintf("cannot load jail's filter: %v; fix: a kernel with CONFIG_SECCOMP_FILTER, or run jail with --best-effort", rep.Filter))
	case rep.Enforce != nil:
		add(false, true, "seccomp", fmt.Sprintf("jail's filter loads %s but does not refuse what it lists: %v; fix: report this with the kernel version, or run jail with --best-effort", rep.Detail, rep.Enforce))
	default:
		add(true, true, "seccomp", fmt.Sprintf("jail's filter loads %s and refuses what it lists, foreign ABIs included", rep.Detail))
	}
	if rep.Notify != nil {
		add(false, false, "exec supervision", fmt.Sprintf("no seccomp user notification (%v); command.deny rules cannot be enforced (jail refuses configs that have them); fix: Linux >= 5.0", rep.Notify))
	} else {
		add(true, false, "exec supervision", "seccomp user notification works (command.deny rules)")
	}
}

// printLists prints the paths every jail masks or keeps read-only, for
// this user's home and the project of the working directory.
func printLists(w io.Writer) {
	home, err := jail.HomeDir()
	if err != nil {
		fmt.Fprintf(w, "\n(cannot list the protected paths: %v)\n", err)
		return
	}
	cwd, _ := os.Getwd()
	_, root := jail.FindProject(cwd, home)
	for _, l := range []struct {
		title string
		paths []string
	}{
		{"credential stores masked in every jail", jail.CredentialStores(home)},
		{"system secrets masked in every jail", jail.SystemSecrets()},
		{"read-only in the project " + root + " (a later, unjailed program would run what they hold)", jail.ProtectedProjectPaths(root)},
		{"read-only in your home whenever a policy makes them writable", jail.ProtectedHomePaths(home)},
	} {
		fmt.Fprintf(w, "\n%s:\n", l.title)
		for _, p := range l.paths {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

// usernsFix names the fix for blocked user namespaces on this machine.
func usernsFix() string {
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return "AppArmor restricts unprivileged user namespaces (Ubuntu 24.04+); allow bwrap with an AppArmor profile: printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile bwrap /usr/bin/bwrap flags=(unconfined) {\\n  userns,\\n}\\n' | sudo tee /etc/apparmor.d/bwrap && sudo systemctl reload apparmor"
	}
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return "sudo sysctl kernel.unprivileged_userns_clone=1"
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return "sudo sysctl user.max_user_namespaces=15000"
	}
	return "enable unprivileged user namespaces in the kernel (CONFIG_USER_NS)"
}

// hasEBPFCaps reports whether this process has CAP_BPF and CAP_PERFMON.
func hasEBPFCaps() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var caps uint64
			fmt.Sscanf(strings.TrimSpace(v), "%x", &caps)
			const capPerfmon, capBPF = 38, 39
			return caps&(1<<capPerfmon) != 0 && caps&(1<<capBPF) != 0
		}
	}
	return false
}

// versionAtLeast compares a dotted version such as "0.8.0" with major.minor.
func versionAtLeast(v string, major, minor int) bool {
	var a, b int
	if n, _ := fmt.Sscanf(v, "%d.%d", &a, &b); n < 2 {
		return false
	}
	return a > major || a == major && b >= minor
}
