package darwin

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// node is one S-expression: an atom, a string, or a list.
type node struct {
	atom   string
	str    *string
	list   []node
	isList bool
}

func (n node) head() string {
	if n.isList && len(n.list) > 0 {
		return n.list[0].atom
	}
	return ""
}

// parseSexp reads SBPL text: lists, "strings" with backslash escapes,
// #"regex" literals, atoms and ; comments. Unbalanced parentheses and
// unterminated strings are errors.
func parseSexp(src string) ([]node, error) {
	var stack [][]node
	var top []node
	push := func(n node) {
		if len(stack) == 0 {
			top = append(top, n)
		} else {
			stack[len(stack)-1] = append(stack[len(stack)-1], n)
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\n' || c == '\t':
		case c == '(':
			stack = append(stack, []node{})
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced ')' at byte %d", i)
			}
			l := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			push(node{list: l, isList: true})
		case c == '"' || (c == '#' && i+1 < len(src) && src[i+1] == '"'):
			if c == '#' {
				i++
			}
			s, n, err := readString(src[i:])
			if err != nil {
				return nil, fmt.Errorf("at byte %d: %w", i, err)
			}
			i += n - 1
			push(node{str: &s})
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \n\t();\"", rune(src[j])) {
				j++
			}
			push(node{atom: src[i:j]})
			i = j - 1
		}
	}
	if len(stack) != 0 {
		return nil, errors.New("unbalanced: a '(' is never closed")
	}
	return top, nil
}

// readString reads a quoted string at the start of s and returns it and
// the bytes it took.
func readString(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) {
				return "", 0, errors.New("unterminated string")
			}
			i++
			b.WriteByte(s[i])
		case '"':
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, errors.New("unterminated string")
}

var knownOps = []string{
	"default", "process-exec", "process-fork", "signal", "process-info*",
	"ipc-posix-sem", "ipc-posix-shm-read-data", "ipc-posix-shm-write-data", "ipc-posix-shm-write-create",
	"mach-lookup", "sysctl-read", "pseudo-tty",
	"file-read*", "file-read-metadata", "file-write*", "file-write-data", "file-write-create", "file-write-unlink", "file-ioctl",
	"network-outbound", "network-bind", "network-inbound", "nvram*",
}

// unfiltered are the operations an allow rule may grant without a filter:
// none reaches a file, the network or another process.
var unfiltered = []string{"process-exec", "process-fork", "ipc-posix-sem",
	"ipc-posix-shm-read-data", "ipc-posix-shm-write-data", "ipc-posix-shm-write-create", "pseudo-tty"}

var knownFilters = []string{"literal", "subpath", "regex", "global-name", "sysctl-name",
	"sysctl-name-prefix", "target", "remote", "local", "ioctl-command", "param", "require-all", "extension"}

var pathFilters = []string{"literal", "subpath", "regex", "prefix", "path"}

// validate asserts the structure of a profile: balanced, deny default
// first, known operations and filters only, every path a declared
// parameter, no user path in the text, and network only to the proxy and
// the published ports.
func validate(t testing.TB, pol Policy, p Profile) {
	t.Helper()
	forms, err := parseSexp(p.Text)
	if err != nil {
		t.Fatalf("profile does not parse: %v", err)
	}
	if len(forms) < 2 || render1(forms[0]) != "(version 1)" || render1(forms[1]) != "(deny default)" {
		t.Fatalf("profile must start with (version 1) (deny default), starts with %v", forms[:min(2, len(forms))])
	}
	declared := map[string]bool{}
	for _, prm := range p.Params {
		if declared[prm.Name] {
			t.Errorf("parameter %s declared twice", prm.Name)
		}
		declared[prm.Name] = true
	}
	used := map[string]bool{}
	narrowed := false
	for _, f := range forms[2:] {
		validateRule(t, pol, f, declared, used)
		file := false
		for _, n := range f.list[1:] {
			file = file || strings.HasPrefix(n.atom, "file-")
		}
		switch {
		case file && f.head() == "deny" && len(f.list) > 2 && f.list[2].isList && f.list[2].head() != "ioctl-command":
			narrowed = true
		case file && f.head() == "allow" && narrowed:
			t.Errorf("rule %s widens file access after a mask or protection, and so overrides it", render1(f))
		}
	}
	for name := range declared {
		if !used[name] {
			t.Errorf("parameter %s is never referenced", name)
		}
	}
	assertNoUserPath(t, p.Text)
}

