package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Commands installed in hidden directories of the home (~/.local/bin, a
// tool's venv, a global npm prefix) run in the jail, read-only, with
// nothing else of the home; a link into a credential store, or a chain a
// project planted, exposes nothing.

const (
	privSecret = "PRIVATE-NEIGHBOUR-7c1d2e"
	hiddenPATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
)

// link makes a symlink owned by the runner, with its directories.
func (s *Sandbox) link(target, path string) {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		s.t.Fatal(err)
	}
	s.chownUp(path)
}

// withPath puts dirs before the usual PATH of the sandbox.
func (s *Sandbox) withPath(dirs ...string) {
	s.Env = append(s.Env, "PATH="+strings.Join(append(dirs, hiddenPATH), ":"))
}

// TestHiddenInstallLocalBin: a script in ~/.local/bin runs; it can read
// neither the rest of the home nor write itself.
func TestHiddenInstallLocalBin(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		tool := s.Home + "/.local/bin/mytool"
		script := "#!/bin/sh\necho \"mytool ran: $1\"\ncat \"$HOME/notes.txt\" \"$HOME/.local/bin/neighbour\" 2>/dev/null && echo READ-HOME\necho pwned >> \"$0\" 2>/dev/null && echo WROTE-SELF\nexit 0\n"
		s.WriteFile(tool, script, 0o755)
		s.WriteFile(s.Home+"/.local/bin/neighbour", privSecret+"\n", 0o644)
		s.withPath(s.Home + "/.local/bin")
		r := s.Jail("--", "mytool", "hello")
		if r.Code != 0 || !strings.Contains(r.Stdout, "mytool ran: hello") {
			t.Fatalf("a script in ~/.local/bin did not run:\n%s", r)
		}
		if strings.Contains(r.Stdout, "READ-HOME") || strings.Contains(r.Stdout, "WROTE-SELF") {
			t.Fatalf("the exposed command reached more than itself:\n%s", r)
		}
		noSecret(t, r, "neighbour of the command", privSecret)
		hostUnchanged(t, tool, script)
		p := s.Jail("plan", "--", "mytool")
		if !strings.Contains(p.Stdout, "command: mytool resolves to "+tool+" (made readable") {
			t.Fatalf("jail plan does not say what the command made readable:\n%s", p)
		}
	})
}

// TestHiddenInstallUvTool: ~/.local/bin/x links into a venv under
// ~/.local/share/uv/tools whose script runs with the venv's python; the
// venv is shown, another tool's venv beside it is not.
func TestHiddenInstallUvTool(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		venv := s.Home + "/.local/share/uv/tools/x"
		s.WriteFile(venv+"/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n", 0o644)
		s.link("/usr/bin/python3", venv+"/bin/python")
		s.WriteFile(venv+"/lib/python3/site-packages/xmod.py", "WHO = 'xmod from the venv'\n", 0o644)
		s.WriteFile(venv+"/bin/x", "#!"+venv+"/bin/python\nimport sys, os\nsys.path.insert(0, os.path.join(sys.prefix, 'lib/python3/site-packages'))\nimport xmod\nprint('uvtool', sys.prefix, xmod.WHO)\ntry:\n    print(open('"+s.Home+"/.local/share/uv/tools/y/secret.txt').read())\nexcept OSError:\n    print('neighbour hidden')\n", 0o755)
		s.WriteFile(s.Home+"/.local/share/uv/tools/y/secret.txt", privSecret+"\n", 0o644)
		s.link("../share/uv/tools/x/bin/x", s.Home+"/.local/bin/x")
		s.withPath(s.Home + "/.local/bin")
		r := s.Jail("--", "x")
		if r.Code != 0 || !strings.Contains(r.Stdout, "uvtool "+venv+" xmod from the venv") || !strings.Contains(r.Stdout, "neighbour hidden") {
			t.Fatalf("the uv tool did not run with its venv:\n%s", r)
		}
		noSecret(t, r, "another tool's venv", privSecret)
	})
}

