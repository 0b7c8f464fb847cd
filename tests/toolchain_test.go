package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// plantToolchainTraps writes, in the project root and in dir (a cwd inside
// it), everything a toolchain would run if jail ran it on the host to ask
// for its registries: a pip package shadowing pip, sitecustomize.py and
// usercustomize.py, an .npmrc whose node-options, script-shell and
// onload-script name a script, and a Go env file whose GOFLAGS adds a
// -toolexec. Each writes a marker in s.Base/markers, a directory the
// runner owns and no jail binds: a marker there means the trap ran on the
// host. It returns the markers.
func plantToolchainTraps(t *testing.T, s *Sandbox, dir string) []string {
	t.Helper()
	s.WriteFile(s.Base+"/markers/.keep", "", 0o644)
	mark := func(name string) string { return filepath.Join(s.Base, "markers", "marker-"+name) }
	py := func(name string) string {
		return fmt.Sprintf("try:\n    open(%q, 'w').write('ran')\nexcept OSError:\n    pass\n", mark(name))
	}
	for _, d := range []string{s.Project, dir} {
		s.WriteFile(d+"/pip/__init__.py", py("pip"), 0o644)
		s.WriteFile(d+"/pip/_internal/__init__.py", "", 0o644)
		s.WriteFile(d+"/pip/_internal/models/__init__.py", "", 0o644)
		s.WriteFile(d+"/pip/_internal/models/index.py", py("pip-index")+"class P:\n    url = 'http://169.254.169.254/'\n    file_storage_domain = '169.254.169.254'\nPyPI = P()\n", 0o644)
		s.WriteFile(d+"/sitecustomize.py", py("sitecustomize"), 0o644)
		s.WriteFile(d+"/usercustomize.py", py("usercustomize"), 0o644)
		s.WriteFile(d+"/.npmrc", "node-options=--require "+s.Project+"/evil.js\nscript-shell="+s.Project+"/evil.sh\nonload-script="+s.Project+"/evil.js\n", 0o644)
		s.WriteFile(d+"/package.json", `{"name": "trap", "version": "1.0.0", "scripts": {"x": "node -e 1"}}`+"\n", 0o644)
	}
	s.WriteFile(s.Project+"/evil.js", fmt.Sprintf("try { require('fs').writeFileSync(%q, 'ran') } catch (e) {}\n", mark("node")), 0o644)
	s.WriteFile(s.Project+"/evil.sh", fmt.Sprintf("#!/bin/sh\necho ran > %s 2>/dev/null\nexec /bin/sh \"$@\"\n", mark("shell")), 0o755)
	s.WriteFile(s.Project+"/go.env", "GOFLAGS=-toolexec="+s.Project+"/evil.sh\nGOTOOLCHAIN=local\n", 0o644)
	return []string{mark("pip"), mark("pip-index"), mark("sitecustomize"), mark("usercustomize"), mark("node"), mark("shell")}
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// TestToolchainNothingRunsOnHost: finding a command's registries runs
// nothing on the host, so what a cloned project plants for python3, npm
// or go never runs outside the jail: not for a run, not for jail plan,
// not for a learning run, from the project root or a directory inside it.
// The controls run the same toolchains on the host and see the traps
// fire, so the traps are real.
func TestToolchainNothingRunsOnHost(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		sub := s.Project + "/sub"
		markers := plantToolchainTraps(t, s, sub)
		s.Env = append(s.Env, "PYTHONPATH="+s.Project, "GOENV="+s.Project+"/go.env", "GOTOOLCHAIN=local",
			"npm_config_update_notifier=false", "npm_config_fetch_retries=0", "npm_config_fetch_timeout=3000")

		// Controls: on the host, the toolchains run the traps.
		if out, code := s.HostOut(sub, "python3", "-c", "from pip._internal.models.index import PyPI"); code != 0 {
			t.Fatalf("control: host python3 failed:\n%s", out)
		}
		for _, m := range markers[:3] {
			if _, err := os.Stat(m); err != nil {
				t.Fatalf("control: the host python3 did not run the planted %s, so this test proves nothing", filepath.Base(m))
			}
		}
		if out, code := s.HostOut(s.Project, "npm", "run", "x"); code != 0 {
			t.Fatalf("control: host npm run x failed:\n%s", out)
		}
		for _, m := range markers[4:] {
			if _, err := os.Stat(m); err != nil {
				t.Fatalf("control: the host npm did not run the planted .npmrc's %s, so this test proves nothing", filepath.Base(m))
			}
		}
		if out, _ := s.HostOut(s.Project, "go", "env", "GOFLAGS"); !strings.Contains(out, "-toolexec="+s.Project+"/evil.sh") {
			t.Fatalf("control: the host go does not read the planted env file's GOFLAGS: %q", out)
		}
		removeAll(markers)

		runs := [][]string{
			{"plan", "--", "python3", "-c", "1"},
			{"--", "python3", "-c", "1"},
			{"plan", "--", "npm", "ping"},
			{"--", "npm", "--version"},
			{"--", "npm", "run", "x"}, // the traps fire, but inside the jail
			{"plan", "--", "go", "version"},
			{"--", "go", "version"},
			{"plan", "--", "uv", "pip", "list"},
			{"--learning", "-y", "--", "python3", "-c", "1"},
		}
		for _, dir := range []string{sub, s.Project} {
			for _, args := range runs {
				r := s.JailIn(dir, "", args...)
				if r.Code != 0 && args[len(args)-1] != "x" { // npm run x: the trap's exec of the script may fail inside
					t.Errorf("jail %s in %s: exit %d\n%s", strings.Join(args, " "), dir, r.Code, r)
				}
				for _, m := range markers {
					if _, err := os.Stat(m); err == nil {
						t.Errorf("jail %s in %s ran the planted %s on the host\n%s", strings.Join(args, " "), dir, filepath.Base(m), r)
						os.Remove(m)
					}
				}
				if args[0] == "plan" && strings.Contains(r.Stdout, "169.254.169.254") && !strings.Contains(r.Stdout, "ignored registry") {
					t.Errorf("jail %s allows the planted pip's 169.254.169.254:\n%s", strings.Join(args, " "), r.Stdout)
				}
			}
		}
	})
}

