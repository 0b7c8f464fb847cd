package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// snapshot lists every entry under dir with its mode, modification time
// and content hash: two equal snapshots mean nothing there changed.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d", strings.TrimPrefix(p, dir), fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s on the host: %v", dir, err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// jailGoCache asks the jail, run in dir, where its go build cache is: the
// project's own directory under ~/.cache/jail.
func jailGoCache(t *testing.T, s *Sandbox, dir string) string {
	t.Helper()
	r := s.JailIn(dir, "", "--", "go", "env", "GOCACHE")
	gc := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || filepath.Dir(filepath.Dir(gc)) != s.Home+"/.cache/jail" || filepath.Base(gc) != "go-build" {
		t.Fatalf("jail -- go env GOCACHE in %s: want ~/.cache/jail/PROJECT/go-build:\n%s", dir, r)
	}
	return gc
}

// writeTinyModule writes a Go module of two library packages: building it
// compiles only them (no standard library), so it is quick.
func writeTinyModule(s *Sandbox) {
	s.WriteFile(s.Project+"/go.mod", "module example.test/tiny\n\ngo 1.21\n", 0o644)
	s.WriteFile(s.Project+"/a/a.go", "package a\n\nfunc A() int { return 41 }\n", 0o644)
	s.WriteFile(s.Project+"/b/b.go", "package b\n\nimport \"example.test/tiny/a\"\n\nfunc B() int { return a.A() + 1 }\n", 0o644)
}

