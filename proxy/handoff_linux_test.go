package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proxySockets serves the HTTP and SOCKS proxies of e on unix sockets,
// as for a jail's bridge, and returns their paths.
func proxySockets(t *testing.T, e *env) (httpSock, socksSock string) {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []struct {
		path  *string
		name  string
		serve func(net.Listener) error
	}{{&httpSock, "http.sock", e.srv.ServeHTTP}, {&socksSock, "socks.sock", e.srv.ServeSOCKS}} {
		*p.path = filepath.Join(dir, p.name)
		l, err := net.Listen("unix", *p.path)
		if err != nil {
			t.Fatal(err)
		}
		go p.serve(l)
		t.Cleanup(func() { l.Close() })
	}
	return httpSock, socksSock
}

const proxiedRequest = "GET http://plain.test/handed HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n"

// socksHello is a SOCKS5 greeting and a CONNECT to plain.test:80.
var socksHello = append([]byte{5, 1, 0, 5, 1, 0, 3, byte(len("plain.test"))}, append([]byte("plain.test"), 0, 80)...)

// readSOCKSReply reads the method choice and the reply to socksHello and
// returns the reply code.
func readSOCKSReply(t *testing.T, br *bufio.Reader) byte {
	t.Helper()
	var b [12]byte
	if _, err := io.ReadFull(br, b[:]); err != nil {
		t.Fatalf("no SOCKS reply: %v", err)
	}
	if b[0] != 5 || b[1] != 0 || b[2] != 5 {
		t.Fatalf("SOCKS reply %v", b)
	}
	return b[3]
}

// The bridge hands the socket it accepted on the proxy port over: the
// proxy serves HTTP proxy requests and SOCKS on it, and nothing goes back
// through the unix socket.
func TestProxySocketsServeTheHandedOverSocket(t *testing.T) {
	t.Parallel()
	plain := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"plain.test"}, Hosts: map[string]string{"plain.test": plain.addr()}}})
	httpSock, socksSock := proxySockets(t, e)
	for _, c := range []struct {
		name, sock string
		socks      bool
	}{{"http", httpSock, false}, {"socks", socksSock, true}} {
		client, accepted := tcpPair(t)
		uc := handOver(t, c.sock, handOffMark, fdOf(t, accepted))
		accepted.Close()
		br := bufio.NewReader(client)
		client.SetDeadline(time.Now().Add(5 * time.Second))
		req := proxiedRequest
		if c.socks {
			client.Write(socksHello)
			if rep := readSOCKSReply(t, br); rep != socksSucceeded {
				t.Fatalf("socks: CONNECT on the handed socket answered %d", rep)
			}
			req = strings.Replace(req, "http://plain.test", "", 1)
		}
		io.WriteString(client, req)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer on the handed-over socket: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "hello from plain.test /handed" {
			t.Fatalf("%s: got %d %q", c.name, resp.StatusCode, b)
		}
		uc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := uc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("%s: the unix socket carried bytes (%d, %v); want it closed", c.name, n, err)
		}
	}
}

