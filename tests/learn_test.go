package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Learning and watch modes: `jail --learning -- CMD` observes one
// run in a permissive but isolated jail (the real home through an overlay
// whose writes are thrown away, secrets still masked, unknown names
// allowed and logged) and writes a least-privilege profile; `jail --watch
// -- CMD` observes the same way, writes nothing and streams every access to
// the decision log. The command observed is ./tool (learn_helpers_test.go):
// it reads its config, writes its cache, runs python3, tries the SSH key
// and fetches from a server on the host.

// 1. A learning run proposes exactly what the tool used, keeps the SSH key
// denied, names the tracer (eBPF as root, the seccomp fallback as the
// unprivileged user), and leaves the host home as it was.
func TestLearningScriptedCommand(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupTool(t, s)
		before := homeSnapshot(t, s.Home)
		r, l := g.learn(t)
		tracer := runnerTracer(s)
		checkStartLine(t, r, "learning", tracer)
		checkToolProfile(t, g, l, tracer)

		// The tool ran to the end, its request reached the upstream.
		for _, w := range []string{"tool: python ok", "tool: fetched", "tool: done"} {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("the learning run's stdout has no %q: the tool did not run as it does unjailed:\n%s", w, r)
			}
		}
		if g.Fetches() != 1 {
			t.Errorf("the upstream served /tool-fetch %d times during the learning run, want 1 (paths %v)", g.Fetches(), g.Up.Paths())
		}
		// The readable summary and no merge without --yes and a terminal.
		for _, sec := range summarySections {
			if !strings.Contains(r.Stderr, sec) {
				t.Errorf("the summary on stderr has no section %q:\n%s", sec, r.Stderr)
			}
		}
		for _, w := range []string{"~/.config/tool", "~/.cache/tool", g.Domain(), "~/.ssh/id_ed25519"} {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("the summary on stderr does not show %q:\n%s", w, r.Stderr)
			}
		}
		if _, ok := lineWithPrefix(r.Stderr, "jail: not merged"); !ok {
			t.Errorf("without --yes and without a terminal, stderr has no line starting \"jail: not merged\":\n%s", r.Stderr)
		}
		if _, err := os.Lstat(s.Project + "/jail.json"); err == nil {
			t.Errorf("a learning run without --yes created %s:\n%s", s.Project+"/jail.json", hostFile(t, s.Project+"/jail.json"))
		}
		noSecret(t, r, "learning run", SSHKeySecret, AWSSecret, strings.TrimSpace(otherToolData))
		// The tool created nothing that lasts (its home writes went to the
		// overlay); jail's own learned profile is not the command's doing.
		if l, ok := lineWithPrefix(r.Stderr, "jail: warning: the command created"); ok {
			t.Errorf("a learning run warns about a path the command did not create on the host: %q", l)
		}

		// The home on disk is untouched: the tool's writes went to the
		// overlay and were thrown away.
		hostAbsent(t, s.Home+"/.cache/tool/x")
		hostUnchanged(t, s.Home+"/.config/tool/settings", toolSettings)
		if d := homeDiff(before, homeSnapshot(t, s.Home)); d != "" {
			t.Errorf("the learning run changed the host home (outside jail's own ~/.config/jail and ~/.local/state/jail):\n%s", d)
		}
	})
}

