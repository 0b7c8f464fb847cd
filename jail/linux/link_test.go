package linux

import (
	"net"
	"testing"
	"time"
)

// TestLinkLostWhenSilent: an end that keeps its connection open but sends
// nothing (a link that stalls) is taken for lost within the timeout; two
// beating ends keep the link well past it; an end that closes is noticed
// at once.
func TestLinkLostWhenSilent(t *testing.T) {
	linkBeat, linkTimeout = 20*time.Millisecond, 200*time.Millisecond
	defer func() { linkBeat, linkTimeout = LinkBeat, LinkTimeout }()
	pair := func() (net.Conn, net.Conn) {
		a, b := net.Pipe()
		return a, b
	}

	a, silent := pair()
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := silent.Read(buf); err != nil {
				return
			}
		}
	}()
	defer silent.Close()
	start := time.Now()
	select {
	case <-WatchLink(a).Lost():
		if d := time.Since(start); d < linkTimeout/2 {
			t.Errorf("a silent link was lost after %v, before its timeout", d)
		}
	case <-time.After(5 * linkTimeout):
		t.Fatal("a silent link was not taken for lost")
	}

	x, y := pair()
	lx, ly := WatchLink(x), WatchLink(y)
	select {
	case <-lx.Lost():
		t.Fatal("a beating link was lost")
	case <-ly.Lost():
		t.Fatal("a beating link was lost")
	case <-time.After(4 * linkTimeout):
	}
	ly.Close()
	select {
	case <-lx.Lost():
	case <-time.After(linkTimeout / 2):
		t.Fatal("the other end's close was not noticed before the timeout")
	}
}
