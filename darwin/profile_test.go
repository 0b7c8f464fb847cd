package darwin

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The paths hold every byte that could break out of an SBPL string or a
// regex if they were spliced in: quotes, parentheses, a semicolon, regex
// metacharacters and a space.
const (
	project = `/Users/al "x" (y);z/src/a.b+c[d]`
	home    = `/Users/al "x" (y);z`
)

func defaultPolicy() Policy {
	return Policy{
		Project:   project,
		Home:      home,
		Read:      []string{home + "/.config/gh", home + "/.gitconfig"},
		Write:     []string{home + "/.npm", "/private/var/folders/ab/T/jail-1"},
		DenyRead:  []string{project + "/.env"},
		Protected: []string{project + "/.git", project + "/.git/hooks", project + "/jail.json", home + "/.ssh"},
		ProxyPort: 41234,
	}
}

func globPolicy() Policy {
	p := defaultPolicy()
	p.DenyRead = append(p.DenyRead, home+"/.aws")
	p.DenyGlobs = []Glob{{project, "**/.env*"}, {project, "secrets/**"}, {"/", "**/.netrc"}}
	p.ProtectedGlobs = []Glob{{project, ".git/modules/*"}, {project, "**/jail.json"}, {project, ".claude/settings*.json"}}
	return p
}

func publishedPolicy() Policy {
	p := defaultPolicy()
	p.Published = []int{8080, 3000, 3000}
	return p
}

// widenedPolicy forwards host ports and allows reads and writes by pattern.
func widenedPolicy() Policy {
	p := defaultPolicy()
	p.Forward = []int{5432, 6379}
	p.ReadGlobs = []Glob{{home, ".config/tool-*"}}
	p.WriteGlobs = []Glob{{home, ".cache/*/jail"}}
	return p
}

// offlinePolicy has no network at all.
func offlinePolicy() Policy {
	p := defaultPolicy()
	p.ProxyPort = 0
	return p
}

func TestGolden(t *testing.T) {
	for name, pol := range map[string]Policy{
		"default":   defaultPolicy(),
		"globs":     globPolicy(),
		"published": publishedPolicy(),
		"widened":   widenedPolicy(),
		"offline":   offlinePolicy(),
	} {
		t.Run(name, func(t *testing.T) {
			prof, err := Generate(pol)
			if err != nil {
				t.Fatal(err)
			}
			validate(t, pol, prof)
			assertNoPathParts(t, pol, prof.Text)
			got := render(prof)
			file := filepath.Join("testdata", name+".sb")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test ./darwin -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the generated profile:\n%s", file, lineDiff(string(want), string(got)))
			}
		})
	}
}

// render is the golden form: the parameters as comments, then the profile.
func render(p Profile) []byte {
	var b bytes.Buffer
	for _, prm := range p.Params {
		fmt.Fprintf(&b, ";; -D %s=%s\n", prm.Name, prm.Value)
	}
	b.WriteString(p.Text)
	return b.Bytes()
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n-%s\n+%s\n", i+1, wl, gl)
		}
	}
	return b.String()
}

