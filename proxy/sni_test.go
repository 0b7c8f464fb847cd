package proxy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// clientHello is the first flight of a real TLS client asking for
// serverName ("" sends no server name).
func clientHello(t *testing.T, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}).Handshake()
	raw, _, err := readClientHello(b)
	if err != nil {
		t.Fatalf("reading a ClientHello: %v", err)
	}
	return raw
}

func TestReadClientHello(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"allowed.test", "Mixed.Case.test", ""} {
		raw := clientHello(t, name)
		got, sni, err := readClientHello(strings.NewReader(string(raw) + "after"))
		if err != nil || sni != name || string(got) != string(raw) {
			t.Errorf("%q: got %q (%d of %d bytes), %v", name, sni, len(got), len(raw), err)
		}
		// Every truncation is an error, never a name or a panic.
		for n := range len(raw) {
			if _, sni, err := readClientHello(strings.NewReader(string(raw[:n]))); err == nil {
				t.Fatalf("%q cut at %d bytes: no error (server name %q)", name, n, sni)
			}
		}
	}
	// Split across records: the handshake message is reassembled.
	raw := clientHello(t, "split.test")
	body := raw[5:]
	var split []byte
	for _, part := range [][]byte{body[:7], body[7:]} {
		split = append(split, tlsRecord, 3, 1, byte(len(part)>>8), byte(len(part)))
		split = append(split, part...)
	}
	if _, sni, err := readClientHello(strings.NewReader(string(split))); err != nil || sni != "split.test" {
		t.Errorf("a ClientHello in two records: %q, %v", sni, err)
	}
	for _, junk := range []string{"GET / HTTP/1.1\r\n\r\n", "\x16\x03\x01\x00\x00", "\x16\x03\x01\xff\xff" + strings.Repeat("x", 100), "\x16\x03\x01\x00\x04\x02\x00\x00\x00"} {
		if _, _, err := readClientHello(strings.NewReader(junk)); err == nil {
			t.Errorf("%q read as a ClientHello", junk)
		}
	}
}

func TestSNIMismatch(t *testing.T) {
	t.Parallel()
	name := &target{norm: host{name: "cdn.test"}}
	ip, _ := normalizeHost("192.0.2.7")
	addr := &target{norm: ip}
	for _, tt := range []struct {
		t    *target
		sni  string
		want string // "" passes
	}{
		{name, "cdn.test", ""},
		{name, "CDN.Test", ""},
		{name, "cdn.test.", ""},
		{name, "fronted.test", `"fronted.test" differs from the passthrough tunnel's name cdn.test`},
		{name, "", "without a server name in a passthrough tunnel to cdn.test"},
		{name, "cdn.test\x00.evil", "differs"},
		{addr, "", ""},
		{addr, "fronted.test", "differs"},
	} {
		if got := sniMismatch(tt.t, tt.sni); tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s with SNI %q: %q, want %q", tt.t.norm.name, tt.sni, got, tt.want)
		}
	}
}

func TestPassthroughSNI(t *testing.T) {
	t.Parallel()
	upCA := memCA(t)
	up := newUpstream(t, upCA, nil)
	e := newEnv(t, Config{Rules: Rules{
		Allow:       []string{"pass.test"},
		Hosts:       map[string]string{"pass.test": up.addr()},
		Passthrough: []string{"pass.test"},
	}})
	fetch := func(via string, serverName string, insecure bool) (string, error) {
		var c net.Conn
		if via == "socks" {
			code, sc := socks(t, e.socksAddr, socksConnect, socksDomain, "pass.test", 443)
			if code != 0 {
				t.Fatalf("SOCKS CONNECT pass.test: %#x", code)
			}
			c = sc
		} else {
			_, _, c, _ = raw(t, e.httpAddr, "CONNECT pass.test:443 HTTP/1.1\r\nHost: pass.test:443\r\n\r\n")
		}
		tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: pool(upCA), InsecureSkipVerify: insecure})
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		io.WriteString(tc, "GET /through HTTP/1.1\r\nHost: "+serverName+"\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	for _, via := range []string{"connect", "socks"} {
		if body, err := fetch(via, "pass.test", false); err != nil || body != "hello from pass.test /through" {
			t.Errorf("%s, matching SNI: %q, %v", via, body, err)
		}
		if body, err := fetch(via, "Pass.Test", false); err != nil || body != "hello from Pass.Test /through" {
			t.Errorf("%s, SNI in other case: %q, %v", via, body, err)
		}
	}
	before := up.hits.Load()
	for _, via := range []string{"connect", "socks"} {
		if body, err := fetch(via, "fronted.test", true); err == nil {
			t.Errorf("%s: a ClientHello for fronted.test in a tunnel to pass.test got through: %q", via, body)
		}
		if body, err := fetch(via, "", true); err == nil {
			t.Errorf("%s: a ClientHello without SNI in a tunnel to pass.test got through: %q", via, body)
		}
	}
	if up.hits.Load() != before {
		t.Errorf("upstream served %d requests of refused tunnels", up.hits.Load()-before)
	}
	got := e.entry(t, func(x Entry) bool { return x.Verdict == verdictDeny && strings.Contains(x.Reason, "fronted.test") })
	if !strings.Contains(got.Reason, "pass.test") || got.Host != "pass.test" {
		t.Errorf("the refusal names %q for host %q, want both names", got.Reason, got.Host)
	}
	e.entry(t, func(x Entry) bool {
		return x.Verdict == verdictDeny && strings.Contains(x.Reason, "without a server name")
	})

	// A plain HTTP client in a passthrough tunnel is served like any
	// other: request by request, for the tunnel's host only.
	_, _, c, br := raw(t, e.httpAddr, "CONNECT pass.test:443 HTTP/1.1\r\nHost: pass.test:443\r\n\r\n")
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: fronted.test\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("plain HTTP with another Host in a passthrough tunnel: %v, %v", resp, err)
	}
}
