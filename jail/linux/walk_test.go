package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// lowWalkLimit lowers maxWalk for one test.
func lowWalkLimit(t *testing.T, n int) {
	t.Helper()
	old := maxWalk
	maxWalk = n
	t.Cleanup(func() { maxWalk = old })
}

// walkSandbox is a home and a project in a temporary directory, with n
// files in project/many.
func walkSandbox(t *testing.T, n int) (home, project string) {
	return walkSandboxIn(t, n, "many")
}

// walkSandboxIn is walkSandbox with the n files in project/sub.
func walkSandboxIn(t *testing.T, n int, sub string) (home, project string) {
	t.Helper()
	base := t.TempDir()
	home, project = filepath.Join(base, "home"), filepath.Join(base, "project")
	for _, d := range []string{home, filepath.Join(project, sub)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(project, sub, fmt.Sprintf("f%03d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("XDG_STATE_HOME", "")
	return home, project
}

// TestGatherRefusesAtWalkLimit: a glob whose tree has more entries than
// the limit is an error naming the pattern and the fix, never a partial
// expansion that leaves the files past the limit unmasked.
func TestGatherRefusesAtWalkLimit(t *testing.T) {
	home, project := walkSandbox(t, 40)
	if err := os.WriteFile(filepath.Join(project, "many", "zz.pem"), []byte("KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	pat := filepath.Join(project, "**", "*.pem")
	pol := &jail.Policy{ProjectRoot: project, DenyRead: []string{pat}}

	// Under the limit the file is matched.
	lowWalkLimit(t, 1000)
	f, err := Gather(pol, home, project)
	if err != nil {
		t.Fatalf("Gather under the limit: %v", err)
	}
	if got := f.Matches[pat]; len(got) != 1 || !strings.HasSuffix(got[0], "/zz.pem") {
		t.Fatalf("Matches[%q] = %q, want the one .pem file", pat, got)
	}

	lowWalkLimit(t, 20)
	_, err = Gather(pol, home, project)
	want := fmt.Sprintf(`denyRead %q: more than 20 entries under %s; narrow the pattern or deny the directory itself`, pat, project)
	if err == nil || err.Error() != want {
		t.Fatalf("Gather over the limit: error %v\nwant %s", err, want)
	}
	var we *WalkError
	if !errors.As(err, &we) || we.Limit != 20 {
		t.Errorf("error %v does not carry the *WalkError with the limit", err)
	}
}

// TestGatherBuiltinPatternAtWalkLimit: the project's own protected globs
// (every jail.json) hit the limit too; the fix names what the user can do.
func TestGatherBuiltinPatternAtWalkLimit(t *testing.T) {
	home, project := walkSandbox(t, 40)
	lowWalkLimit(t, 20)
	_, err := Gather(&jail.Policy{ProjectRoot: project}, home, project)
	if err == nil || !strings.HasPrefix(err.Error(), `protected path "`+project+`/**/jail.json": more than 20 entries under `+project) ||
		!strings.HasSuffix(err.Error(), "; run jail from a smaller directory") {
		t.Fatalf("Gather: %v", err)
	}
}

// TestGatherRefusesGlobAtRoot: a glob right below / is never expanded
// (that would walk the machine), and is an error rather than no match.
func TestGatherRefusesGlobAtRoot(t *testing.T) {
	home, project := walkSandbox(t, 0)
	_, err := Gather(&jail.Policy{ProjectRoot: project, DenyRead: []string{"/*/secret.pem"}}, home, project)
	if err == nil || !strings.Contains(err.Error(), `denyRead "/*/secret.pem": a glob right below / would walk the whole machine; start the pattern with a directory`) {
		t.Fatalf("Gather: %v", err)
	}
}

// TestGatherRefusesHardLinkScanAtLimit: a denied file with a second name
// makes jail search the trees it shows for that name; a tree too big to
// search completely is an error that names the file and how to find the
// other name, since a missed name would show the file.
func TestGatherRefusesHardLinkScanAtLimit(t *testing.T) {
	// The files are in .git, which the expansion of the project's globs
	// does not enter and the hard-link scan does.
	home, project := walkSandboxIn(t, 40, ".git/objects")
	key := filepath.Join(home, ".ssh", "id_rsa")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(project, ".git", "objects", "zz-link")
	if err := os.Link(key, link); err != nil {
		t.Fatal(err)
	}
	pol := &jail.Policy{ProjectRoot: project}
	lowWalkLimit(t, 1000)
	f, err := Gather(pol, home, project)
	if err != nil {
		t.Fatalf("Gather under the limit: %v", err)
	}
	if !contains(f.HardLinks, link) {
		t.Fatalf("HardLinks = %q, want %s", f.HardLinks, link)
	}

	// The walks of the globs fit in 30 entries, the hard-link scan of the
	// project (44 entries) does not.
	lowWalkLimit(t, 30)
	_, err = Gather(pol, home, project)
	want := fmt.Sprintf("hard-link scan: %s has another name, and there are more than 30 entries under %s to look for it in; remove the extra name (find %s -samefile %s) or run jail from a smaller directory", key, project, project, key)
	if err == nil || err.Error() != want {
		t.Fatalf("Gather: error %v\nwant %s", err, want)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestWalkLinkedLimit: the scan of a denied tree for files with several
// names stops with an error at the limit instead of passing over the rest.
func TestWalkLinkedLimit(t *testing.T) {
	_, project := walkSandbox(t, 10)
	lowWalkLimit(t, 5)
	err := walkLinked(project, nil, func(string, [2]uint64, uint64) {}, func(*WalkError) {})
	var we *WalkError
	if !errors.As(err, &we) || we.Limit != 5 || we.Path != project {
		t.Fatalf("walkLinked = %v, want a *WalkError at the limit", err)
	}
	if msg := linkRefusal(err, "", project).Error(); !strings.HasPrefix(msg, "hard-link scan: more than 5 entries under "+project+"; ") {
		t.Errorf("linkRefusal = %q", msg)
	}
	// Skipped trees are not counted.
	lowWalkLimit(t, 5)
	if err := walkLinked(project, func(p string) bool { return strings.HasSuffix(p, "/many") }, func(string, [2]uint64, uint64) {}, func(*WalkError) {}); err != nil {
		t.Errorf("walkLinked skipping the big directory: %v", err)
	}
}

// TestWalkGlobsVanished: an entry that disappears during the walk, or a
// base that does not exist, is not an error: nothing there can match.
func TestWalkGlobsVanished(t *testing.T) {
	dir := t.TempDir()
	var unread []*WalkError
	err := walkGlobs([]string{dir + "/absent/**", dir + "/*.pem"}, func(string, string, fs.DirEntry) {}, func(e *WalkError) { unread = append(unread, e) })
	if err != nil || len(unread) != 0 {
		t.Fatalf("walkGlobs = %v, unread %v", err, unread)
	}
	if !jail.ClosedInside(dir+"/gone", &fs.PathError{Op: "open", Path: dir + "/gone", Err: fs.ErrNotExist}) {
		t.Error("ClosedInside: a vanished directory must not stop the walk")
	}
	if jail.ClosedInside(dir, &fs.PathError{Op: "open", Path: dir, Err: errors.New("input/output error")}) {
		t.Error("ClosedInside: an I/O error is not a directory closed to the jail")
	}
}

// TestMatchBelow: which patterns could match below a directory the walk
// could not read, and so make that directory an error.
func TestMatchBelow(t *testing.T) {
	for _, tc := range []struct {
		pat, dir string
		want     bool
	}{
		{"/p/**/*.pem", "/p/locked", true},
		{"/p/**/*.pem", "/p", true},
		{"/p/**/*.pem", "/q", false},
		{"/p/secrets/*.pem", "/p/secrets", true},
		{"/p/secrets/*.pem", "/p/other", false},
		{"/p/secrets/*.pem", "/p/secrets/sub", false},
		{"/p/secrets/**", "/p/secrets/sub", true},
		{"/p/secrets/**", "/p/secrets", true},
		{"/p/.env", "/p", true},
		{"/p/.env", "/p/.env", false},
		{"/p/*/key", "/p/a", true},
		{"/p/*/key", "/p/a/b", false},
		{"/p/**", "/", true},
		{"/p/[ab]/x", "/p/c", false},
	} {
		if got := matchBelow(tc.pat, tc.dir); got != tc.want {
			t.Errorf("matchBelow(%q, %q) = %v, want %v", tc.pat, tc.dir, got, tc.want)
		}
	}
}

// TestGatherRefusesGlobInDirName: a project directory named like a glob
// would turn ".git/hooks" and ".env" under it into patterns that match
// other paths (proj1/.git/hooks) or none: jail refuses instead.
func TestGatherRefusesGlobInDirName(t *testing.T) {
	home, _ := walkSandbox(t, 0)
	project := filepath.Join(filepath.Dir(home), "proj[1]")
	if err := os.MkdirAll(project+"/.git/hooks", 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Gather(&jail.Policy{ProjectRoot: project}, home, project)
	if err == nil || !strings.HasPrefix(err.Error(), "the project directory "+project+" has a glob character") {
		t.Fatalf("Gather: %v", err)
	}
}

// TestLinkCensusUnaccounted: with a denied tree partly unreadable, a shown
// file some of whose names were not found may be linked to a denied file.
func TestLinkCensusUnaccounted(t *testing.T) {
	c := &linkCensus{names: map[[2]uint64]map[string]bool{}, nlink: map[[2]uint64]uint64{}, shown: map[[2]uint64][]string{}}
	c.note("/home/u/.ssh/id", [2]uint64{1, 1}, 2, false)
	c.note("/p/id-link", [2]uint64{1, 1}, 2, true)
	c.note("/p/a", [2]uint64{1, 2}, 2, true)
	c.note("/p/b", [2]uint64{1, 2}, 2, true)
	if p := c.unaccounted(); p != "" {
		t.Fatalf("every name found, unaccounted = %q", p)
	}
	c.note("/p/z", [2]uint64{1, 3}, 2, true) // its other name is nowhere scanned
	c.note("/home/u/.ssh/only", [2]uint64{1, 4}, 3, false)
	if p := c.unaccounted(); p != "/p/z" {
		t.Fatalf("unaccounted = %q, want /p/z (a shown file with a name not found)", p)
	}
}

// JAIL_MAX_WALK can lower the walk bound, never raise it.
func TestWalkLimitOnlyLowers(t *testing.T) {
	for env, want := range map[string]int{"": 1_000_000, "50": 50, "0": 1_000_000, "-3": 1_000_000, "5000000": 1_000_000, "x": 1_000_000} {
		if got := walkLimit(env); got != want {
			t.Errorf("walkLimit(%q) = %d, want %d", env, got, want)
		}
	}
}
