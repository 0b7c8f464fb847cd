package jail

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseConfig checks that ParseConfig never panics, that every error is
// a *ConfigError pointing inside the input, and that a parsed config
// survives a round trip through encoding/json.
//
// Seeds: testdata/fuzz/FuzzParseConfig (every key and the tricky syntax)
// plus the documents below.
//
//	go test -run XXX -fuzz FuzzParseConfig -fuzztime 60s ./jail/
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		specExampleJSONC,
		usersOneLiner,
		`{}`,
		"\xef\xbb\xbf// c\n{/* c */\"extends\": [\"a\",],}",
		`{"network": {"allow": ["x.com:443", "*.x.com", "[::1]:8080"], "unknown": "allow", "hosts": {"a.test": "127.0.0.1:1"}}}`,
		// Patterns the matcher cannot honour: each must be a positioned error.
		`{"filesystem": {"denyRead": ["secrets/[a-"]}}`,
		"{\n\"filesystem\": {\"denyWrite\": [\"ok\", \"foo**\"]}}",
		`{"filesystem": {"allowRead": ["src/*/../x"], "allowWrite": ["/*"]}}`,
		`{"secrets": {"files": ["[!.]env", "a*\\"]}}`,
		`{"filesystem": {"denyRead": ["[z-a]", "[^]", "x/**y"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz.json")
		if err != nil {
			checkConfigError(t, data, err)
			return
		}
		if c == nil {
			t.Fatalf("ParseConfig(%q) returned neither a config nor an error", data)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("json.Marshal(%+v): %v", *c, err)
		}
		// encoding/json writes unset lists and maps as null, which
		// ParseConfig refuses (reported; see TestConfigJSONMarshalRoundTrip).
		// Drop the nulls so that the rest of the round trip is still checked.
		out = dropJSONNulls(t, out)
		c2, err := ParseConfig(out, "fuzz.json")
		if err != nil {
			t.Fatalf("the re-marshalled config does not parse: %v\ninput:       %q\nre-marshalled: %s", err, data, out)
		}
		if !configsEqual(*c, *c2) {
			t.Fatalf("round trip changed the config\ninput: %q\n first: %+v\nsecond: %+v", data, *c, *c2)
		}
	})
}

// checkConfigError asserts the one error shape users see: a *ConfigError naming the
// file, with a 1-based line and column inside the input, on one line.
func checkConfigError(t *testing.T, data []byte, err error) {
	t.Helper()
	ce, ok := err.(*ConfigError)
	if !ok {
		t.Fatalf("ParseConfig(%q) error %v is a %T, want *ConfigError", data, err, err)
	}
	if ce.File != "fuzz.json" {
		t.Fatalf("ParseConfig(%q): error names file %q, want fuzz.json", data, ce.File)
	}
	lines := bytes.Split(data, []byte("\n"))
	if ce.Line < 1 || ce.Col < 1 || ce.Line > len(lines) {
		t.Fatalf("ParseConfig(%q): error %v at line %d col %d, outside the input's %d lines", data, err, ce.Line, ce.Col, len(lines))
	}
	if n := utf8.RuneCount(lines[ce.Line-1]); ce.Col > n+1 {
		t.Fatalf("ParseConfig(%q): error %v at col %d, but line %d has %d characters", data, err, ce.Col, ce.Line, n)
	}
	if ce.Msg == "" || strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("ParseConfig(%q): error %q is empty or not one line", data, err)
	}
}

// dropJSONNulls removes members whose value is null from a JSON document.
func dropJSONNulls(t *testing.T, data []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", data, err)
	}
	var drop func(any)
	drop = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if e == nil {
					delete(v, k)
				} else {
					drop(e)
				}
			}
		case []any:
			for _, e := range v {
				drop(e)
			}
		}
	}
	drop(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refMatchPath is a slow, obviously correct MatchPath: "**" matches zero or
// more segments, other segments as in filepath.Match; memoized, so it is
// polynomial however many "**" there are.
func refMatchPath(pattern, path string) bool {
	pat := strings.Split(strings.Trim(pattern, "/"), "/")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	memo := map[[2]int]bool{}
	var m func(i, j int) bool
	m = func(i, j int) bool {
		if i == len(pat) {
			return j == len(segs)
		}
		key := [2]int{i, j}
		if r, ok := memo[key]; ok {
			return r
		}
		var r bool
		if pat[i] == "**" {
			r = m(i+1, j) || j < len(segs) && m(i, j+1)
		} else if j < len(segs) {
			// A segment without glob characters is literal: a backslash
			// in a path is a file name character, not an escape.
			ok, err := pat[i] == segs[j], error(nil)
			if HasMeta(pat[i]) {
				ok, err = filepath.Match(pat[i], segs[j])
			}
			r = err == nil && ok && m(i+1, j+1)
		}
		memo[key] = r
		return r
	}
	return m(0, 0)
}

// matchPathWithin runs MatchPath with a deadline, so that exponential
// backtracking shows up as a failure instead of a hung fuzzer.
func matchPathWithin(t *testing.T, pattern, path string, d time.Duration) bool {
	t.Helper()
	done := make(chan bool, 1)
	go func() { done <- MatchPath(pattern, path) }()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		t.Fatalf("MatchPath(%q, %q) did not finish in %v", pattern, path, d)
		return false
	}
}

// FuzzMatchPath checks that MatchPath never panics or hangs, agrees with
// refMatchPath, and that a pattern without meta characters (per HasMeta)
// matches exactly the path it spells.
//
//	go test -run XXX -fuzz FuzzMatchPath -fuzztime 20s ./jail/
func FuzzMatchPath(f *testing.F) {
	for _, s := range [][2]string{
		{"/p/secrets/**", "/p/secrets"},
		{"/p/**/*.pem", "/p/key.pem"},
		{"/p/**/*.pem", "/p/a/b/key.pem"},
		{"/p/.env.*", "/p/.env.local"},
		{"/p/[a-c]?/**/x", "/p/b1/x"},
		{"/home/u/.ssh/**", "/home/u/.ssh/id_ed25519"},
		{"/p/.env", "/p/.env"},
		{"/**/**/a/**", "/a"},
		{"/p/[^x]*", "/p/y"},
		{"/p/a\\*b", "/p/a*b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if len(pattern) > 512 || len(path) > 512 {
			return // long inputs only slow the reference down
		}
		got := matchPathWithin(t, pattern, path, time.Second)
		if want := refMatchPath(pattern, path); got != want {
			t.Fatalf("MatchPath(%q, %q) = %v, reference says %v", pattern, path, got, want)
		}
		if !HasMeta(pattern) {
			want := strings.Trim(pattern, "/") == strings.Trim(path, "/")
			if got != want {
				t.Fatalf("literal pattern: MatchPath(%q, %q) = %v, want %v", pattern, path, got, want)
			}
			if !matchPathWithin(t, pattern, pattern, time.Second) {
				t.Fatalf("literal pattern %q does not match itself", pattern)
			}
		}
		base := GlobBase(pattern)
		if HasMeta(base) {
			t.Fatalf("GlobBase(%q) = %q has meta characters", pattern, base)
		}
		// The walk that expands a glob starts at its base, so every match
		// of a clean absolute pattern must be under the base.
		clean := func(p string) bool { return strings.HasPrefix(p, "/") && filepath.Clean(p) == p }
		if got && clean(pattern) && clean(path) && !Under(path, base) {
			t.Fatalf("MatchPath(%q, %q) is true but the path is not under GlobBase = %q", pattern, path, base)
		}
	})
}

// FuzzCheckPattern checks that CheckPattern never panics and that a
// pattern it accepts is one MatchPath honours: no segment makes
// filepath.Match fail (which MatchPath would read as "no match"), and "**"
// appears only as a whole segment.
//
//	go test -run XXX -fuzz FuzzCheckPattern -fuzztime 20s ./jail/
func FuzzCheckPattern(f *testing.F) {
	for _, s := range [][2]string{
		{"secrets/[a-", "secrets/a"},
		{"foo**", "foo"},
		{"[!.]*", "!x"},
		{"a*\\", "ab"},
		{"[\\]]x", "]x"},
		{"[^a-c]?", "dz"},
		{"**/*.pem", "a/b.pem"},
		{"x/[a-z0-9_]*.key", "x/k.key"},
		{"[\\", "a"},
		{"[]a]", "a"},
		{"[é-ü]", "ö"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if CheckPattern(pattern) != nil || !HasMeta(pattern) {
			return
		}
		for _, seg := range strings.Split(pattern, "/") {
			if seg != "**" && strings.Contains(seg, "**") {
				t.Fatalf("CheckPattern(%q) accepted %q, which has \"**\" inside a segment", pattern, seg)
			}
			if !HasMeta(seg) {
				continue
			}
			for _, n := range []string{name, seg, "", "a", "!", "-", "]", "\\"} {
				if _, err := filepath.Match(seg, n); err != nil {
					t.Fatalf("CheckPattern(%q) accepted segment %q, but filepath.Match(%q, %q): %v", pattern, seg, seg, n, err)
				}
			}
		}
	})
}