func validateRule(t testing.TB, pol Policy, f node, declared, used map[string]bool) {
	t.Helper()
	action := f.head()
	if action != "allow" && action != "deny" {
		t.Errorf("top-level form %s is not an allow or deny rule", render1(f))
		return
	}
	var ops []string
	var filters []node
	for _, n := range f.list[1:] {
		if n.isList {
			filters = append(filters, n)
		} else if n.atom != "" && len(filters) == 0 {
			ops = append(ops, n.atom)
		} else {
			t.Errorf("rule %s: unexpected %s", render1(f), render1(n))
		}
	}
	for _, op := range ops {
		if !slices.Contains(knownOps, op) {
			t.Errorf("rule %s: unknown operation %s", render1(f), op)
		}
		if action == "allow" && len(filters) == 0 && !slices.Contains(unfiltered, op) {
			t.Errorf("rule %s: %s allowed without a filter", render1(f), op)
		}
	}
	for _, flt := range filters {
		validateFilter(t, f, flt, declared, used)
		if action == "allow" {
			validateNetwork(t, pol, f, ops, flt)
		}
	}
}

func validateFilter(t testing.TB, rule, f node, declared, used map[string]bool) {
	t.Helper()
	h := f.head()
	if !slices.Contains(knownFilters, h) {
		t.Errorf("rule %s: unknown filter %s", render1(rule), h)
		return
	}
	if h == "require-all" {
		for _, c := range f.list[1:] {
			validateFilter(t, rule, c, declared, used)
		}
		return
	}
	if slices.Contains(pathFilters, h) {
		if len(f.list) != 2 || f.list[1].head() != "param" || len(f.list[1].list) != 2 || f.list[1].list[1].str == nil {
			t.Errorf("rule %s: path filter %s is not a (param \"NAME\")", render1(rule), render1(f))
			return
		}
		name := *f.list[1].list[1].str
		if !declared[name] {
			t.Errorf("rule %s: parameter %s is not declared", render1(rule), name)
		}
		used[name] = true
		return
	}
	for _, a := range f.list[1:] {
		if a.str != nil && strings.Contains(*a.str, "/") {
			t.Errorf("rule %s: a path-like string %q outside a parameter", render1(rule), *a.str)
		}
	}
}

// validateNetwork lets network rules name only loopback: outbound only
// the proxy port and forwarded ports (none without a proxy), bind and
// inbound only published ports.
func validateNetwork(t testing.TB, pol Policy, rule node, ops []string, f node) {
	t.Helper()
	for _, op := range ops {
		if !strings.HasPrefix(op, "network") {
			continue
		}
		port, ok := loopbackPort(f)
		switch {
		case !ok:
			t.Errorf("rule %s: network filter %s is not (remote|local tcp \"localhost:PORT\")", render1(rule), render1(f))
		case op == "network-outbound" && (f.head() != "remote" || pol.ProxyPort == 0 || (port != pol.ProxyPort && !slices.Contains(pol.Forward, port))):
			t.Errorf("rule %s: outbound to something other than the proxy port %d and the forwarded ports %v", render1(rule), pol.ProxyPort, pol.Forward)
		case op != "network-outbound" && (f.head() != "local" || !slices.Contains(pol.Published, port)):
			t.Errorf("rule %s: %s on a port that is not published", render1(rule), op)
		}
	}
}

