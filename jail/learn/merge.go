package learn

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jailsh/jail/jail/jsonc"
)

// Empty reports whether the profile has nothing to merge into a jail.json:
// no reads, writes or domains (Programs are informational).
func (p Profile) Empty() bool {
	return len(p.AllowRead) == 0 && len(p.AllowWrite) == 0 && len(p.Domains) == 0
}

// Merge adds a learned profile to the text of an existing jail.json (JSON
// with comments and trailing commas) and returns the new text. It is pure.
//
// The edit is jsonc.AppendStrings's, textual and minimal: comments, key
// order and formatting of everything else are kept. p.AllowRead goes to filesystem.allowRead,
// p.AllowWrite to filesystem.allowWrite, p.Domains to network.allow; new
// entries are appended in sorted order, one per line in an array written
// over several lines, inline in a one-line or empty array. A missing array
// or parent object is added as the last member of its parent, indented like
// the file's top-level members (two spaces when there are none).
//
// An entry already present (compared after decoding) is not added again; a
// read already writable is not added to allowRead; a write already readable
// is added to allowWrite and the allowRead entry left in place.
//
// Entries that are empty, hold a NUL byte or are not valid UTF-8 are an
// error. When nothing is added, existing is returned unchanged. An empty (or
// white-space only) existing gives a fresh document shaped like
// a fresh document with only the keys that have entries. Syntax errors carry line:column; a "filesystem" or
// "network" that is not an object, or a list key that is not a list, is an
// error naming the key path.
func Merge(existing []byte, p Profile) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if strings.Trim(string(existing), " \t\r\n") == "" {
		read, write, domains := additions(p, nil, nil, nil)
		if len(read)+len(write)+len(domains) == 0 {
			return existing, nil
		}
		return freshConfig(read, write, domains), nil
	}
	var have [3][]string
	for i, path := range [][]string{{"filesystem", "allowRead"}, {"filesystem", "allowWrite"}, {"network", "allow"}} {
		list, err := jsonc.Strings(existing, path...)
		if err != nil {
			return nil, err
		}
		have[i] = list
	}
	read, write, domains := additions(p, have[0], have[1], have[2])
	if len(read)+len(write)+len(domains) == 0 {
		return existing, nil
	}
	return jsonc.AppendStrings(existing,
		jsonc.Append{Path: []string{"filesystem", "allowRead"}, Vals: read},
		jsonc.Append{Path: []string{"filesystem", "allowWrite"}, Vals: write},
		jsonc.Append{Path: []string{"network", "allow"}, Vals: domains})
}

// check rejects entries a jail.json cannot hold or jail would refuse.
func (p Profile) check() error {
	for _, l := range []struct {
		name string
		list []string
	}{{"allowRead", p.AllowRead}, {"allowWrite", p.AllowWrite}, {"domains", p.Domains}} {
		for _, s := range l.list {
			switch {
			case strings.TrimSpace(s) == "":
				return fmt.Errorf("learned %s has an empty entry", l.name)
			case !utf8.ValidString(s):
				return fmt.Errorf("learned %s entry %q is not valid UTF-8, which a jail.json cannot hold", l.name, s)
			case strings.ContainsRune(s, 0):
				return fmt.Errorf("learned %s entry %q has a NUL byte", l.name, s)
			}
		}
	}
	return nil
}

// additions returns the sorted entries of p missing from the existing
// allowRead, allowWrite and network.allow lists.
func additions(p Profile, read, write, domains []string) (r, w, d []string) {
	have := func(lists ...[]string) map[string]bool {
		m := map[string]bool{}
		for _, l := range lists {
			for _, s := range l {
				m[s] = true
			}
		}
		return m
	}
	w = missing(p.AllowWrite, have(write))
	r = missing(p.AllowRead, have(read, write, w))
	d = missing(p.Domains, have(domains))
	return r, w, d
}

// missing returns the sorted, distinct entries of want not in have.
func missing(want []string, have map[string]bool) []string {
	var out []string
	for _, s := range sorted(want) {
		if !have[s] && (len(out) == 0 || out[len(out)-1] != s) {
			out = append(out, s)
		}
	}
	return out
}

// freshConfig is the jail.json Merge writes where there was none: only the
// keys that have entries, for a file the team will commit and read.
func freshConfig(read, write, domains []string) []byte {
	fs := map[string][]string{}
	if len(read) > 0 {
		fs["allowRead"] = read
	}
	if len(write) > 0 {
		fs["allowWrite"] = write
	}
	doc := map[string]any{}
	if len(fs) > 0 {
		doc["filesystem"] = fs
	}
	if len(domains) > 0 {
		doc["network"] = map[string][]string{"allow": domains}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // only strings: cannot fail
	}
	return append(b, '\n')
}
