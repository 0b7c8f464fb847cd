package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dotenvSecret is a value that looks like a credential by its shape alone.
const dotenvSecret = "sk-ant-api03-TRUSTWIDENING-0123456789abcdef"

// clone makes an upstream repository holding files and symlinks (name ->
// target) and clones it to dir, as a user clones a stranger's repository.
func (s *Sandbox) clone(dir string, files, links map[string]string) string {
	s.t.Helper()
	up := dir + "-upstream"
	for rel, body := range files {
		s.WriteFile(filepath.Join(up, rel), body, 0o644)
	}
	for rel, target := range links {
		if err := os.Symlink(target, filepath.Join(up, rel)); err != nil {
			s.t.Fatal(err)
		}
		s.chownUp(filepath.Join(up, rel))
	}
	s.Host("git", "init", "-q", "-b", "main", up)
	s.Host("git", "-C", up, "-c", "user.email=t@example.test", "-c", "user.name=t", "add", "-A")
	s.Host("git", "-C", up, "-c", "user.email=t@example.test", "-c", "user.name=t", "commit", "-qm", "stranger's repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	s.chownUp(dir)
	s.Host("git", "clone", "-q", up, dir)
	return dir
}

// refused asserts that a run was refused for an untrusted widening: exit
// 125, one line on stderr naming jail trust and what widens, and the
// command never ran (its marker is absent on the host).
func refused(t *testing.T, r Result, marker, names string) {
	t.Helper()
	if r.Code != 125 || !strings.Contains(r.Stderr, "jail trust") || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Errorf("untrusted widening (%s): want exit 125 and one line naming jail trust:\n%s", names, r)
	}
	if !strings.Contains(r.Stderr, names) {
		t.Errorf("the refusal does not name %q:\n%s", names, r.Stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran although its jail.json (%s) was not trusted", names)
	}
}

// TestClonedSecretsFilesNeedsTrust: a cloned repository's jail.json that
// names secrets.files (empty, or a file that does not exist) used to
// replace the .env masks and show .env unmasked, with no question asked.
// Now it is refused until trusted, and once trusted the .env masks still
// apply: secrets.files only adds files.
func TestClonedSecretsFilesNeedsTrust(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.NoAutoTrust = true
		for i, files := range []string{`[]`, `["nothing"]`} {
			dir := s.clone(filepath.Join(s.Base, "repo"+string(rune('a'+i))), map[string]string{
				"jail.json": `{"secrets": {"files": ` + files + `}}`,
				"README.md": "# a stranger's project\n",
			}, nil)
			// The user's own .env, written after cloning.
			s.WriteFile(dir+"/.env", "ANTHROPIC_API_KEY="+dotenvSecret+"\nPLAIN=hello\n", 0o600)
			s.WriteFile(dir+"/config/.env.local", "DEPLOY_TOKEN="+dotenvSecret+"-nested\n", 0o600)
			marker := dir + "/ran"
			script := "touch ran; echo ==dotenv; cat .env; echo ==nested; cat config/.env.local"

			refused(t, s.JailIn(dir, "", "--", "sh", "-c", script), marker, "secrets.files")

			if tr := s.JailIn(dir, "", "trust"); tr.Code != 0 {
				t.Fatalf("jail trust:\n%s", tr)
			}
			r := s.JailIn(dir, "", "--", "sh", "-c", script)
			if r.Code != 0 {
				t.Fatalf("secrets.files %s, trusted: the command must run:\n%s", files, r)
			}
			noSecret(t, r, "the trusted run's output", dotenvSecret)
			dotenv := lines(section(r.Stdout, "dotenv"))
			if len(dotenv) != 2 || !placeholderRE("ANTHROPIC_API_KEY").MatchString(strings.TrimPrefix(dotenv[0], "ANTHROPIC_API_KEY=")) || dotenv[1] != "PLAIN=hello" {
				t.Errorf("secrets.files %s: cat .env inside: want ANTHROPIC_API_KEY=jail-secret-… and PLAIN=hello (the default mask stays); got %q", files, dotenv)
			}
			nested := lines(section(r.Stdout, "nested"))
			if len(nested) != 1 || !placeholderRE("DEPLOY_TOKEN").MatchString(strings.TrimPrefix(nested[0], "DEPLOY_TOKEN=")) {
				t.Errorf("secrets.files %s: cat config/.env.local inside: want DEPLOY_TOKEN=jail-secret-… (.env.* stays masked); got %q", files, nested)
			}
			if got := hostFile(t, dir+"/.env"); !strings.Contains(got, dotenvSecret) {
				t.Errorf("the host's .env changed: %q", got)
			}
		}
	})
}

