package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// viewLoop is a jailed script that, until the host creates ./done in the
// project, reads the sign-in file and the protected settings.json, tries
// to write settings.json, and counts its rounds in ./count; then it
// prints a last snapshot.
const viewLoop = `
round() {
  echo "@@ROUND $1"
  cat ~/.claude/.credentials.json 2>&1; echo
  cat ~/.claude/settings.json 2>&1; echo
  (echo '{"hooks":{"planted":1}}' > ~/.claude/settings.json) 2>/dev/null && echo "@@WROTE settings.json"
  (echo '{"hooks":{"planted":1}}' >> ~/.claude/settings.json) 2>/dev/null && echo "@@APPENDED settings.json"
}
i=0
touch ready
while [ ! -e done ]; do
  i=$((i+1)); round $i; echo $i > count.tmp; mv count.tmp count
  sleep 0.02
done
round last
ls -la ~/.claude
`

// jailRounds returns the number of rounds the jailed viewLoop has done.
func jailRounds(s *Sandbox) int {
	b, _ := os.ReadFile(s.Project + "/count")
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// afterRounds waits until the jail has done n more rounds than now, so
// that it read the files after the host's last change.
func afterRounds(t *testing.T, s *Sandbox, n int) {
	t.Helper()
	want := jailRounds(s) + n
	if !waitFor(20*time.Second, func() bool { return jailRounds(s) >= want }) {
		t.Fatalf("the jailed loop stopped at round %d, want %d", jailRounds(s), want)
	}
}

// renameOver writes content to a temporary file beside path and renames it
// over path, as an agent saving its file outside the jail does.
func renameOver(t *testing.T, s *Sandbox, path, content string) {
	t.Helper()
	tmp := path + ".tmp-host"
	s.WriteFile(tmp, content, 0o600)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// While a jail runs a loop reading ~/.claude/.credentials.json, the host
// renames a new credentials file with fresh real tokens over it (as
// Claude Code refreshing outside the jail does), replaces the protected
// ~/.claude/settings.json by rename, unlinks the credentials file, and
// renames yet another one into its place: the jail never reads a real
// token (in anything it printed), never writes settings.json, and the
// host files keep exactly what the host wrote.
func TestSignInViewHostRenames(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		k := newSignInTokens()
		third := newSignInTokens()
		creds := s.Home + "/.claude/.credentials.json"
		settings := s.Home + "/.claude/settings.json"
		s.WriteFile(creds, claudeCredentials(k.Access, k.Refresh, time.Now().Add(time.Hour).UnixMilli()), 0o600)
		s.WriteFile(settings, `{"host":"v1"}`, 0o644)
		cmd := s.JailCmd("--profile", "claude", "--no-network", "--", "sh", "-c", viewLoop)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		waitForFile(t, s.Project+"/ready")
		afterRounds(t, s, 2)

		renameOver(t, s, creds, claudeCredentials(k.NewAccess, k.NewRefresh, time.Now().Add(8*time.Hour).UnixMilli()))
		afterRounds(t, s, 3)
		if got := credsTokens(hostFile(t, creds)); got["accessToken"] != k.NewAccess {
			t.Errorf("while the jail runs, the host file holds %v, want the host's new tokens", got)
		}
		renameOver(t, s, settings, `{"host":"v2"}`)
		afterRounds(t, s, 3)
		if err := os.Remove(creds); err != nil {
			t.Fatal(err)
		}
		afterRounds(t, s, 3)
		renameOver(t, s, creds, claudeCredentials(third.Access, third.Refresh, time.Now().Add(8*time.Hour).UnixMilli()))
		afterRounds(t, s, 3)
		s.WriteFile(s.Project+"/done", "", 0o644)
		err := cmd.Wait()
		r := Result{Stdout: out.String(), Stderr: errb.String()}
		if err != nil {
			t.Fatalf("the jailed loop failed (%v):\n%s", err, r)
		}

		k.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		third.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		last := r.Stdout[strings.LastIndex(r.Stdout, "@@ROUND last"):]
		if !regexp.MustCompile(`"accessToken":"sk-ant-oat01-jail`).MatchString(last) {
			t.Errorf("control: after the host's renames the jail no longer reads its session copy (want a placeholder):\n%s", last)
		}
		if strings.Contains(r.Stdout, "@@WROTE") || strings.Contains(r.Stdout, "@@APPENDED") || strings.Contains(r.Stdout, "planted") {
			t.Errorf("the jail wrote the protected settings.json:\n%s", r)
		}
		if strings.Contains(r.Stdout, `"host":"v2"`) {
			t.Errorf("the jail was shown the host's new settings.json (the bind detached):\n%s", r)
		}
		hostUnchanged(t, settings, `{"host":"v2"}`)
		if got := credsTokens(hostFile(t, creds)); got["accessToken"] != third.Access || got["refreshToken"] != third.Refresh {
			t.Errorf("after the jail exited the host file holds %v, want the host's last tokens", got)
		}
		hostAbsent(t, creds+".tmp-host")
	})
}

