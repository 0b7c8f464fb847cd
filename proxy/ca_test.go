package proxy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestLoadOrCreateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, "ca.pem"): 0o644, filepath.Join(dir, "ca-key.pem"): 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
	}
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "jail local CA" {
		t.Errorf("certificate: IsCA=%v CN=%q", ca.Cert.IsCA, ca.Cert.Subject.CommonName)
	}
	if _, ok := ca.Cert.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("public key is %T, want ECDSA", ca.Cert.PublicKey)
	}
	if life := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore); life < 10*365*24*time.Hour {
		t.Errorf("valid for %v, want 10 years", life)
	}

	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Cert.Raw, ca.Cert.Raw) {
		t.Error("second call did not reload the same CA")
	}

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, host := range []string{"allowed.test", "10.1.2.3"} {
		leaf, err := again.Leaf(host, key)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("leaf for %s does not verify against the CA: %v", host, err)
		}
	}
}

func TestLoadOrCreateCAConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	cas := make([]*CA, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { cas[i], errs[i] = LoadOrCreateCA(dir) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !cas[i].Cert.Equal(cas[0].Cert) {
			t.Fatalf("caller %d got a different CA", i)
		}
	}
	onDisk, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !onDisk.Cert.Equal(cas[0].Cert) {
		t.Fatal("the CA on disk is not the one the callers got")
	}
}

func TestLoadCABroken(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCA(dir); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "ca-key.pem"))
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("a certificate without its key was accepted or silently replaced")
	}
	os.WriteFile(filepath.Join(dir, "ca-key.pem"), []byte("garbage"), 0o600)
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("a garbage key was accepted")
	}
	// A key without a certificate is what a crash between the two
	// renames leaves: a new pair is created.
	os.Remove(filepath.Join(dir, "ca.pem"))
	if _, err := LoadOrCreateCA(dir); err != nil {
		t.Fatalf("after a half-written CA: %v", err)
	}
}
