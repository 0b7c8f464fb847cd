package learn_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/learn"
)

// updateGolden is learn_test.go's -update flag (both files build into one
// test binary; defining it twice would panic).
func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// learned is the testdata form of a Profile.
type learned struct {
	AllowRead  []string `json:"allowRead"`
	AllowWrite []string `json:"allowWrite"`
	Domains    []string `json:"domains"`
}

func readProfile(t *testing.T, path string) learn.Profile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l learned
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return learn.Profile{AllowRead: l.AllowRead, AllowWrite: l.AllowWrite, Domains: l.Domains}
}

func TestMergeGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "merge", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			existing, err := os.ReadFile(filepath.Join(dir, "existing.jsonc"))
			if err != nil {
				t.Fatal(err)
			}
			p := readProfile(t, filepath.Join(dir, "learned.json"))
			got, err := learn.Merge(existing, p)
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			wantFile := filepath.Join(dir, "want.jsonc")
			if updateGolden() {
				if err := os.WriteFile(wantFile, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Merge differs from %s (go test -update rewrites it):\n%s", wantFile, lineDiff(string(want), string(got)))
			}
			checkMerged(t, existing, got, p)
			if filepath.Base(dir) == "nothing-new" && !bytes.Equal(got, existing) {
				t.Errorf("nothing to add, but the file changed")
			}
		})
	}
}

// checkMerged asserts what holds for every successful merge: jail accepts
// the result, it holds every learned entry, merging again changes nothing,
// and a CRLF file keeps CRLF line endings.
func checkMerged(t *testing.T, existing, got []byte, p learn.Profile) {
	t.Helper()
	c, err := jail.ParseConfig(got, "jail.json")
	if err != nil {
		t.Fatalf("jail rejects the merged file: %v\n%s", err, got)
	}
	has := func(list []string, s string) bool {
		for _, e := range list {
			if e == s {
				return true
			}
		}
		return false
	}
	for _, s := range p.AllowRead {
		if !has(c.Filesystem.AllowRead, s) && !has(c.Filesystem.AllowWrite, s) {
			t.Errorf("read %q missing from the merged file", s)
		}
	}
	for _, s := range p.AllowWrite {
		if !has(c.Filesystem.AllowWrite, s) {
			t.Errorf("write %q missing from the merged file", s)
		}
	}
	for _, s := range p.Domains {
		if !has(c.Network.Allow, s) {
			t.Errorf("domain %q missing from the merged file", s)
		}
	}
	again, err := learn.Merge(got, p)
	if err != nil || !bytes.Equal(again, got) {
		t.Errorf("merging twice changes the file (err %v):\n%s", err, lineDiff(string(got), string(again)))
	}
	if bytes.Contains(existing, []byte("\r\n")) && strings.Count(string(got), "\n") != strings.Count(string(got), "\r\n") {
		t.Errorf("CRLF file gained bare LF line endings:\n%q", got)
	}
}

