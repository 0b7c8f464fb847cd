package learn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
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
// The edit is textual and minimal: comments, key order and formatting of
// everything else are kept. p.AllowRead goes to filesystem.allowRead,
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
	root, err := jsonc.Parse(existing)
	if err != nil {
		if se, ok := err.(*jsonc.SyntaxError); ok {
			return nil, errAt(existing, se.Off, "%s", se.Msg)
		}
		return nil, err
	}
	if root.Kind != jsonc.Object {
		return nil, errAt(existing, root.Start, "a jail.json is an object such as {}, got %s", root.Kind)
	}
	fs, err := child(existing, root, "filesystem", jsonc.Object)
	if err != nil {
		return nil, err
	}
	network, err := child(existing, root, "network", jsonc.Object)
	if err != nil {
		return nil, err
	}
	allowRead, err := child(existing, fs, "filesystem.allowRead", jsonc.Array)
	if err != nil {
		return nil, err
	}
	allowWrite, err := child(existing, fs, "filesystem.allowWrite", jsonc.Array)
	if err != nil {
		return nil, err
	}
	allow, err := child(existing, network, "network.allow", jsonc.Array)
	if err != nil {
		return nil, err
	}

	read, write, domains := additions(p, strs(allowRead), strs(allowWrite), strs(allow))
	if len(read)+len(write)+len(domains) == 0 {
		return existing, nil
	}

	e := &editor{src: existing, nl: newline(existing), unit: indentUnit(existing, root)}
	var fsNew, netNew, rootNew []newMember
	for _, t := range []struct {
		arr  *jsonc.Node
		key  string
		vals []string
		into *[]newMember
	}{
		{allowRead, "allowRead", read, &fsNew},
		{allowWrite, "allowWrite", write, &fsNew},
		{allow, "allow", domains, &netNew},
	} {
		switch {
		case len(t.vals) == 0:
		case t.arr != nil:
			e.appendItems(t.arr, t.vals)
		default:
			*t.into = append(*t.into, newMember{key: t.key, items: t.vals})
		}
	}
	rootMulti := e.multiline(root)
	for _, t := range []struct {
		obj  *jsonc.Node
		key  string
		mems []newMember
	}{
		{fs, "filesystem", fsNew},
		{network, "network", netNew},
	} {
		switch {
		case len(t.mems) == 0:
		case t.obj != nil:
			e.addMembers(t.obj, t.mems, rootMulti)
		default:
			rootNew = append(rootNew, newMember{key: t.key, members: t.mems})
		}
	}
	if len(rootNew) > 0 {
		e.addMembers(root, rootNew, true)
	}
	return e.apply(), nil
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

// child returns the member key of obj (nil when obj or the member is
// missing) after checking its kind; path names it in errors.
func child(src []byte, obj *jsonc.Node, path string, kind jsonc.Kind) (*jsonc.Node, error) {
	if obj == nil {
		return nil, nil
	}
	key := path[strings.LastIndexByte(path, '.')+1:]
	for _, m := range obj.Members {
		if m.Key != key {
			continue
		}
		if m.Value.Kind != kind {
			return nil, errAt(src, m.Value.Start, "%q must be %s, got %s", path, kind, m.Value.Kind)
		}
		return m.Value, nil
	}
	return nil, nil
}

func strs(arr *jsonc.Node) []string {
	if arr == nil {
		return nil
	}
	var out []string
	for _, it := range arr.Items {
		if it.Kind == jsonc.String {
			out = append(out, it.Str)
		}
	}
	return out
}

func errAt(src []byte, off int, format string, args ...any) error {
	line, col := jsonc.LineCol(src, off)
	return fmt.Errorf("%d:%d: %s", line, col, fmt.Sprintf(format, args...))
}

