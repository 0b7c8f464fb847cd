package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail"
	"golang.org/x/sys/unix"
)

func TestParseShebang(t *testing.T) {
	long := "#!/" + strings.Repeat("x", 300)
	for _, tt := range []struct {
		in           string
		interp, arg  string
		hasArg, none bool
	}{
		{in: "#!/bin/sh\necho", interp: "/bin/sh"},
		{in: "#!/usr/bin/git push\n", interp: "/usr/bin/git", arg: "push", hasArg: true},
		{in: "#!  /usr/bin/env   node  \n", interp: "/usr/bin/env", arg: "node", hasArg: true},
		{in: "#!/usr/bin/env -S git push origin\n", interp: "/usr/bin/env", arg: "-S git push origin", hasArg: true},
		{in: "#!\t/bin/sh\t-e\t\n", interp: "/bin/sh", arg: "-e", hasArg: true},
		{in: "#!/bin/sh ", interp: "/bin/sh", hasArg: true}, // no newline: the NUL padding is an empty argument
		{in: "#!/bin/sh", interp: "/bin/sh"},                // no newline, NUL after the name
		{in: "#!gg push\n", interp: "gg", arg: "push", hasArg: true},
		{in: "#!/bin/sh\x00 push\n", interp: "/bin/sh"},               // the line ends at a NUL
		{in: "#!/bin/sh \x00push\n", interp: "/bin/sh", hasArg: true}, // an empty argument, as the kernel passes it
		{in: "#!\n", none: true},
		{in: "#!   \n", none: true},
		{in: "\x7fELF", none: true},
		{in: "#", none: true},
		{in: long, none: true}, // a name that may be cut off
		{in: "#!/bin/sh " + strings.Repeat("a", 300), interp: "/bin/sh", arg: strings.Repeat("a", 256-len("#!/bin/sh ")-1), hasArg: true},
	} {
		interp, arg, hasArg := parseShebang([]byte(tt.in))
		if tt.none {
			if interp != "" {
				t.Errorf("parseShebang(%q) = %q: want no interpreter", tt.in, interp)
			}
			continue
		}
		if interp != tt.interp || arg != tt.arg || hasArg != tt.hasArg {
			t.Errorf("parseShebang(%q) = %q, %q, %v; want %q, %q, %v", tt.in, interp, arg, hasArg, tt.interp, tt.arg, tt.hasArg)
		}
	}
}

// lookupPath opens path as the supervisor does and tells what it is.
func lookupPath(t *testing.T, p *programs, path string) execFile {
	t.Helper()
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	f, err := p.lookup(fd, &st)
	if err != nil {
		t.Fatalf("lookup %s: %v", path, err)
	}
	return f
}

func TestProgramsFindAndLookup(t *testing.T) {
	dir := t.TempDir()
	bin, project := filepath.Join(dir, "bin"), filepath.Join(dir, "project")
	write := func(path, content string) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write(filepath.Join(bin, "tool"), "\x7fELF the tool")
	write(filepath.Join(project, "scripts/deploy.sh"), "#!/bin/sh\necho deploying\n")
	write(filepath.Join(project, "deep/er/release"), "#!/bin/sh\necho releasing\n")
	write(filepath.Join(project, "node_modules/.bin/ship"), "#!/bin/sh\necho shipping\n")
	write(filepath.Join(project, "node_modules/pkg/release"), "#!/bin/sh\necho not the project's\n")
	write(filepath.Join(project, ".git/hooks/release"), "#!/bin/sh\necho not the project's either\n")

	p := newPrograms()
	p.find(jail.ParseCommandRules([]string{"tool push", "scripts/deploy.sh", "release", "ship"}), bin+":relative", project)

	for _, tt := range []struct{ path, want string }{
		{write(filepath.Join(dir, "copy-of-tool"), "\x7fELF the tool"), "tool"},
		{write(filepath.Join(dir, "d"), "#!/bin/sh\necho deploying\n"), "deploy.sh"},
		{write(filepath.Join(dir, "r"), "#!/bin/sh\necho releasing\n"), "release"},
		{write(filepath.Join(dir, "s"), "#!/bin/sh\necho shipping\n"), "ship"},
		{write(filepath.Join(dir, "t"), "\x7fELF the toot"), ""}, // same size, one byte off
		{write(filepath.Join(dir, "n"), "#!/bin/sh\necho not the project's\n"), ""},
		{write(filepath.Join(dir, "h"), "#!/bin/sh\necho not the project's either\n"), ""},
	} {
		if got := lookupPath(t, p, tt.path).program; got != tt.want {
			t.Errorf("%s is %q, want %q", filepath.Base(tt.path), got, tt.want)
		}
	}

	// A hard link is the program by its inode, even once the original
	// has changed; a copy is known by the content it had at start.
	link := filepath.Join(dir, "link")
	if err := os.Link(filepath.Join(project, "scripts/deploy.sh"), link); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(project, "scripts/deploy.sh"), "#!/bin/sh\necho changed\n")
	if got := lookupPath(t, p, link).program; got != "deploy.sh" {
		t.Errorf("a hard link of the changed original is %q, want deploy.sh", got)
	}
	if got := lookupPath(t, p, filepath.Join(dir, "d")).program; got != "deploy.sh" {
		t.Errorf("a copy of the original content is %q after the original changed, want deploy.sh", got)
	}
	if f := lookupPath(t, p, link); f.interp != "/bin/sh" || f.hasArg {
		t.Errorf("the #! line of %s: %+v", link, f)
	}
}