// planAllow is the allow line of a jail plan's network section.
func planAllow(t *testing.T, plan string) string {
	t.Helper()
	for _, l := range lines(plan) {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "allow:"); ok {
			return strings.TrimSpace(a)
		}
	}
	t.Fatalf("no allow line in the plan:\n%s", plan)
	return ""
}

// TestToolchainLocalRegistryDropped: a project's .npmrc naming a loopback
// canary (a server on the host's 127.0.0.2) or the metadata address does not put it in the allow list, trust
// or not, and npm makes no connection to it. The controls: the same
// address named by the user's own environment, or by --allow-domain, is
// allowed and the canary is reached.
func TestToolchainLocalRegistryDropped(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		// 127.0.0.2: loopback, but not in the jail's NO_PROXY, so npm
		// asks the proxy for it and the proxy alone decides.
		canary := newUpstreamAt(t, "127.0.0.2:0", false, "")
		addr := canary.Addr()
		s.Env = append(s.Env, "npm_config_update_notifier=false", "npm_config_fetch_retries=0", "npm_config_fetch_timeout=5000")
		for _, target := range []string{addr, "169.254.169.254"} {
			s.WriteFile(s.Project+"/.npmrc", "registry=http://"+target+"/\n", 0o644)
			for _, trusted := range []bool{false, true} {
				if trusted {
					if tr := s.Jail("trust"); tr.Code != 0 {
						t.Fatalf("jail trust:\n%s", tr)
					}
				}
				r := s.Jail("plan", "--", "npm", "ping")
				if r.Code != 0 {
					t.Fatalf("jail plan -- npm ping:\n%s", r)
				}
				if allow := planAllow(t, r.Stdout); strings.Contains(allow, target) {
					t.Errorf("the plan allows %s from the project's .npmrc (trusted %v): %s", target, trusted, allow)
				}
				if !strings.Contains(r.Stdout, "ignored registry "+target) {
					t.Errorf("the plan does not warn that %s was ignored:\n%s", target, r.Stdout)
				}
				if strings.Contains(r.Stdout, "untrusted") {
					t.Errorf("a dropped address still asks for trust:\n%s", r.Stdout)
				}
			}
			n := len(decisions(t, s, ""))
			if r := s.Jail("--", "npm", "ping"); r.Code == 0 {
				t.Errorf("jail -- npm ping to %s succeeded:\n%s", target, r)
			}
			if d, ok := findDecision(decisions(t, s, "")[n:], strings.Split(target, ":")[0], ""); ok && d.Verdict == "allow" {
				t.Errorf("the proxy allowed %s: %s", target, d)
			}
		}
		if c := canary.Conns(); c != 0 {
			t.Fatalf("the loopback canary named by the project's .npmrc accepted %d connections", c)
		}

		// Controls: the user's own word allows the same address.
		s.WriteFile(s.Project+"/.npmrc", "registry=http://"+addr+"/\n", 0o644)
		r := s.Jail("--allow-domain", addr, "--", "npm", "ping")
		if canary.Conns() == 0 {
			t.Fatalf("control: with --allow-domain %s the canary saw no connection, so this test proves nothing:\n%s", addr, r)
		}
		os.Remove(s.Project + "/.npmrc")
		before := canary.Conns()
		env := s.Env
		s.Env = append(append([]string{}, env...), "npm_config_registry=http://"+addr+"/")
		r = s.Jail("plan", "--", "npm", "ping")
		if allow := planAllow(t, r.Stdout); !strings.Contains(allow, addr) {
			t.Errorf("control: npm_config_registry in the user's environment is not allowed: %s", allow)
		}
		r = s.Jail("--", "npm", "ping")
		s.Env = env
		if canary.Conns() == before {
			t.Errorf("control: npm with the user's npm_config_registry did not reach the canary:\n%s", r)
		}
	})
}

