package proxy

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CA is the per-user certificate authority that signs the leaf
// certificates of intercepted hosts. Its key never enters the jail; the
// jailed process trusts Cert through a CA bundle.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
)

// LoadOrCreateCA loads the CA in dir (ca.pem, ca-key.pem) or, when neither
// file exists, creates one: an ECDSA P-256 self-signed "jail local CA"
// valid for ten years, the certificate mode 0644 and the key mode 0600, in
// dir created mode 0700. Concurrent first runs are serialized by a lock
// file in dir, each file is written to a temporary name and renamed, and
// every caller returns the pair that is on disk.
func LoadOrCreateCA(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating CA directory: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return nil, fmt.Errorf("locking CA directory %q: %w", dir, err)
	}
	defer unlock()

	ca, err := loadCA(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return ca, err
	}
	certPEM, keyPEM, err := newCA()
	if err != nil {
		return nil, err
	}
	// The key goes first: a crash in between leaves no certificate, and
	// with no certificate the pair is created afresh next time.
	if err := WriteFileAtomic(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(filepath.Join(dir, caCertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	return loadCA(dir)
}

// loadCA returns an error matching fs.ErrNotExist when the certificate is
// missing (a new pair is then due), and a descriptive error when the pair
// is there but unusable.
func loadCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("CA certificate %q has no key %q (remove the certificate to create a new CA, then trust it again where you had trusted the old one)", certPath, keyPath)
		}
		return nil, fmt.Errorf("reading CA key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading CA from %q: %w (remove %s and %s to create a new CA)", dir, err, caCertFile, caKeyFile)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || pair.Leaf == nil || !pair.Leaf.IsCA {
		return nil, fmt.Errorf("loading CA from %q: not a CA certificate and signing key (remove %s and %s to create a new CA)", dir, caCertFile, caKeyFile)
	}
	return &CA{Cert: pair.Leaf, Key: signer}, nil
}

func newCA() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "jail local CA", Organization: []string{"jail"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// Leaf returns a certificate for host (a name or an IP literal) signed by
// the CA, with key as its key.
func (ca *CA) Leaf(host string, key *ecdsa.PrivateKey) (*tls.Certificate, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(0, 0, 30),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		SubjectKeyId: keyID(&key.PublicKey),
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate for %q: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(b)
	return sum[:20]
}

// WriteFileAtomic writes data to a temporary file in the same directory
// (created mode 0700 if missing) and renames it over path: a crash leaves
// the old file or the new one, never half of either.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing %q: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %q: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %q: %w", path, err)
	}
	return nil
}

// leafCache keeps the most recently used leaf certificates, at most max,
// and signs each missing one once however many connections ask for it at
// the same time.
type leafCache struct {
	max     int
	mu      sync.Mutex
	order   *list.List // of *leafEntry, most recently used first
	entries map[string]*list.Element
	pending map[string]*leafCall
}

type leafEntry struct {
	host string
	cert *tls.Certificate
}

// leafCall is a signing in progress; done is closed when it has ended.
type leafCall struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

func newLeafCache(max int) *leafCache {
	return &leafCache{max: max, order: list.New(), entries: map[string]*list.Element{}, pending: map[string]*leafCall{}}
}

// get returns host's certificate, calling sign when none is cached or the
// cached one is about to expire.
func (lc *leafCache) get(host string, sign func() (*tls.Certificate, error)) (*tls.Certificate, error) {
	lc.mu.Lock()
	if el, ok := lc.entries[host]; ok {
		if c := el.Value.(*leafEntry).cert; time.Until(c.Leaf.NotAfter) > time.Hour {
			lc.order.MoveToFront(el)
			lc.mu.Unlock()
			return c, nil
		}
	}
	if call, ok := lc.pending[host]; ok {
		lc.mu.Unlock()
		<-call.done
		return call.cert, call.err
	}
	call := &leafCall{done: make(chan struct{})}
	lc.pending[host] = call
	lc.mu.Unlock()

	call.cert, call.err = sign()
	lc.mu.Lock()
	delete(lc.pending, host)
	if call.err == nil {
		lc.put(host, call.cert)
	}
	lc.mu.Unlock()
	close(call.done)
	return call.cert, call.err
}

// put stores c for host, dropping the least recently used past max.
// lc.mu is held.
func (lc *leafCache) put(host string, c *tls.Certificate) {
	if el, ok := lc.entries[host]; ok {
		el.Value.(*leafEntry).cert = c
		lc.order.MoveToFront(el)
		return
	}
	lc.entries[host] = lc.order.PushFront(&leafEntry{host: host, cert: c})
	for lc.order.Len() > lc.max {
		last := lc.order.Back()
		lc.order.Remove(last)
		delete(lc.entries, last.Value.(*leafEntry).host)
	}
}

// len is the number of certificates cached.
func (lc *leafCache) len() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.order.Len()
}