// What the jail creates at the top of ~/.claude (a file, a directory)
// reaches the host after exit; a name the host created meanwhile keeps
// the host's content, the jail's kept beside it and reported in one line.
// A host file is shared as it runs (an append shows on the host at once);
// renamed over, renamed or removed inside, it is so on the host after
// exit. A host directory cannot be removed or renamed from inside
// (EBUSY), and the session copy renamed to a new name does not reach the
// host.
func TestSignInViewNewEntries(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		k := newSignInTokens()
		dir := s.Home + "/.claude"
		s.WriteFile(dir+"/.credentials.json", claudeCredentials(k.Access, k.Refresh, time.Now().Add(time.Hour).UnixMilli()), 0o600)
		s.WriteFile(dir+"/history.jsonl", "host history\n", 0o600)
		s.WriteFile(dir+"/registry.json", "host registry\n", 0o600)
		s.WriteFile(dir+"/notes.md", "host notes\n", 0o600)
		s.WriteFile(dir+"/old.log", "old\n", 0o600)
		s.WriteFile(dir+"/projects/p/log", "host log\n", 0o600)
		if err := os.Mkdir(dir+"/todos", 0o700); err != nil {
			t.Fatal(err)
		}
		s.chownUp(dir + "/todos")
		cmd := s.JailCmd("--profile", "claude", "--no-network", "--", "sh", "-c", `
cd ~/.claude
echo jail-new > new-file
mkdir new-dir && echo in-dir > new-dir/f
echo jail-version > both
echo more >> history.jsonl && echo "@@APPEND ok"
printf 'jail registry\n' > registry.json.tmp && mv registry.json.tmp registry.json && echo "@@RENAMED-OVER ok"
mv notes.md notes-renamed.md && echo "@@MV ok"
rm old.log && echo "@@RM ok"
echo jail-log > projects/p/log2
rmdir todos 2>&1; [ -d todos ] && echo "@@RMDIR refused"
mv projects projects-moved 2>&1; [ -d projects ] && echo "@@MVDIR refused"
mv .credentials.json creds-moved.json && echo "@@COPY moved"
touch ~/../project/ready
while [ ! -e ~/../project/done ]; do sleep 0.05; done
`)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		waitForFile(t, s.Project+"/ready")
		if got := hostFile(t, dir+"/history.jsonl"); got != "host history\nmore\n" {
			t.Errorf("while the jail runs, its append to history.jsonl is not on the host: %q", got)
		}
		s.WriteFile(dir+"/both", "host-version\n", 0o600)
		s.WriteFile(s.Project+"/done", "", 0o644)
		err := cmd.Wait()
		r := Result{Stdout: out.String(), Stderr: errb.String()}
		if err != nil {
			t.Fatalf("jail failed (%v):\n%s", err, r)
		}
		for _, w := range []string{"@@APPEND ok", "@@RENAMED-OVER ok", "@@MV ok", "@@RM ok", "@@RMDIR refused", "@@MVDIR refused", "@@COPY moved"} {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("inside, want %q:\n%s", w, r)
			}
		}
		if strings.Count(r.Stdout, "busy") != 2 {
			t.Errorf("removing and renaming a host directory inside: want EBUSY (Device or resource busy) twice:\n%s", r)
		}
		hostUnchanged(t, dir+"/new-file", "jail-new\n")
		hostUnchanged(t, dir+"/new-dir/f", "in-dir\n")
		hostUnchanged(t, dir+"/both", "host-version\n")
		hostUnchanged(t, dir+"/history.jsonl", "host history\nmore\n")
		hostUnchanged(t, dir+"/registry.json", "jail registry\n")
		hostUnchanged(t, dir+"/notes-renamed.md", "host notes\n")
		hostUnchanged(t, dir+"/projects/p/log2", "jail-log\n")
		hostAbsent(t, dir+"/notes.md")
		hostAbsent(t, dir+"/old.log")
		hostAbsent(t, dir+"/projects-moved")
		if fi, err := os.Stat(dir + "/todos"); err != nil || !fi.IsDir() {
			t.Errorf("the host's todos directory: %v", err)
		}
		beside, _ := filepath.Glob(dir + "/both.jail-*")
		if len(beside) != 1 || hostFile(t, beside[0]) != "jail-version\n" {
			t.Errorf("the jail's own \"both\" was not kept beside the host's: %v", beside)
		}
		if n := strings.Count(r.Stderr, "kept beside"); n != 1 || !regexp.MustCompile(`created both meanwhile.*kept beside as both\.jail-`).MatchString(r.Stderr) {
			t.Errorf("want one line on stderr naming the name kept beside the host's:\n%s", r.Stderr)
		}
		hostAbsent(t, dir+"/creds-moved.json")
		if got := credsTokens(hostFile(t, dir+"/.credentials.json")); got["accessToken"] != k.Access {
			t.Errorf("the host's sign-in file changed: %v", got)
		}
		if views, _ := filepath.Glob(s.Home + "/.local/state/jail/views/*"); len(views) != 0 {
			t.Errorf("session views left behind in the state directory: %v", views)
		}
	})
}

