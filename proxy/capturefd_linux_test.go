package proxy

import (
	"bufio"
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

// handOver sends line and fds on a new connection to the capture socket,
// as the jail's bridge (or a jailed process) can, and returns the
// connection.
func handOver(t *testing.T, sock, line string, fds ...int) *net.UnixConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	uc := c.(*net.UnixConn)
	if _, _, err := uc.WriteMsgUnix([]byte(line), syscall.UnixRights(fds...), nil); err != nil {
		t.Fatal(err)
	}
	return uc
}

// tcpPair is both ends of a loopback TCP connection: the client's and the
// one a listener accepted (what the bridge hands over).
func tcpPair(t *testing.T) (client, accepted *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); a.Close() })
	return c.(*net.TCPConn), a.(*net.TCPConn)
}

func fdOf(t *testing.T, c interface {
	File() (*os.File, error)
}) int {
	t.Helper()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

const handedRequest = "GET /handed HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n"

// The bridge hands the accepted socket over: the proxy serves the client
// on it, decided like any captured connection, and nothing goes back
// through the capture socket.
func TestCaptureServesTheHandedOverSocket(t *testing.T) {
	t.Parallel()
	plain := newUpstream(t, nil, nil)
	_, sock := captureEnv(t, Config{Rules: Rules{Allow: []string{"plain.test"}, Hosts: map[string]string{"plain.test": plain.addr()}}})
	client, accepted := tcpPair(t)
	uc := handOver(t, sock, "192.0.2.1:80\n", fdOf(t, accepted))
	accepted.Close()
	io.WriteString(client, handedRequest)
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		t.Fatalf("no answer on the handed-over socket: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello from plain.test /handed" {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
	uc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := uc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("the capture socket carried bytes (%d, %v); want it closed", n, err)
	}
}

// Any jailed process can write to the capture socket and send any
// descriptor it holds. Each here carries (or is connected to something
// that carries) a request for an allowed host: served, it would reach the
// upstream server and the answer would be written into the descriptor (a
// file of the project changed by the proxy). Each is refused and logged,
// and the file is unchanged.
func TestCaptureRefusesOtherDescriptors(t *testing.T) {
	t.Parallel()
	plain := newUpstream(t, nil, nil)
	e, sock := captureEnv(t, Config{Rules: Rules{Allow: []string{"plain.test"}, Hosts: map[string]string{"plain.test": plain.addr()}}})
	st := strayDescriptors(t, handedRequest)
	_, a1 := tcpPair(t)
	c2, a2 := tcpPair(t)
	io.WriteString(c2, handedRequest)

	for _, c := range []struct {
		name string
		fds  []int
		why  string
	}{
		{"a file", []int{st.file}, "not a socket"},
		{"a pipe", []int{st.pipe}, "not a socket"},
		{"a unix socket", []int{st.unix}, "not a TCP socket"},
		{"a UDP socket", []int{st.udp}, "not a TCP socket"},
		{"a listening TCP socket", []int{st.listening}, "not connected"},
		{"two TCP sockets", []int{fdOf(t, a1), fdOf(t, a2)}, "more than one descriptor"},
	} {
		uc := handOver(t, sock, "192.0.2.1:80\n", c.fds...)
		uc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := uc.Read(make([]byte, 64)); n != 0 || err != io.EOF {
			t.Errorf("%s: the proxy answered (%d bytes, %v); want the connection closed", c.name, n, err)
		}
		got := e.entry(t, func(x Entry) bool {
			return x.Method == "CAPTURE" && strings.Contains(x.Reason, c.why)
		})
		if got.Verdict != verdictDeny || !strings.HasPrefix(got.Reason, "invalid capture: the socket handed over: ") {
			t.Errorf("%s: logged %+v, want a denial of the socket handed over (%s)", c.name, got, c.why)
		}
	}
	time.Sleep(200 * time.Millisecond) // a wrongly served descriptor would be answered by now
	if hits := plain.hits.Load(); hits != 0 {
		t.Errorf("the upstream server got %d requests from descriptors that must be refused", hits)
	}
	if b, _ := os.ReadFile(st.path); string(b) != handedRequest {
		t.Errorf("the proxy wrote into the file handed over: %q", b)
	}
	c2.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := c2.Read(make([]byte, 1)); n != 0 {
		t.Error("a TCP socket handed over with another was answered")
	}
}

// The process that hands a socket over keeps its copy of the same open
// file and may make it blocking again. The proxy's reads and writes of a
// handed socket still wait only in the poller: a read deadline ends a
// read with no data, a write deadline ends a write to a peer that reads
// nothing, and a close returns at once.
func TestHandedSocketMadeBlockingKeepsDeadlines(t *testing.T) {
	t.Parallel()
	client, accepted := tcpPair(t)
	fd := fdOf(t, accepted)
	f := os.NewFile(uintptr(fd), "copy")
	fc, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newHandedConn(fc)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetNonblock(fd, false); err != nil { // the sender's copy
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Read(make([]byte, 16))
		done <- err
	}()
	select {
	case err := <-done:
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Errorf("read: got %v, want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read of the handed socket made blocking waited past its deadline")
	}
	go func() {
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Write(make([]byte, 64<<20)) // the client reads nothing
		done <- err
	}()
	select {
	case err := <-done:
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Errorf("write: got %v, want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write of the handed socket made blocking waited past its deadline")
	}
	io.WriteString(client, "x")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4)
	if n, err := c.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Errorf("control: read (%d, %v), want the client's byte", n, err)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the handed socket made blocking waited")
	}
}

// strays are descriptors a jailed process could send instead of a
// connected TCP socket, each holding payload where it can be read.
type strays struct {
	path                             string // the file's
	file, pipe, unix, udp, listening int
}

// strayDescriptors opens one of each kind, closed when the test ends; the
// file is written with payload in t's temporary directory.
func strayDescriptors(t *testing.T, payload string) strays {
	t.Helper()
	file := filepath.Join(t.TempDir(), "request.txt")
	if err := os.WriteFile(file, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	io.WriteString(pw, payload)
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(pair[0]); syscall.Close(pair[1]) })
	syscall.Write(pair[1], []byte(payload))
	udp, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	listening, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listening.Close() })
	return strays{path: file, file: int(f.Fd()), pipe: int(pr.Fd()), unix: pair[0], udp: fdOf(t, udp), listening: fdOf(t, listening.(*net.TCPListener))}
}
