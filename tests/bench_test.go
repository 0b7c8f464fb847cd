package tests

import (
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"
)

// BenchmarkStartup times `jail -- true` with every protection on against a
// bare `bwrap --ro-bind / / --unshare-all --die-with-parent true`, the two
// interleaved in one run, and reports both medians and their ratio
// (SPEC §7 target: ≤ 4×).
func BenchmarkStartup(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Fatalf("bubblewrap is not installed: %v", err)
	}
	project := b.TempDir()
	if err := exec.Command("git", "init", "-q", project).Run(); err != nil {
		b.Fatal(err)
	}
	run := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Dir = project
		cmd.Env = []string{"HOME=" + os.Getenv("HOME"), "PATH=/usr/bin:/bin"}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return time.Since(start)
	}
	// Warm the page cache for both binaries.
	run(bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true")
	run(jailBin, "--", "true")

	var bare, jailed []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bare = append(bare, run(bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"))
		jailed = append(jailed, run(jailBin, "--", "true"))
	}
	b.StopTimer()
	mb, mj := median(bare), median(jailed)
	b.ReportMetric(float64(mb.Microseconds())/1000, "bwrap-ms")
	b.ReportMetric(float64(mj.Microseconds())/1000, "jail-ms")
	b.ReportMetric(float64(mj)/float64(mb), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
