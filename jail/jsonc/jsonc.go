// Package jsonc parses JSON with comments and trailing commas (jail.json and
// the other config files) into a tree that keeps where each value is, for
// errors that name a line and column and for edits that change a file no
// more than they must.
package jsonc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Node is one value of a parsed document, spanning data[Start:End].
type Node struct {
	Kind       Kind
	Start, End int
	Str        string // String: the decoded string; Bool and Number: the literal
	Items      []*Node
	Members    []Member // Object, in document order
	// TrailingComma: a ',' follows the last item or member.
	TrailingComma bool
}

// Member is one key of an object and its value.
type Member struct {
	Key    string
	KeyOff int
	Value  *Node
}

// Kind is a JSON value's type.
type Kind int

// The kinds of values.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "a boolean"
	case Number:
		return "a number"
	case String:
		return "a string"
	case Array:
		return "a list"
	case Object:
		return "an object"
	}
	return "?"
}

// MaxDepth bounds nesting so that hostile input cannot exhaust the stack.
const MaxDepth = 64

// SyntaxError is a parse failure at a byte offset (see LineCol).
type SyntaxError struct {
	Off int
	Msg string
}

func (e *SyntaxError) Error() string { return e.Msg }

// Parse parses JSON that may contain // and /* */ comments and trailing
// commas. It rejects duplicate keys, which plain JSON decoders silently
// accept. Errors are *SyntaxError.
func Parse(data []byte) (*Node, error) {
	p := &parser{data: data}
	p.skip()
	if p.pos >= len(p.data) {
		return nil, p.fail(p.pos, "empty file; a config is a JSON object such as {}")
	}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.err != nil {
		return nil, p.err
	}
	if p.pos < len(p.data) {
		return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s after the end of the document", p.describe()))
	}
	return n, nil
}

type parser struct {
	data []byte
	pos  int
	err  *SyntaxError
}

// skip passes over white space and comments.
func (p *parser) skip() {
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/' && p.pos+1 < len(p.data) && p.data[p.pos+1] == '/':
			for p.pos < len(p.data) && p.data[p.pos] != '\n' {
				p.pos++
			}
		case c == '/' && p.pos+1 < len(p.data) && p.data[p.pos+1] == '*':
			end := bytes.Index(p.data[p.pos+2:], []byte("*/"))
			if end < 0 {
				if p.err == nil {
					p.err = &SyntaxError{p.pos, "unterminated /* comment"}
				}
				p.pos = len(p.data)
				return
			}
			p.pos += end + 4
		case c == 0xEF && p.pos == 0 && len(p.data) >= 3 && p.data[1] == 0xBB && p.data[2] == 0xBF:
			p.pos += 3 // UTF-8 byte order mark
		default:
			return
		}
	}
}

// fail returns the first error met: an unterminated comment found while
// skipping explains what follows better than the error it causes.
func (p *parser) fail(off int, msg string) error {
	if p.err != nil {
		return p.err
	}
	return &SyntaxError{off, msg}
}

func (p *parser) describe() string {
	if p.pos >= len(p.data) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.data[p.pos:])
	if r == utf8.RuneError {
		return "invalid UTF-8"
	}
	return fmt.Sprintf("%q", r)
}

func (p *parser) value(depth int) (*Node, error) {
	if p.err != nil {
		return nil, p.err
	}
	if depth >= MaxDepth {
		return nil, &SyntaxError{p.pos, "nesting is too deep"}
	}
	if p.pos >= len(p.data) {
		return nil, p.fail(p.pos, "unexpected end of file, expected a value")
	}
	start := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return &Node{Kind: String, Start: start, End: p.pos, Str: s}, nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+5)]), lit) {
				p.pos += len(lit)
				if lit == "null" {
					return &Node{Kind: Null, Start: start, End: p.pos}, nil
				}
				return &Node{Kind: Bool, Start: start, End: p.pos, Str: lit}, nil
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		end := p.pos
		for end < len(p.data) && strings.IndexByte("+-.eE0123456789", p.data[end]) >= 0 {
			end++
		}
		var f float64
		if err := json.Unmarshal(p.data[p.pos:end], &f); err != nil {
			return nil, &SyntaxError{p.pos, "invalid number"}
		}
		p.pos = end
		return &Node{Kind: Number, Start: start, End: end, Str: string(p.data[start:end])}, nil
	}
	return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s, expected a value", p.describe()))
}

func (p *parser) string() (string, error) {
	start := p.pos
	end := p.pos + 1
	for {
		if end >= len(p.data) || p.data[end] == '\n' {
			return "", &SyntaxError{start, "unterminated string"}
		}
		if p.data[end] == '\\' {
			end += 2
			continue
		}
		if p.data[end] == '"' {
			break
		}
		end++
	}
	var s string
	if err := json.Unmarshal(p.data[start:end+1], &s); err != nil {
		return "", &SyntaxError{start, "invalid string: " + strings.TrimPrefix(err.Error(), "invalid character ")}
	}
	p.pos = end + 1
	return s, nil
}

func (p *parser) array(depth int) (*Node, error) {
	n := &Node{Kind: Array, Start: p.pos}
	p.pos++ // [
	for {
		p.skip()
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			n.End, n.TrailingComma = p.pos, len(n.Items) > 0
			return n, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.Items = append(n.Items, v)
		p.skip()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			n.End = p.pos
			return n, nil
		}
		return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s in a list, expected ',' or ']'", p.describe()))
	}
}

func (p *parser) object(depth int) (*Node, error) {
	n := &Node{Kind: Object, Start: p.pos}
	p.pos++ // {
	seen := map[string]bool{}
	for {
		p.skip()
		if p.err != nil {
			return nil, p.err
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			n.End, n.TrailingComma = p.pos, len(n.Members) > 0
			return n, nil
		}
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s in an object, expected a quoted key or '}'", p.describe()))
		}
		keyOff := p.pos
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, &SyntaxError{keyOff, fmt.Sprintf("duplicate key %q", key)}
		}
		seen[key] = true
		p.skip()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s after key %q, expected ':'", p.describe(), key))
		}
		p.pos++
		p.skip()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.Members = append(n.Members, Member{Key: key, KeyOff: keyOff, Value: v})
		p.skip()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			n.End = p.pos
			return n, nil
		}
		return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s in an object, expected ',' or '}'", p.describe()))
	}
}

// LineCol converts a byte offset into a 1-based line and column (in runes).
func LineCol(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	line = 1 + strings.Count(string(data[:off]), "\n")
	lineStart := strings.LastIndexByte(string(data[:off]), '\n') + 1
	col = 1 + utf8.RuneCount(data[lineStart:off])
	if lineStart == 0 && bytes.HasPrefix(data, []byte("\xEF\xBB\xBF")) && off >= 3 {
		col-- // the byte order mark is not a column
	}
	return line, col
}
