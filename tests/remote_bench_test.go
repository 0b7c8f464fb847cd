package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRemoteBench (JAIL_REMOTE_BENCH=1, run by make bench): the start-up
// of a second jail --remote --remote-keep run of `true` that changes
// nothing (no upload, nothing to sync either way), against plain `ssh host true` over loopback sshd, as medians of
// interleaved runs. The second run must cost at most the plain ssh plus
// 150 ms.
func TestRemoteBench(t *testing.T) {
	if os.Getenv("JAIL_REMOTE_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it with JAIL_REMOTE_BENCH=1")
	}
	s := NewSandbox(t, runners(t)[0])
	d := startRemoteSSHD(t, "")
	d.client(s, true, "")
	if r := s.Jail("--remote", d.Target(), "--remote-keep", "--no-network", "--", "true"); r.Code != 0 {
		t.Fatalf("first run:\n%s", r)
	}
	plain := func() time.Duration {
		cmd := exec.Command("/usr/bin/ssh", "-F", filepath.Join(s.Base, "sshc/config"), "-o", "BatchMode=yes", "-o", "ControlPath=none", "-p", strconv.Itoa(d.Port), remoteUser+"@127.0.0.1", "true")
		s.as(cmd)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("plain ssh: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	// Without a network, and with one: the local proxy, its forwards and
	// the remote session directory are part of the start-up.
	runs := map[string][]string{
		"no network": {"--remote", d.Target(), "--remote-keep", "--no-network", "--", "true"},
		"network":    {"--remote", d.Target(), "--remote-keep", "--", "true"},
	}
	jailed := map[string][]time.Duration{}
	var direct []time.Duration
	for i := 0; i < 15; i++ {
		for _, name := range []string{"no network", "network"} {
			r := s.Jail(runs[name]...)
			if r.Code != 0 {
				t.Fatalf("%s run %d:\n%s", name, i, r)
			}
			jailed[name] = append(jailed[name], r.Took)
		}
		direct = append(direct, plain())
	}
	md := median(direct)
	for _, name := range []string{"no network", "network"} {
		mj := median(jailed[name])
		t.Logf("jail --remote (second run, no change, %s): median %v; plain ssh host true: median %v; difference %v", name, mj, md, mj-md)
		if mj > md+150*time.Millisecond {
			t.Errorf("a no-change jail --remote run (%s) takes %v, more than plain ssh (%v) + 150 ms", name, mj, md)
		}
	}
}