// TestCachesGoBuildCannotPoisonHost: an unjailed go build reuses what its
// build cache holds without checking it, so a jailed build must leave the
// host's cache byte for byte as it was, whether it builds normally, points
// GOCACHE back at the host's cache, or writes there itself; also with a
// trusted jail.json that makes the host's cache writable and points GOCACHE
// at it, where every write fails on a read-only cache. The jailed build
// still works, with a cache of its own that persists between runs.
func TestCachesGoBuildCannotPoisonHost(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		writeTinyModule(s)
		s.Env = []string{"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"}
		hostCache := s.Home + "/.cache/go-build"
		if out, code := s.HostOut(s.Project, "go", "build", "./..."); code != 0 {
			t.Fatalf("unjailed go build: %s", out)
		}
		before := snapshot(t, hostCache)
		if !strings.Contains(before, "-d ") {
			t.Fatalf("the unjailed build left no entries in %s:\n%s", hostCache, before)
		}

		r := s.Jail("--", "go", "build", "-x", "./...")
		if r.Code != 0 {
			t.Fatalf("jailed go build failed:\n%s", r)
		}
		if !strings.Contains(r.Stderr, "/compile") {
			t.Errorf("the first jailed build compiled nothing: it must not use the host's cache:\n%s", r)
		}
		r = s.Jail("--", "go", "build", "-x", "./...")
		if r.Code != 0 || strings.Contains(r.Stderr, "/compile") {
			t.Errorf("the second jailed build is not served from the jail's cache:\n%s", r)
		}
		if entries, err := os.ReadDir(jailGoCache(t, s, s.Project)); err != nil || len(entries) == 0 {
			t.Errorf("the jail's own build cache is missing or empty on the host: %v", err)
		}

		// From inside, at the host's cache: with the default policy it is
		// not there at all (what is written lands in the throwaway home).
		attack := `GOCACHE=$HOME/.cache/go-build go build -a ./...
mkdir -p ~/.cache/go-build/00 && echo poison > ~/.cache/go-build/00/poison-d && echo "wrote poison"
for f in ~/.cache/go-build/*/*-d; do echo poison > "$f" && echo "overwrote $f"; done
true`
		if r := s.Sh(attack); r.Code != 0 {
			t.Fatalf("the attack did not run:\n%s", r)
		}
		if after := snapshot(t, hostCache); after != before {
			t.Fatalf("a jailed command changed the host's build cache (default policy):\n%s", r)
		}

		// With a trusted jail.json that makes the host's cache writable
		// and points GOCACHE at it, it is read-only.
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"allowWrite": ["~/.cache/go-build"]}, "env": {"set": {"GOCACHE": "~/.cache/go-build"}}}`, 0o644)
		// (go skips a cache it cannot write: the build may succeed, it
		// must not have written.)
		r = s.Jail("--", "go", "build", "-a", "./...")
		if after := snapshot(t, hostCache); after != before {
			t.Fatalf("go build -a with env.set GOCACHE at the host's cache changed it:\n%s", r)
		}
		r = s.Sh(attack)
		if r.Code != 0 {
			t.Fatalf("the attack did not run:\n%s", r)
		}
		if strings.Contains(r.Stdout, "wrote poison") || strings.Contains(r.Stdout, "overwrote") {
			t.Errorf("a write into the host's build cache succeeded:\n%s", r)
		}
		if strings.Count(r.Stderr, "Read-only file system") < 2 {
			t.Errorf("the writes did not fail on a read-only cache:\n%s", r)
		}
		if after := snapshot(t, hostCache); after != before {
			t.Fatalf("a jailed command changed the host's build cache (allowWrite in jail.json):\n%s", r)
		}
		os.Remove(s.Project + "/jail.json")

		// The unjailed build still finds everything cached.
		if out, code := s.HostOut(s.Project, "go", "build", "-x", "./..."); code != 0 || strings.Contains(out, "/compile") {
			t.Errorf("the unjailed build after the jailed ones (exit %d) recompiled or failed:\n%s", code, out)
		}
	})
}

// TestCachesReadOnlyWhateverTheLayer: Maven's repository, pip's, uv's and
// Gradle's caches and cargo's extracted sources stay read-only even when a
// trusted jail.json or the user's config makes them writable, exactly, from
// a parent directory or below them; jail plan shows each re-bound read-only,
// and the host's files are untouched. A writable path next to them stays
// writable.
func TestCachesReadOnlyWhateverTheLayer(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		caches := []string{
			s.Home + "/.m2/repository", s.Home + "/.cache/pip", s.Home + "/.cargo/registry/src",
			s.Home + "/.gradle/caches", s.Home + "/.cache/uv",
		}
		for _, c := range caches {
			s.WriteFile(c+"/entry", "genuine\n", 0o644)
		}
		before := map[string]string{}
		for _, c := range caches {
			before[c] = snapshot(t, c)
		}
		// Exactly (~/.m2/repository), from the parent (~/.cache holds
		// pip's cache), from below (~/.cargo/registry/src under
		// ~/.cargo/registry, ~/.gradle/caches under ~/.gradle), and from
		// the user's own config (~/.cache/uv).
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"allowWrite": ["~/.m2/repository", "~/.cache", "~/.cargo/registry/src", "~/.gradle/caches"]}}`, 0o644)
		s.WriteFile(s.Home+"/.config/jail/config.json", `{"filesystem": {"allowWrite": ["~/.cache/uv"]}}`, 0o644)

		plan := s.Jail("plan", "--", "true")
		if plan.Code != 0 {
			t.Fatalf("jail plan:\n%s", plan)
		}
		for _, c := range caches {
			if !strings.Contains(plan.Stdout, "ro-bind    "+c+"  # read-only") {
				t.Errorf("jail plan does not show %s read-only:\n%s", c, plan.Stdout)
			}
		}

		script := `for d in "$@"; do
  echo poison > "$d/new" && echo "WROTE new in $d"
  echo poison > "$d/entry" && echo "WROTE entry in $d"
  rm -f "$d/entry" && [ ! -e "$d/entry" ] && echo "REMOVED entry in $d"
  mv "$d/entry" "$d/moved" 2>/dev/null && echo "MOVED entry in $d"
  chmod 0777 "$d/entry" && echo "CHMOD entry in $d"
  mkdir "$d/sub" && echo "MKDIR in $d"
done
mkdir -p ~/.cache/other && echo fine > ~/.cache/other/x && echo "control wrote"`
		r := s.Jail(append([]string{"--", "sh", "-c", script, "sh"}, caches...)...)
		if r.Code != 0 {
			t.Fatalf("the attack did not run:\n%s", r)
		}
		for _, verb := range []string{"WROTE", "REMOVED", "MOVED", "CHMOD", "MKDIR"} {
			if strings.Contains(r.Stdout, verb) {
				t.Errorf("a write into a host cache succeeded from inside:\n%s", r)
				break
			}
		}
		if n := strings.Count(r.Stderr, "Read-only file system"); n < 2*len(caches) {
			t.Errorf("the writes did not fail on read-only caches (%d read-only errors):\n%s", n, r)
		}
		if !strings.Contains(r.Stdout, "control wrote") {
			t.Errorf("the control write into writable ~/.cache failed: the jail.json was not applied:\n%s", r)
		}
		hostUnchanged(t, s.Home+"/.cache/other/x", "fine\n")
		for _, c := range caches {
			if after := snapshot(t, c); after != before[c] {
				t.Errorf("the host's %s changed:\n%s\nwant\n%s", c, after, before[c])
			}
		}
	})
}

