package jsonc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Append is a list of strings AppendStrings adds to the list at Path
// ({"network", "allow"}), creating the list and the objects above it that
// are missing.
type Append struct {
	Path []string
	Vals []string
}

// AppendStrings adds each Append's values to the document src (JSON with
// comments and trailing commas) and returns the new text; it is pure.
//
// The edit is textual and minimal: comments, key order and formatting of
// everything else are kept. Values are appended in the order given, one
// per line in a list written over several lines, inline in a one-line or
// empty list; a value the list already holds (compared after decoding), or
// given twice, is not added again. A missing list or parent object is
// added as the last member of its parent, indented like the document's
// top-level members (two spaces when there are none). When nothing is
// added, src is returned unchanged.
//
// Errors carry line:column: syntax errors, a document that is not an
// object, and a key on a path that holds another kind of value (named by
// its dotted path).
func AppendStrings(src []byte, adds ...Append) ([]byte, error) {
	root, err := root(src)
	if err != nil {
		return nil, err
	}
	e := &editor{src: src, nl: newline(src), unit: indentUnit(src, root)}
	var pending []*pendingMembers
	for _, a := range adds {
		node, depth, err := walk(src, root, a.Path)
		if err != nil {
			return nil, err
		}
		var have []string
		if depth == len(a.Path) {
			have = strs(node)
		}
		vals := fresh(a.Vals, have)
		switch {
		case len(vals) == 0:
		case depth == len(a.Path):
			e.appendItems(node, vals)
		default:
			pendingFor(&pending, node).add(a.Path[depth:], vals)
		}
	}
	if len(pending) == 0 && len(e.edits) == 0 {
		return src, nil
	}
	rootMulti := e.multiline(root)
	for _, p := range pending {
		e.addMembers(p.obj, p.mems, p.obj == root || rootMulti)
	}
	return e.apply(), nil
}

// Strings returns the strings of the list at path in src (nil when a key
// on the path is missing), with the errors of AppendStrings.
func Strings(src []byte, path ...string) ([]string, error) {
	root, err := root(src)
	if err != nil {
		return nil, err
	}
	node, depth, err := walk(src, root, path)
	if err != nil || depth < len(path) {
		return nil, err
	}
	return strs(node), nil
}

// root parses src, which must be an object.
func root(src []byte) (*Node, error) {
	n, err := Parse(src)
	if err != nil {
		if se, ok := err.(*SyntaxError); ok {
			return nil, errAt(src, se.Off, "%s", se.Msg)
		}
		return nil, err
	}
	if n.Kind != Object {
		return nil, errAt(src, n.Start, "a jail.json is an object such as {}, got %s", n.Kind)
	}
	return n, nil
}

// walk follows path from root as far as it exists: the node reached and
// how many keys of path it took. Every key but the last must hold an
// object, the last a list.
func walk(src []byte, root *Node, path []string) (*Node, int, error) {
	node := root
	for i, key := range path {
		kind := Object
		if i == len(path)-1 {
			kind = Array
		}
		var next *Node
		for _, m := range node.Members {
			if m.Key == key {
				next = m.Value
			}
		}
		if next == nil {
			return node, i, nil
		}
		if next.Kind != kind {
			return nil, 0, errAt(src, next.Start, "%q must be %s, got %s", strings.Join(path[:i+1], "."), kind, next.Kind)
		}
		node = next
	}
	return node, len(path), nil
}

// fresh returns the values of want, in order, neither in have nor
// earlier in want.
func fresh(want, have []string) []string {
	var out []string
	for _, s := range want {
		if !slices.Contains(have, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// pendingMembers are the members to add to one existing object.
type pendingMembers struct {
	obj  *Node
	mems []newMember
}

func pendingFor(list *[]*pendingMembers, obj *Node) *pendingMembers {
	for _, p := range *list {
		if p.obj == obj {
			return p
		}
	}
	p := &pendingMembers{obj: obj}
	*list = append(*list, p)
	return p
}

// add adds vals under the missing keys path: objects down to the list.
func (p *pendingMembers) add(path []string, vals []string) {
	mems := &p.mems
	for i, key := range path {
		at := slices.IndexFunc(*mems, func(m newMember) bool { return m.key == key })
		if at < 0 {
			m := newMember{key: key}
			if i < len(path)-1 {
				m.members = []newMember{}
			}
			*mems = append(*mems, m)
			at = len(*mems) - 1
		}
		if i == len(path)-1 {
			(*mems)[at].items = append((*mems)[at].items, fresh(vals, (*mems)[at].items)...)
			return
		}
		mems = &(*mems)[at].members
	}
}

func strs(arr *Node) []string {
	if arr == nil {
		return nil
	}
	var out []string
	for _, it := range arr.Items {
		if it.Kind == String {
			out = append(out, it.Str)
		}
	}
	return out
}

func errAt(src []byte, off int, format string, args ...any) error {
	line, col := LineCol(src, off)
	return fmt.Errorf("%d:%d: %s", line, col, fmt.Sprintf(format, args...))
}

// newMember is a member AppendStrings adds: a list of strings, or an
// object when members is set.
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
func (e *editor) appendItems(arr *Node, vals []string) {
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
func (e *editor) addMembers(obj *Node, mems []newMember, expand bool) {
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
func (e *editor) multiline(n *Node) bool {
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
func indentUnit(src []byte, root *Node) string {
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
