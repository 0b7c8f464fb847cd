package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/jailsh/jail/jail"
)

// check reports each protection the machine has or lacks, with the fix.
// It exits non-zero when the default (strict) jail cannot run.
func check(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "jail: check takes no arguments, got %q\n", args[0])
		return 125
	}
	type row struct {
		ok       bool
		required bool
		name     string
		detail   string
	}
	var rows []row
	add := func(ok, required bool, name, detail string) { rows = append(rows, row{ok, required, name, detail}) }

	bwrap, err := jail.FindBwrap()
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
	if abi := jail.LandlockABI(); abi > 0 {
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
	if jail.SeccompAvailable() {
		add(true, true, "seccomp", "filters available")
	} else {
		add(false, true, "seccomp", "not available; fix: a kernel with CONFIG_SECCOMP_FILTER, or --best-effort")
	}
	if jail.SeccompNotifyAvailable() {
		add(true, false, "exec supervision", "seccomp user notification (command.deny rules)")
	} else {
		add(false, false, "exec supervision", "no seccomp user notification; command.deny rules cannot be enforced (jail refuses configs that have them); fix: Linux >= 5.0")
	}
	if hasEBPFCaps() {
		add(true, false, "eBPF (learning)", "CAP_BPF and CAP_PERFMON present")
	} else {
		add(false, false, "eBPF (learning)", "no CAP_BPF+CAP_PERFMON; --learning will use the slower unprivileged tracer; fix: sudo setcap cap_bpf,cap_perfmon+ep $(command -v jail)")
	}

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
		fmt.Fprintln(stdout, "\nthe default (strict) jail cannot run on this machine; fix what is marked MISS, or use --best-effort")
		return 1
	}
	fmt.Fprintln(stdout, "\nthe default (strict) jail runs on this machine")
	return 0
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
