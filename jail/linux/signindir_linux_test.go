package linux

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// viewFixture is a host ~/.claude with a file, a directory, a symlink, a
// protected file, a masked file and the sign-in file, and its view.
func viewFixture(t *testing.T) (*Plan, SignInView) {
	t.Helper()
	base := t.TempDir()
	host := filepath.Join(base, "home", ".claude")
	for name, content := range map[string]string{"a": "host a", "gone": "g", "kept": "k", "d/inner": "host inner", "settings.json": "{}", "m": "masked", ".credentials.json": "{}", "both-dir/x": ""} {
		os.MkdirAll(filepath.Dir(filepath.Join(host, name)), 0o700)
		if err := os.WriteFile(filepath.Join(host, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/nowhere/target", filepath.Join(host, "l"))
	state := filepath.Join(base, "state")
	v := SignInView{Path: "/home/u/.claude", Host: host, Dir: signInViewDir(state, "0123456789abcdef", 0), Writable: true,
		SignIn: []string{".credentials.json"}, Held: []string{".other.json"}, ReadOnly: []string{"settings.json", "settings.local.json"}, Hidden: []string{"m"}}
	return &Plan{Session: "0123456789abcdef", StateDir: state, SignInViews: []SignInView{v}}, v
}

// The session directory holds a hard link to each writable host file, a
// stub for each other host entry, bound over by it (read-only where
// protected, not at all where masked), the symlinks as links, and
// nothing for the sign-in copy, written next, nor for the sign-in file the
// host lacks: a sign-in made inside writes it there, for the session.
func TestPrepareSignInViews(t *testing.T) {
	plan, v := viewFixture(t)
	vs, entries, err := prepareSignInViews(plan, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer vs.remove()
	var got []string
	for _, o := range entries[v.Path] {
		got = append(got, o.Kind+" "+strings.TrimPrefix(o.Src, v.Host+"/")+" "+strings.TrimPrefix(o.Dest, v.Path+"/"))
	}
	want := []string{"bind-try both-dir both-dir", "bind-try d d", "ro-bind-try settings.json settings.json"}
	if !slices.Equal(got, want) {
		t.Errorf("entry binds:\n got %q\nwant %q", got, want)
	}
	if l, err := os.Readlink(filepath.Join(v.Dir, "l")); err != nil || l != "/nowhere/target" {
		t.Errorf("the symlink's copy: %q %v", l, err)
	}
	if a, h := inode(t, filepath.Join(v.Dir, "a")), inode(t, filepath.Join(v.Host, "a")); a != h {
		t.Errorf("the writable file a is not a hard link to the host's: inodes %d, %d", a, h)
	}
	if _, err := os.Lstat(filepath.Join(v.Dir, ".other.json")); err == nil {
		t.Errorf("the held sign-in file has a stub in the view")
	}
	for _, name := range []string{"m", "settings.json"} {
		if fi, err := os.Lstat(filepath.Join(v.Dir, name)); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			t.Errorf("stub %s: %v %v", name, fi, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(v.Dir, ".credentials.json")); err == nil {
		t.Errorf("a stub for the sign-in file, where its copy goes")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(v.Dir), manifestName)); err != nil {
		t.Errorf("no manifest: %v", err)
	}
}

// After exit: new entries move into the host directory; a name the host
// made meanwhile keeps the host's, the jail's beside it (one line); the
// session copy under another name, stubs, protected and sign-in names
// never move; the session directory and the manifest go.
func TestSignInViewMoveBack(t *testing.T) {
	plan, v := viewFixture(t)
	vs, _, err := prepareSignInViews(plan, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, s string) {
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyPath := filepath.Join(v.Dir, ".credentials.json")
	write(copyPath, "placeholders")
	if err := vs.noteCopies([]jail.SignInFile{{Copy: copyPath}}); err != nil {
		t.Fatal(err)
	}
	// What the jail does.
	write(filepath.Join(v.Dir, "new"), "jail new")
	write(filepath.Join(v.Dir, "newdir", "f"), "jail f")
	write(filepath.Join(v.Dir, "both"), "jail both")
	write(filepath.Join(v.Dir, "settings.local.json"), `{"hooks":1}`)
	os.Rename(copyPath, filepath.Join(v.Dir, "renamed-copy"))
	write(copyPath, "planted")
	write(filepath.Join(v.Dir, "a.tmp"), "jail a")
	os.Rename(filepath.Join(v.Dir, "a.tmp"), filepath.Join(v.Dir, "a")) // a rename over a host file
	write(filepath.Join(v.Dir, "l.tmp"), "jail l")
	os.Rename(filepath.Join(v.Dir, "l.tmp"), filepath.Join(v.Dir, "l"))
	os.Remove(filepath.Join(v.Dir, "gone"))
	os.Remove(filepath.Join(v.Dir, "kept"))
	// What the host does meanwhile.
	write(filepath.Join(v.Host, "kept"), "host rewrote it")
	write(filepath.Join(v.Host, "both"), "host both")
	os.Remove(filepath.Join(v.Host, "l"))
	os.Symlink("/elsewhere", filepath.Join(v.Host, "l"))

	var stderr bytes.Buffer
	vs.moveBack(&stderr)
	vs.remove()
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(v.Host, name)); return string(b) }
	if read("new") != "jail new" || read("newdir/f") != "jail f" || read("both") != "host both" || read("both.jail-01234567") != "jail both" {
		t.Errorf("host after moving back: new %q, newdir/f %q, both %q, both.jail-01234567 %q", read("new"), read("newdir/f"), read("both"), read("both.jail-01234567"))
	}
	if read("a") != "jail a" {
		t.Errorf("the jail's rename over a, unchanged on the host, did not reach it: %q", read("a"))
	}
	if l, _ := os.Readlink(filepath.Join(v.Host, "l")); l != "/elsewhere" || read("l.jail-01234567") != "jail l" {
		t.Errorf("the host's own new l was replaced, or the jail's not kept beside: %q, %q", l, read("l.jail-01234567"))
	}
	if _, err := os.Lstat(filepath.Join(v.Host, "gone")); err == nil || read("kept") != "host rewrote it" {
		t.Errorf("a file removed inside: want it removed on the host unless the host changed it since (gone %v, kept %q)", err, read("kept"))
	}
	if read("settings.json") != "{}" || read(".credentials.json") != "{}" || read("m") != "masked" || read("d/inner") != "host inner" {
		t.Errorf("a host entry was replaced by its stub or by the jail's")
	}
	for _, name := range []string{"renamed-copy", "settings.local.json", ".other.json"} {
		if _, err := os.Lstat(filepath.Join(v.Host, name)); err == nil {
			t.Errorf("%s reached the host directory", name)
		}
	}
	if strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "created both, l meanwhile; the jail's kept beside as both.jail-01234567, l.jail-01234567") {
		t.Errorf("stderr: %q", stderr.String())
	}
	if _, err := os.Lstat(filepath.Dir(v.Dir)); err == nil {
		t.Errorf("the session's views were left: %s", filepath.Dir(v.Dir))
	}
}

// A killed jail's view is moved back by the next run; a running one's is
// left alone.
func TestRecoverSignInViews(t *testing.T) {
	plan, v := viewFixture(t)
	vs, _, err := prepareSignInViews(plan, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(v.Dir, "new"), []byte("jail new"), 0o600)
	recoverSignInViews(plan.StateDir, "another", &bytes.Buffer{})
	if _, err := os.Lstat(filepath.Join(v.Host, "new")); err == nil {
		t.Fatalf("the view of a jail still running was moved back")
	}
	vs.PID, vs.Start = 0, 0 // as left by a jail killed
	if err := vs.save(); err != nil {
		t.Fatal(err)
	}
	recoverSignInViews(plan.StateDir, "another", &bytes.Buffer{})
	if b, err := os.ReadFile(filepath.Join(v.Host, "new")); err != nil || string(b) != "jail new" {
		t.Errorf("the killed jail's new entry: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Dir(v.Dir)); err == nil {
		t.Errorf("the killed jail's views were left: %s", filepath.Dir(v.Dir))
	}
}