func loopbackPort(f node) (int, bool) {
	if (f.head() != "remote" && f.head() != "local") || len(f.list) != 3 || f.list[1].atom != "tcp" || f.list[2].str == nil {
		return 0, false
	}
	p, ok := strings.CutPrefix(*f.list[2].str, "localhost:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(p)
	return n, err == nil
}

// assertNoUserPath fails when the profile text holds a "/" at all: every
// path, the fixed system ones included, travels as a parameter, so no byte
// sequence of an absolute path can appear in the text.
func assertNoUserPath(t testing.TB, text string) {
	t.Helper()
	if i := strings.IndexByte(text, '/'); i >= 0 {
		line := text[strings.LastIndexByte(text[:i], '\n')+1:]
		line, _, _ = strings.Cut(line, "\n")
		t.Errorf("the profile text holds a path byte sequence: %s", line)
	}
}

// assertNoPathParts fails when a distinctive part of a policy path (a
// segment of six bytes or more) appears in the profile text.
func assertNoPathParts(t testing.TB, pol Policy, text string) {
	t.Helper()
	all := append([]string{pol.Project, pol.Home}, pol.Read...)
	all = append(append(append(all, pol.Write...), pol.DenyRead...), pol.Protected...)
	for _, g := range append(slices.Clone(pol.DenyGlobs), pol.ProtectedGlobs...) {
		all = append(all, g.Dir)
	}
	for _, p := range all {
		for _, part := range strings.Split(p, "/") {
			if len(part) >= 6 && strings.Contains(text, part) {
				t.Errorf("the profile text holds %q, part of the path %q", part, p)
			}
		}
	}
}

func render1(n node) string {
	switch {
	case n.str != nil:
		return strconv.Quote(*n.str)
	case !n.isList:
		return n.atom
	}
	parts := make([]string, len(n.list))
	for i, c := range n.list {
		parts[i] = render1(c)
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// TestValidatorCatches feeds the validator broken profiles and asserts it
// rejects each one, so a generator regression cannot pass unnoticed.
func TestValidatorCatches(t *testing.T) {
	pol := publishedPolicy()
	good, err := Generate(pol)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"unbalanced":        good.Text + "(allow file-read*",
		"allow default":     good.Text + "(allow default)\n",
		"unknown operation": good.Text + "(allow file-mount (literal (param \"PROJECT_0\")))\n",
		"spliced path":      good.Text + "(allow file-read* (subpath \"/Users/other\"))\n",
		"project in text":   good.Text + "; " + pol.Project + "\n",
		"path in a comment": good.Text + "; see /etc\n",
		"open network":      good.Text + "(allow network-outbound)\n",
		"other port":        good.Text + "(allow network-outbound (remote tcp \"localhost:22\"))\n",
		"any host":          good.Text + "(allow network-outbound (remote tcp \"*:41234\"))\n",
		"unpublished bind":  good.Text + "(allow network-bind (local tcp \"localhost:9999\"))\n",
		"undeclared param":  good.Text + "(allow file-read* (subpath (param \"NOPE_0\")))\n",
		"allow after masks": good.Text + "(allow file-write* (subpath (param \"PROJECT_0\")))\n",
		"deny default late": strings.Replace(good.Text, "(deny default)\n", "", 1) + "(deny default)\n",
	} {
		t.Run(name, func(t *testing.T) {
			ft := &fakeT{}
			func() {
				defer func() { _ = recover() }()
				validate(ft, pol, Profile{Text: text, Params: good.Params})
			}()
			if !ft.failed {
				t.Errorf("the validator accepted a profile with %s", name)
			}
		})
	}
}

// TestValidatorCatchesOffline: without a proxy no outbound rule passes,
// not even to a port that would be the proxy's.
func TestValidatorCatchesOffline(t *testing.T) {
	pol := offlinePolicy()
	good, err := Generate(pol)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, pol, good)
	ft := &fakeT{}
	func() {
		defer func() { _ = recover() }()
		validate(ft, pol, Profile{Text: good.Text + "(allow network-outbound (remote tcp \"localhost:41234\"))\n", Params: good.Params})
	}()
	if !ft.failed {
		t.Error("the validator accepted an outbound rule in a profile without a proxy")
	}
}

// fakeT records failures of validate without failing the real test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true; panic("fatal") }
