package proxy

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// withExtension is raw, a ClientHello in one record, with one more
// extension at the end of its extensions.
func withExtension(t *testing.T, raw []byte, typ uint16, data []byte) []byte {
	t.Helper()
	ext := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, typ), uint16(len(data)))
	ext = append(ext, data...)
	out := append(append([]byte(nil), raw...), ext...)
	grow := func(off, size int) {
		v := 0
		for _, c := range out[off : off+size] {
			v = v<<8 | int(c)
		}
		v += len(ext)
		for i := size - 1; i >= 0; i-- {
			out[off+i] = byte(v)
			v >>= 8
		}
	}
	grow(3, 2) // record length
	grow(6, 3) // handshake length
	p := 9 + 2 + 32
	p += 1 + int(out[p])                                       // session id
	p += 2 + int(binary.BigEndian.Uint16(out[p:]))             // cipher suites
	p += 1 + int(out[p])                                       // compression methods
	if int(binary.BigEndian.Uint16(out[p:]))+p+2 != len(raw) { // extensions end the record
		t.Fatalf("the ClientHello has bytes after its extensions")
	}
	grow(p, 2)
	return out
}

// A ClientHello that carries an encrypted inner one (ECH, or the draft
// ESNI) does not show the name it asks for: its server name is refused
// as hidden, while the same ClientHello without it names its host.
func TestReadClientHelloHiddenName(t *testing.T) {
	t.Parallel()
	raw := clientHello(t, "allowed.test")
	if _, sni, err := readClientHello(strings.NewReader(string(withExtension(t, raw, 0x1234, []byte("x"))))); err != nil || sni != "allowed.test" {
		t.Fatalf("control: a ClientHello with an unknown extension: sni %q, err %v", sni, err)
	}
	for _, typ := range []uint16{extECH, extESNI} {
		b := withExtension(t, raw, typ, make([]byte, 40))
		if _, sni, err := readClientHello(strings.NewReader(string(b))); !errors.Is(err, errHiddenName) {
			t.Errorf("extension %#x: sni %q, err %v; want errHiddenName", typ, sni, err)
		}
	}
}

// serverNameExt is a server_name extension's body listing names.
func serverNameExt(names ...string) []byte {
	var list []byte
	for _, n := range names {
		list = binary.BigEndian.AppendUint16(append(list, 0), uint16(len(n))) // host_name
		list = append(list, n...)
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(list))), list...)
}

// TLS allows one server name: a second server_name extension, or a second
// host name in the one, is refused, since a server could serve the name
// the proxy did not check.
func TestReadClientHelloTwoNames(t *testing.T) {
	t.Parallel()
	raw := clientHello(t, "allowed.test")
	for what, b := range map[string][]byte{
		"second extension": withExtension(t, raw, extServerName, serverNameExt("evil.test")),
		"second name":      withExtension(t, clientHello(t, ""), extServerName, serverNameExt("allowed.test", "evil.test")),
	} {
		if _, sni, err := readClientHello(strings.NewReader(string(b))); !errors.Is(err, errTwoNames) {
			t.Errorf("%s: sni %q, err %v; want errTwoNames", what, sni, err)
		}
	}
	b := withExtension(t, clientHello(t, ""), extServerName, serverNameExt("allowed.test"))
	if _, sni, err := readClientHello(strings.NewReader(string(b))); err != nil || sni != "allowed.test" {
		t.Errorf("control: one name in an added extension: sni %q, err %v", sni, err)
	}
}
