package inside

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// DNSPort is the bridge's resolver port on the jail's loopback, where
// the capture redirects every query to port 53.
const DNSPort = 3053

// SyntheticNet6 is the prefix of the resolver's synthetic IPv6 addresses
// (the proxy's, which gives them out): the one IPv6 prefix routed inside
// the jail, to the capture.
var SyntheticNet6 = netip.MustParsePrefix("fd6a:6169:6c00::/64")

// maxDatagrams caps the datagrams a relay has in flight; more are dropped
// (a resolver's client asks again).
const maxDatagrams = 64

// datagramTimeout bounds one datagram's exchange with the Dial side.
const datagramTimeout = 5 * time.Second

// Relay copies every connection accepted on Listen to a new connection to
// Dial. Addresses are "tcp:HOST:PORT" or "unix:PATH". Inside the jail, init
// runs the bridge as relays from loopback ports to the host proxy's unix
// sockets; on the host, jail runs relays for published and forwarded ports.
// A Listen address "udp:HOST:PORT" relays datagrams: each is sent after
// its two-byte length on a new connection to Dial, and the one message
// that comes back the same way is the reply (DNS over UDP to DNS over
// TCP).
//
// With HandOff, each connection accepted on a tcp Listen address is sent
// itself to the unix Dial socket (SCM_RIGHTS, with the one byte
// HandOffMark) instead of being copied: the host proxy then reads and
// writes the client's socket, and no byte goes through the relay.
type Relay struct {
	Listen  string
	Dial    string
	HandOff bool
}

// HandOffMark is the one byte sent with a socket a relay hands over.
const HandOffMark = "\x00"

func (r Relay) String() string {
	if r.HandOff {
		return r.Listen + " -> " + r.Dial + " (the socket handed over)"
	}
	return r.Listen + " -> " + r.Dial
}

func splitAddr(a string) (network, addr string, err error) {
	network, addr, ok := strings.Cut(a, ":")
	if !ok || (network != "tcp" && network != "unix" && network != "udp") || addr == "" {
		return "", "", fmt.Errorf("relay address %q: want tcp:HOST:PORT, udp:HOST:PORT or unix:PATH", a)
	}
	return network, addr, nil
}

// Listen opens the relay's listening side.
func (r Relay) listen() (net.Listener, error) {
	network, addr, err := splitAddr(r.Listen)
	if err != nil {
		return nil, err
	}
	if network == "udp" {
		pc, err := net.ListenPacket(network, addr)
		if err != nil {
			return nil, fmt.Errorf("relay %s: %w", r, err)
		}
		return packetListener{pc}, nil
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", r, err)
	}
	return l, nil
}

// packetListener holds a datagram relay's socket where the relays keep
// their listeners, to be closed with them. It accepts nothing: serve
// reads its datagrams instead.
type packetListener struct{ net.PacketConn }

func (p packetListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (p packetListener) Addr() net.Addr            { return p.LocalAddr() }

// serveDatagrams relays each datagram to a new connection to the Dial
// side and sends the reply back, until pc is closed.
func (r Relay) serveDatagrams(pc net.PacketConn) {
	network, addr, _ := splitAddr(r.Dial)
	slots := make(chan struct{}, maxDatagrams)
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n == 0 {
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			continue
		}
		q := append([]byte(nil), buf[:n]...)
		go func() {
			defer func() { <-slots }()
			if a, err := exchangeFramed(network, addr, q); err == nil {
				pc.WriteTo(a, from)
			}
		}()
	}
}

// exchangeFramed sends msg after its two-byte length on a new connection
// and reads one message back the same way.
func exchangeFramed(network, addr string, msg []byte) ([]byte, error) {
	c, err := net.DialTimeout(network, addr, datagramTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(datagramTimeout))
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)); err != nil {
		return nil, err
	}
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, err
	}
	a := make([]byte, binary.BigEndian.Uint16(n[:]))
	_, err = io.ReadFull(c, a)
	return a, err
}

// serve accepts until l is closed, joining each connection to a fresh one
// to the Dial side, or handing it over on that one (HandOff). A failed
// dial closes the client's connection: when the proxy is gone, the jail
// has no network.
func (r Relay) serve(l net.Listener, onConn func(net.Conn)) {
	if p, ok := l.(packetListener); ok {
		r.serveDatagrams(p.PacketConn)
		return
	}
	network, addr, _ := splitAddr(r.Dial)
	acceptLoop(l, func(c net.Conn) {
		if onConn != nil {
			onConn(c)
		}
		up, err := net.Dial(network, addr)
		if err != nil {
			c.Close()
			return
		}
		if tc, ok := c.(*net.TCPConn); ok && r.HandOff && handOff(tc, up, []byte(HandOffMark)) {
			return
		}
		join(c, up)
	})
}

// acceptLoop hands every connection accepted on l to its own goroutine
// running handle, until l is closed. A failed accept (out of descriptors,
// while the jail holds many connections open) is retried after a pause
// that grows to a second: returning would leave the port unserved for
// the rest of the session.
func acceptLoop(l net.Listener, handle func(net.Conn)) {
	var pause time.Duration
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		go handle(c)
	}
}

// join copies both ways until both directions are done, passing half-closes
// on so that protocols that shut down writing keep working.
func join(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// StartRelays listens on every relay, then serves them in the background.
// It fails before serving anything if any listener cannot be opened.
func StartRelays(relays []Relay, onConn func(Relay, net.Conn)) ([]net.Listener, error) {
	var ls []net.Listener
	for _, r := range relays {
		l, err := r.listen()
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
	}
	for i, r := range relays {
		var cb func(net.Conn)
		if onConn != nil {
			r := r
			cb = func(c net.Conn) { onConn(r, c) }
		}
		go r.serve(ls[i], cb)
	}
	return ls, nil
}

// CapturePort is the port of r's listening address ("tcp:HOST:PORT"), 0
// when it has none.
func CapturePort(r Relay) int {
	_, addr, err := splitAddr(r.Listen)
	if err != nil {
		return 0
	}
	_, p, _ := net.SplitHostPort(addr)
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}