// TestCachesToolchainsUseJailCaches: each toolchain run in the jail finds
// its cache variable pointed at a directory of the project's own jail,
// which jail created on the host, even when the host's environment points it at the
// host's cache; Maven gets its local repository through MAVEN_OPTS, with
// ~/ expanded after the '='.
func TestCachesToolchainsUseJailCaches(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		writeTinyModule(s)
		s.Env = []string{"GOTOOLCHAIN=local", "GOPROXY=off",
			"GOCACHE=" + s.Home + "/.cache/go-build", "GOMODCACHE=" + s.Home + "/go/pkg/mod", "PIP_CACHE_DIR=" + s.Home + "/.cache/pip"}
		jc := filepath.Dir(jailGoCache(t, s, s.Project))
		if !strings.HasPrefix(filepath.Base(jc), "project-") {
			t.Errorf("the project's jail caches %s are not named for the project", jc)
		}
		r := s.Jail("--", "go", "env", "GOCACHE", "GOMODCACHE")
		if r.Code != 0 || r.Stdout != jc+"/go-build\n"+jc+"/go-mod\n" {
			t.Errorf("jail -- go env GOCACHE GOMODCACHE: want the jail's own caches under %s:\n%s", jc, r)
		}
		r = s.Jail("--", "pip3", "cache", "dir")
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != jc+"/pip" {
			t.Errorf("jail -- pip3 cache dir: want %s/pip:\n%s", jc, r)
		}
		s.WriteFile(s.Project+"/pom.xml", `<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>`+
			`<groupId>test</groupId><artifactId>t</artifactId><version>1</version><packaging>pom</packaging></project>`+"\n", 0o644)
		r = s.Jail("--", "mvn", "-o", "-X", "validate")
		if r.Code != 0 || !strings.Contains(r.Stdout, "Using local repository at "+jc+"/m2/repository") {
			t.Errorf("jail -- mvn: want the local repository %s/m2/repository:\n%s", jc, r)
		}
		for _, d := range []string{"go-build", "go-mod", "pip", "m2"} {
			if fi, err := os.Stat(jc + "/" + d); err != nil || !fi.IsDir() {
				t.Errorf("jail did not create its own cache %s/%s on the host: %v", jc, d, err)
			}
		}
		for _, d := range []string{"/.cache/go-build", "/go/pkg/mod", "/.cache/pip", "/.m2"} {
			hostAbsent(t, s.Home+d)
		}
	})
}

