package main

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestMain lets this test binary stand in for jail as the seccomp probe
// child: runSeccompProbe runs os.Executable with "check --probe-seccomp".
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "check" && os.Args[2] == probeSeccompArg {
		os.Exit(check(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestVersionAtLeast(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"0.8.0", true}, {"0.11.1", true}, {"1.0", true}, {"0.6.1", false}, {"0.7.99", false}, {"", false}, {"garbage", false}} {
		if got := versionAtLeast(tt.v, 0, 8); got != tt.want {
			t.Errorf("versionAtLeast(%q, 0, 8) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestSeccompProbe runs the real probe: on this machine (Linux 6.18) jail's
// filter loads, refuses what it lists, and the notify filter installs.
func TestSeccompProbe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("seccomp is a Linux feature")
	}
	rep := runSeccompProbe()
	if rep.Filter != nil || rep.Enforce != nil || rep.Notify != nil {
		t.Fatalf("probe on a machine with seccomp: %+v", rep)
	}
	if !strings.Contains(rep.Detail, "instructions") {
		t.Errorf("filter detail %q does not say what loaded", rep.Detail)
	}
}

// TestSeccompRows: check's rows say "MISS" with the cause and the fix for
// each step the probe reports failed, including a probe that died
// without reporting.
func TestSeccompRows(t *testing.T) {
	type row struct {
		ok, required bool
		name, detail string
	}
	rows := func(rep seccompReport) []row {
		var out []row
		addSeccomp(rep, func(ok, required bool, name, detail string) { out = append(out, row{ok, required, name, detail}) })
		return out
	}
	for _, tc := range []struct {
		name string
		out  string // the probe child's output
		want []row
	}{
		{"all present", "filter ok (amd64, 344 instructions)\nenforce ok\nnotify ok\n", []row{
			{true, true, "seccomp", "jail's filter loads (amd64, 344 instructions) and refuses what it lists, foreign ABIs included"},
			{true, false, "exec supervision", "seccomp user notification works (command.deny rules)"},
		}},
		{"no filter mode", "filter loading seccomp filter: seccomp(SECCOMP_SET_MODE_FILTER): invalid argument\nenforce no filter loaded\nnotify seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): invalid argument\n", []row{
			{false, true, "seccomp", "cannot load jail's filter: loading seccomp filter: seccomp(SECCOMP_SET_MODE_FILTER): invalid argument; fix: a kernel with CONFIG_SECCOMP_FILTER, or run jail with --best-effort"},
			{false, false, "exec supervision", "no seccomp user notification (seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): invalid argument); command.deny rules cannot be enforced (jail refuses configs that have them); fix: Linux >= 5.0"},
		}},
		{"not enforced", "filter ok (amd64, 344 instructions)\nenforce personality(READ_IMPLIES_EXEC) gave \"success\", want EPERM from the filter\nnotify ok\n", []row{
			{false, true, "seccomp", `jail's filter loads (amd64, 344 instructions) but does not refuse what it lists: personality(READ_IMPLIES_EXEC) gave "success", want EPERM from the filter; fix: report this with the kernel version, or run jail with --best-effort`},
			{true, false, "exec supervision", "seccomp user notification works (command.deny rules)"},
		}},
		{"probe died", "", []row{
			{false, true, "seccomp", "cannot load jail's filter: not reported by the probe; fix: a kernel with CONFIG_SECCOMP_FILTER, or run jail with --best-effort"},
			{false, false, "exec supervision", "no seccomp user notification (not reported by the probe); command.deny rules cannot be enforced (jail refuses configs that have them); fix: Linux >= 5.0"},
		}},
	} {
		got := rows(parseSeccompProbe(tc.out))
		if len(got) != len(tc.want) {
			t.Fatalf("%s: rows %+v", tc.name, got)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: row %d\n got %+v\nwant %+v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
	if !errors.Is(parseSeccompProbe("").Filter, errNotReported) {
		t.Error("an empty report must read as not reported")
	}
}

// TestCheckVerbose: --verbose lists every path the jail masks or keeps
// read-only, from the planner's own lists; other arguments are refused.
func TestCheckVerbose(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	var out, errb strings.Builder
	check([]string{"--verbose"}, &out, &errb)
	cwd, _ := os.Getwd()
	_, root := jail.FindProject(cwd, home)
	lists := [][]string{jail.CredentialStores(home), jail.SystemSecrets(), jail.ProtectedProjectPaths(root), jail.ProtectedHomePaths(home)}
	for _, l := range lists {
		if len(l) == 0 {
			t.Fatalf("an empty list: %q", lists)
		}
		for _, p := range l {
			if !strings.Contains(out.String(), "\n  "+p+"\n") {
				t.Errorf("check --verbose does not list %s:\n%s", p, out.String())
			}
		}
	}
	for _, want := range []string{home + "/.ssh", "/etc/shadow", root + "/.git/hooks", home + "/.bashrc"} {
		if !strings.Contains(out.String(), "  "+want+"\n") {
			t.Errorf("check --verbose does not list %s", want)
		}
	}
	out.Reset()
	check(nil, &out, &errb)
	if strings.Contains(out.String(), "credential stores") {
		t.Errorf("check without --verbose lists paths:\n%s", out.String())
	}
	if code := check([]string{"--bogus"}, &out, &errb); code != 125 || !strings.Contains(errb.String(), `jail: check takes only --verbose, got "--bogus"`) {
		t.Errorf("check --bogus: exit %d, stderr %q", code, errb.String())
	}
}
