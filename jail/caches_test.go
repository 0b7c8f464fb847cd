package jail

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail/learn"
	"github.com/jailsh/jail/profiles"
)

// TestReadOnlyCachesList: the list names every cache an unjailed build runs
// from unchecked, leaves out the caches checked at use, and is what both the
// planner and learning keep read-only.
func TestReadOnlyCachesList(t *testing.T) {
	home := "/home/u"
	list := ReadOnlyCaches(home)
	covered := func(p string) bool {
		return slices.ContainsFunc(list, func(c string) bool { return Under(p, c) })
	}
	for _, rel := range poisonableCaches {
		rel = strings.TrimSuffix(rel, "/") // a directory's mark
		if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || strings.HasPrefix(rel, "..") || HasMeta(rel) {
			t.Errorf("%q is not a clean literal path relative to the home", rel)
		}
	}
	for _, rel := range []string{
		".cache/go-build", "go/pkg/mod", "go/bin", ".m2/repository", ".gradle/caches", ".gradle/wrapper",
		".cache/pip", ".cache/uv", ".cargo/registry/src", ".cargo/git/checkouts", ".cargo/bin", ".rustup",
		".local/bin", ".npm/_cacache", ".cache/yarn", ".bun/install/cache", ".gem",
		".cache/pre-commit/repoabc", ".cache/ms-playwright",
	} {
		if !covered(filepath.Join(home, rel)) {
			t.Errorf("~/%s is not kept read-only", rel)
		}
	}
	// Checked at use, shared with the host, and where the jail's own caches live.
	for _, rel := range []string{".cache/jail/go-build", ".cache/jail/cargo", ".cache"} {
		if covered(filepath.Join(home, rel)) {
			t.Errorf("~/%s must stay writable for the jail", rel)
		}
	}
	ro := ReadOnlyHome(home)
	for _, c := range list {
		if !slices.Contains(ro, c) {
			t.Errorf("%s is not in ReadOnlyHome, which planning and learning use", c)
		}
	}
}

// cacheVars are the variables each toolchain profile must point at a cache
// of the jail's own.
var cacheVars = map[string][]string{
	"go":     {"GOCACHE", "GOMODCACHE"},
	"python": {"PIP_CACHE_DIR", "UV_CACHE_DIR"},
	"rust":   {"CARGO_HOME"},
	"java":   {"MAVEN_OPTS", "MAVEN_USER_HOME", "GRADLE_USER_HOME"},
	"node":   {"YARN_CACHE_FOLDER", "YARN_GLOBAL_FOLDER", "BUN_INSTALL_CACHE_DIR"},
	"ruby":   {"GEM_HOME", "BUNDLE_USER_CACHE"},
}

// TestProfilesKeepCachesPrivate: no built-in profile makes a poisonable path
// writable, and every directory a profile's env.set names under the home is
// one the same profile makes writable (so jail creates and binds it) and a
// private one under the project's ~/.cache/jail/{project}.
func TestProfilesKeepCachesPrivate(t *testing.T) {
	home := "/home/u"
	caches := ReadOnlyCaches(home)
	entries, err := fs.ReadDir(profiles.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		c, err := LoadProfile(name, home, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		pol, err := Resolve([]*Config{c}, "/home/u/proj", home, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range pol.AllowWrite {
			for _, pc := range caches {
				if Under(w, pc) || Under(pc, w) {
					t.Errorf("%s: allowWrite %s opens %s, which an unjailed tool runs from", name, w, pc)
				}
			}
		}
		for _, v := range cacheVars[name] {
			if _, ok := pol.Env.Set[v]; !ok {
				t.Errorf("%s: env.set does not give %s a cache of the jail's own", name, v)
			}
		}
		env := PlanEnv([]string{"HOME=" + home}, pol, "s", "x", nil)
		for _, kv := range env.Env {
			k, v, _ := strings.Cut(kv, "=")
			if _, set := pol.Env.Set[k]; !set {
				continue
			}
			dir := firstHomePath(v, home)
			if dir == "" {
				t.Errorf("%s: %s=%s names no directory under the home", name, k, v)
				continue
			}
			own := filepath.Join(home, ".cache/jail", ProjectKey("/home/u/proj"))
			if !Under(dir, own) || !slices.ContainsFunc(pol.AllowWrite, func(w string) bool { return Under(dir, w) }) {
				t.Errorf("%s: %s=%s is not a writable directory of the profile under the project's %s", name, k, v, own)
			}
		}
	}
}

// firstHomePath returns the first absolute path under home in an
// environment value ("-Da=/home/u/x -Db=…" gives /home/u/x).
func firstHomePath(v, home string) string {
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ':' || r == '=' }) {
		if Under(f, home) && f != home {
			return f
		}
	}
	return ""
}