// lineDiff shows the lines from the first that differs.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var b strings.Builder
	b.WriteString("first difference at line " + strconv.Itoa(i+1) + "\n--- want\n")
	for _, l := range w[i:min(len(w), i+8)] {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("+++ got\n")
	for _, l := range g[i:min(len(g), i+8)] {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func TestMergeEmptyProfileUnchanged(t *testing.T) {
	for _, in := range []string{"", "  \n", "{}", "{\n  // x\n}\n"} {
		got, err := learn.Merge([]byte(in), learn.Profile{Programs: []string{"/usr/bin/git"}})
		if err != nil || string(got) != in {
			t.Errorf("Merge(%q, empty) = %q, %v; want it unchanged", in, got, err)
		}
	}
	if !(learn.Profile{Programs: []string{"/usr/bin/git"}}).Empty() {
		t.Errorf("a profile with only programs should be Empty")
	}
	if (learn.Profile{Domains: []string{"x.org"}}).Empty() {
		t.Errorf("a profile with a domain is not Empty")
	}
}

func TestMergeErrors(t *testing.T) {
	p := learn.Profile{AllowRead: []string{"~/.config/tool"}, AllowWrite: []string{"~/.cache/tool"}, Domains: []string{"example.org"}}
	tests := []struct {
		name, in, err string
		p             *learn.Profile // p when nil
	}{
		{"top-level list", `["a"]`, `1:1: a jail.json is an object such as {}, got a list`, nil},
		{"top-level string", `  "x"`, `1:3: a jail.json is an object such as {}, got a string`, nil},
		{"filesystem number", "{\n  \"filesystem\": 3\n}", `2:17: "filesystem" must be an object, got a number`, nil},
		{"network list", `{"network": []}`, `1:13: "network" must be an object, got a list`, nil},
		{"allowRead string", `{"filesystem": {"allowRead": "x"}}`, `1:30: "filesystem.allowRead" must be a list, got a string`, nil},
		{"allowWrite object", `{"filesystem": {"allowWrite": {}}}`, `"filesystem.allowWrite" must be a list, got an object`, nil},
		{"allow null", `{"network": {"allow": null}}`, `"network.allow" must be a list, got null`, nil},
		{"unterminated string", "{\n  \"filesystem\": {\"allowRead\": [\"~/x]}}\n}", `2:32: unterminated string`, nil},
		{"unterminated comment", "{ /* x", `1:3: unterminated /* comment`, nil},
		{"garbage", "garbage", `1:1: unexpected 'g', expected a value`, nil},
		{"trailing garbage", "{} x", `1:4: unexpected 'x' after the end of the document`, nil},
		{"missing comma", "{\"a\": 1 \"b\": 2}", `1:9: unexpected '"' in an object, expected ',' or '}'`, nil},
		{"unclosed object", `{"filesystem": {`, `1:17: unexpected end of file in an object`, nil},
		{"unclosed list", `{"network": {"allow": ["a"`, `unexpected end of file in a list`, nil},
		{"duplicate key", `{"network": {}, "network": {}}`, `1:17: duplicate key "network"`, nil},
		{"only a comment", "// nothing\n", `2:1: empty file`, nil},
		{"bad escape", `{"a": "\q"}`, `1:7: invalid string`, nil},
		{"bad number", `{"a": 1.2.3}`, `1:7: invalid number`, nil},
		{"too deep", strings.Repeat("[", 100), `nesting is too deep`, nil},
		{"unicode column", "{\"é\": 1,,}", `1:9: unexpected ','`, nil},
		{"empty entry", `{}`, `learned allowRead has an empty entry`, &learn.Profile{AllowRead: []string{" "}}},
		{"invalid UTF-8", ``, `learned allowWrite entry "\xff" is not valid UTF-8`, &learn.Profile{AllowWrite: []string{"\xff"}}},
		{"NUL", `{}`, `learned domains entry "a\x00" has a NUL byte`, &learn.Profile{Domains: []string{"a\x00"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pp := p
			if tt.p != nil {
				pp = *tt.p
			}
			got, err := learn.Merge([]byte(tt.in), pp)
			if err == nil {
				t.Fatalf("Merge(%q) = %q, want an error containing %q", tt.in, got, tt.err)
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Merge(%q) error = %q, want it to contain %q", tt.in, err, tt.err)
			}
		})
	}
}

// FuzzMerge checks that Merge never panics, that what it returns parses
// again and holds every learned entry, and that a file jail accepts stays
// one jail accepts.
func FuzzMerge(f *testing.F) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "merge", "*", "existing.jsonc"))
	for _, file := range dirs {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "~/.config/tool", "~/.cache/tool", "example.org")
	}
	f.Add([]byte(`{"filesystem": {"allowRead": ["~/a"]}}`), "~/a", "~/a", "a.b:8080")
	f.Add([]byte("{\r\n\t\"network\": {\r\n\t\t\"allow\": [\r\n\t\t\t\"x.org\",\r\n\t\t],\r\n\t},\r\n}\r\n"), "/opt/x", "", "x.org")
	f.Fuzz(func(t *testing.T, existing []byte, read, write, domain string) {
		p := learn.Profile{AllowRead: []string{read, "~/.config/zz"}, AllowWrite: []string{write}, Domains: []string{domain}}
		out, err := learn.Merge(existing, p)
		if _, perr := learn.Merge([]byte("{}"), p); perr != nil {
			if err == nil {
				t.Fatalf("Merge accepts the profile in one file but not in {}: %v", perr)
			}
			return // entries a jail.json cannot hold
		}
		_, existingErr := jail.ParseConfig(existing, "jail.json")
		_, profileErr := jail.ParseConfig(p.JSON(), "learned.json")
		if err != nil {
			if existingErr == nil {
				t.Fatalf("jail accepts the file but Merge fails: %v", err)
			}
			return
		}
		again, err := learn.Merge(out, p)
		if err != nil {
			t.Fatalf("merged output does not parse again: %v\n%q", err, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("merging twice changes the file:\n%q\n%q", out, again)
		}
		if len(bytes.Trim(existing, " \t\r\n")) > 0 {
			checkEntries(t, out, p)
		}
		if existingErr == nil && profileErr == nil {
			if _, err := jail.ParseConfig(out, "jail.json"); err != nil {
				t.Fatalf("jail accepted the file but rejects the merged one: %v\n%q\n%q", err, existing, out)
			}
		}
	})
}

// checkEntries decodes out as plain JSON once comments and trailing commas
// are gone and checks that every learned entry is in it.
func checkEntries(t *testing.T, out []byte, p learn.Profile) {
	t.Helper()
	var doc struct {
		Filesystem struct {
			AllowRead  []any `json:"allowRead"`
			AllowWrite []any `json:"allowWrite"`
		} `json:"filesystem"`
		Network struct {
			Allow []any `json:"allow"`
		} `json:"network"`
	}
	plain := stripJSONC(out)
	if err := json.Unmarshal(plain, &doc); err != nil {
		t.Fatalf("merged output is not JSONC: %v\n%q\nstripped: %q", err, out, plain)
	}
	has := func(list []any, s string) bool {
		for _, e := range list {
			if e == s {
				return true
			}
		}
		return false
	}
	for _, s := range p.AllowWrite {
		if !has(doc.Filesystem.AllowWrite, s) {
			t.Fatalf("write %q missing from %q", s, out)
		}
	}
	for _, s := range p.AllowRead {
		if !has(doc.Filesystem.AllowRead, s) && !has(doc.Filesystem.AllowWrite, s) {
			t.Fatalf("read %q missing from %q", s, out)
		}
	}
	for _, s := range p.Domains {
		if !has(doc.Network.Allow, s) {
			t.Fatalf("domain %q missing from %q", s, out)
		}
	}
}

// stripJSONC drops comments, trailing commas and a byte order mark, turning
// JSONC into JSON.
func stripJSONC(src []byte) []byte {
	src = bytes.TrimPrefix(src, []byte("\xEF\xBB\xBF"))
	var out []byte
	comma := -1 // index in out of a ',' not yet followed by a value
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j, len(src)-1)
			out = append(out, src[i:j+1]...)
			i = j
			comma = -1
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			out = append(out, '\n')
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 3
			out = append(out, ' ')
		case c == ',':
			comma = len(out)
			out = append(out, c)
		case c == ']' || c == '}':
			if comma >= 0 {
				out[comma] = ' '
			}
			comma = -1
			out = append(out, c)
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			out = append(out, c)
		default:
			comma = -1
			out = append(out, c)
		}
	}
	return out
}
