package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

func TestTrustOpJailCAAloneUnlessSomethingIsNotIntercepted(t *testing.T) {
	f := &Facts{CADir: "/c", SessionDir: "/s"}
	for _, c := range []struct {
		name        string
		pol         jail.Policy
		src, bundle string
	}{
		{"intercepted", jail.Policy{}, "/c/ca.pem", ""},
		{"passthrough", jail.Policy{Network: jail.NetworkConfig{Passthrough: []string{"pinned.example.test"}}}, "/s/ca-bundle.pem", "/s/ca-bundle.pem"},
		{"forward", jail.Policy{Forward: []int{5432}}, "/s/ca-bundle.pem", "/s/ca-bundle.pem"},
	} {
		n := &NetPlan{}
		op := trustOp(&c.pol, f, n)
		if op.Kind != "ro-bind" || op.Src != c.src || op.Dest != CABundlePath || n.Bundle != c.bundle {
			t.Errorf("%s: op %+v, bundle %q; want %s bound, bundle %q", c.name, op, n.Bundle, c.src, c.bundle)
		}
	}
}

func TestWriteBundleCopiesOnlyCertificates(t *testing.T) {
	dir := t.TempDir()
	cert := "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n"
	ca := "-----BEGIN CERTIFICATE-----\nAwQF\n-----END CERTIFICATE-----\n"
	host := filepath.Join(dir, "host.pem")
	os.WriteFile(host, []byte("# comment\n"+cert+"canary-line\n-----BEGIN PRIVATE KEY-----\nBgcI\n-----END PRIVATE KEY-----\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "ca.pem"), []byte(ca), 0o644)
	out := filepath.Join(dir, "bundle.pem")
	if err := writeBundle(out, filepath.Join(dir, "ca.pem"), host); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if string(b) != cert+ca {
		t.Errorf("bundle:\n%s\nwant the host's certificate then the jail CA, nothing else", b)
	}
	if err := writeBundle(out, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing host bundle: %v, want an error naming it", err)
	}
}

func TestHostCAFilePrefersSSLCertFile(t *testing.T) {
	env := map[string]string{"SSL_CERT_FILE": "/etc/custom.pem"}
	if got := hostCAFile(func(k string) string { return env[k] }); got != "/etc/custom.pem" {
		t.Errorf("hostCAFile = %q, want SSL_CERT_FILE's", got)
	}
	got := hostCAFile(func(string) string { return "" })
	if got != "" && !fileExists(got) {
		t.Errorf("hostCAFile without SSL_CERT_FILE = %q, which does not exist", got)
	}
}