// TestToolchainProjectRegistryNeedsTrust: a registry named by a project's
// toolchain file widens the jail like network.allow in its jail.json: no
// jail.json at all, and still refused without a terminal (exit 125, one
// line naming jail trust, nothing run) until `jail trust`; a change asks
// again.
func TestToolchainProjectRegistryNeedsTrust(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.NoAutoTrust = true
		ran := s.Project + "/ran"
		node := []string{"--", "node", "-e", "require('fs').writeFileSync('ran', '')"}
		s.WriteFile(s.Project+"/.npmrc", "registry=https://registry.example.test/\n", 0o644)

		r := s.Jail(node...)
		if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, "jail trust") ||
			!strings.Contains(r.Stderr, ".npmrc registry registry.example.test (project toolchain config)") {
			t.Fatalf("an untrusted project .npmrc registry: want exit 125 and one line naming it and jail trust:\n%s", r)
		}
		hostAbsent(t, ran)
		r = s.Jail("plan", "--", "npm", "ping")
		if r.Code != 0 || !strings.Contains(r.Stdout, "untrusted") || !strings.Contains(r.Stdout, ".npmrc") {
			t.Errorf("jail plan does not show the untrusted .npmrc:\n%s", r)
		}
		// A command of another toolchain does not read .npmrc: no widening.
		if r := s.Jail("--", "sh", "-c", "true"); r.Code != 0 {
			t.Errorf("sh is not a node command, yet:\n%s", r)
		}

		if tr := s.Jail("trust"); tr.Code != 0 || !strings.Contains(tr.Stdout, s.Project+"/.npmrc") {
			t.Fatalf("jail trust without a jail.json does not trust the .npmrc:\n%s", tr)
		}
		r = s.Jail("plan", "--", "npm", "ping")
		if strings.Contains(r.Stdout, "untrusted") || !strings.Contains(planAllow(t, r.Stdout), "registry.example.test") {
			t.Errorf("after jail trust the plan must allow registry.example.test and ask nothing:\n%s", r)
		}
		if r := s.Jail(node...); r.Code != 0 {
			t.Fatalf("after jail trust the command must run:\n%s", r)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Errorf("after jail trust the command did not run")
		}
		s.WriteFile(s.Project+"/.npmrc", "registry=https://registry.example.test/\n@x:registry=https://other.example.test/\n", 0o644)
		if r := s.Jail(node...); r.Code != 125 || !strings.Contains(r.Stderr, "other.example.test") {
			t.Errorf("a changed .npmrc must need trust again:\n%s", r)
		}

		// The other toolchains' project files, each refused the same way.
		for i, c := range []struct{ file, content, cmd string }{
			{"pyproject.toml", "[[tool.uv.index]]\nname = \"x\"\nurl = \"https://uv.example.test/simple\"\n", "python3"},
			{"uv.toml", "index-url = \"https://uv2.example.test/simple\"\n", "uv"},
			{".cargo/config.toml", "[registries.x]\nindex = \"sparse+https://cargo.example.test/\"\n", "cargo"},
			{".yarnrc.yml", "npmRegistryServer: \"https://yarn.example.test\"\n", "yarn"},
			{"bunfig.toml", "[install]\nregistry = \"https://bun.example.test/\"\n", "bun"},
		} {
			dir := s.Project + "/p" + strconv.Itoa(i)
			s.WriteFile(dir+"/"+c.file, c.content, 0o644)
			s.Host("git", "init", "-q", dir) // its own project root
			r := s.JailIn(dir, "", "--", c.cmd, "--version")
			if r.Code != 125 || !strings.Contains(r.Stderr, c.file) || !strings.Contains(r.Stderr, "jail trust") {
				t.Errorf("an untrusted %s: want exit 125 naming it and jail trust:\n%s", c.file, r)
			}
		}
	})
}

