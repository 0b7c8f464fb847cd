package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkStartup times `jail -- true` with every protection on against a
// bare `bwrap --ro-bind / / --unshare-all --die-with-parent true`, the two
// interleaved in one run, and reports both medians and the median of the
// ratios pair by pair, which a machine whose speed drifts during the run
// moves less than the ratio of the medians (target: ≤ 2.5×). The bare run
// makes the namespaces the jail makes (user, PID, IPC, UTS, network,
// cgroup; the jail's nested user namespace adds nothing measurable); what
// it lacks is the jail's mounts, Landlock, seccomp, capture and proxy.
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

	var bare, jailed, ratios []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tb := run(bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true")
		tj := run(jailBin, "--", "true")
		bare, jailed = append(bare, tb), append(jailed, tj)
		ratios = append(ratios, time.Duration(float64(tj)/float64(tb)*1000)) // ratio in thousandths
	}
	b.StopTimer()
	mb, mj := median(bare), median(jailed)
	b.ReportMetric(float64(mb.Microseconds())/1000, "bwrap-ms")
	b.ReportMetric(float64(mj.Microseconds())/1000, "jail-ms")
	b.ReportMetric(float64(median(ratios))/1000, "ratio")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkLearning times a file-heavy command (git status, then reading
// every file of a project of 3,000 small files in nested directories)
// plain in the jail against the same under `jail --learning` with the eBPF
// tracer (JAIL_TRACER=ebpf: needs root or CAP_BPF+CAP_PERFMON) and with the
// seccomp fallback (JAIL_TRACER=seccomp), interleaved in one run, and
// reports the medians and the ratios to the plain jailed time (target
// target: ebpf-ratio ≤ 1.5). For scale, the same command bare on the host
// against `strace -f` on the host (strace cannot run inside the jail,
// whose seccomp filter refuses ptrace) is reported as strace-ratio. The
// runs use a throwaway HOME so that the learned profiles (git.json) never
// land in the real ~/.config/jail/learned; each is removed after its run so
// that every plain run is a plain run.
func BenchmarkLearning(b *testing.B) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		b.Fatalf("strace is not installed (tests/deps.sh --test installs it): %v", err)
	}
	root := b.TempDir()
	home, project := filepath.Join(root, "home"), filepath.Join(root, "project")
	for d := 0; d < 30; d++ {
		for sub := 0; sub < 10; sub++ {
			dir := filepath.Join(project, fmt.Sprintf("pkg%02d", d), fmt.Sprintf("mod%d", sub))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := 0; f < 10; f++ {
				body := strings.Repeat(fmt.Sprintf("line of pkg%02d/mod%d/file%d\n", d, sub, f), 8)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%d.txt", f)), []byte(body), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		b.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.email=b@example.test", "-c", "user.name=b", "commit", "-qm", "files"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = project, env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	const script = `git status >/dev/null; find . -type f -not -path "./.git/*" | xargs cat >/dev/null`
	learned := filepath.Join(home, ".config/jail/learned")
	run := func(extraEnv []string, name string, args ...string) (time.Duration, string) {
		cmd := exec.Command(name, args...)
		cmd.Dir = project
		cmd.Env = append(append([]string{}, env...), extraEnv...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		os.RemoveAll(learned)
		if err != nil {
			b.Fatalf("%s %v (env %v): %v\n%s", name, args, extraEnv, err, out)
		}
		return took, string(out)
	}
	plainRun := func() time.Duration { d, _ := run(nil, jailBin, "--", "sh", "-c", script); return d }
	learnRun := func(tracer string) time.Duration {
		d, _ := run([]string{"JAIL_TRACER=" + tracer}, jailBin, "--learning", "--", "sh", "-c", script)
		return d
	}
	bareRun := func() time.Duration { d, _ := run(nil, "sh", "-c", script); return d }
	straceRun := func() time.Duration { d, _ := run(nil, strace, "-f", "-o", "/dev/null", "sh", "-c", script); return d }

	// Warm the page cache and jail's CA; check each learning run really
	// traced with the tracer it names, or the ratio measures nothing.
	plainRun()
	bareRun()
	straceRun()
	for _, tracer := range []string{"seccomp", "ebpf"} {
		cmd := exec.Command(jailBin, "--learning", "--", "sh", "-c", script)
		cmd.Dir = project
		cmd.Env = append(append([]string{}, env...), "JAIL_TRACER="+tracer)
		out, err := cmd.CombinedOutput()
		_, statErr := os.Stat(filepath.Join(learned, "git.json")) // named after the shell string's first word
		os.RemoveAll(learned)
		if tracer == "ebpf" && err != nil && os.Geteuid() != 0 {
			b.Fatalf("JAIL_TRACER=ebpf jail --learning fails without root or CAP_BPF+CAP_PERFMON, and the eBPF ratio has a target; run make bench as root: %v\n%s", err, out)
		}
		if err != nil || !strings.Contains(string(out), "(tracer: "+tracer) || statErr != nil {
			b.Fatalf("JAIL_TRACER=%s jail --learning did not trace with %s and write its profile (err %v, profile %v); nothing to measure\n%s", tracer, tracer, err, statErr, out)
		}
	}

	var plain, ebpf, seccomp, bare, traced []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain = append(plain, plainRun())
		ebpf = append(ebpf, learnRun("ebpf"))
		seccomp = append(seccomp, learnRun("seccomp"))
		bare = append(bare, bareRun())
		traced = append(traced, straceRun())
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mp, me, ms2, mb, mt := median(plain), median(ebpf), median(seccomp), median(bare), median(traced)
	b.ReportMetric(ms(mp), "plain-ms")
	b.ReportMetric(ms(me), "ebpf-ms")
	b.ReportMetric(ms(ms2), "seccomp-ms")
	b.ReportMetric(ms(mb), "bare-ms")
	b.ReportMetric(ms(mt), "strace-ms")
	b.ReportMetric(float64(me)/float64(mp), "ebpf-ratio")
	b.ReportMetric(float64(ms2)/float64(mp), "seccomp-ratio")
	b.ReportMetric(float64(mt)/float64(mb), "strace-ratio")
}
