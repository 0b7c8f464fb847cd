package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	"net/url"
	"strings"
)

// minSearched is the shortest value whose spellings are searched for in
// requests and redacted from responses. A shorter one would match
// unrelated text too often: a request would be refused, or a response
// corrupted, for bytes that merely look like it.
const minSearched = 8

// spelling is one way a value can be written: as it is, escaped for JSON,
// XML or HTML, or a URL, base64 or hex. A request in which a spelling occurs carries
// the real value; a response has it replaced by redacted.
type spelling struct {
	label    string // for logs: "raw", "JSON-escaped", "XML-escaped", "URL-escaped", "base64", "hex"
	text     []byte
	redacted []byte // what a response gets instead
}

// spellings lists the ways value (at least minSearched bytes) can be
// written, each once, with what a response gets for each: the
// placeholder ph written the same way where it can be.
func spellings(value, ph string) []spelling {
	var out []spelling
	add := func(label string, text, redacted []byte) {
		for _, s := range out {
			if bytes.Equal(s.text, text) {
				return
			}
		}
		out = append(out, spelling{label: label, text: text, redacted: redacted})
	}
	p := []byte(ph) // placeholder bytes need no escaping anywhere
	add("raw", []byte(value), p)
	add("JSON-escaped", jsonEscape(value, true), p)
	add("JSON-escaped", jsonEscape(value, false), p)
	add("JSON-escaped", bytes.ReplaceAll(jsonEscape(value, false), []byte("/"), []byte(`\/`)), p) // "\/", as some encoders write it
	add("XML-escaped", xmlEscape(value), p)
	add("XML-escaped", []byte(html.EscapeString(value)), p) // &#39; and &#34;, as HTML templates write them
	for _, esc := range []string{url.QueryEscape(value), url.PathEscape(value)} {
		add("URL-escaped", []byte(esc), p)
		add("URL-escaped", lowerHexEscapes(esc), p)
	}
	add("hex", []byte(hex.EncodeToString([]byte(value))), []byte(hex.EncodeToString(p)))
	add("hex", []byte(strings.ToUpper(hex.EncodeToString([]byte(value)))), []byte(strings.ToUpper(hex.EncodeToString(p))))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for a := 0; a < 3; a++ {
			add("base64", base64Core(enc, []byte(value), a), base64Redacted(enc, value, ph, a))
		}
	}
	return out
}

func jsonEscape(v string, html bool) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(html)
	e.Encode(v) // a string always encodes
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return out[1 : len(out)-1]
}

// lowerHexEscapes writes the %XX escapes of s in lower case.
func lowerHexEscapes(s string) []byte {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLowerHex(b[i+1]), toLowerHex(b[i+2])
			i += 2
		}
	}
	return b
}

func toLowerHex(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// base64Core is the part of v's base64 that does not depend on its
// neighbours when v starts a (0, 1 or 2) bytes after a 3-byte boundary
// of a longer encoded text: the characters whose six bits all come from
// v. The characters at either end, which share bits with the bytes
// around, are left out, so the core is found padded or not, alone or
// inside a longer text.
func base64Core(enc *base64.Encoding, v []byte, a int) []byte {
	buf := make([]byte, a+len(v)+2)
	copy(buf[a:], v)
	full := enc.WithPadding(base64.NoPadding).EncodeToString(buf)
	return []byte(full[(8*a+5)/6 : 8*(a+len(v))/6])
}

// base64Redacted is what a response gets for a value's base64 core: the
// placeholder's core in the same alignment when both are as long, the
// placeholder's whole base64 when both fill whole 3-byte groups from a
// boundary, else filler of the same length (decoding to zero bits,
// never the value). The one or two characters at either end that share
// bits with the neighbours are kept, so up to six bits of the value's
// first and last bytes stay visible.
func base64Redacted(enc *base64.Encoding, value, ph string, a int) []byte {
	core := base64Core(enc, []byte(value), a)
	switch {
	case len(ph) == len(value):
		return base64Core(enc, []byte(ph), a)
	case a == 0 && len(value)%3 == 0 && len(ph)%3 == 0:
		return []byte(enc.WithPadding(base64.NoPadding).EncodeToString([]byte(ph)))
	}
	fill := bytes.Repeat([]byte("A"), len(core))
	if bytes.Equal(fill, core) {
		fill = bytes.Repeat([]byte("B"), len(core))
	}
	return fill
}
