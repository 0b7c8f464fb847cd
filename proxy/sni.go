package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxClientHello caps the bytes read for a ClientHello, across records.
const maxClientHello = 64 << 10

var errNotClientHello = errors.New("not a TLS ClientHello")

// readClientHello reads the TLS records that carry the client's first
// handshake message, a ClientHello, and returns their bytes (to be sent on
// unchanged) and the server name it asks for ("" without the extension).
func readClientHello(r io.Reader) (raw []byte, sni string, err error) {
	var msg []byte // the handshake message, reassembled
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return raw, "", err
		}
		n := int(binary.BigEndian.Uint16(hdr[3:]))
		if hdr[0] != tlsRecord || n == 0 || n > 1<<14 || len(raw)+5+n > maxClientHello {
			return raw, "", errNotClientHello
		}
		rec := make([]byte, 5+n)
		copy(rec, hdr[:])
		if _, err := io.ReadFull(r, rec[5:]); err != nil {
			return raw, "", err
		}
		raw = append(raw, rec...)
		msg = append(msg, rec[5:]...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != 1 { // client_hello
			return raw, "", errNotClientHello
		}
		if size := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])); len(msg) >= size {
			sni, err := helloServerName(msg[4:size])
			return raw, sni, err
		}
	}
}

// errHiddenName is a ClientHello whose server name is not the one it
// shows: it carries an encrypted ClientHello (ECH, or its draft ESNI),
// whose inner name the server at the other end would serve instead of
// the outer one.
var errHiddenName = errors.New("the ClientHello hides the server name it asks for (encrypted client hello)")

// errTwoNames is a ClientHello with two server names (two server_name
// extensions, or two host names in one), which TLS forbids: the proxy
// would check one and a server might serve the other.
var errTwoNames = errors.New("the ClientHello names two servers")

const (
	extServerName = 0
	extECH        = 0xfe0d
	extESNI       = 0xffce
)

// helloServerName returns the host_name of a ClientHello body's
// server_name extension, or "" when it has none.
func helloServerName(b []byte) (string, error) {
	p := parser{b: b}
	p.skip(2 + 32)   // legacy_version, random
	p.skip(p.int(1)) // legacy_session_id
	p.skip(p.int(2)) // cipher_suites
	p.skip(p.int(1)) // legacy_compression_methods
	if p.err == nil && len(p.b) == 0 {
		return "", nil // no extensions
	}
	var sni string
	seen := false
	exts := parser{b: p.bytes(p.int(2)), err: p.err}
	for exts.err == nil && len(exts.b) > 0 {
		typ := exts.int(2)
		data := exts.bytes(exts.int(2))
		if exts.err == nil && (typ == extECH || typ == extESNI) {
			return "", errHiddenName
		}
		if typ != extServerName {
			continue
		}
		if seen {
			return "", errTwoNames
		}
		seen = true
		names := parser{b: data, err: exts.err}
		list := parser{b: names.bytes(names.int(2)), err: names.err}
		for list.err == nil && len(list.b) > 0 {
			kind := list.int(1)
			name := list.bytes(list.int(2))
			if list.err == nil && kind == 0 { // host_name
				if sni != "" {
					return "", errTwoNames
				}
				sni = string(name)
			}
		}
		if list.err != nil {
			return "", fmt.Errorf("bad server_name extension: %w", list.err)
		}
	}
	if exts.err != nil {
		return "", fmt.Errorf("bad ClientHello: %w", exts.err)
	}
	if p.err != nil {
		return "", fmt.Errorf("bad ClientHello: %w", p.err)
	}
	return sni, nil
}

// parser reads big-endian fields from b; the first short read sets err
// and every later read returns zero values.
type parser struct {
	b   []byte
	err error
}

func (p *parser) bytes(n int) []byte {
	if p.err != nil || n > len(p.b) {
		p.err = errors.New("truncated")
		return nil
	}
	v := p.b[:n]
	p.b = p.b[n:]
	return v
}

func (p *parser) skip(n int) { p.bytes(n) }

func (p *parser) int(n int) int {
	v := 0
	for _, c := range p.bytes(n) {
		v = v<<8 | int(c)
	}
	return v
}

// sniMismatch says why a passthrough tunnel decided for t's name must not
// carry a ClientHello for sni, or "" when it may: the name must be the
// same (case and a trailing dot aside), and a tunnel to a name must name
// it.
func sniMismatch(t *target, sni string) string {
	if sni == "" {
		if t.norm.ip.IsValid() {
			return ""
		}
		return fmt.Sprintf("TLS ClientHello without a server name in a passthrough tunnel to %s", t.norm.name)
	}
	if h, ok := normalizeHost(sni); ok && !h.ip.IsValid() && h.name == t.norm.name {
		return ""
	}
	return fmt.Sprintf("TLS server name %q differs from the passthrough tunnel's name %s (domain fronting)", sni, t.norm.name)
}
