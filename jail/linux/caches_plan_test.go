package linux

import (
	"slices"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestPlanKeepsCachesReadOnly: whatever a layer makes writable (the cache
// itself, a directory below it, a parent holding it), the plan re-binds the
// cache read-only after the writable bind; env.set pointing a toolchain back
// at the host's cache changes nothing; the jail's own caches stay writable.
func TestPlanKeepsCachesReadOnly(t *testing.T) {
	dir := PathInfo{Exists: true, Dir: true}
	extra := map[string]PathInfo{
		"/home/u/.m2/repository": dir, "/home/u/.cache": dir, "/home/u/.cache/pip": dir,
		"/home/u/.cache/go-build": dir, "/home/u/.cache/jail/go-build": dir,
		"/home/u/.cargo/registry/src": dir, "/home/u/.cargo/registry": dir,
		"/home/u/.gradle/caches": dir, "/home/u/go/pkg": dir, "/home/u/go/pkg/mod": dir,
	}
	pol := jail.Policy{
		ProjectRoot: "/home/u/proj",
		AllowWrite: []string{
			"/home/u/.m2/repository", "/home/u/.cache", "/home/u/.cargo/registry/src", "/home/u/.gradle/caches",
			"/home/u/go/pkg", "/home/u/.cache/jail/go-build",
		},
		Env:     jail.EnvConfig{Set: map[string]string{"GOCACHE": "~/.cache/go-build"}},
		Network: jail.NetworkConfig{Unknown: "deny"},
	}
	p, err := Build(&pol, fakeFacts(extra, nil), []string{"go", "build", "./..."})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for dest, op := range lastMounts(p) {
		last[dest] = op.Kind
	}
	for _, ro := range []string{
		"/home/u/.m2/repository", "/home/u/.cache/pip", "/home/u/.cache/go-build",
		"/home/u/.cargo/registry/src", "/home/u/.gradle/caches", "/home/u/go/pkg/mod",
	} {
		if last[ro] != "ro-bind" {
			t.Errorf("%s is not re-bound read-only (last op %q):\n%s", ro, last[ro], p)
		}
	}
	for _, rw := range []string{"/home/u/.cache", "/home/u/go/pkg"} {
		if last[rw] != "bind" {
			t.Errorf("%s should stay writable (last op %q)", rw, last[rw])
		}
	}
	if k := last["/home/u/.cache/jail/go-build"]; k != "" {
		t.Errorf("the jail's own cache, inside writable ~/.cache, was re-bound (%s)", k)
	}
	if !slices.Contains(p.Env.Env, "GOCACHE=/home/u/.cache/go-build") {
		t.Errorf("env.set GOCACHE was not expanded: %v", p.Env.Env)
	}
}
