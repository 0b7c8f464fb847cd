package linux

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jailsh/jail/jail"
)

// agentRun is a host file and its session copy as prepareAgentFiles
// leaves them.
func agentRun(t *testing.T, content string, mode os.FileMode) (*agentSession, AgentFile) {
	t.Helper()
	dir := t.TempDir()
	host := filepath.Join(dir, "home", ".claude.json")
	os.MkdirAll(filepath.Dir(host), 0o700)
	if err := os.WriteFile(host, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(host, mode)
	a := AgentFile{Path: host, Host: host, Copy: filepath.Join(dir, "run", "s1", "agent-0.json"), Rule: jail.AgentFileRules[0]}
	os.Mkdir(filepath.Join(dir, "run"), 0o700)
	s, err := prepareAgentFiles(&Plan{AgentFiles: []AgentFile{a}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(a.Copy); string(b) != content {
		t.Fatalf("the session copy holds %q, want the host file's %q", b, content)
	}
	return s, a
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestAgentMergeBackFiles: the host file is replaced (atomically, mode
// kept) only when the merge changes it; an invalid copy or a host file
// removed meanwhile leaves the host as it is, with one warning; the
// copies are removed afterwards.
func TestAgentMergeBackFiles(t *testing.T) {
	t.Run("unchanged copy: host file untouched", func(t *testing.T) {
		s, a := agentRun(t, `{"a": 1}`, 0o640)
		before := inode(t, a.Host)
		var warn bytes.Buffer
		s.mergeBack(&warn)
		if inode(t, a.Host) != before || warn.Len() > 0 {
			t.Errorf("the host file was rewritten or warned about (%q)", warn.String())
		}
		s.remove()
		if _, err := os.Stat(filepath.Dir(a.Copy)); err == nil {
			t.Errorf("the session copy's directory is still there")
		}
	})
	t.Run("only a command key changed: host file untouched", func(t *testing.T) {
		s, a := agentRun(t, `{"a": 1}`, 0o640)
		before := inode(t, a.Host)
		os.WriteFile(a.Copy, []byte(`{"a": 1, "mcpServers": {"x": {"command": "sh"}}}`), 0o600)
		var warn bytes.Buffer
		s.mergeBack(&warn)
		if b, _ := os.ReadFile(a.Host); inode(t, a.Host) != before || string(b) != `{"a": 1}` || warn.Len() > 0 {
			t.Errorf("host file %q rewritten (warnings %q)", b, warn.String())
		}
	})
	t.Run("merged: mode kept, lock released", func(t *testing.T) {
		s, a := agentRun(t, `{"a": 1}`, 0o640)
		os.WriteFile(a.Copy, []byte(`{"a": 2}`), 0o600)
		var warn bytes.Buffer
		s.mergeBack(&warn)
		b, _ := os.ReadFile(a.Host)
		fi, _ := os.Stat(a.Host)
		if string(b) != "{\n  \"a\": 2\n}\n" || fi.Mode().Perm() != 0o640 || warn.Len() > 0 {
			t.Errorf("host file %q mode %v, warnings %q; want a: 2 with mode 0640", b, fi.Mode(), warn.String())
		}
		if _, err := os.Stat(a.Host + ".lock"); err == nil {
			t.Errorf("the lock directory is left behind")
		}
	})
	t.Run("invalid copy: one warning", func(t *testing.T) {
		s, a := agentRun(t, `{"a": 1}`, 0o600)
		os.WriteFile(a.Copy, []byte(`{"a": `), 0o600)
		var warn bytes.Buffer
		s.mergeBack(&warn)
		if b, _ := os.ReadFile(a.Host); string(b) != `{"a": 1}` || strings.Count(warn.String(), "\n") != 1 || !strings.Contains(warn.String(), "invalid") {
			t.Errorf("host file %q, warnings %q", b, warn.String())
		}
	})
	t.Run("host file removed meanwhile: not recreated", func(t *testing.T) {
		s, a := agentRun(t, `{"a": 1}`, 0o600)
		os.WriteFile(a.Copy, []byte(`{"a": 2}`), 0o600)
		os.Remove(a.Host)
		var warn bytes.Buffer
		s.mergeBack(&warn)
		if _, err := os.Stat(a.Host); err == nil || !strings.Contains(warn.String(), "removed on the host") {
			t.Errorf("host file recreated or no warning (%q)", warn.String())
		}
	})
}

// TestAgentMergeBackTooDeep: a copy nested millions of levels deep, as a
// jailed run can leave it, is refused with one warning instead of
// overflowing jail's stack; the host file stays byte for byte and the
// session copy is removed.
func TestAgentMergeBackTooDeep(t *testing.T) {
	const host = `{"numStartups": 3, "mcpServers": {"mine": {"command": "my-server"}}}`
	s, a := agentRun(t, host, 0o600)
	n := 2_000_000
	os.WriteFile(a.Copy, []byte(`{"a":`+strings.Repeat("[", n)+strings.Repeat("]", n)+`}`), 0o600)
	before := inode(t, a.Host)
	var warn bytes.Buffer
	s.mergeBack(&warn)
	if b, _ := os.ReadFile(a.Host); string(b) != host || inode(t, a.Host) != before {
		t.Errorf("the host file changed: %q", b)
	}
	if strings.Count(warn.String(), "\n") != 1 || !strings.Contains(warn.String(), "nested deeper") {
		t.Errorf("want one warning naming the nesting, got %q", warn.String())
	}
	s.remove()
	if _, err := os.Stat(a.Copy); err == nil {
		t.Errorf("the session copy is left behind")
	}
}

// TestAgentMergeBackPrivateDir: in its private directory, a copy renamed
// over is merged from where it ends; a host file missing at the start is
// created, mode 0600, without the protected keys; a copy removed inside
// merges nothing; a symlink or FIFO left in its place is not read; the
// directory goes, whatever the jail left in it.
func TestAgentMergeBackPrivateDir(t *testing.T) {
	setup := func(t *testing.T, hostContent string) (*agentSession, AgentFile) {
		dir := t.TempDir()
		host := filepath.Join(dir, "home", ".claude.json")
		os.MkdirAll(filepath.Dir(host), 0o700)
		missing := hostContent == ""
		if !missing {
			os.WriteFile(host, []byte(hostContent), 0o600)
		}
		priv := filepath.Join(dir, "run", "s1", "agent-0")
		a := AgentFile{Path: host, Host: host, Copy: filepath.Join(priv, ".claude.json"), Dir: priv, Inside: "/run/jail/agent-0", Missing: missing, Rule: jail.AgentFileRules[0]}
		os.Mkdir(filepath.Join(dir, "run"), 0o700)
		s, err := prepareAgentFiles(&Plan{AgentFiles: []AgentFile{a}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(a.Copy); missing != os.IsNotExist(err) {
			t.Fatalf("copy of a host file missing %v: %v", missing, err)
		}
		return s, a
	}
	renameIn := func(t *testing.T, a AgentFile, content string) {
		tmp := a.Copy + ".tmp.1"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, a.Copy); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("missing host file: created without protected keys", func(t *testing.T) {
		s, a := setup(t, "")
		renameIn(t, a, `{"userID": "u1", "mcpServers": {"evil": {"command": "sh"}}}`)
		var warn bytes.Buffer
		s.mergeBack(&warn)
		s.remove()
		b, err := os.ReadFile(a.Host)
		fi, _ := os.Stat(a.Host)
		if err != nil || !strings.Contains(string(b), `"u1"`) || strings.Contains(string(b), "evil") || fi.Mode().Perm() != 0o600 || warn.Len() > 0 {
			t.Errorf("host file %q (%v, mode %v), warnings %q; want userID only, mode 0600", b, err, fi.Mode(), warn.String())
		}
		if _, err := os.Stat(a.Dir); !os.IsNotExist(err) {
			t.Errorf("the private directory is still there: %v", err)
		}
	})
	t.Run("renamed over: merged from the final file", func(t *testing.T) {
		s, a := setup(t, `{"numStartups": 1}`)
		renameIn(t, a, `{"numStartups": 2, "hooks": {}}`)
		s.mergeBack(io.Discard)
		if b, _ := os.ReadFile(a.Host); !strings.Contains(string(b), `"numStartups": 2`) || strings.Contains(string(b), "hooks") {
			t.Errorf("host file after the merge: %s", b)
		}
	})
	t.Run("removed inside: nothing merged", func(t *testing.T) {
		s, a := setup(t, `{"numStartups": 1}`)
		os.Remove(a.Copy)
		var warn bytes.Buffer
		s.mergeBack(&warn)
		if b, _ := os.ReadFile(a.Host); string(b) != `{"numStartups": 1}` || warn.Len() > 0 {
			t.Errorf("host file %q, warnings %q; want it as it was, no warning", b, warn.String())
		}
	})
	for name, replace := range map[string]func(a AgentFile, outside string) error{
		"symlink": func(a AgentFile, outside string) error { os.Remove(a.Copy); return os.Symlink(outside, a.Copy) },
		"fifo":    func(a AgentFile, _ string) error { os.Remove(a.Copy); return syscall.Mkfifo(a.Copy, 0o600) },
	} {
		t.Run(name+" in its place: not read", func(t *testing.T) {
			s, a := setup(t, `{"numStartups": 1}`)
			outside := filepath.Join(t.TempDir(), "outside.json")
			os.WriteFile(outside, []byte(`{"numStartups": 1, "leaked": true}`), 0o600)
			if err := replace(a, outside); err != nil {
				t.Fatal(err)
			}
			var warn bytes.Buffer
			s.mergeBack(&warn)
			s.remove()
			if b, _ := os.ReadFile(a.Host); string(b) != `{"numStartups": 1}` || !strings.Contains(warn.String(), "not updated") {
				t.Errorf("host file %q, warnings %q; want it as it was, one warning", b, warn.String())
			}
			if _, err := os.Stat(outside); err != nil {
				t.Errorf("removing the private directory followed the symlink: %v", err)
			}
		})
	}
}