// 2. A later plain run of the same command uses the learned profile (said
// once), works without any flag, and still refuses what the learning run
// never did: another tool's file, and a write to the config learned
// read-only.
func TestLearnedProfileRerun(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupTool(t, s)
		g.learn(t)
		n := g.Fetches()

		r := s.Jail("--", "./tool")
		if r.Code != 0 || !strings.Contains(r.Stdout, "tool: done") {
			t.Fatalf("jail -- ./tool under the learned profile: want exit 0 and \"tool: done\":\n%s", r)
		}
		if g.Fetches() != n+1 {
			t.Errorf("the rerun's request did not reach the upstream through the learned network.allow %s (paths %v)", g.Domain(), g.Up.Paths())
		}
		want := "jail: using learned profile " + g.LearnedPath()
		if c := strings.Count(r.Stderr, "using learned profile"); c != 1 || !hasLineStarting(r.Stderr, want) {
			t.Errorf("the first run after learning: want the line %q exactly once (found %d):\n%s", want, c, r.Stderr)
		}
		// allowWrite ~/.cache/tool is real now.
		if got, err := os.ReadFile(s.Home + "/.cache/tool/x"); err != nil || string(got) != "cached\n" {
			t.Errorf("under the learned allowWrite ~/.cache/tool the tool's cache write did not reach the host: %q, %v", got, err)
		}

		r = s.Jail("--", "./tool")
		if r.Code != 0 {
			t.Fatalf("second run under the learned profile: want exit 0:\n%s", r)
		}
		if strings.Contains(r.Stderr, "using learned profile") {
			t.Errorf("the second run repeats \"using learned profile\"; want it the first time only:\n%s", r.Stderr)
		}

		// Never learned: another tool's file.
		r = s.Jail("--", "./tool", "extra")
		if r.Code != 7 || !strings.Contains(r.Stdout, "tool: cannot read othertool") {
			t.Errorf("./tool extra reads ~/.config/othertool/secret, which the learning run never touched: want it refused (exit 7, \"tool: cannot read othertool\"):\n%s", r)
		}
		noSecret(t, r, "./tool extra", strings.TrimSpace(otherToolData))

		// Learned read-only: the settings file cannot be written.
		r = s.Jail("--", "./tool", "write-settings")
		if r.Code != 8 || !strings.Contains(r.Stdout, "tool: cannot write settings") {
			t.Errorf("./tool write-settings appends to ~/.config/tool/settings, learned read-only: want it refused (exit 8, \"tool: cannot write settings\"):\n%s", r)
		}
		hostUnchanged(t, s.Home+"/.config/tool/settings", toolSettings)
	})
}

// 3. JAIL_TRACER=seccomp forces the unprivileged tracer, also as root, and
// it learns the same profile as eBPF. The learned file follows
// $XDG_CONFIG_HOME.
func TestLearningSeccompFallback(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupTool(t, s)
		var viaDefault *learned
		if s.R.UID == 0 {
			r, l := g.learn(t)
			checkStartLine(t, r, "learning", "ebpf")
			checkToolProfile(t, g, l, "ebpf")
			viaDefault = l
			os.Remove(g.LearnedPath())
		}

		s.Env = append(s.Env, "JAIL_TRACER=seccomp")
		r, l := g.learn(t)
		checkStartLine(t, r, "learning", "seccomp")
		checkToolProfile(t, g, l, "seccomp")
		if viaDefault != nil {
			same := func(what string, a, b []string) {
				if strings.Join(a, "\x00") != strings.Join(b, "\x00") {
					t.Errorf("%s differs between the tracers: ebpf %q, seccomp %q", what, a, b)
				}
			}
			same("filesystem.allowRead", viaDefault.Filesystem.AllowRead, l.Filesystem.AllowRead)
			same("filesystem.allowWrite", viaDefault.Filesystem.AllowWrite, l.Filesystem.AllowWrite)
			same("network.allow", viaDefault.Network.Allow, l.Network.Allow)
			same("learned.keptDenied", viaDefault.Learned.KeptDenied, l.Learned.KeptDenied)
			// Programs by name: one tracer may report the path execve was
			// given (/usr/bin/python3), the other the file it ran
			// (/usr/bin/python3.11).
			same("learned.programs (by name, version suffix dropped)", programNames(viaDefault.Learned.Programs), programNames(l.Learned.Programs))
		}

		// $XDG_CONFIG_HOME moves the learned profile.
		xdg := filepath.Join(s.Base, "xdg-config")
		if err := os.MkdirAll(xdg, 0o755); err != nil {
			t.Fatal(err)
		}
		s.chownUp(xdg)
		os.Remove(g.LearnedPath())
		s.Env = append(s.Env, "XDG_CONFIG_HOME="+xdg)
		r, l = g.learn(t) // checks the line naming $XDG_CONFIG_HOME/jail/learned/tool.json
		checkToolProfile(t, g, l, "seccomp")
		if _, err := os.Stat(filepath.Join(s.Home, ".config/jail/learned/tool.json")); err == nil {
			t.Errorf("with XDG_CONFIG_HOME=%s the learned profile was still written under ~/.config/jail/learned", xdg)
		}
	})
}

