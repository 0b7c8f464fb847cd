package jail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// node is one value of a parsed JSON-with-comments document, with the byte
// offset where it starts so that errors can name a line and column.
type node struct {
	kind    nodeKind
	off     int
	str     string // kindString
	items   []*node
	members []member // kindObject, in document order
}

type member struct {
	key    string
	keyOff int
	value  *node
}

type nodeKind int

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k nodeKind) String() string {
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

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxDepth = 64

// syntaxError is a parse failure at a byte offset.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// parseJSONC parses JSON that may contain // and /* */ comments and trailing
// commas. It rejects duplicate keys, which plain JSON decoders silently accept.
func parseJSONC(data []byte) (*node, error) {
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
	err  *syntaxError
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
					p.err = &syntaxError{p.pos, "unterminated /* comment"}
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
	return &syntaxError{off, msg}
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

func (p *parser) value(depth int) (*node, error) {
	if p.err != nil {
		return nil, p.err
	}
	if depth >= maxDepth {
		return nil, &syntaxError{p.pos, "nesting is too deep"}
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
		return &node{kind: kindString, off: start, str: s}, nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+5)]), lit) {
				p.pos += len(lit)
				if lit == "null" {
					return &node{kind: kindNull, off: start}, nil
				}
				return &node{kind: kindBool, off: start, str: lit}, nil
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		end := p.pos
		for end < len(p.data) && strings.IndexByte("+-.eE0123456789", p.data[end]) >= 0 {
			end++
		}
		var f float64
		if err := json.Unmarshal(p.data[p.pos:end], &f); err != nil {
			return nil, &syntaxError{p.pos, "invalid number"}
		}
		p.pos = end
		return &node{kind: kindNumber, off: start, str: string(p.data[start:end])}, nil
	}
	return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s, expected a value", p.describe()))
}

func (p *parser) string() (string, error) {
	start := p.pos
	end := p.pos + 1
	for {
		if end >= len(p.data) || p.data[end] == '\n' {
			return "", &syntaxError{start, "unterminated string"}
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
		return "", &syntaxError{start, "invalid string: " + strings.TrimPrefix(err.Error(), "invalid character ")}
	}
	p.pos = end + 1
	return s, nil
}

func (p *parser) array(depth int) (*node, error) {
	n := &node{kind: kindArray, off: p.pos}
	p.pos++ // [
	for {
		p.skip()
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return n, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
		p.skip()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return n, nil
		}
		return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s in a list, expected ',' or ']'", p.describe()))
	}
}

func (p *parser) object(depth int) (*node, error) {
	n := &node{kind: kindObject, off: p.pos}
	p.pos++ // {
	seen := map[string]bool{}
	for {
		p.skip()
		if p.err != nil {
			return nil, p.err
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
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
			return nil, &syntaxError{keyOff, fmt.Sprintf("duplicate key %q", key)}
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
		n.members = append(n.members, member{key: key, keyOff: keyOff, value: v})
		p.skip()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			return n, nil
		}
		return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s in an object, expected ',' or '}'", p.describe()))
	}
}

// lineCol converts a byte offset into a 1-based line and column (in runes).
func lineCol(data []byte, off int) (line, col int) {
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