// The proxy's refresh save replaces the host file by rename (a new inode,
// as an unjailed agent expects), with the real new tokens, while the jail
// keeps reading its session copy: the rename over the host name shows the
// jail nothing of the host file.
func TestSignInViewAtomicSave(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		k, _, oauth := setupSignIn(t, s)
		hostPath := s.Home + "/.claude/.credentials.json"
		var before syscall.Stat_t
		if err := syscall.Stat(hostPath, &before); err != nil {
			t.Fatal(err)
		}
		r := s.Jail("--profile", "claude", "--", "sh", "-c", `
refresh=$(sed -n 's/.*"refreshToken":"\([^"]*\)".*/\1/p' ~/.claude/.credentials.json)
curl -s -H 'Content-Type: application/json' -d "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$refresh\"}" https://`+signInTokenHost+`/v1/oauth/token; echo
echo "@@AFTER"
cat ~/.claude/.credentials.json; echo
ls -la ~/.claude
`)
		k.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, `"access_token":"sk-ant-oat01-jail`) {
			t.Errorf("control: the refresh through the proxy did not answer a new placeholder:\n%s\ntoken endpoint saw: %v", r, oauth.requests())
		}
		after := r.Stdout[strings.Index(r.Stdout, "@@AFTER"):]
		if !strings.Contains(after, `"accessToken":"sk-ant-oat01-jail`) || strings.Contains(after, ".tmp") {
			t.Errorf("after the host file was replaced, the jail sees:\n%s", after)
		}
		host := credsTokens(hostFile(t, hostPath))
		if host["accessToken"] != k.NewAccess || host["refreshToken"] != k.NewRefresh {
			t.Errorf("the host file after the refresh holds %v, want the new real tokens", host)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(hostPath, &st); err != nil || st.Ino == before.Ino || st.Mode&0o777 != 0o600 {
			t.Errorf("the host file after the refresh: inode %d -> %d (want a new one: renamed over), mode %o (%v)", before.Ino, st.Ino, st.Mode&0o777, err)
		}
		if m, _ := filepath.Glob(s.Home + "/.claude/.credentials.json.tmp*"); len(m) > 0 {
			t.Errorf("the save left temporary files: %v", m)
		}
		if p := s.Jail("plan", "--profile", "claude", "--", "true"); !regexp.MustCompile(`\n +bind +` + regexp.QuoteMeta(s.Home+"/.claude") + `  # session view \(sign-in tokens: placeholders inside`).MatchString(p.Stdout) {
			t.Errorf("jail plan does not show ~/.claude as a session view in one line:\n%s", p.Stdout)
		}
	})
}