// 4. --yes merges the learned allowRead, allowWrite and network.allow into
// the project's jail.json, keeping its comments, and trusts the result:
// the next plain run needs no `jail trust`. With no jail.json, one is
// created at the project root.
func TestLearningMergeYes(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupTool(t, s)
		cfg := s.Project + "/jail.json"
		s.WriteFile(cfg, `{
  // team policy: keep this comment
  "filesystem": {"allowWrite": ["./build"]},
  "network": {"allow": ["example.com"]}
}
`, 0o644)
		r, _ := g.learn(t, "--yes")
		if want := "jail: merged into " + cfg; !hasLineStarting(r.Stderr, want) {
			t.Errorf("stderr has no line %q:\n%s", want, r.Stderr)
		}
		text := hostFile(t, cfg)
		if !strings.Contains(text, "// team policy: keep this comment") {
			t.Errorf("the merge dropped the jail.json comment:\n%s", text)
		}
		m := parseJSONC(t, cfg)
		for _, w := range []struct{ k1, k2, v string }{
			{"filesystem", "allowRead", "~/.config/tool"},
			{"filesystem", "allowWrite", "~/.cache/tool"},
			{"filesystem", "allowWrite", "./build"},
			{"network", "allow", g.Domain()},
			{"network", "allow", "example.com"},
		} {
			if !contains(strList(m, w.k1, w.k2), w.v) {
				t.Errorf("the merged jail.json has no %q in %s.%s:\n%s", w.v, w.k1, w.k2, text)
			}
		}
		for _, p := range append(strList(m, "filesystem", "allowRead"), strList(m, "filesystem", "allowWrite")...) {
			if secretPath(p) {
				t.Errorf("the merged jail.json allows the secret path %q:\n%s", p, text)
			}
		}

		// Trusted by the merge: a plain run without `jail trust` works.
		s.NoAutoTrust = true
		r = s.Jail("--", "./tool")
		if r.Code != 0 || strings.Contains(r.Stderr, "jail trust") {
			t.Errorf("the run after merging with --yes: want exit 0 with no trust prompt (the user consented to the merge):\n%s", r)
		}

		// No jail.json: created at the project root.
		os.Remove(cfg)
		os.Remove(g.LearnedPath())
		s.NoAutoTrust = false
		r, _ = g.learn(t, "--yes")
		if want := "jail: merged into " + cfg; !hasLineStarting(r.Stderr, want) {
			t.Errorf("with no jail.json: stderr has no line %q:\n%s", want, r.Stderr)
		}
		if _, err := os.Stat(cfg); err != nil {
			t.Fatalf("with no jail.json and --yes, none was created at the project root: %v\n%s", err, r)
		}
		m = parseJSONC(t, cfg)
		if !contains(strList(m, "filesystem", "allowRead"), "~/.config/tool") || !contains(strList(m, "filesystem", "allowWrite"), "~/.cache/tool") || !contains(strList(m, "network", "allow"), g.Domain()) {
			t.Errorf("the created jail.json lacks the learned entries:\n%s", hostFile(t, cfg))
		}
		s.NoAutoTrust = true
		if r = s.Jail("--", "./tool"); r.Code != 0 {
			t.Errorf("the run after creating jail.json with --yes: want exit 0 with no trust prompt:\n%s", r)
		}
	})
}

