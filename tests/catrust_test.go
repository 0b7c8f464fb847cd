package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// gogetSrc is a Go HTTPS client: Go's default transport reads HTTPS_PROXY
// and crypto/x509 reads SSL_CERT_FILE. It prints one probe line.
const gogetSrc = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	name := os.Args[1]
	clean := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	c := &http.Client{Timeout: 15 * time.Second}
	r, err := c.Get(os.Args[2])
	if err != nil {
		fmt.Printf("@@%s\t1\t000 000\t\t%s\n", name, clean(err.Error()))
		return
	}
	b, _ := io.ReadAll(r.Body)
	fmt.Printf("@@%s\t0\t%d 000\t%s\t\n", name, r.StatusCode, clean(string(b)))
}
`

var goget struct {
	once sync.Once
	bin  []byte
	err  error
}

// writeGoget builds the Go client once and copies it into the project,
// where the jail can run it.
func writeGoget(t *testing.T, s *Sandbox) {
	t.Helper()
	goget.once.Do(func() {
		dir, err := os.MkdirTemp("", "goget-")
		if err != nil {
			goget.err = err
			return
		}
		defer os.RemoveAll(dir)
		os.WriteFile(filepath.Join(dir, "main.go"), []byte(gogetSrc), 0o644)
		os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module goget\n\ngo 1.21\n"), 0o644)
		build := exec.Command("go", "build", "-o", "goget", ".")
		build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			goget.err = &buildError{err, out}
			return
		}
		goget.bin, goget.err = os.ReadFile(filepath.Join(dir, "goget"))
	})
	if goget.err != nil {
		t.Fatalf("building the Go client: %v", goget.err)
	}
	s.WriteFile(s.Project+"/goget", string(goget.bin), 0o755)
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// trustClientsSh runs curl, python3 urllib, node https, git and Go against
// https://api.allowed.test/PREFIX-*, then prints how many certificates the
// bundle holds, then the CA's private key if the jail can read it and
// every file of the jail's trust and sockets directory.
const trustClientsSh = probeSh + `
p=$1
echo session=$JAIL_SESSION
probe curl https://api.allowed.test/$p-curl
python3 urlget.py python https://api.allowed.test/$p-python
node netget.js node https://api.allowed.test/$p-node
./goget go https://api.allowed.test/$p-go
if git clone -q https://api.allowed.test/repo.git clone 2>git.err; then echo "@@git	0	200 000	$(cat clone/served.txt)	"; else echo "@@git	1	000 000		$(tr '\n' ' ' <git.err)"; fi
echo ==certs; grep -c 'BEGIN CERTIFICATE' /run/jail/ca.pem
echo ==key
cat "$CADIR/ca-key.pem" 2>/dev/null && echo key-readable
cat /run/jail/ca.pem /run/jail/net/* 2>/dev/null
echo ==end
`

// runTrustClients runs trustClientsSh in s and checks that every client
// got the upstream's answer, that the upstream saw each request, and that
// no byte of the jail CA's private key reached the jail. It returns the
// number of certificates the jail's bundle holds.
func runTrustClients(t *testing.T, s *Sandbox, n *netServers, prefix string) int {
	t.Helper()
	writeNetClients(s)
	writeGoget(t, s)
	caDir := filepath.Join(s.Home, ".config", "jail", "ca")
	s.WriteFile(s.Project+"/clients.sh", strings.Replace(trustClientsSh, "$CADIR", caDir, -1), 0o755)
	r := s.Jail("--", "sh", "clients.sh", prefix)
	ps := probes(t, r)
	for _, c := range []string{"curl", "python", "node", "go"} {
		wantOK(t, getProbe(t, ps, r, c), "/"+prefix+"-"+c)
		if !n.API.Saw("/" + prefix + "-" + c) {
			t.Errorf("%s: the upstream did not see /%s-%s (saw %v)", c, prefix, c, n.API.Paths())
		}
	}
	if g := getProbe(t, ps, r, "git"); g.Exit != 0 || g.Body != "served by git http-backend" {
		t.Errorf("git clone: %s", g)
	}
	key, err := os.ReadFile(filepath.Join(caDir, "ca-key.pem"))
	if err != nil || !strings.Contains(string(key), "PRIVATE KEY") {
		t.Fatalf("the jail CA's key on the host: %v %q", err, key)
	}
	inside := between(r.Stdout, "==key\n", "==end")
	for _, line := range strings.Split(string(key), "\n") {
		if len(line) > 16 && strings.Contains(inside, line) {
			t.Errorf("the jail read the CA's private key (%q):\n%s", line, inside)
		}
	}
	if strings.Contains(inside, "key-readable") || strings.Contains(inside, "PRIVATE KEY") {
		t.Errorf("the jail read a private key:\n%s", inside)
	}
	certs, err := strconv.Atoi(strings.TrimSpace(between(r.Stdout, "==certs\n", "==key")))
	if err != nil {
		t.Fatalf("no certificate count:\n%s", r)
	}
	return certs
}

// TestCATrustIntercepted: with no passthrough host the jail trusts the jail
// CA alone, one certificate, and every client (curl, python3 urllib, node
// https, git, Go) still reaches an intercepted allowed host; the CA's key
// is never readable inside.
func TestCATrustIntercepted(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		gitRoot := t.TempDir()
		makeBareRepo(t, gitRoot)
		n := setupNet(t, s, gitRoot)
		if c := runTrustClients(t, s, n, "icpt"); c != 1 {
			t.Errorf("/run/jail/ca.pem holds %d certificates; want the jail CA alone", c)
		}
	})
}

// TestCATrustPassthrough: a passthrough host's tunnel is not intercepted,
// so the jail's bundle holds the host's CAs (here the test CA, trusted on
// the host through SSL_CERT_FILE) and every client verifies the upstream's
// own certificate. The host's SSL_CERT_FILE also holds a private key and a
// canary line: only its certificates reach the jail.
func TestCATrustPassthrough(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		gitRoot := t.TempDir()
		makeBareRepo(t, gitRoot)
		n := setupNet(t, s, gitRoot)
		addPassthrough(t, s, "api.allowed.test")
		bundle := filepath.Join(s.Base, "trust", "bundle.pem")
		b, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		const canary = "trust-canary-4f1e"
		s.WriteFile(bundle, string(b)+"\n"+canary+"\n-----BEGIN PRIVATE KEY-----\nTUFSS0VSLW5vdC1hLWtleQ==\n-----END PRIVATE KEY-----\n", 0o644)
		hostCerts := strings.Count(string(b), "BEGIN CERTIFICATE")
		if c := runTrustClients(t, s, n, "pt"); c != hostCerts+1 {
			t.Errorf("/run/jail/ca.pem holds %d certificates; want the host's %d plus the jail CA", c, hostCerts)
		}
		// The tunnel reached the upstream itself: the certificate curl sees
		// is the upstream's, which the test CA alone verifies.
		s.WriteFile(s.Project+"/testca.pem", string(netPKI.get(t).CAPEM), 0o644)
		r := s.Sh(probeSh + "probe own --cacert testca.pem https://api.allowed.test/pt-own\necho ==bundle; grep -c -e " + canary + " -e 'PRIVATE KEY' /run/jail/ca.pem; true")
		wantOK(t, getProbe(t, probes(t, r), r, "own"), "/pt-own")
		if got := strings.TrimSpace(after(r.Stdout, "==bundle\n")); got != "0" {
			t.Errorf("the jail's bundle holds what is not a certificate of the host's SSL_CERT_FILE (%s lines):\n%s", got, r)
		}
	})
}

// after is what follows the first a in s ("" when there is none).
func after(s, a string) string {
	if i := strings.Index(s, a); i >= 0 {
		return s[i+len(a):]
	}
	return ""
}
