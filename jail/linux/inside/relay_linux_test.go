package inside

import (
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A relay with HandOff sends each accepted socket itself to the unix
// socket, with the mark alone: the proxy's side answers on the client's
// socket and nothing else comes through the unix connection. Without
// HandOff the bytes are copied.
func TestRelayHandsTheSocketOver(t *testing.T) {
	for _, handOff := range []bool{true, false} {
		sock := filepath.Join(t.TempDir(), "http.sock")
		ul, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ul.Close()
		got := make(chan string, 1)
		go func() {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			if !handOff {
				b := make([]byte, 1)
				io.ReadFull(c, b)
				got <- "copied " + string(b)
				c.Write([]byte("hi"))
				return
			}
			line, client, err := takeHandedOff(c.(*net.UnixConn))
			if err != nil {
				got <- err.Error()
				return
			}
			got <- line
			client.Write([]byte("hi"))
			client.Close()
		}()
		ls, err := StartRelays([]Relay{{Listen: "tcp:127.0.0.1:0", Dial: "unix:" + sock, HandOff: handOff}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ls[0].Close()
		c, err := net.Dial("tcp", ls[0].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("x"))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 2)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "hi" {
			t.Fatalf("handOff %v: read %q, %v", handOff, b, err)
		}
		want := HandOffMark
		if !handOff {
			want = "copied x"
		}
		if line := <-got; line != want {
			t.Fatalf("handOff %v: the unix side got %q, want %q", handOff, line, want)
		}
	}
}