// TestUntrustedWideningKeys: each key that widens the jail is refused in a
// stranger's jail.json until trusted, one at a time, so that none rides on
// another: secrets passed or replaced, variables that change what tools
// run or where they connect, uninspected or redirected hosts, allowed
// commands, profiles, and a read "inside the project" through a symlink
// the repository ships to the user's home.
func TestUntrustedWideningKeys(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.NoAutoTrust = true
		for i, c := range []struct{ doc, names string }{
			{`{"env": {"pass": ["GITHUB_TOKEN"]}}`, "env.pass GITHUB_TOKEN"},
			{`{"env": {"set": {"ANTHROPIC_API_KEY": "sk-ant-stranger-0123456789"}}}`, "env.set ANTHROPIC_API_KEY="},
			{`{"env": {"set": {"NO_PROXY": "*"}}}`, "env.set NO_PROXY="},
			{`{"env": {"set": {"no_proxy": "*"}}}`, "env.set no_proxy="},
			{`{"env": {"set": {"LD_PRELOAD": "./evil.so"}}}`, "env.set LD_PRELOAD="},
			{`{"env": {"set": {"HTTPS_PROXY": "http://127.0.0.1:9"}}}`, "env.set HTTPS_PROXY="},
			{`{"network": {"passthrough": ["api.github.com"]}}`, "network.passthrough api.github.com"},
			{`{"network": {"hosts": {"api.anthropic.com": "127.0.0.1:9"}}}`, "network.hosts api.anthropic.com"},
			{`{"command": {"deny": ["git push"], "allow": ["git push"]}}`, `command.allow "git push"`},
			{`{"extends": ["node"]}`, "extends profile node"},
			{`{"secrets": {"env": {"GITHUB_TOKEN": ["evil.example"]}}}`, "secrets.env GITHUB_TOKEN"},
		} {
			marker := filepath.Join(s.Project, "ran-"+string(rune('a'+i)))
			s.WriteFile(s.Project+"/jail.json", c.doc, 0o644)
			refused(t, s.Sh("touch "+marker), marker, c.names)
		}
	})
}

// TestSymlinkAllowNeedsTrust: a repository cloned under the home ships a
// relative symlink to ~/.config (no need to know the user's name) and asks
// to write "cfg/autostart", inside the project as written. jail creates a
// missing allowWrite directory on the host before the jail starts, through
// the link: ~/.config/autostart, where a desktop session starts what it
// finds. That is a write outside the project, so it needs trust.
func TestSymlinkAllowNeedsTrust(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.NoAutoTrust = true
		s.WriteFile(s.Home+"/.config/keep", "", 0o644)
		dir := s.clone(filepath.Join(s.Home, "code", "repo"), map[string]string{
			"jail.json": `{"filesystem": {"allowWrite": ["cfg/autostart"]}}`,
		}, map[string]string{"cfg": "../../.config"})
		target := s.Home + "/.config/autostart"
		r := s.JailIn(dir, "", "--", "sh", "-c", "touch ran")
		refused(t, r, dir+"/ran", "allowWrite cfg/autostart (through a symlink to")
		hostAbsent(t, target)
		// Trusted, the run goes ahead, and jail still creates nothing
		// through a symlink in the project (the project is writable
		// already; a link there may have been made by a jailed command).
		if tr := s.JailIn(dir, "", "trust"); tr.Code != 0 {
			t.Fatalf("jail trust:\n%s", tr)
		}
		if r := s.JailIn(dir, "", "--", "touch", "ran"); r.Code != 0 {
			t.Fatalf("trusted run:\n%s", r)
		}
		if _, err := os.Stat(dir + "/ran"); err != nil {
			t.Errorf("control: the trusted run did not run: %v", err)
		}
		hostAbsent(t, target)
	})
}

// TestNarrowingNeedsNoTrust: a jail.json that only narrows (and informs)
// runs without trust, and its narrowing holds.
func TestNarrowingNeedsNoTrust(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		s.NoAutoTrust = true
		s.WriteFile(s.Project+"/private.txt", "not for the jail\n", 0o644)
		s.WriteFile(s.Project+"/jail.json", `{
			"$schema": "https://jail.invalid/jail.schema.json",
			"description": "narrowing only",
			"filesystem": {"allowRead": ["."], "allowWrite": ["."], "denyRead": ["private.txt"], "denyWrite": ["README.md"]},
			"network": {"deny": ["x.example"], "unknown": "deny"},
			"secrets": {"env": {"MY_DB_PASSWORD": []}},
			"command": {"deny": ["git push"]},
			"learned": {"command": "sh", "tracer": "seccomp", "programs": ["/bin/sh"], "keptDenied": ["~/.ssh"]}
		}`, 0o644)
		r := s.Sh(`touch ran; cat private.txt; echo "##read=$?"; (echo x >> README.md) 2>/dev/null; echo "##write=$?"`)
		if r.Code != 0 {
			t.Fatalf("a narrowing-only jail.json needs no trust:\n%s", r)
		}
		if _, err := os.Stat(s.Project + "/ran"); err != nil {
			t.Errorf("the command did not run: %v\n%s", err, r)
		}
		if strings.Contains(r.Stdout, "not for the jail") || strings.Contains(r.Stdout, "##read=0") || strings.Contains(r.Stdout, "##write=0") {
			t.Errorf("the narrowing did not hold (denyRead private.txt, denyWrite README.md):\n%s", r)
		}
	})
}
