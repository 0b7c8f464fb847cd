package darwin

import (
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// generatorFiles are the pure profile generator: string building only, so
// it reaches no process, no file and no Linux type.
var generatorFiles = []string{"glob.go", "profile.go", "system.go"}

// generatorImports is the generator's whole dependency policy.
var generatorImports = []string{"errors", "fmt", "path", "regexp", "slices", "strconv", "strings"}

// linuxOnly are the packages of the Linux jail: the macOS planner and
// runner share the neutral policy (jail) and the proxy, never these.
var linuxOnly = []string{"jail/linux", "jail/seccomp", "jail/inside", "bpf", "libseccomp", "landlock", "golang.org/x/sys/unix"}

func TestImports(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if slices.Contains(generatorFiles, name) && !slices.Contains(generatorImports, p) {
				t.Errorf("%s imports %s; the generator may import only %v", name, p, generatorImports)
			}
			for _, l := range linuxOnly {
				if strings.Contains(p, l) {
					t.Errorf("%s imports %s, a package of the Linux jail", name, p)
				}
			}
		}
	}
}