func TestExpandHome(t *testing.T) {
	for _, c := range []struct{ in, home, want string }{
		{"~/.cache/jail/go-build", "/home/u", "/home/u/.cache/jail/go-build"},
		{"-Dmaven.repo.local=~/.m2/r -Dx=~/y", "/home/u", "-Dmaven.repo.local=/home/u/.m2/r -Dx=/home/u/y"},
		{"~/a:~/b:/c", "/home/u/", "/home/u/a:/home/u/b:/c"},
		{"a~/b", "/home/u", "a~/b"},
		{"~user/x", "/home/u", "~user/x"},
		{"~", "/home/u", "~"},
		{"~/x", "", "~/x"},
		{"~/x", "relative", "~/x"},
	} {
		if got := expandHome(c.in, c.home); got != c.want {
			t.Errorf("expandHome(%q, %q) = %q, want %q", c.in, c.home, got, c.want)
		}
	}
}

// TestLearningProposesNoCache: a learning run whose command wrote into the
// host's caches proposes none of them (it reports them kept read-only), nor
// the project's own jail cache (a learned profile serves every project and
// would open it to the others); another tool's cache is proposed as usual.
func TestLearningProposesNoCache(t *testing.T) {
	home := "/home/u"
	var ev []learn.Event
	for _, p := range []string{
		"/home/u/.cache/go-build/ab/abcd-d", "/home/u/go/pkg/mod/example.test/m@v1.0.0/m.go",
		"/home/u/.m2/repository/org/x/1/x-1.jar", "/home/u/.gradle/caches/modules-2/x.jar",
		"/home/u/.cache/pip/wheels/ab/x.whl", "/home/u/.cache/uv/wheels-v1/x",
		"/home/u/.cargo/registry/src/idx/c-1.0.0/src/lib.rs", "/home/u/.cargo/git/checkouts/c/abc/lib.rs",
		"/home/u/.local/bin/tool", "/home/u/.cache/jail/proj-0123456789ab/go-build/ab/abcd-d",
		"/home/u/.cache/newtool/x",
	} {
		ev = append(ev, learn.Event{Kind: learn.Create, Path: p, Write: true})
	}
	r := learn.Synthesize(ev, nil, learn.Facts{
		Home: home, Project: "/home/u/proj", SystemDirs: SystemDirs(),
		Allowed: []string{"/home/u/.cache/jail/proj-0123456789ab/go-build"}, ReadOnly: ReadOnlyHome(home),
	})
	if got := strings.Join(r.Profile.AllowWrite, " "); got != "~/.cache/newtool" {
		t.Errorf("allowWrite = %q, want only ~/.cache/newtool", got)
	}
	if len(r.Profile.AllowRead) != 0 {
		t.Errorf("allowRead = %v: a write there asked for no read", r.Profile.AllowRead)
	}
	for _, p := range []string{"~/.cache/go-build/", "~/go/pkg/mod/", "~/.m2/repository/", "~/.cargo/registry/src/", "~/.local/bin/tool"} {
		if !slices.ContainsFunc(r.KeptDenied, func(k string) bool {
			return strings.HasPrefix(k, "tried to write "+p) && strings.HasSuffix(k, "kept read-only")
		}) {
			t.Errorf("the write under %s is not reported kept read-only: %v", p, r.KeptDenied)
		}
	}
}

// TestProjectKey: each project root gets caches of its own, the same on
// every run, named for the reader; the go profile's paths and variables
// agree on them.
func TestProjectKey(t *testing.T) {
	a, b := ProjectKey("/home/u/src/app"), ProjectKey("/home/u/other/app")
	if a == b || a != ProjectKey("/home/u/src/app") {
		t.Errorf("keys %q and %q: want stable and distinct per root", a, b)
	}
	if !strings.HasPrefix(a, "app-") || len(a) != len("app-")+12 {
		t.Errorf("key %q: want app- and 12 hex digits", a)
	}
	for _, root := range []string{"/", "/home/u/a b/../x", "/home/u/" + strings.Repeat("n", 100)} {
		if k := ProjectKey(root); strings.ContainsAny(k, "/. ") || len(k) > 45 {
			t.Errorf("ProjectKey(%q) = %q: not one short path element", root, k)
		}
	}
	home := "/home/u"
	c, err := LoadProfile("go", home, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, root := range []string{"/home/u/src/app", "/home/u/other/app"} {
		pol, err := Resolve([]*Config{c}, root, home, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(home, ".cache/jail", ProjectKey(root), "go-build")
		env := PlanEnv([]string{"HOME=" + home}, pol, "s", "x", nil)
		if !slices.Contains(pol.AllowWrite, want) || !slices.Contains(env.Env, "GOCACHE="+want) {
			t.Errorf("project %s: want allowWrite and GOCACHE %s, got %v and %v", root, want, pol.AllowWrite, env.Env)
		}
		seen[want] = true
	}
	if len(seen) != 2 {
		t.Errorf("two projects share a build cache: %v", seen)
	}
}