// 5. --watch: the tool runs as it would unjailed-but-isolated (nothing
// blocked on the network), every access is a decision-log entry streamed
// live to `jail log -f`, nothing is written (no profile, no merge, the home
// untouched) and a summary line ends the run.
func TestWatchMode(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		g := setupTool(t, s)
		before := homeSnapshot(t, s.Home)
		n := len(decisions(t, s, ""))
		follow, stopFollow := followLog(t, s)

		cmd := s.JailCmd(append(append([]string{"--watch"}, g.AllowFlag()...), "--", "./tool", "watch")...)
		var stdout, stderr syncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting jail --watch: %v", err)
		}
		settings := s.Home + "/.config/tool/settings"
		// Live: while the tool waits for .tool-go-on, `jail log -f` must
		// already show its file and exec activity.
		live := waitFor(12*time.Second, func() bool {
			o := follow.String()
			return strings.Contains(o, settings) && strings.Contains(o, "python3")
		})
		liveOut := follow.String()
		if err := os.WriteFile(s.Project+"/.tool-go-on", nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s.chownUp(s.Project + "/.tool-go-on")
		code := 0
		if err := cmd.Wait(); err != nil {
			if ee, ok := err.(interface{ ExitCode() int }); ok {
				code = ee.ExitCode()
			} else {
				t.Fatalf("jail --watch: %v", err)
			}
		}
		r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code, Took: time.Since(start)}
		// Give `jail log -f` (it polls every 200 ms) time for the last lines.
		waitFor(2*time.Second, func() bool { return strings.Contains(follow.String(), s.Home+"/.cache/tool/x") })
		stopFollow()

		if r.Code != 0 || !strings.Contains(r.Stdout, "tool: done") || !strings.Contains(r.Stdout, "tool: fetched") {
			t.Errorf("jail --watch -- ./tool watch: want exit 0, the fetch and \"tool: done\":\n%s", r)
		}
		if strings.Contains(r.Stdout, "gave up waiting") {
			t.Errorf("the tool waited 15 s for the test's go-ahead; the run was slower than expected:\n%s", r)
		}
		if !live {
			t.Errorf("`jail log -f`, started before the watch run, did not show the read of %s and the python3 exec while the run was live; it printed:\n%s", settings, liveOut)
		}
		if !strings.Contains(follow.String(), s.Home+"/.cache/tool/x") {
			t.Errorf("`jail log -f` did not show the write of ~/.cache/tool/x; it printed:\n%s", follow.String())
		}
		checkStartLine(t, r, "watching", runnerTracer(s))
		if _, ok := lineWithPrefix(r.Stderr, "jail: watched"); !ok {
			t.Errorf("stderr has no summary line starting \"jail: watched\":\n%s", r.Stderr)
		}
		if strings.Contains(r.Stderr, "learned profile written") || strings.Contains(r.Stderr, "merged into") {
			t.Errorf("a watch run wrote or merged a profile:\n%s", r.Stderr)
		}
		if _, err := os.Lstat(g.LearnedPath()); err == nil {
			t.Errorf("a watch run wrote a learned profile %s:\n%s", g.LearnedPath(), hostFile(t, g.LearnedPath()))
		}
		if _, err := os.Lstat(s.Project + "/jail.json"); err == nil {
			t.Errorf("a watch run created %s", s.Project+"/jail.json")
		}
		noSecret(t, r, "watch run", SSHKeySecret, AWSSecret)

		// Every access is in the decision log.
		ds := logSince(t, s, n)
		wantFile := func(method, path, verdict, reason string) {
			t.Helper()
			es := fileEntries(ds, method, path)
			for _, d := range es {
				if d.Verdict == verdict && (reason == "" || d.Reason == reason) {
					return
				}
			}
			t.Errorf("the decision log has no {scheme file, method %s, path %s, verdict %s, reason %q} entry; entries of this run:\n%s", method, path, verdict, reason, dumpTraced(ds))
		}
		wantFile("READ", settings, "allow", "")
		wantFile("READ", s.Home+"/.config/tool/sub/more", "allow", "")
		wantFile("MKDIR", s.Home+"/.cache/tool", "allow", "")
		wantFile("WRITE", s.Home+"/.cache/tool/x", "allow", "")
		wantFile("READ", s.Home+"/.config/tool/absent", "error", "ENOENT")
		wantFile("MKDIR", s.Home+"/.config/tool", "error", "EEXIST")
		key := s.Home + "/.ssh/id_ed25519"
		var keyEntries []decision
		for _, d := range ds {
			if d.Scheme == "file" && d.Path == key {
				keyEntries = append(keyEntries, d)
			}
		}
		if len(keyEntries) == 0 {
			t.Errorf("the decision log has no entry for the attempt on %s; entries of this run:\n%s", key, dumpTraced(ds))
		}
		for _, d := range keyEntries {
			if d.Verdict != "deny" {
				t.Errorf("the attempt on the SSH key is logged as %q, want deny: %s", d.Verdict, d)
			}
		}
		var python bool
		for _, d := range ds {
			if d.Scheme == "exec" && d.Method == "EXEC" && programName(d.Path) == "python3" && d.Verdict == "allow" {
				python = true
			}
		}
		if !python {
			t.Errorf("the decision log has no {scheme exec, method EXEC, path .../python3, verdict allow} entry; entries of this run:\n%s", dumpTraced(ds))
		}
		var fetched bool
		for _, d := range ds {
			if d.Host == "127.0.0.1" && d.Port == g.Up.Port() && d.Path == "/tool-fetch" && d.Verdict == "allow" && d.Scheme == "http" {
				fetched = true
			}
		}
		if !fetched || !g.Up.Saw("/tool-fetch") {
			t.Errorf("the fetch from %s is not logged as an allowed http request or did not reach the upstream (paths %v); entries of this run:\n%s", g.Domain(), g.Up.Paths(), dumpTraced(ds))
		}
		// An unknown name is not blocked by a rule. Offline the proxy
		// cannot resolve it: then the entry is an error (the resolution),
		// which still shows no rule refused it.
		u, ok := findDecision(ds, toolUnknownName, "")
		switch {
		case !ok:
			t.Errorf("the request to the unknown name %s is not in the decision log; entries of this run:\n%s", toolUnknownName, dumpTraced(ds))
		case u.Verdict == "deny":
			t.Errorf("watch mode blocked the unknown name %s by a rule: %s", toolUnknownName, u)
		case u.Verdict == "error":
			t.Logf("the unknown name %s could not be resolved here (offline), so only \"not blocked by a rule\" is checked: %s", toolUnknownName, u)
		}
		for _, d := range ds {
			if d.Scheme != "file" && d.Scheme != "exec" && d.Verdict == "deny" {
				t.Errorf("watch mode blocked a network request: %s", d)
			}
		}

		// Nothing written to the home on disk.
		hostAbsent(t, s.Home+"/.cache/tool/x")
		if d := homeDiff(before, homeSnapshot(t, s.Home)); d != "" {
			t.Errorf("the watch run changed the host home (outside jail's own ~/.config/jail and ~/.local/state/jail):\n%s", d)
		}
	})
}