// TestHiddenInstallNpmGlobal: ~/.npm-global/bin/tool links to the
// package's bin script, which requires a module of its package relative
// to itself; another global package stays hidden, and a hard link in the
// package to the SSH key does not show the key.
func TestHiddenInstallNpmGlobal(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		pkg := s.Home + "/.npm-global/lib/node_modules/tool"
		s.WriteFile(pkg+"/package.json", `{"name":"tool","bin":{"tool":"bin/tool.js"}}`, 0o644)
		s.WriteFile(pkg+"/lib/m.js", "module.exports = 'npm tool ran';\n", 0o644)
		s.WriteFile(pkg+"/bin/tool.js", "#!/usr/bin/env node\nconst fs = require('fs');\nconsole.log(require('../lib/m.js'));\nfor (const f of ['"+s.Home+"/.npm-global/lib/node_modules/other/secret.txt', '"+pkg+"/key']) {\n  try { console.log(fs.readFileSync(f, 'utf8')); } catch (e) { console.log('hidden ' + f); }\n}\n", 0o755)
		s.WriteFile(s.Home+"/.npm-global/lib/node_modules/other/secret.txt", privSecret+"\n", 0o644)
		if err := os.Link(s.Home+"/.ssh/id_ed25519", pkg+"/key"); err != nil {
			t.Fatal(err)
		}
		s.link("../lib/node_modules/tool/bin/tool.js", s.Home+"/.npm-global/bin/tool")
		s.withPath(s.Home + "/.npm-global/bin")
		r := s.Jail("--", "tool")
		noSecret(t, r, "npm global package", privSecret, SSHKeySecret)
		if r.Code == 0 && (!strings.Contains(r.Stdout, "npm tool ran") || !strings.Contains(r.Stdout, "hidden "+pkg+"/key")) {
			t.Fatalf("the npm tool did not run:\n%s", r)
		}
		if r.Code != 0 && !strings.Contains(r.Stderr, "hard link") {
			t.Fatalf("want the tool to run, or a refusal naming the hard link:\n%s", r)
		}
		os.Remove(pkg + "/key")
		r = s.Jail("--", "tool")
		if r.Code != 0 || !strings.Contains(r.Stdout, "npm tool ran") {
			t.Fatalf("the npm tool did not run:\n%s", r)
		}
		noSecret(t, r, "npm global package", privSecret)
	})
}

// TestHiddenInstallLinkIntoCredentialStore: ~/.local/bin/evil links to an
// executable in ~/.ssh. Jail refuses in one line with the fix and shows
// nothing of ~/.ssh; the same through a chain of two links.
func TestHiddenInstallLinkIntoCredentialStore(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(s.Home+"/.ssh/run", "#!/bin/sh\ncat \"$HOME/.ssh/id_ed25519\"\n", 0o755)
		s.link("../../.ssh/run", s.Home+"/.local/bin/evil")
		s.link(s.Home+"/.local/bin/evil", s.Home+"/.local/bin/evil2")
		s.withPath(s.Home + "/.local/bin")
		for _, cmd := range []string{"evil", "evil2"} {
			r := s.Jail("--", cmd)
			noSecret(t, r, "link into ~/.ssh", SSHKeySecret)
			l := jailLines(r.Stderr)
			if r.Code != 125 || len(l) != 1 || !strings.Contains(l[0], s.Home+"/.ssh") || !strings.Contains(l[0], "move the program out of it") {
				t.Fatalf("%s: want one refusal line naming ~/.ssh and the fix:\n%s", cmd, r)
			}
		}
	})
}

// TestHiddenInstallProjectPlantedChain: the project plants a link on a
// PATH entry inside it (absolute or relative) that leads to a program in
// the hidden home; jail shows nothing of the home for it.
func TestHiddenInstallProjectPlantedChain(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		prog := s.Home + "/.local/share/priv/bin/pt"
		s.WriteFile(prog, "#!/bin/sh\ncat \"$(dirname \"$0\")/../data\"\n", 0o755)
		s.WriteFile(s.Home+"/.local/share/priv/data", privSecret+"\n", 0o644)
		s.link(prog, s.Project+"/bin/pt")
		for _, entry := range []string{s.Project + "/bin", "bin"} {
			s.Env = nil
			s.withPath(entry)
			r := s.Jail("--", "pt")
			noSecret(t, r, "chain planted by the project ("+entry+")", privSecret)
			if r.Code == 0 {
				t.Fatalf("PATH entry %s: the planted chain ran the home's program:\n%s", entry, r)
			}
			p := s.Jail("plan", "--", "pt")
			if strings.Contains(p.Stdout, "/.local/share/priv") {
				t.Fatalf("PATH entry %s: the plan shows the home's program:\n%s", entry, p)
			}
		}
	})
}

