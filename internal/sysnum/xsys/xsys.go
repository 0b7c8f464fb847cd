// Package xsys reads system call and errno numbers out of the source of
// golang.org/x/sys/unix for any architecture, so they can be compared or
// tabulated on a machine of another architecture. It is used by the
// generator of package sysnum and by the test that keeps its tables
// current; jail itself does not import it.
package xsys

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Dir returns the directory of the golang.org/x/sys module that the
// enclosing module requires, as the go command resolves it.
func Dir() (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		// go test runs the test binary with the toolchain's GOROOT.
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		return "", fmt.Errorf("locating golang.org/x/sys: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("locating golang.org/x/sys: not in the module cache (run go mod download)")
	}
	return dir, nil
}

// Syscalls returns the system calls of zsysnum_linux_GOARCH.go in the x/sys
// module at dir: SYS_OPENAT = 56 gives "openat": 56.
func Syscalls(dir, goarch string) (map[string]uint32, error) {
	file, err := parse(dir, "zsysnum_linux_"+goarch+".go")
	if err != nil {
		return nil, err
	}
	m := map[string]uint32{}
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, name := range v.Names {
				if !strings.HasPrefix(name.Name, "SYS_") || i >= len(v.Values) {
					continue
				}
				n, err := number(v.Values[i])
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", goarch, name.Name, err)
				}
				m[strings.ToLower(strings.TrimPrefix(name.Name, "SYS_"))] = n
			}
		}
	}
	if len(m) < 200 {
		return nil, fmt.Errorf("%s: only %d system calls found", goarch, len(m))
	}
	return m, nil
}

// Errnos returns the errors of the errorList in zerrors_linux_GOARCH.go
// in the x/sys module at dir: {1, "EPERM", ...} gives "EPERM": 1.
func Errnos(dir, goarch string) (map[string]uint32, error) {
	file, err := parse(dir, "zerrors_linux_"+goarch+".go")
	if err != nil {
		return nil, err
	}
	list := errorList(file)
	if list == nil {
		return nil, fmt.Errorf("%s: no errorList", goarch)
	}
	m := map[string]uint32{}
	for _, e := range list.Elts {
		entry, ok := e.(*ast.CompositeLit)
		if !ok || len(entry.Elts) < 2 {
			return nil, fmt.Errorf("%s: unexpected errorList entry", goarch)
		}
		n, err := number(entry.Elts[0])
		if err != nil {
			return nil, fmt.Errorf("%s: errorList: %w", goarch, err)
		}
		lit, ok := entry.Elts[1].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return nil, fmt.Errorf("%s: errorList: name is not a string", goarch)
		}
		name, err := strconv.Unquote(lit.Value)
		if err != nil {
			return nil, err
		}
		m[name] = n
	}
	return m, nil
}

func parse(dir, name string) (*ast.File, error) {
	path := filepath.Join(dir, "unix", name)
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return f, nil
}

func errorList(f *ast.File) *ast.CompositeLit {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if len(v.Names) == 1 && v.Names[0].Name == "errorList" && len(v.Values) == 1 {
				lit, _ := v.Values[0].(*ast.CompositeLit)
				return lit
			}
		}
	}
	return nil
}

// number evaluates an integer literal.
func number(e ast.Expr) (uint32, error) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return 0, fmt.Errorf("not an integer literal")
	}
	n, err := strconv.ParseUint(lit.Value, 0, 32)
	if err != nil {
		return 0, err
	}
	return uint32(n), nil
}
