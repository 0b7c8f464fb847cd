package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail/credstores"
	"github.com/jailsh/jail/jail/learn"
)

// The profile a learning run writes is a config jail accepts, and the
// "learned" record grants nothing.
func TestLearnedFileIsAConfig(t *testing.T) {
	ev := []learn.Event{
		{Kind: learn.Open, Path: "/home/u/.config/tool/settings"},
		{Kind: learn.Mkdir, Path: "/home/u/.cache/tool"},
		{Kind: learn.Exec, Path: "/usr/bin/python3"},
		{Kind: learn.Open, Path: "/home/u/.ssh/id_ed25519"},
	}
	r := learn.Synthesize(ev, []learn.Request{{Host: "127.0.0.1", Port: 8080, Allowed: true}}, learn.Facts{Home: "/home/u", Project: "/home/u/src/p", SystemDirs: SystemDirs()})
	c, err := ParseConfig(r.File("tool", TracerEBPF), "tool.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Filesystem.AllowRead, ","); got != "~/.config/tool" {
		t.Errorf("allowRead %q", got)
	}
	if got := strings.Join(c.Filesystem.AllowWrite, ","); got != "~/.cache/tool" {
		t.Errorf("allowWrite %q", got)
	}
	if got := strings.Join(c.Network.Allow, ","); got != "127.0.0.1:8080" {
		t.Errorf("network.allow %q", got)
	}
	if c.Learned.Tracer != TracerEBPF || len(c.Learned.Programs) != 1 || len(c.Learned.KeptDenied) != 1 {
		t.Errorf("learned record %+v", c.Learned)
	}
}

// Later runs of the program find the learned profile as a layer; learning
// and watch runs do not.
func TestLearnedLayer(t *testing.T) {
	home := t.TempDir()
	project := filepath.Join(home, "p")
	os.MkdirAll(project, 0o755)
	getenv := func(string) string { return "" }
	argv := []string{"./tool", "x"}
	lp := LearnedPath(home, getenv, argv)
	if lp != filepath.Join(home, ".config/jail/learned/tool.json") {
		t.Fatalf("LearnedPath = %s", lp)
	}
	os.MkdirAll(filepath.Dir(lp), 0o700)
	os.WriteFile(lp, []byte(`{"filesystem": {"allowRead": ["~/.config/tool"]}, "learned": {"tracer": "ebpf"}}`), 0o600)
	has := func(opts Options) bool {
		layers, _, err := LoadLayers(opts, argv, project, home, getenv)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			if l.FromLearning {
				return true
			}
		}
		return false
	}
	if !has(Options{}) {
		t.Error("a plain run does not use the learned profile")
	}
	if has(Options{Mode: "learning"}) || has(Options{Mode: "watch"}) {
		t.Error("a learning or watch run uses the learned profile")
	}
	os.WriteFile(lp, []byte(`{"filesystem": {"allowRead": 3}}`), 0o600)
	if _, _, err := LoadLayers(Options{}, argv, project, home, getenv); err == nil || !strings.Contains(err.Error(), "jail --learning wrote") {
		t.Errorf("a broken learned profile: %v", err)
	}
}

func TestLearnedName(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want string
	}{
		{[]string{"claude"}, "claude"},
		{[]string{"/usr/bin/python3", "x.py"}, "python3"},
		{[]string{"./tool", "extra"}, "tool"},
		{[]string{"/bin/sh", "-c", "npm install && npm test"}, "npm"},
		{[]string{"bash", "-c", "  ./scripts/build.sh --fast"}, "build.sh"},
		{[]string{"/bin/sh", "-c", "FOO=1 make"}, "make"},
		{[]string{"/bin/sh", "-c", "env A=1 B=2 exec ./tool --x"}, "tool"},
		{[]string{"/bin/sh", "-c", "cd / && ls"}, "sh"},
		{[]string{"/bin/sh", "-c", "   "}, "sh"},
		{[]string{"/bin/sh", "-c", "echo hi | tool"}, "sh"},
		{[]string{"/bin/sh", "-c", "env -u X node a.js"}, "node"},
		{[]string{"/bin/sh", "-c", "nice -n 5 make"}, "make"},
		{[]string{"/bin/sh", "-c", "$(echo x)"}, "sh"},
		{[]string{"/bin/sh", "-c", ""}, "sh"},
		{[]string{"sh", "script.sh"}, "sh"},
		{[]string{"/"}, ""},
		{[]string{".hidden"}, ""},
		{[]string{"a b"}, ""},
		{nil, ""},
	} {
		if got := LearnedName(tt.argv); got != tt.want {
			t.Errorf("LearnedName(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

// Every store masked without a search for other names is a store.
func TestBulkStoresAreStores(t *testing.T) {
	for _, b := range credstores.Bulk {
		if !strings.HasSuffix(b, "/") || !credstores.IsHomeStore(strings.TrimSuffix(b, "/")) {
			t.Errorf("%s is in Bulk but not a directory store of Home", b)
		}
	}
}
