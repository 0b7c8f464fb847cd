package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The grant jail prints for eBPF works as printed: the unprivileged user
// running a copy of jail that has CAP_BPF and CAP_PERFMON as file
// capabilities learns with eBPF (no tracefs access, no root), and the
// learning run still drops every capability before the command runs.
func TestLearningFileCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("granting file capabilities needs root; run the suite as root (make test does)")
	}
	setcap, err := exec.LookPath("setcap")
	if err != nil {
		for _, p := range []string{"/usr/sbin/setcap", "/sbin/setcap"} {
			if _, err2 := os.Stat(p); err2 == nil {
				setcap, err = p, nil
			}
		}
	}
	if err != nil {
		t.Fatalf("setcap is not installed (make test installs libcap2-bin): %v", err)
	}
	var user Runner
	for _, r := range runners(t) {
		if r.Name == "user" {
			user = r
		}
	}
	dir, err := os.MkdirTemp("", "jail-caps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // the user runs the copy from here
	capJail := filepath.Join(dir, "jail")
	for _, f := range []string{"jail", "jail-init"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(jailBin), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The grant, as jail words it (bpf.GrantHint) with the copy's path.
	if out, err := exec.Command(setcap, "cap_bpf,cap_perfmon+ep", capJail).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v\n%s", err, out)
	}

	s := NewSandbox(t, user)
	cmd := exec.Command(capJail, "--learning", "--", "sh", "-c", "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status; cat ~/notes.txt")
	cmd.Dir = s.Project
	s.as(cmd)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("learning with the capable copy: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "jail: learning (tracer: ebpf)") {
		t.Fatalf("the user with CAP_BPF and CAP_PERFMON on jail did not learn with eBPF:\n%s", stderr.String())
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "Cap") && !strings.HasSuffix(line, "0000000000000000") {
			t.Errorf("the command kept a capability: %q", line)
		}
	}
	l := readLearned(t, learnedPath(s, "grep"), Result{Stdout: stdout.String(), Stderr: stderr.String()})
	if l.Learned.Tracer != "ebpf" || !contains(l.Filesystem.AllowRead, "~/notes.txt") {
		t.Errorf("learned with the capable copy: want tracer ebpf and ~/notes.txt read:\n%s", l.raw)
	}
}