func TestDeterministic(t *testing.T) {
	a, _ := Generate(globPolicy())
	pol := globPolicy()
	slices.Reverse(pol.DenyRead)
	slices.Reverse(pol.DenyGlobs)
	slices.Reverse(pol.ProtectedGlobs)
	slices.Reverse(pol.Protected)
	slices.Reverse(pol.Write)
	b, _ := Generate(pol)
	if a.Text != b.Text || !slices.Equal(a.Params, b.Params) {
		t.Error("the order of policy entries changed the profile")
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"relative project", func(p *Policy) { p.Project = "src" }, "clean absolute"},
		{"dotdot write", func(p *Policy) { p.Write = []string{"/a/../b"} }, "clean absolute"},
		{"newline read", func(p *Policy) { p.Read = []string{"/a\n(allow default)"} }, "clean absolute"},
		{"negative proxy", func(p *Policy) { p.ProxyPort = -1 }, "proxy port"},
		{"bad published", func(p *Policy) { p.Published = []int{70000} }, "port 70000"},
		{"bad forward", func(p *Policy) { p.Forward = []int{0} }, "port 0"},
		{"bad read glob", func(p *Policy) { p.ReadGlobs = []Glob{{"/p", "[a^b]"}} }, "allowRead"},
		{"bad write glob", func(p *Policy) { p.WriteGlobs = []Glob{{"/p", "../x"}} }, "allowWrite"},
		{"class with caret", func(p *Policy) { p.DenyGlobs = []Glob{{"/p", "[a^b]"}} }, "character class"},
		{"unterminated class", func(p *Policy) { p.ProtectedGlobs = []Glob{{"/p", "[ab"}} }, "unterminated"},
		{"absolute pattern", func(p *Policy) { p.DenyGlobs = []Glob{{"/p", "/etc/*"}} }, "relative pattern"},
		{"dotdot pattern", func(p *Policy) { p.DenyGlobs = []Glob{{"/p", "../*"}} }, "segment"},
		{"newline pattern", func(p *Policy) { p.DenyGlobs = []Glob{{"/p", "a\n(allow default)"}} }, "relative pattern"},
		{"relative glob dir", func(p *Policy) { p.DenyGlobs = []Glob{{"p", "*"}} }, "absolute directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := defaultPolicy()
			tc.edit(&pol)
			_, err := Generate(pol)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestGlobRegex checks the regex of a glob against paths it must and must
// not match, with Go's regexp standing in for Seatbelt's (the generated
// expressions use only the POSIX extended subset both read alike).
func TestGlobRegex(t *testing.T) {
	for _, tc := range []struct {
		glob    Glob
		match   []string
		noMatch []string
	}{
		{Glob{"/p", "**/.env*"}, []string{"/p/.env", "/p/a/b/.env.local"}, []string{"/p/x.env", "/q/.env", "/p/.en"}},
		{Glob{"/p", "secrets/**"}, []string{"/p/secrets", "/p/secrets/a/b"}, []string{"/p/secretsx", "/p/secret"}},
		{Glob{"/a.b", "*.json"}, []string{"/a.b/x.json"}, []string{"/aXb/x.json", "/a.b/d/x.json", "/a.b/xjson"}},
		{Glob{"/p", "?"}, []string{"/p/a"}, []string{"/p/ab", "/p//"}},
		{Glob{"/p", "[a-c]x"}, []string{"/p/bx"}, []string{"/p/dx", "/p/-x"}},
		{Glob{"/p", "[^a]"}, []string{"/p/b"}, []string{"/p/a", "/p//"}},
		{Glob{"/", "**/.netrc"}, []string{"/.netrc", "/u/h/.netrc"}, []string{"/u/h/x.netrc"}},
		// A directory full of metacharacters matches only itself.
		{Glob{"/(x)+|$/[d]*", "*"}, []string{"/(x)+|$/[d]*/y"}, []string{"/x/y", "/xx/d/y", "/(x)+|$/d/y"}},
	} {
		re, err := tc.glob.regex(false)
		if err != nil {
			t.Fatalf("%s: %v", tc.glob, err)
		}
		rx := regexp.MustCompile(re)
		for _, p := range tc.match {
			if !rx.MatchString(p) {
				t.Errorf("%s (%s) does not match %s", tc.glob, re, p)
			}
		}
		for _, p := range tc.noMatch {
			if rx.MatchString(p) {
				t.Errorf("%s (%s) matches %s", tc.glob, re, p)
			}
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	pol := globPolicy()
	for b.Loop() {
		if _, err := Generate(pol); err != nil {
			b.Fatal(err)
		}
	}
}

// TestArgs checks the sandbox-exec command line: each parameter as its own
// -D argument (so a value with spaces or quotes stays one argument), the
// profile text after -p, and the command after "--" so a command starting
// with "-" is not read as an option.
func TestArgs(t *testing.T) {
	prof, err := Generate(defaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	args := prof.Args([]string{"-x", "y"})
	n := 2 * len(prof.Params)
	for i, prm := range prof.Params {
		if args[2*i] != "-D" || args[2*i+1] != prm.Name+"="+prm.Value {
			t.Fatalf("argument %d: got %q %q, want -D %s=%s", 2*i, args[2*i], args[2*i+1], prm.Name, prm.Value)
		}
	}
	want := []string{"-p", prof.Text, "--", "-x", "y"}
	if !slices.Equal(args[n:], want) {
		t.Errorf("tail of the arguments: got %q, want %q", args[n:], want)
	}
	if !strings.Contains(strings.Join(args, "\n"), "PROJECT_0="+project) {
		t.Error("the project is not passed as a parameter")
	}
}

// FuzzGenerate: whatever bytes the paths and the pattern hold, Generate
// either refuses or gives a profile that passes the validator.
func FuzzGenerate(f *testing.F) {
	f.Add(project, home, "**/.env*", 41234)
	f.Add("/p", "/h", "[a-c]?/x", 1)
	f.Fuzz(func(t *testing.T, proj, hom, pattern string, port int) {
		pol := Policy{
			Project:        proj,
			Home:           hom,
			DenyRead:       []string{proj + "/.env"},
			DenyGlobs:      []Glob{{proj, pattern}},
			Protected:      []string{proj + "/.git"},
			ProtectedGlobs: []Glob{{hom, pattern}},
			ProxyPort:      port,
		}
		prof, err := Generate(pol)
		if err != nil {
			return
		}
		validate(t, pol, prof)
	})
}
