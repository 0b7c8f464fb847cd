package inside

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCaptureInNamespace programs the capture in a fresh user and network
// namespace (as init does in the jail's) and checks that a connection to
// an address the namespace has no interface for reaches the capture
// socket with its original destination, that the jail's own loopback is
// left alone, that IPv6 has no route but to the synthetic prefix, which is
// captured too, that (shortTimeWait) a closed captured connection leaves
// the connection tracking table within seconds, and (dnsAndUDP) that DNS
// reaches the resolver port while other UDP is refused.
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
			client.Read(make([]byte, 1)) // the client's "x": closed unread, it would reset the connection
			client.Write([]byte("hi"))
			client.Close()
		}
	}()
	if _, err := StartCapture(Relay{Listen: "tcp:127.0.0.1:3129", Dial: "unix:" + sock, HandOff: true}); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{"192.0.2.7:443", "10.1.2.3:22", "8.8.8.8:80", "[fd6a:6169:6c00::5]:443"} {
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
	shortTimeWait(t)
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
	// IPv6 outside the synthetic prefix has no route.
	for _, dst := range []string{"[2001:db8::1]:443", "[fd6a:6169:6c01::5]:443", "[2606:4700::1111]:443"} {
		if _, err := net.DialTimeout("tcp", dst, time.Second); !errors.Is(err, syscall.ENETUNREACH) {
			t.Fatalf("dial %s: %v, want network unreachable", dst, err)
		}
	}
	dnsAndUDP(t)
	t.Log("capture ok")
}

// dnsAndUDP checks, in the captured namespace, that a query to port 53 of
// any address reaches the bridge's resolver port (UDP through a datagram
// relay, TCP as it is), and that other UDP fails at once.
func dnsAndUDP(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "dns.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() { // a framed echo, with "re:" before the message
				defer c.Close()
				var n [2]byte
				if _, err := io.ReadFull(c, n[:]); err != nil {
					return
				}
				m := make([]byte, binary.BigEndian.Uint16(n[:]))
				io.ReadFull(c, m)
				m = append([]byte("re:"), m...)
				c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...))
			}()
		}
	}()
	ls, err := StartRelays([]Relay{{Listen: "udp:127.0.0.1:" + strconv.Itoa(DNSPort), Dial: "unix:" + sock}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ls[0].Close()
	for _, dst := range []string{"127.0.0.1:53", "8.8.8.8:53", "198.18.0.1:53"} {
		c, err := net.Dial("udp", dst)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		c.Write([]byte("q"))
		b := make([]byte, 16)
		n, err := c.Read(b)
		if err != nil || string(b[:n]) != "re:q" {
			t.Fatalf("UDP %s: %q, %v", dst, b[:n], err)
		}
		c.Close()
	}
	tl, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(DNSPort))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	go func() {
		if c, err := tl.Accept(); err == nil {
			c.Write([]byte("tcp53"))
			c.Close()
		}
	}()
	c, err := net.DialTimeout("tcp", "9.9.9.9:53", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if b, _ := io.ReadAll(c); string(b) != "tcp53" {
		t.Fatalf("TCP to port 53: %q", b)
	}
	c.Close()
	// Other UDP: a send outside the loopback fails at once; the jail's
	// own loopback is its own (nothing listens on port 9).
	for _, dst := range []string{"192.0.2.1:443", "8.8.8.8:443", "198.18.0.1:443", "[fd6a:6169:6c00::5]:443"} {
		c, err := net.Dial("udp", dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("quic")); !errors.Is(err, syscall.EPERM) {
			t.Fatalf("UDP to %s: %v, want operation not permitted", dst, err)
		}
		c.Close()
	}
	c, err = net.Dial("udp", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("UDP to the jail's loopback port 9: %v, want connection refused", err)
	}
	c.Close()
}

// shortTimeWait checks, after captured connections closed both ways, that
// the namespace's connection tracking keeps them (IPv4 and IPv6) in
// TIME_WAIT for at most conntrackTimeWait seconds, not the kernel's two
// minutes: a command closing connections fast must not fill the table.
func shortTimeWait(t *testing.T) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		b, err := os.ReadFile("/proc/net/nf_conntrack")
		if err != nil {
			t.Fatalf("reading the namespace's connection tracking table: %v", err)
		}
		var v4, v6 int
		var long []string
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 6 || f[2] != "tcp" || f[5] != "TIME_WAIT" {
				continue
			}
			if left, err := strconv.Atoi(f[4]); err != nil || left > conntrackTimeWait {
				long = append(long, l)
			}
			switch {
			case strings.Contains(l, "dst=192.0.2.7 ") && strings.Contains(l, "dport=443 "):
				v4++
			case f[0] == "ipv6" && strings.Contains(l, "dport=443 "):
				v6++
			}
		}
		if len(long) > 0 {
			t.Fatalf("closed connections kept longer than %d s in TIME_WAIT:\n%s", conntrackTimeWait, strings.Join(long, "\n"))
		}
		if v4 > 0 && v6 > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no closed captured connection to 192.0.2.7:443 and the synthetic IPv6 address in TIME_WAIT (%d, %d):\n%s", v4, v6, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
