package proxy

import (
	"bufio"
	"net/textproto"
	"strings"
	"testing"
)

// FuzzDecide: any host is either refused with a reason or is a valid name
// or IP literal that a rule (or unknown=allow, for names) let through.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{"allowed.test", "ALLOWED.test.", "a.allowed.test", "allowed.test@evil.test", "1.1.1.1", "[::1]", "::ffff:10.1.2.3", "0x7f.1", "", " ", "a..b", "fe80::1%eth0"} {
		f.Add(s, 443)
	}
	rules := Rules{Allow: []string{"allowed.test", "*.allowed.test", "10.1.2.3"}, Deny: []string{"bad.allowed.test"}, Unknown: "allow"}
	f.Fuzz(func(t *testing.T, host string, port int) {
		d := rules.Decide(host, port)
		if !d.Allow {
			if d.Reason == "" {
				t.Fatalf("Decide(%q, %d) refuses without a reason", host, port)
			}
			return
		}
		h, ok := normalizeHost(host)
		if !ok || strings.ContainsAny(host, "@/ %\t\r\n") || port < 1 || port > 65535 {
			t.Fatalf("Decide(%q, %d) allowed an invalid host", host, port)
		}
		if (h.ip.IsValid() || looksNumeric(h.name)) && d.Rule != "allow 10.1.2.3" {
			t.Fatalf("Decide(%q, %d) allowed an IP literal by %q", host, port, d.Rule)
		}
	})
}

// FuzzReadRequest: request heads never panic the reader, net/http drops
// the Host header of an absolute-form request, and readRequest reports it
// as net/http's own header parser reads it.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\nhost:b.test\n\n",
		"GET http://a.test/ HTTP/1.1\r\nX: 1\r\n Host: b.test\r\n\r\n",
		"\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		req, hostHeader, err := readRequest(bufio.NewReaderSize(strings.NewReader(raw), 4096))
		if err != nil || !req.URL.IsAbs() || req.Method == "CONNECT" {
			return
		}
		if _, ok := req.Header["Host"]; ok {
			t.Fatalf("net/http kept a Host header: %q", raw)
		}
		tp := textproto.NewReader(bufio.NewReader(strings.NewReader(raw)))
		tp.ReadLine()
		h, _ := tp.ReadMIMEHeader()
		if want := h.Get("Host"); want != hostHeader {
			t.Fatalf("%q: Host header %q, want %q", raw, hostHeader, want)
		}
	})
}