// TestHiddenInstallTooWide: a link to a package in ~/node_modules would
// show the whole home: refused with the --allow-read fix, and with that
// fix the command runs.
func TestHiddenInstallTooWide(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.WriteFile(s.Home+"/node_modules/wide/cli.js", "#!/usr/bin/env node\nconsole.log('wide ran');\n", 0o755)
		s.link("../../node_modules/wide/cli.js", s.Home+"/.local/bin/wide")
		s.withPath(s.Home + "/.local/bin")
		r := s.Jail("--", "wide")
		noSecret(t, r, "a tree as wide as the home", SSHKeySecret, AWSSecret)
		l := jailLines(r.Stderr)
		if r.Code != 125 || len(l) != 1 || !strings.Contains(l[0], "whole home") || !strings.Contains(l[0], "--allow-read") {
			t.Fatalf("want one refusal line with the --allow-read fix:\n%s", r)
		}
		r = s.Jail("--allow-read", s.Home+"/node_modules", "--", "wide")
		if r.Code != 0 || !strings.Contains(r.Stdout, "wide ran") {
			t.Fatalf("with --allow-read the command does not run:\n%s", r)
		}
	})
}

// TestHiddenInstallNotFound: a command no PATH entry has is one line from
// jail with the fix and the shell's exit code 127, before anything runs;
// jail plan says so and still plans.
func TestHiddenInstallNotFound(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		name := "no-such-tool-" + uniq()
		r := s.Jail("--", name)
		l := jailLines(r.Stderr)
		if r.Code != 127 || len(l) != 1 || strings.TrimSpace(r.Stderr) != l[0] || !strings.Contains(l[0], name+" is in no directory of your PATH; install it") {
			t.Fatalf("want one line from jail with the fix, and exit 127:\n%s", r)
		}
		p := s.Jail("plan", "--", name)
		if p.Code != 0 || !strings.Contains(p.Stdout, "command: "+name+" is in no directory of your PATH") {
			t.Fatalf("jail plan of a missing command does not say so:\n%s", p)
		}
	})
}

// TestHiddenInstallClaude: the real claude, its package linked into a
// global npm prefix in the home as `npm link` leaves it, runs by name.
func TestHiddenInstallClaude(t *testing.T) {
	cache := installedAgents(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		prefix := s.Home + "/.npm-global"
		s.link(filepath.Join(cache, "node_modules/@anthropic-ai/claude-code"), prefix+"/lib/node_modules/@anthropic-ai/claude-code")
		s.link("../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe", prefix+"/bin/claude")
		s.withPath(prefix + "/bin")
		r := runAgent(t, s, "--", "claude", "--version")
		if r.Code != 0 || !versionRE.MatchString(r.Stdout) {
			t.Fatalf("claude from a hidden prefix did not run:\n%s", r)
		}
		p := s.Jail("plan", "--", "claude")
		if !strings.Contains(p.Stdout, "command: claude resolves to "+prefix+"/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe") {
			t.Fatalf("the plan does not say where claude resolved:\n%s", p)
		}
	})
}

// TestHiddenInstallShellShim: a pnpm-style cmd-shim on PATH execs node on
// a package beside it; the jail shows the package's install prefix and
// the command runs. A shim that execs a file in a credential store is
// refused in one line, and shows nothing of it.
func TestHiddenInstallShellShim(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		pnpm := s.Home + "/.local/share/pnpm"
		s.WriteFile(pnpm+"/global/5/node_modules/@acme/tool/cli.js", "console.log('tool ran', process.argv[2])\n", 0o755)
		s.WriteFile(pnpm+"/tool", "#!/bin/sh\nbasedir=$(dirname \"$(echo \"$0\" | sed -e 's,\\\\,/,g')\")\n"+
			"if [ -x \"$basedir/node\" ]; then\n  exec \"$basedir/node\"  \"$basedir/global/5/node_modules/@acme/tool/cli.js\" \"$@\"\nelse\n"+
			"  exec node  \"$basedir/global/5/node_modules/@acme/tool/cli.js\" \"$@\"\nfi\n", 0o755)
		s.WriteFile(pnpm+"/sshcat", "#!/bin/sh\nexec "+s.Home+"/.ssh/id_ed25519 \"$@\"\n", 0o755)
		s.withPath(pnpm)
		r := s.Jail("--", "tool", "hello")
		if r.Code != 0 || !strings.Contains(r.Stdout, "tool ran hello") {
			t.Fatalf("jail -- tool (a pnpm shim): want the package to run:\n%s", r)
		}
		r = s.Jail("--", "sshcat")
		if r.Code != 125 || !strings.Contains(r.Stderr, "which jail keeps masked") || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
			t.Errorf("a shim execing a file in ~/.ssh: want exit 125 and one line:\n%s", r)
		}
		noSecret(t, r, "a shim into ~/.ssh", SSHKeySecret)
	})
}