// 6. Without CAP_BPF and CAP_PERFMON (the unprivileged user), learning
// falls back to the seccomp tracer and says how to grant them; forcing
// eBPF then fails before the command runs.
func TestLearningUnprivilegedEBPFMessage(t *testing.T) {
	t.Parallel()
	for _, rn := range runners(t) {
		if rn.UID == 0 {
			continue // root has the capabilities: TestLearningScriptedCommand checks it gets eBPF
		}
		t.Run(rn.Name, func(t *testing.T) {
			t.Parallel()
			s := NewSandbox(t, rn)
			r := s.Jail("--learning", "--", "sh", "-c", "echo ran")
			if r.Code != 0 || !strings.Contains(r.Stdout, "ran") {
				t.Fatalf("jail --learning as the unprivileged user: want exit 0 (the seccomp fallback):\n%s", r)
			}
			line, ok := lineWithPrefix(r.Stderr, "jail: learning (tracer: seccomp;")
			if !ok {
				t.Fatalf("stderr has no line starting \"jail: learning (tracer: seccomp;\":\n%s", r.Stderr)
			}
			for _, w := range []string{"CAP_BPF", "CAP_PERFMON", "setcap"} {
				if !strings.Contains(line, w) {
					t.Errorf("the fallback line does not name %q (what is missing and how to grant it): %q", w, line)
				}
			}

			// Forcing eBPF without the capabilities: exit 125, nothing run.
			s.Env = append(s.Env, "JAIL_TRACER=ebpf")
			r = s.Jail("--learning", "--", "sh", "-c", "touch ran")
			if r.Code != 125 {
				t.Errorf("JAIL_TRACER=ebpf without CAP_BPF/CAP_PERFMON: want exit 125:\n%s", r)
			}
			if _, err := os.Stat(s.Project + "/ran"); err == nil {
				t.Errorf("JAIL_TRACER=ebpf failed but the command ran")
			}
			if !strings.Contains(r.Stderr, "CAP_BPF") {
				t.Errorf("the JAIL_TRACER=ebpf failure does not say what is missing (CAP_BPF):\n%s", r.Stderr)
			}
		})
	}
}