// Any jailed process can reach the HTTP and SOCKS sockets and send any
// descriptor it holds. Each here carries (or is connected to something
// that carries) a proxy request for an allowed host: served, it would
// reach the upstream server and the answer would be written into the
// descriptor. Each is refused and logged, and the file is unchanged. So
// is a real TCP socket sent with bytes of the sender's besides the
// bridge's mark.
func TestProxySocketsRefuseOtherDescriptors(t *testing.T) {
	t.Parallel()
	plain := newUpstream(t, nil, nil)
	e := newEnv(t, Config{Rules: Rules{Allow: []string{"plain.test"}, Hosts: map[string]string{"plain.test": plain.addr()}}})
	httpSock, socksSock := proxySockets(t, e)
	var answered []*net.TCPConn
	var files []string
	for _, sc := range []struct{ scheme, sock string }{{"http", httpSock}, {"socks5", socksSock}} {
		st := strayDescriptors(t, proxiedRequest)
		files = append(files, st.path)
		_, a1 := tcpPair(t)
		c2, a2 := tcpPair(t)
		c3, a3 := tcpPair(t)
		io.WriteString(c2, proxiedRequest)
		io.WriteString(c3, proxiedRequest)
		answered = append(answered, c2, c3)

		for _, c := range []struct {
			name, bytes string
			fds         []int
			why         string
		}{
			{"a file", handOffMark, []int{st.file}, "not a socket"},
			{"a pipe", handOffMark, []int{st.pipe}, "not a socket"},
			{"a unix socket", handOffMark, []int{st.unix}, "not a TCP socket"},
			{"a UDP socket", handOffMark, []int{st.udp}, "not a TCP socket"},
			{"a listening TCP socket", handOffMark, []int{st.listening}, "not connected"},
			{"two TCP sockets", handOffMark, []int{fdOf(t, a1), fdOf(t, a2)}, "more than one descriptor"},
			{"a TCP socket with a request", proxiedRequest, []int{fdOf(t, a3)}, "other bytes than the bridge's mark"},
		} {
			uc := handOver(t, sc.sock, c.bytes, c.fds...)
			uc.SetReadDeadline(time.Now().Add(5 * time.Second))
			// Closed with the sender's bytes unread, a reset.
			if n, err := uc.Read(make([]byte, 64)); n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
				t.Errorf("%s, %s: the proxy answered (%d bytes, %v); want the connection closed", sc.scheme, c.name, n, err)
			}
			got := e.entry(t, func(x Entry) bool { return x.Scheme == sc.scheme && strings.Contains(x.Reason, c.why) })
			if got.Verdict != verdictDeny || !strings.HasPrefix(got.Reason, "invalid proxy connection: the socket handed over: ") {
				t.Errorf("%s, %s: logged %+v, want a denial of the socket handed over (%s)", sc.scheme, c.name, got, c.why)
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // a wrongly served descriptor would be answered by now
	if hits := plain.hits.Load(); hits != 0 {
		t.Errorf("the upstream server got %d requests from descriptors that must be refused", hits)
	}
	for _, file := range files {
		if b, _ := os.ReadFile(file); string(b) != proxiedRequest {
			t.Errorf("the proxy wrote into the file handed over: %q", b)
		}
	}
	for _, c := range answered {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, _ := c.Read(make([]byte, 1)); n != 0 {
			t.Error("a TCP socket that must be refused was answered")
		}
	}
}

// A client past the connection cap whose socket the bridge handed over
// is answered on that socket in its protocol: the 503 or the SOCKS
// failure would otherwise go to the unix socket, which the bridge has
// closed, and the client would see its connection cut unexplained.
func TestProxySocketsRefuseOverTheCapOnTheHandedSocket(t *testing.T) {
	t.Parallel()
	plain := newUpstream(t, nil, nil)
	e := newEnv(t, Config{
		Rules:  Rules{Allow: []string{"plain.test"}, Hosts: map[string]string{"plain.test": plain.addr()}},
		Limits: Limits{Conns: 1},
		total:  &connCounter{},
	})
	httpSock, socksSock := proxySockets(t, e)
	held, _ := net.Dial("tcp", e.httpAddr)
	defer held.Close()
	waitSlots(t, e.srv, 1)
	for _, c := range []struct {
		name, sock string
		socks      bool
	}{{"http", httpSock, false}, {"socks", socksSock, true}} {
		client, accepted := tcpPair(t)
		handOver(t, c.sock, handOffMark, fdOf(t, accepted))
		accepted.Close()
		client.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(client)
		if c.socks {
			client.Write(socksHello)
			if rep := readSOCKSReply(t, br); rep != socksGeneralFailure {
				t.Errorf("socks past the cap: reply %d, want a general failure", rep)
			}
			continue
		}
		io.WriteString(client, proxiedRequest)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("http past the cap: no answer on the handed socket: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "connection limit reached") {
			t.Errorf("http past the cap: %d %q, want 503 naming the limit", resp.StatusCode, b)
		}
	}
	if hits := plain.hits.Load(); hits != 0 {
		t.Errorf("the upstream server got %d requests past the cap", hits)
	}
}