// newMember is a member Merge adds: a list of strings, or an object when
// members is set.
type newMember struct {
	key     string
	items   []string
	members []newMember
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// editor collects edits of src. nl is the file's line ending and unit one
// level of indentation.
type editor struct {
	src      []byte
	nl, unit string
	edits    []edit
}

func (e *editor) insert(off int, text string) {
	e.edits = append(e.edits, edit{off, off, text})
}

// apply returns src with the edits made; edits at the same offset keep the
// order they were made in.
func (e *editor) apply() []byte {
	sort.SliceStable(e.edits, func(i, j int) bool { return e.edits[i].start < e.edits[j].start })
	var b bytes.Buffer
	last := 0
	for _, ed := range e.edits {
		b.Write(e.src[last:ed.start])
		b.WriteString(ed.text)
		last = ed.end
	}
	b.Write(e.src[last:])
	return b.Bytes()
}

// appendItems adds vals at the end of the array arr.
func (e *editor) appendItems(arr *jsonc.Node, vals []string) {
	quoted := make([]string, len(vals))
	for i, v := range vals {
		quoted[i] = quote(v)
	}
	closeOff := arr.End - 1
	if !e.startsLine(closeOff) {
		switch {
		case len(arr.Items) == 0 && strings.Trim(string(e.src[arr.Start+1:closeOff]), " \t") == "":
			e.edits = append(e.edits, edit{arr.Start + 1, closeOff, strings.Join(quoted, ", ")})
		case len(arr.Items) == 0:
			e.insert(arr.Start+1, strings.Join(quoted, ", "))
		default:
			e.insert(arr.Items[len(arr.Items)-1].End, ", "+strings.Join(quoted, ", "))
		}
		return
	}
	indent := e.indent(closeOff) + e.unit
	if n := len(arr.Items); n > 0 {
		last := arr.Items[n-1]
		if !e.sameLine(arr.Start, last.Start) {
			indent = e.indent(last.Start)
		}
		if !arr.TrailingComma {
			e.insert(last.End, ",")
		}
	}
	var b strings.Builder
	for i, q := range quoted {
		b.WriteString(indent + q)
		if i < len(quoted)-1 || arr.TrailingComma {
			b.WriteString(",")
		}
		b.WriteString(e.nl)
	}
	e.insert(e.lineStart(closeOff), b.String())
}

// addMembers adds mems at the end of the object obj. An empty object with
// only white space inside is opened over several lines when it is written
// over several lines or expand is set.
func (e *editor) addMembers(obj *jsonc.Node, mems []newMember, expand bool) {
	closeOff := obj.End - 1
	if len(obj.Members) == 0 && strings.Trim(string(e.src[obj.Start+1:closeOff]), " \t\r\n") == "" {
		if !expand && !e.multiline(obj) {
			e.edits = append(e.edits, edit{obj.Start + 1, closeOff, e.inlineMembers(mems)})
			return
		}
		outer := e.indent(obj.Start)
		e.edits = append(e.edits, edit{obj.Start + 1, closeOff, e.nl + e.memberLines(mems, outer+e.unit, false) + outer})
		return
	}
	if !e.startsLine(closeOff) {
		if len(obj.Members) == 0 {
			e.insert(obj.Start+1, e.inlineMembers(mems))
		} else {
			e.insert(obj.Members[len(obj.Members)-1].Value.End, ", "+e.inlineMembers(mems))
		}
		return
	}
	indent := e.indent(closeOff) + e.unit
	if n := len(obj.Members); n > 0 {
		last := obj.Members[n-1]
		if !e.sameLine(obj.Start, last.KeyOff) {
			indent = e.indent(last.KeyOff)
		}
		if !obj.TrailingComma {
			e.insert(last.Value.End, ",")
		}
	}
	e.insert(e.lineStart(closeOff), e.memberLines(mems, indent, obj.TrailingComma))
}

// memberLines renders mems one per line at indent, each line ended.
func (e *editor) memberLines(mems []newMember, indent string, trailingComma bool) string {
	var b strings.Builder
	for i, m := range mems {
		b.WriteString(indent + quote(m.key) + ": " + e.value(m, indent))
		if i < len(mems)-1 || trailingComma {
			b.WriteString(",")
		}
		b.WriteString(e.nl)
	}
	return b.String()
}

// value renders m's value over several lines, its closing bracket at indent.
func (e *editor) value(m newMember, indent string) string {
	if m.members != nil {
		return "{" + e.nl + e.memberLines(m.members, indent+e.unit, false) + indent + "}"
	}
	var b strings.Builder
	b.WriteString("[" + e.nl)
	for i, s := range m.items {
		b.WriteString(indent + e.unit + quote(s))
		if i < len(m.items)-1 {
			b.WriteString(",")
		}
		b.WriteString(e.nl)
	}
	return b.String() + indent + "]"
}

// inlineMembers renders mems on one line.
func (e *editor) inlineMembers(mems []newMember) string {
	parts := make([]string, len(mems))
	for i, m := range mems {
		var v string
		if m.members != nil {
			v = "{" + e.inlineMembers(m.members) + "}"
		} else {
			q := make([]string, len(m.items))
			for j, s := range m.items {
				q[j] = quote(s)
			}
			v = "[" + strings.Join(q, ", ") + "]"
		}
		parts[i] = quote(m.key) + ": " + v
	}
	return strings.Join(parts, ", ")
}

func (e *editor) lineStart(off int) int {
	return bytes.LastIndexByte(e.src[:off], '\n') + 1
}

// indent is the leading white space of the line holding off.
func (e *editor) indent(off int) string {
	ls := e.lineStart(off)
	end := ls
	for end < off && (e.src[end] == ' ' || e.src[end] == '\t') {
		end++
	}
	return string(e.src[ls:end])
}

// startsLine reports whether only white space precedes off on its line.
func (e *editor) startsLine(off int) bool {
	return strings.Trim(string(e.src[e.lineStart(off):off]), " \t") == ""
}

func (e *editor) sameLine(a, b int) bool {
	return bytes.IndexByte(e.src[a:b], '\n') < 0
}

// multiline reports whether a container is written over several lines.
func (e *editor) multiline(n *jsonc.Node) bool {
	return !e.sameLine(n.Start, n.End)
}

// newline is the file's line ending: that of its first line.
func newline(src []byte) string {
	if i := bytes.IndexByte(src, '\n'); i > 0 && src[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// indentUnit is the indentation of the top-level members, two spaces when
// they have none.
func indentUnit(src []byte, root *jsonc.Node) string {
	e := &editor{src: src}
	if len(root.Members) > 0 {
		off := root.Members[0].KeyOff
		if in := e.indent(off); in != "" && e.startsLine(off) {
			return in
		}
	}
	return "  "
}

// quote renders s as a JSON string without HTML escapes.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string cannot fail to encode
	}
	return strings.TrimSuffix(b.String(), "\n")
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