// TestCachesLearningProposesNone: a learning run whose command writes into
// the host's caches proposes none of them and reports each kept read-only;
// the caches on disk are untouched; a cache of its own is proposed as usual.
// Learning go build proposes neither the host's caches nor the project's
// own jail caches.
func TestCachesLearningProposesNone(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		caches := []string{"/.cache/go-build", "/.m2/repository", "/.cargo/registry/src", "/.cache/pip", "/go/pkg/mod"}
		for _, c := range caches {
			s.WriteFile(s.Home+c+"/entry", "genuine\n", 0o644)
		}
		before := map[string]string{}
		for _, c := range caches {
			before[c] = snapshot(t, s.Home+c)
		}
		s.WriteFile(s.Project+"/poisoner", `#!/bin/sh
for d in "$@"; do echo poison > "$HOME$d/entry"; echo poison > "$HOME$d/new"; done
mkdir -p ~/.cache/newtool && echo x > ~/.cache/newtool/x
echo poisoner done
`, 0o755)
		r := s.Jail(append([]string{"--learning", "--", "./poisoner"}, caches...)...)
		if r.Code != 0 || !strings.Contains(r.Stdout, "poisoner done") {
			t.Fatalf("jail --learning -- ./poisoner:\n%s", r)
		}
		l := readLearned(t, learnedPath(s, "poisoner"), r)
		wantList(t, "filesystem.allowWrite", l.Filesystem.AllowWrite, []string{"~/.cache/newtool"}, l)
		for _, c := range caches {
			if !slices.ContainsFunc(l.Learned.KeptDenied, func(k string) bool {
				return strings.HasPrefix(k, "tried to write ~"+c+"/") && strings.HasSuffix(k, "kept read-only")
			}) {
				t.Errorf("the learned profile does not report the write under ~%s kept read-only:\n%s", c, l.raw)
			}
			if after := snapshot(t, s.Home+c); after != before[c] {
				t.Errorf("the learning run changed the host's ~%s", c)
			}
		}

		// go under its profile writes into the project's own jail caches:
		// the learned profile, which every project's go would get, does
		// not name them.
		writeTinyModule(s)
		s.Env = []string{"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"}
		r = s.Jail("--learning", "--", "go", "build", "./...")
		if r.Code != 0 {
			t.Fatalf("jail --learning -- go build:\n%s", r)
		}
		raw := hostFile(t, learnedPath(s, "go"))
		if strings.Contains(raw, "/.cache/jail") || strings.Contains(raw, `"~/.cache/go-build"`) {
			t.Errorf("the learned go profile names a build cache:\n%s", raw)
		}
	})
}

// TestCachesProjectsApart: jailed builds of two projects do not share a
// cache: a hostile project's jail can neither see nor change the caches
// another project's jailed builds use (a poisoned compiled package there
// would end up in a binary the user runs unjailed).
func TestCachesProjectsApart(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		writeTinyModule(s)
		s.Env = []string{"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"}
		other := s.Base + "/other"
		s.WriteFile(other+"/go.mod", "module example.test/other\n\ngo 1.21\n", 0o644)
		s.WriteFile(other+"/c/c.go", "package c\n\nfunc C() int { return 7 }\n", 0o644)
		if r := s.JailIn(other, "", "--", "go", "build", "./..."); r.Code != 0 {
			t.Fatalf("jailed go build of the other project:\n%s", r)
		}
		victim := jailGoCache(t, s, other)
		mine := jailGoCache(t, s, s.Project)
		if victim == mine {
			t.Fatalf("two projects share the jail's build cache %s", mine)
		}
		before := snapshot(t, victim)
		r := s.Jail("--", "sh", "-c", `ls "$1" >/dev/null 2>&1 && echo "SAW the other project's cache"; mkdir -p "$1/00" && echo poison > "$1/00/poison-d"; GOCACHE="$1" go build -a ./...; true`, "sh", victim)
		if r.Code != 0 {
			t.Fatalf("the attack did not run:\n%s", r)
		}
		if strings.Contains(r.Stdout, "SAW") {
			t.Errorf("a project's jail sees another project's build cache:\n%s", r)
		}
		if after := snapshot(t, victim); after != before {
			t.Errorf("a project's jail changed another project's build cache:\n%s", r)
		}
		// The go profile's own build in this project does not reach it either.
		if r := s.Jail("--", "go", "build", "-a", "./..."); r.Code != 0 {
			t.Fatalf("jailed go build:\n%s", r)
		}
		if after := snapshot(t, victim); after != before {
			t.Errorf("this project's jailed build changed the other project's build cache")
		}
	})
}
