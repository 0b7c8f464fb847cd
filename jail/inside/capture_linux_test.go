package inside

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCaptureInNamespace programs the capture in a fresh user and network
// namespace (as init does in the jail's) and checks that a connection to
// an address the namespace has no interface for reaches the capture
// socket with its original destination, that the jail's own loopback is
// left alone, and that IPv6 has no route.
func TestCaptureInNamespace(t *testing.T) {
	if os.Getenv("JAIL_CAPTURE_CHILD") == "1" {
		captureChild(t)
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare(1) is needed to make a network namespace: %v", err)
	}
	cmd := exec.Command(unshare, "-Urn", os.Args[0], "-test.run=^TestCaptureInNamespace$", "-test.v")
	cmd.Env = append(os.Environ(), "JAIL_CAPTURE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "capture ok") {
		t.Fatalf("in the namespace: %v\n%s", err, out)
	}
}

func captureChild(t *testing.T) {
	// Before the capture: no route at all.
	if _, err := net.DialTimeout("tcp", "192.0.2.7:443", time.Second); !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("dial before capture: %v, want network unreachable", err)
	}
	// ProgramCapture's first step, moving every thread to a namespace of
	// its own, needs a binary without cgo: unshare made this one already.
	if err := programNetns(3129); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "capture.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			// The bridge hands the client's socket over.
			line, client, err := takeHandedOff(c.(*net.UnixConn))
			c.Close()
			if err != nil {
				got <- err.Error()
				continue
			}
			got <- line
			client.Write([]byte("hi"))
			client.Close()
		}
	}()
	if _, err := StartCapture(Relay{Listen: "tcp:127.0.0.1:3129", Dial: "unix:" + sock}); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{"192.0.2.7:443", "10.1.2.3:22", "8.8.8.8:80"} {
		c, err := net.DialTimeout("tcp", dst, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", dst, err)
		}
		c.Write([]byte("x"))
		b := make([]byte, 2)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(b); err != nil || string(b) != "hi" {
			t.Fatalf("%s: read %q, %v", dst, b, err)
		}
		c.Close()
		if line := <-got; line != dst+"\n" {
			t.Fatalf("%s: header %q", dst, line)
		}
	}
	// The namespace's own loopback is not captured.
	ll, err := net.Listen("tcp", "127.0.0.1:4555")
	if err != nil {
		t.Fatal(err)
	}
	defer ll.Close()
	go func() {
		if c, err := ll.Accept(); err == nil {
			c.Write([]byte("lo"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", "127.0.0.1:4555")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(b); err != nil || string(b) != "lo" {
		t.Fatalf("loopback: %q, %v", b, err)
	}
	select {
	case line := <-got:
		t.Fatalf("a loopback connection was captured: %q", line)
	default:
	}
	// IPv6 has no route.
	if _, err := net.DialTimeout("tcp", "[2001:db8::1]:443", time.Second); err == nil {
		t.Fatal("an IPv6 connection was opened")
	}
	t.Log("capture ok")
}
