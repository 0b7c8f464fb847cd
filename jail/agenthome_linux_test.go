package jail

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	a := AgentFile{Path: host, Host: host, Copy: filepath.Join(dir, "run", "s1", "agent-0.json"), Rule: agentFiles[0]}
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