// TestToolchainTrustPrompt: on a terminal, an untrusted project .npmrc
// registry is asked about once, naming the file and the host: "n" runs
// nothing, "y" records trust and runs, and the next run asks nothing.
func TestToolchainTrustPrompt(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.NoAutoTrust = true
		s.WriteFile(s.Project+"/.npmrc", "registry=https://registry.example.test/\n", 0o644)
		ran := s.Project + "/ran"
		node := `node -e "require('fs').writeFileSync('ran', '')"`
		tm := NewTerm(t, s)

		tm.Type(tm.Jail("-- " + node + "; echo rc-n=$?"))
		tm.WaitLine(`\s*\.npmrc registry registry\.example\.test \(project toolchain config\)`)
		tm.WaitLine(`Trust this file as it is now\? \[y/N\]`)
		tm.Type("n")
		tm.WaitLine(`rc-n=125`)
		hostAbsent(t, ran)

		tm.Type(tm.Jail("-- " + node + "; echo rc-y=$?"))
		tm.WaitLine(`Trust this file as it is now\? \[y/N\]`)
		tm.Type("y")
		tm.WaitLine(`rc-y=0`)
		if _, err := os.Stat(ran); err != nil {
			t.Fatalf("after answering y the command did not run")
		}
		if rec := hostFile(t, s.Home+"/.config/jail/trusted.json"); !strings.Contains(rec, s.Project+"/.npmrc") {
			t.Fatalf("answering y did not record the .npmrc:\n%s", rec)
		}
		if r := s.Jail("plan", "--", "npm", "ping"); strings.Contains(r.Stdout, "untrusted") {
			t.Errorf("after answering y the plan still calls the .npmrc untrusted:\n%s", r.Stdout)
		}
	})
}

// TestToolchainTrustHoles: a venv reached through a symbolic link to the
// project still needs trust; a planted .npmrc's terminal escapes reach
// the refusal line quoted; and `jail trust` names every host the files it
// records add, even of a toolchain the refused command does not use.
func TestToolchainTrustHoles(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.NoAutoTrust = true
		p6 := s.Project + "/p6"
		s.WriteFile(p6+"/.venv/pip.conf", "[global]\nindex-url=https://evil-index.example.com/simple\n", 0o644)
		s.Host("git", "init", "-q", p6)
		lnk := s.Home + "/lnk"
		s.Host("ln", "-s", p6, lnk)
		env := s.Env
		for _, venv := range []string{lnk + "/.venv", p6 + "/.venv"} {
			s.Env = append(append([]string{}, env...), "VIRTUAL_ENV="+venv)
			r := s.JailIn(lnk, "", "plan", "--", "pip", "--version")
			if r.Code != 0 || !strings.Contains(r.Stdout, "untrusted") || !strings.Contains(r.Stdout, "evil-index.example.com") {
				t.Errorf("VIRTUAL_ENV=%s from the link: the project's pip.conf must need trust:\n%s", venv, r)
			}
		}
		s.Env = env

		s.WriteFile(s.Project+"/.npmrc", "@x\x1b[2K\x1b[1A\x1b[2K\r  .npmrc registry registry.example.test (your ~/.npmrc)\x1b[8m:registry=https://evil.example.com/\n", 0o644)
		r := s.Jail("--", "npm", "--version")
		if r.Code != 125 || !strings.Contains(r.Stderr, "evil.example.com") || strings.ContainsAny(r.Stderr, "\x1b\r") {
			t.Errorf("the planted escapes must reach the refusal quoted (exit 125, no ESC):\n%q", r.Stderr)
		}

		s.WriteFile(s.Project+"/jail.json", `{"network": {"allow": ["docs.example.org"]}}`+"\n", 0o644)
		s.WriteFile(s.Project+"/.npmrc", "registry=https://evil-registry.example.com/\n", 0o644)
		if r := s.Jail("--", "go", "version"); r.Code != 125 || strings.Contains(r.Stderr, "evil-registry") {
			t.Errorf("go reads no .npmrc: want only the jail.json refused:\n%s", r)
		}
		tr := s.Jail("trust")
		if tr.Code != 0 || !strings.Contains(tr.Stdout, "evil-registry.example.com") || !strings.Contains(tr.Stdout, "docs.example.org") {
			t.Errorf("jail trust must show what the .npmrc and the jail.json widen:\n%s", tr)
		}
	})
}
