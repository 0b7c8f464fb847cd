package linux

import (
	"net"
	"sync"
	"time"
)

// Both ends of the link between a remote jail and the machine jail was
// started from write one byte every LinkBeat on the control connection;
// an end that reads nothing for LinkTimeout takes the link for lost, as
// it does when the connection ends. A link that stalls (a network that
// drops every packet, a laptop asleep) stops the jail as a closed one
// does, rather than leaving it running without its proxy.
const (
	LinkBeat    = 2 * time.Second
	LinkTimeout = 15 * time.Second
)

// linkBeat and linkTimeout are LinkBeat and LinkTimeout, shorter in tests.
var linkBeat, linkTimeout = LinkBeat, LinkTimeout

// Link is one end of a control connection, kept beating.
type Link struct {
	c    net.Conn
	lost chan struct{}
	once sync.Once
}

// WatchLink keeps the control connection c beating until the link is lost
// (c ended, failed, or was silent for LinkTimeout) or closed.
func WatchLink(c net.Conn) *Link {
	l := &Link{c: c, lost: make(chan struct{})}
	go l.read()
	go l.beat()
	return l
}

// Lost is closed once the link is lost or closed.
func (l *Link) Lost() <-chan struct{} { return l.lost }

// Close ends the link: the other end finds it lost.
func (l *Link) Close() {
	l.once.Do(func() { close(l.lost); l.c.Close() })
}

func (l *Link) read() {
	defer l.Close()
	buf := make([]byte, 64)
	for {
		l.c.SetReadDeadline(time.Now().Add(linkTimeout))
		if _, err := l.c.Read(buf); err != nil {
			return
		}
	}
}

func (l *Link) beat() {
	defer l.Close()
	t := time.NewTicker(linkBeat)
	defer t.Stop()
	for {
		l.c.SetWriteDeadline(time.Now().Add(linkTimeout))
		if _, err := l.c.Write([]byte{0}); err != nil {
			return
		}
		select {
		case <-t.C:
		case <-l.lost:
			return
		}
	}
}
