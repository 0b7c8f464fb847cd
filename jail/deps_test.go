package jail

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// listedPackage is what `go list -json` says of one package.
type listedPackage struct {
	ImportPath string
	Imports    []string
}

// goTool is the go command that runs the tests.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the dependency policy needs the go command: none on PATH nor at %s", p)
	}
	return p
}

// importGraph lists pkg and everything it depends on when built for goos
// (test files left out), as package -> its imports.
func importGraph(t *testing.T, goos, pkg string) map[string][]string {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-deps", "-json=ImportPath,Imports", pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED="+map[bool]string{true: "1", false: "0"}[goos == runtime.GOOS])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s for %s: %v\n%s", pkg, goos, err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list %s for %s: %v", pkg, goos, err)
		}
		graph[p.ImportPath] = p.Imports
	}
	return graph
}

// pathTo is the chain of imports from root to the first package that
// forbidden matches, or nil.
func pathTo(graph map[string][]string, root string, forbidden func(string) bool) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range graph[p] {
			if _, seen := prev[q]; seen {
				continue
			}
			prev[q] = p
			if forbidden(q) {
				var chain []string
				for at := q; at != ""; at = prev[at] {
					chain = append([]string{at}, chain...)
				}
				return chain
			}
			queue = append(queue, q)
		}
	}
	return nil
}

// inPackage reports whether an import path is pkg or inside it.
func inPackage(path, pkg string) bool { return path == pkg || strings.HasPrefix(path, pkg+"/") }

// TestDependencyPolicy is a statement of policy: the resolved policy is
// platform-neutral, and the Linux planner and the Seatbelt generator are
// siblings built on it. So the policy package reaches nothing of the Linux
// jail (its planner, init, seccomp filter, eBPF probes, Landlock), on Linux
// as on macOS, and neither planner reaches the other.
func TestDependencyPolicy(t *testing.T) {
	const (
		mod    = "github.com/jailsh/jail"
		policy = mod + "/jail"
		linux  = mod + "/jail/linux"
		darwin = mod + "/darwin"
	)
	linuxOnly := []string{linux, mod + "/bpf", "github.com/seccomp/libseccomp-golang", "github.com/landlock-lsm/go-landlock", "github.com/cilium/ebpf"}
	rules := []struct {
		root      string
		forbidden []string
	}{
		{policy, linuxOnly},
		{linux, []string{darwin}},
		{darwin, linuxOnly},
	}
	for _, goos := range []string{"linux", "darwin"} {
		for _, r := range rules {
			graph := importGraph(t, goos, r.root)
			if _, ok := graph[r.root]; !ok {
				t.Fatalf("GOOS=%s: go list did not list %s", goos, r.root)
			}
			for _, f := range r.forbidden {
				if chain := pathTo(graph, r.root, func(p string) bool { return inPackage(p, f) }); chain != nil {
					t.Errorf("GOOS=%s: %s must not depend on %s, but imports it: %s", goos, r.root, f, strings.Join(chain, " -> "))
				}
			}
		}
		// The policy calls the kernel through the standard library only:
		// the raw system-call package is the Linux apply's.
		for _, imp := range importGraph(t, goos, policy)[policy] {
			if imp == "golang.org/x/sys/unix" {
				t.Errorf("GOOS=%s: %s imports golang.org/x/sys/unix: %s -> %s; use the standard library, or move the code to the Linux apply", goos, policy, policy, imp)
			}
		}
	}
}
