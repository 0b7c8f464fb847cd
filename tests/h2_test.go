package tests

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// TestH2CurlInjection: curl --http2 through the jail negotiates HTTP/2
// with the intercepting proxy, its placeholder reaches an HTTP/2 upstream
// as the real value, and the value echoed back reaches curl as the
// placeholder. A second request names another host in :authority (curl
// sends its Host header as :authority) than the tunnel's SNI: it must be
// refused with 403 and reach no server.
func TestH2CurlInjection(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		var mu sync.Mutex
		var protos, keys []string
		g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY"}, nil, func(g *secretsRig) map[string]any {
			srv := newTestServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				protos, keys = append(protos, r.Proto), append(keys, r.Header.Get("X-Api-Key"))
				mu.Unlock()
				w.Write([]byte("echo " + r.Header.Get("X-Api-Key") + "\n"))
			}))
			srv.EnableHTTP2 = true
			startTestServer(t, srv, &secretsPKI.get(t).Leaf)
			return map[string]any{"network": map[string]any{
				"allow": []string{anthropicHost},
				"hosts": map[string]string{anthropicHost: srv.Listener.Addr().String()},
			}}
		})
		real := g.Real["ANTHROPIC_API_KEY"]
		r := s.Sh(`
			curl -sS --http2 --max-time 15 -w '\nversion=%{http_version} code=%{http_code}\n' \
				-H "x-api-key: $ANTHROPIC_API_KEY" https://` + anthropicHost + `/v1/messages
			echo ph=$ANTHROPIC_API_KEY
			curl -sS --http2 --max-time 15 -o /dev/null -w 'spoof version=%{http_version} code=%{http_code}\n' \
				-H 'Host: evil.example.test' -H "x-api-key: $ANTHROPIC_API_KEY" https://` + anthropicHost + `/v1/spoof`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, "version=2 code=200") {
			t.Fatalf("curl --http2 did not get a 200 over HTTP/2 through the jail:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "spoof version=2 code=403") {
			t.Errorf("an :authority other than the tunnel's was not refused with 403 over HTTP/2:\n%s", r)
		}
		ph := ""
		for _, l := range lines(r.Stdout) {
			if strings.HasPrefix(l, "ph=") {
				ph = strings.TrimPrefix(l, "ph=")
			}
		}
		if ph == "" || ph == real || !strings.Contains(r.Stdout, "echo "+ph) {
			t.Errorf("the echoed value did not come back as the placeholder %q:\n%s", ph, r)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(keys) != 1 || keys[0] != real {
			t.Errorf("the upstream saw x-api-key %q, want the real value once", keys)
		}
		if len(protos) != 1 || protos[0] != "HTTP/2.0" {
			t.Errorf("the proxy spoke %q to an HTTP/2 upstream", protos)
		}
		hostLogHasNoReal(t, s, g)
	})
}

// rawCodec sends gRPC messages as they are: the tests need no schema.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

var grpcClient struct {
	once sync.Once
	path string
	err  error
}

// grpcClientBinary builds testdata/h2grpc, the gRPC client run inside
// the jail, once for every test.
func grpcClientBinary(t *testing.T) []byte {
	t.Helper()
	grpcClient.once.Do(func() {
		dir, err := os.MkdirTemp("", "h2grpc")
		if err != nil {
			grpcClient.err = err
			return
		}
		grpcClient.path = filepath.Join(dir, "h2grpc")
		out, err := exec.Command("go", "build", "-o", grpcClient.path, "./testdata/h2grpc").CombinedOutput()
		if err != nil {
			grpcClient.err = fmt.Errorf("building the gRPC client: %v\n%s", err, out)
		}
	})
	if grpcClient.err != nil {
		t.Fatal(grpcClient.err)
	}
	b, err := os.ReadFile(grpcClient.path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// grpcEcho serves any method: it records the x-api-key metadata it got,
// sends it back in a header ("seen-key"), and answers Unary with the
// request message and a trailer, Stream with five messages.
type grpcEcho struct {
	mu   sync.Mutex
	keys []string
}

func (g *grpcEcho) handle(_ any, st grpc.ServerStream) error {
	md, _ := metadata.FromIncomingContext(st.Context())
	key := strings.Join(md.Get("x-api-key"), ",")
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.mu.Unlock()
	var in []byte
	if err := st.RecvMsg(&in); err != nil {
		return err
	}
	st.SetHeader(metadata.Pairs("seen-key", key))
	method, _ := grpc.MethodFromServerStream(st)
	if method == "/jailtest.Echo/Stream" {
		for i := 0; i < 5; i++ {
			m := []byte(fmt.Sprintf("part %d", i))
			if err := st.SendMsg(&m); err != nil {
				return err
			}
			time.Sleep(300 * time.Millisecond) // a buffered stream would arrive all at once
		}
		return nil
	}
	st.SetTrailer(metadata.Pairs("done", "yes"))
	return st.SendMsg(&in)
}

// TestH2GRPC: a grpc-go client in the jail calls a grpc-go server (TLS,
// on the host's loopback, under a name the proxy intercepts) through
// HTTPS_PROXY: a unary call whose x-api-key metadata is a placeholder
// reaches the server as the real value and is echoed back as the
// placeholder, its trailer arrives, a server-streaming call gets every
// message as it is sent (not held until the stream ends), and a 4 MiB message goes each way intact.
func TestH2GRPC(t *testing.T) {
	t.Parallel()
	bin := grpcClientBinary(t)
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		echo := &grpcEcho{}
		g := setupSecrets(t, s, []string{"ANTHROPIC_API_KEY"}, nil, func(g *secretsRig) map[string]any {
			srv := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&secretsPKI.get(t).Leaf)),
				grpc.ForceServerCodec(rawCodec{}), grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20),
				grpc.UnknownServiceHandler(echo.handle))
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(l)
			t.Cleanup(srv.Stop)
			return map[string]any{"network": map[string]any{
				"allow": []string{anthropicHost},
				"hosts": map[string]string{anthropicHost: l.Addr().String()},
			}}
		})
		s.WriteFile(filepath.Join(s.Project, "h2grpc"), string(bin), 0o755)
		real := g.Real["ANTHROPIC_API_KEY"]
		r := s.Sh(`echo ph=$ANTHROPIC_API_KEY; KEY=$ANTHROPIC_API_KEY ./h2grpc ` + anthropicHost + `:443`)
		g.noReal(t, "the jail's output", r.Stdout+r.Stderr)
		ph := ""
		for _, l := range lines(r.Stdout) {
			if strings.HasPrefix(l, "ph=") {
				ph = strings.TrimPrefix(l, "ph=")
			}
		}
		for _, want := range []string{"unary=ping seen=[" + ph + "] trailer=[yes]", "stream=5 streamed=true", "big=4194304 same=true"} {
			if ph == "" || !strings.Contains(r.Stdout, want) {
				t.Errorf("the gRPC client through the jail did not print %q:\n%s", want, r)
			}
		}
		echo.mu.Lock()
		defer echo.mu.Unlock()
		for _, k := range echo.keys {
			if k != real {
				t.Errorf("the gRPC server saw x-api-key %q, want the real value on every call", k)
			}
		}
		if len(echo.keys) != 3 {
			t.Errorf("the gRPC server got %d calls, want 3", len(echo.keys))
		}
		hostLogHasNoReal(t, s, g)
	})
}
