package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteCABundle copies only the CERTIFICATE blocks of the host bundle, so
// a misnamed SSL_CERT_FILE holding a private key never reaches the jail.
func TestWriteBundleCopiesOnlyCertificates(t *testing.T) {
	dir := t.TempDir()
	cert := "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n"
	ca := "-----BEGIN CERTIFICATE-----\nAwQF\n-----END CERTIFICATE-----\n"
	host := filepath.Join(dir, "host.pem")
	os.WriteFile(host, []byte("# comment\n"+cert+"canary-line\n-----BEGIN PRIVATE KEY-----\nBgcI\n-----END PRIVATE KEY-----\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "ca.pem"), []byte(ca), 0o644)
	out := filepath.Join(dir, "bundle.pem")
	if err := WriteCABundle(out, filepath.Join(dir, "ca.pem"), host); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if string(b) != cert+ca {
		t.Errorf("bundle:\n%s\nwant the host's certificate then the jail CA, nothing else", b)
	}
	if err := WriteCABundle(out, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing host bundle: %v, want an error naming it", err)
	}
}