// A jail killed (SIGKILL) before its command exits cannot move back what
// the jail created in ~/.claude: it stays on disk in the state directory,
// and the next run moves it into ~/.claude.
func TestSignInViewKilledJail(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Home+"/.claude/history.jsonl", "host\n", 0o600)
		cmd := s.JailCmd("--profile", "claude", "--no-network", "--", "sh", "-c", `echo before-kill > ~/.claude/made-inside; touch ready; sleep 60`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitForFile(t, s.Project+"/ready")
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if _, err := os.Lstat(s.Home + "/.claude/made-inside"); err == nil {
			t.Fatalf("control: the killed jail's entry reached ~/.claude without a next run; the test would prove nothing")
		}
		if m, _ := filepath.Glob(s.Home + "/.local/state/jail/views/*/0/made-inside"); len(m) != 1 {
			t.Fatalf("the killed jail's entry is not kept in the state directory: %v", m)
		}
		waitGone(t, "sleep 60")
		if r := s.Jail("--profile", "claude", "--no-network", "--", "true"); r.Code != 0 {
			t.Fatalf("next run:\n%s", r)
		}
		hostUnchanged(t, s.Home+"/.claude/made-inside", "before-kill\n")
		hostUnchanged(t, s.Home+"/.claude/history.jsonl", "host\n")
		if views, _ := filepath.Glob(s.Home + "/.local/state/jail/views/*"); len(views) != 0 {
			t.Errorf("views left in the state directory after the next run: %v", views)
		}
	})
}

// The real Claude Code, its access token expired, refreshes through the
// proxy while ~/.claude is a session view: the host file is replaced by
// rename (a new inode, nothing left beside it) with the new real tokens,
// and Claude Code inside, which rewrites its own copy, never sees them.
func TestSignInViewClaudeCodeRefreshAtomic(t *testing.T) {
	t.Parallel()
	argv, cache := claudeCode(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		k, api, oauth := setupSignIn(t, s)
		hostPath := s.Home + "/.claude/.credentials.json"
		var before syscall.Stat_t
		if err := syscall.Stat(hostPath, &before); err != nil {
			t.Fatal(err)
		}
		s.Env = append(s.Env, "CLAUDE_CODE_MAX_RETRIES=1")
		script := `"$@" -p "say hi"; echo "@@EXIT $?"; echo "@@CREDS $(cat ~/.claude/.credentials.json)"; ls -la ~/.claude`
		args := append([]string{"--profile", "claude", "--allow-read", cache, "--", "sh", "-c", script, "claude"}, argv...)
		r, timedOut := jailTimeout(t, s.JailCmd(args...), "", 2*time.Minute)
		k.noReal(t, "Claude Code's output", r.Stdout+r.Stderr)
		if timedOut || !strings.Contains(r.Stdout, "@@EXIT 0") || !strings.Contains(r.Stdout, mockAnswer) {
			t.Fatalf("claude -p inside: want exit 0 and %q (timed out: %v):\n%s\napi saw: %v\ntoken endpoint saw: %v", mockAnswer, timedOut, r, api.paths(), oauth.requests())
		}
		if inside := credsTokens(r.Stdout[strings.Index(r.Stdout, "@@CREDS"):]); !strings.Contains(inside["accessToken"], "jail") {
			t.Errorf("after the refresh the jail's access token is %q, want a placeholder", inside["accessToken"])
		}
		host := credsTokens(hostFile(t, hostPath))
		if host["accessToken"] != k.NewAccess || host["refreshToken"] != k.NewRefresh {
			t.Errorf("the host file after the refresh holds %v, want the new real tokens", host)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(hostPath, &st); err != nil || st.Ino == before.Ino || st.Mode&0o777 != 0o600 {
			t.Errorf("the host file after the refresh: inode %d -> %d (want a new one: renamed over), mode %o (%v)", before.Ino, st.Ino, st.Mode&0o777, err)
		}
		if m, _ := filepath.Glob(s.Home + "/.claude/.credentials.json*"); len(m) != 1 {
			t.Errorf("beside the host file after the refresh: %v", m)
		}
	})
}
