package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers the network, secrets and command-rule tests share: test CAs
// trusted on the host side, the servers the proxy forwards to, jail.json
// and the decision log.

// testPKI is a test CA and a leaf signed by it. The host side of jail
// trusts the CA through SSL_CERT_FILE; the jail never sees it.
type testPKI struct {
	CAPEM []byte
	Leaf  tls.Certificate
}

// lazyPKI makes a CA named caName and a leaf for names once, on first use.
type lazyPKI struct {
	what   string // how a failure names it
	caName string
	names  []string

	once sync.Once
	pki  *testPKI
	err  error
}

func (p *lazyPKI) get(t *testing.T) *testPKI {
	t.Helper()
	p.once.Do(func() { p.pki, p.err = newPKIFor(p.caName, p.names) })
	if p.err != nil {
		t.Fatalf("%s: %v", p.what, p.err)
	}
	return p.pki
}

func newPKIFor(caName string, names []string) (*testPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	return &testPKI{
		CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Leaf:  tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey},
	}, nil
}

// trustCA writes s.Base/trust/file, a bundle of the system CAs and p's CA
// readable by the runner, and points the jail process's SSL_CERT_FILE at
// it: the proxy verifies upstream servers with the host's trust; the jail
// never sees it.
func trustCA(t *testing.T, s *Sandbox, p *testPKI, file string) string {
	t.Helper()
	var bundle []byte
	for _, sys := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"} {
		if b, err := os.ReadFile(sys); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	bundle = append(bundle, p.CAPEM...)
	path := filepath.Join(s.Base, "trust", file)
	s.WriteFile(path, string(bundle), 0o644)
	s.Env = append(s.Env, "SSL_CERT_FILE="+path)
	return path
}

// newTestServer is an unstarted server on the host's loopback that does
// not log: refused handshakes and plain HTTP on a TLS port are expected.
func newTestServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	return srv
}

// startTestServer starts srv, with TLS and leaf when leaf is set, and
// closes it when the test ends.
func startTestServer(t *testing.T, srv *httptest.Server, leaf *tls.Certificate) {
	t.Helper()
	if leaf != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
}

// reqLog is the requests a test server received, safe for its handlers.
type reqLog[T any] struct {
	mu   sync.Mutex
	reqs []T
}

func (l *reqLog[T]) add(r T) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

// Requests returns every request received so far.
func (l *reqLog[T]) Requests() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.reqs...)
}

// dumpRequests prints requests one a line for a failure message.
func dumpRequests[T fmt.Stringer](rs []T) string {
	if len(rs) == 0 {
		return "  (no requests)\n"
	}
	var b strings.Builder
	for _, r := range rs {
		b.WriteString("  " + r.String() + "\n")
	}
	return b.String()
}

// writeJailJSON writes the project's jail.json (read-only inside the jail,
// so only the host changes it between runs).
func writeJailJSON(t *testing.T, s *Sandbox, cfg map[string]any) {
	t.Helper()
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	s.WriteFile(s.Project+"/jail.json", string(b)+"\n", 0o644)
}

// decisionLog is the runner's decision log on the host.
func decisionLog(s *Sandbox) string {
	return filepath.Join(s.Home, ".local/state/jail/decisions.jsonl")
}
