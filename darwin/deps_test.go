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

// allowedImports is the generator's whole dependency policy: it is pure
// string building, so it reaches no process, no file and no Linux type.
var allowedImports = []string{"errors", "fmt", "path", "regexp", "slices", "strconv", "strings"}

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
			if !slices.Contains(allowedImports, p) {
				t.Errorf("%s imports %s; the generator may import only %v", name, p, allowedImports)
			}
		}
	}
}