// A file is cached once it has settled, and a changed file is looked at
// again: its key changes.
func TestProgramsCache(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("the real tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := newPrograms()
	p.find(jail.ParseCommandRules([]string{"tool"}), dir, "")
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("not the tool!"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := lookupPath(t, p, f).program; got != "" || len(p.cache) != 0 {
		t.Fatalf("a fresh file: program %q, %d cached; want none cached", got, len(p.cache))
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(f, old, old) // mtime; ctime is now, so still not cached
	lookupPath(t, p, f)
	if len(p.cache) != 0 {
		t.Fatalf("a file whose ctime is now was cached")
	}
	p.cache = map[fileKey]execFile{}
	// Settled files are cached (ctime cannot be set back: wait it out).
	time.Sleep(settle + 100*time.Millisecond)
	lookupPath(t, p, f)
	if len(p.cache) != 1 {
		t.Fatalf("a settled file was not cached: %d entries", len(p.cache))
	}
	if err := os.WriteFile(f, []byte("the real tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := lookupPath(t, p, f).program; got != "tool" {
		t.Errorf("the file rewritten as the tool is %q, want tool (a stale cache entry?)", got)
	}
}

func TestSelfLink(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/proc/self/exe", "exe"},
		{"/proc/self/fd/3", "fd/3"},
		{"/proc/thread-self/fd/12", "fd/12"},
		{"/dev/fd/4", "fd/4"},
		{"/proc/self/fd/", ""},
		{"/proc/self/fd/3/x", ""},
		{"/proc/self/cwd/g", ""},
		{"/proc/self/root/usr/bin/git", ""},
		{"/usr/bin/git", ""},
	} {
		got, ok := selfLink(tt.in)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("selfLink(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}

func TestCommandOfInterpreter(t *testing.T) {
	deny := jail.ParseCommandRules([]string{"git push"})
	f := execFile{interp: "/usr/bin/git", arg: "push", hasArg: true}
	argv := interpreterArgv(f, "origin", []string{"origin", "main"})
	if got := strings.Join(argv, " "); got != "/usr/bin/git push origin main" {
		t.Fatalf("interpreterArgv = %q", got)
	}
	if denied, _ := jail.MatchCommand(commandOf("", f.interp, argv), deny, nil); !denied {
		t.Errorf("%v is not denied by git push", argv)
	}
	// A copy of git under another name is git by identity.
	if denied, _ := jail.MatchCommand(commandOf("git", "/tmp/g", []string{"g", "push"}), deny, nil); !denied {
		t.Errorf("a copy of git called g is not denied pushing")
	}
	if denied, _ := jail.MatchCommand(commandOf("git", "/tmp/g", []string{"g", "status"}), deny, nil); denied {
		t.Errorf("a copy of git called g is denied g status")
	}
}

// BenchmarkExecFile is the supervisor's work per exec of a settled file
// that is no denied program (/bin/true): resolving it in the root and
// looking it up, against the two stats of the path that were done before
// the file was resolved in the root.
func BenchmarkExecFile(b *testing.B) {
	s := newSupervisor([]string{"git push"}, nil, "", nil)
	s.findPrograms("/usr/bin:/bin", "")
	pid := os.Getpid()
	b.Run("resolve-in-root", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, errno := s.fileOf(pid, unix.AT_FDCWD, "/bin/true", false); errno != 0 {
				b.Fatal(errno)
			}
		}
	})
	b.Run("two-stats", func(b *testing.B) {
		var st unix.Stat_t
		p := "/proc/" + strconv.Itoa(pid) + "/root/bin/true"
		for i := 0; i < b.N; i++ {
			if _, err := os.Stat(p); err != nil {
				b.Fatal(err)
			}
			if err := unix.Stat(p, &st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestScriptCommand(t *testing.T) {
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(filepath.Join(project, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho deploying\n"
	for _, p := range []string{filepath.Join(project, "scripts/deploy.sh"), filepath.Join(dir, "ship")} {
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := newSupervisor([]string{"scripts/deploy.sh"}, nil, "", nil)
	s.findPrograms("", project)
	ship := filepath.Join(dir, "ship")
	for _, tt := range []struct{ argv, want string }{
		{"sh " + ship + " prod", "deploy.sh prod"},
		{"bash -e -x " + ship, "deploy.sh"},
		{"python3 -X opt " + ship + " a b", "deploy.sh a b"},
		{"sh -c " + ship, ""}, // a command string, not a file
		{"node -e x " + ship, ""},
		{"python3 -m mod " + ship, ""},
		{"perl -w " + ship, "deploy.sh"},
		{"sh a b c " + ship, ""}, // past the first three arguments
		{"cat " + ship, ""},      // not an interpreter
		{"sh", ""},
	} {
		got := strings.Join(s.scriptCommand(os.Getpid(), strings.Fields(tt.argv)), " ")
		if got != tt.want {
			t.Errorf("scriptCommand(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

// FuzzParseShebang: any first bytes give no interpreter or one word of
// the first line, and an argument without NUL.
func FuzzParseShebang(f *testing.F) {
	for _, s := range []string{"#!/bin/sh\n", "#!/usr/bin/env -S a b\n", "#! x\t\ty \n", "#!", "\x7fELF", "#!/bin/sh \x00x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		interp, arg, hasArg := parseShebang(b)
		if interp == "" {
			if hasArg || arg != "" {
				t.Fatalf("an argument without an interpreter: %q", b)
			}
			return
		}
		if !strings.HasPrefix(string(b), "#!") || strings.ContainsAny(interp, " \t\x00\n") || strings.ContainsAny(arg, "\x00\n") {
			t.Fatalf("parseShebang(%q) = %q, %q", b, interp, arg)
		}
		if !hasArg && arg != "" {
			t.Fatalf("an argument not flagged: %q", b)
		}
	})
}
