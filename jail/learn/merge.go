package learn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
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
// Profile.JSON. Syntax errors carry line:column; a "filesystem" or
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
		return Profile{AllowRead: read, AllowWrite: write, Domains: domains}.JSON(), nil
	}
	root, err := parseJSONC(existing)
	if err != nil {
		if se, ok := err.(*syntaxError); ok {
			return nil, errAt(existing, se.off, "%s", se.msg)
		}
		return nil, err
	}
	if root.kind != kindObject {
		return nil, errAt(existing, root.start, "a jail.json is an object such as {}, got %s", root.kind)
	}
	fs, err := child(existing, root, "filesystem", kindObject)
	if err != nil {
		return nil, err
	}
	network, err := child(existing, root, "network", kindObject)
	if err != nil {
		return nil, err
	}
	allowRead, err := child(existing, fs, "filesystem.allowRead", kindArray)
	if err != nil {
		return nil, err
	}
	allowWrite, err := child(existing, fs, "filesystem.allowWrite", kindArray)
	if err != nil {
		return nil, err
	}
	allow, err := child(existing, network, "network.allow", kindArray)
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
		arr  *jnode
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
		obj  *jnode
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
func child(src []byte, obj *jnode, path string, kind jsonKind) (*jnode, error) {
	if obj == nil {
		return nil, nil
	}
	key := path[strings.LastIndexByte(path, '.')+1:]
	for _, m := range obj.members {
		if m.key != key {
			continue
		}
		if m.value.kind != kind {
			return nil, errAt(src, m.value.start, "%q must be %s, got %s", path, kind, m.value.kind)
		}
		return m.value, nil
	}
	return nil, nil
}

func strs(arr *jnode) []string {
	if arr == nil {
		return nil
	}
	var out []string
	for _, it := range arr.items {
		if it.kind == kindString {
			out = append(out, it.str)
		}
	}
	return out
}

func errAt(src []byte, off int, format string, args ...any) error {
	line, col := lineCol(src, off)
	return fmt.Errorf("%d:%d: %s", line, col, fmt.Sprintf(format, args...))
}

// lineCol converts a byte offset into a 1-based line and column (in runes),
// as package jail counts them.
func lineCol(src []byte, off int) (line, col int) {
	off = min(off, len(src))
	line = 1 + bytes.Count(src[:off], []byte("\n"))
	lineStart := bytes.LastIndexByte(src[:off], '\n') + 1
	col = 1 + utf8.RuneCount(src[lineStart:off])
	if lineStart == 0 && bytes.HasPrefix(src, []byte("\xEF\xBB\xBF")) && off >= 3 {
		col-- // the byte order mark is not a column
	}
	return line, col
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
func (e *editor) appendItems(arr *jnode, vals []string) {
	quoted := make([]string, len(vals))
	for i, v := range vals {
		quoted[i] = quote(v)
	}
	closeOff := arr.end - 1
	if !e.startsLine(closeOff) {
		switch {
		case len(arr.items) == 0 && strings.Trim(string(e.src[arr.start+1:closeOff]), " \t") == "":
			e.edits = append(e.edits, edit{arr.start + 1, closeOff, strings.Join(quoted, ", ")})
		case len(arr.items) == 0:
			e.insert(arr.start+1, strings.Join(quoted, ", "))
		default:
			e.insert(arr.items[len(arr.items)-1].end, ", "+strings.Join(quoted, ", "))
		}
		return
	}
	indent := e.indent(closeOff) + e.unit
	if n := len(arr.items); n > 0 {
		last := arr.items[n-1]
		if !e.sameLine(arr.start, last.start) {
			indent = e.indent(last.start)
		}
		if !arr.trailingComma {
			e.insert(last.end, ",")
		}
	}
	var b strings.Builder
	for i, q := range quoted {
		b.WriteString(indent + q)
		if i < len(quoted)-1 || arr.trailingComma {
			b.WriteString(",")
		}
		b.WriteString(e.nl)
	}
	e.insert(e.lineStart(closeOff), b.String())
}

// addMembers adds mems at the end of the object obj. An empty object with
// only white space inside is opened over several lines when it is written
// over several lines or expand is set.
func (e *editor) addMembers(obj *jnode, mems []newMember, expand bool) {
	closeOff := obj.end - 1
	if len(obj.members) == 0 && strings.Trim(string(e.src[obj.start+1:closeOff]), " \t\r\n") == "" {
		if !expand && !e.multiline(obj) {
			e.edits = append(e.edits, edit{obj.start + 1, closeOff, e.inlineMembers(mems)})
			return
		}
		outer := e.indent(obj.start)
		e.edits = append(e.edits, edit{obj.start + 1, closeOff, e.nl + e.memberLines(mems, outer+e.unit, false) + outer})
		return
	}
	if !e.startsLine(closeOff) {
		if len(obj.members) == 0 {
			e.insert(obj.start+1, e.inlineMembers(mems))
		} else {
			e.insert(obj.members[len(obj.members)-1].value.end, ", "+e.inlineMembers(mems))
		}
		return
	}
	indent := e.indent(closeOff) + e.unit
	if n := len(obj.members); n > 0 {
		last := obj.members[n-1]
		if !e.sameLine(obj.start, last.keyOff) {
			indent = e.indent(last.keyOff)
		}
		if !obj.trailingComma {
			e.insert(last.value.end, ",")
		}
	}
	e.insert(e.lineStart(closeOff), e.memberLines(mems, indent, obj.trailingComma))
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
func (e *editor) multiline(n *jnode) bool {
	return !e.sameLine(n.start, n.end)
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
func indentUnit(src []byte, root *jnode) string {
	e := &editor{src: src}
	if len(root.members) > 0 {
		off := root.members[0].keyOff
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

// The parser below mirrors package jail's JSONC parser (jail/jsonc.go),
// which learn does not import, and also records where each value ends and
// whether a container has a trailing comma, for editing.

type jsonKind int

const (
	kindNull jsonKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k jsonKind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "a list"
	case kindObject:
		return "an object"
	}
	return "?"
}

// jnode is one parsed value spanning src[start:end].
type jnode struct {
	kind          jsonKind
	start, end    int
	str           string // kindString
	items         []*jnode
	members       []jmember
	trailingComma bool // a ',' after the last item or member
}

type jmember struct {
	key    string
	keyOff int
	value  *jnode
}

// maxDepth bounds nesting as package jail does.
const maxDepth = 64

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

func parseJSONC(src []byte) (*jnode, error) {
	p := &parser{src: src}
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.pos >= len(src) {
		return nil, &syntaxError{p.pos, "empty file; a config is a JSON object such as {}"}
	}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.pos < len(src) {
		return nil, &syntaxError{p.pos, fmt.Sprintf("unexpected %s after the end of the document", p.describe())}
	}
	return n, nil
}

type parser struct {
	src []byte
	pos int
}

// skip passes over white space, comments and a leading byte order mark.
func (p *parser) skip() error {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			end := bytes.Index(p.src[p.pos+2:], []byte("*/"))
			if end < 0 {
				return &syntaxError{p.pos, "unterminated /* comment"}
			}
			p.pos += end + 4
		case c == 0xEF && p.pos == 0 && bytes.HasPrefix(p.src, []byte("\xEF\xBB\xBF")):
			p.pos += 3
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.src[p.pos:])
	if r == utf8.RuneError {
		return "invalid UTF-8"
	}
	return fmt.Sprintf("%q", r)
}

func (p *parser) value(depth int) (*jnode, error) {
	if depth >= maxDepth {
		return nil, &syntaxError{p.pos, "nesting is too deep"}
	}
	if p.pos >= len(p.src) {
		return nil, &syntaxError{p.pos, "unexpected end of file, expected a value"}
	}
	start := p.pos
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return &jnode{kind: kindString, start: start, end: p.pos, str: s}, nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(p.src[p.pos:], []byte(lit)) {
				p.pos += len(lit)
				kind := kindBool
				if lit == "null" {
					kind = kindNull
				}
				return &jnode{kind: kind, start: start, end: p.pos}, nil
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		end := p.pos
		for end < len(p.src) && strings.IndexByte("+-.eE0123456789", p.src[end]) >= 0 {
			end++
		}
		var f float64
		if err := json.Unmarshal(p.src[p.pos:end], &f); err != nil {
			return nil, &syntaxError{p.pos, "invalid number"}
		}
		p.pos = end
		return &jnode{kind: kindNumber, start: start, end: end}, nil
	}
	return nil, &syntaxError{p.pos, fmt.Sprintf("unexpected %s, expected a value", p.describe())}
}

func (p *parser) string() (string, error) {
	start := p.pos
	end := p.pos + 1
	for {
		if end >= len(p.src) || p.src[end] == '\n' {
			return "", &syntaxError{start, "unterminated string"}
		}
		if p.src[end] == '\\' {
			end += 2
			continue
		}
		if p.src[end] == '"' {
			break
		}
		end++
	}
	var s string
	if err := json.Unmarshal(p.src[start:end+1], &s); err != nil {
		return "", &syntaxError{start, "invalid string: " + strings.TrimPrefix(err.Error(), "invalid character ")}
	}
	p.pos = end + 1
	return s, nil
}

func (p *parser) array(depth int) (*jnode, error) {
	n := &jnode{kind: kindArray, start: p.pos}
	p.pos++ // [
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			n.end = p.pos
			n.trailingComma = len(n.items) > 0
			return n, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		return nil, &syntaxError{p.pos, fmt.Sprintf("unexpected %s in a list, expected ',' or ']'", p.describe())}
	}
}

func (p *parser) object(depth int) (*jnode, error) {
	n := &jnode{kind: kindObject, start: p.pos}
	p.pos++ // {
	seen := map[string]bool{}
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			p.pos++
			n.end = p.pos
			n.trailingComma = len(n.members) > 0
			return n, nil
		}
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return nil, &syntaxError{p.pos, fmt.Sprintf("unexpected %s in an object, expected a quoted key or '}'", p.describe())}
		}
		keyOff := p.pos
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, &syntaxError{keyOff, fmt.Sprintf("duplicate key %q", key)}
		}
		seen[key] = true
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, &syntaxError{p.pos, fmt.Sprintf("unexpected %s after key %q, expected ':'", p.describe(), key)}
		}
		p.pos++
		if err := p.skip(); err != nil {
			return nil, err
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.members = append(n.members, jmember{key: key, keyOff: keyOff, value: v})
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		return nil, &syntaxError{p.pos, fmt.Sprintf("unexpected %s in an object, expected ',' or '}'", p.describe())}
	}
}
