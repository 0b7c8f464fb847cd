package proxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// A name that resolves to one of this host's own addresses (not loopback,
// not a private range: here a documentation address, elsewhere a server's
// public one) is refused even where unknown names are allowed: it would
// reach what the host serves on every interface. Mapped by network.hosts,
// the same address is reached.
func TestResolvedToThisHostIsRefused(t *testing.T) {
	t.Parallel()
	var own string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			own = n.IP.String()
		}
	}
	if own == "" {
		t.Skip("this host has no IPv4 address but loopback to dial")
	}
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	e := newEnv(t, Config{
		Rules:    Rules{Unknown: "allow", Hosts: map[string]string{"mapped.test": net.JoinHostPort(own, port)}},
		Resolver: func(context.Context, string) ([]net.IP, error) { return []net.IP{net.ParseIP(own)}, nil },
	})
	resp, _, _, _ := raw(t, e.httpAddr, "CONNECT resolved.test:"+port+" HTTP/1.1\r\nHost: resolved.test:"+port+"\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Errorf("CONNECT to a name resolving to this host's %s: %d, want 403", own, resp.StatusCode)
	}
	en := e.entry(t, func(x Entry) bool { return x.Host == "resolved.test" })
	if en.Verdict != verdictDeny || !strings.Contains(en.Reason, "this host's address "+own) {
		t.Errorf("logged %+v, want a denial naming this host's address", en)
	}
	if n := conns.Load(); n != 0 { // read once the tunnel is logged, dialled or not
		t.Errorf("the host's server on %s:%s accepted %d connections", own, port, n)
	}
	// Control: mapped explicitly, the address is reached.
	resp, _, _, _ = raw(t, e.httpAddr, "CONNECT mapped.test:"+port+" HTTP/1.1\r\nHost: mapped.test:"+port+"\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Errorf("control: CONNECT to a name network.hosts maps to %s: %d, want 200", own, resp.StatusCode)
	}
}

func TestOwnAddrRefusesWhenInterfacesCannotBeListed(t *testing.T) {
	hostAddrs.Lock()
	saved, savedAt, savedList := hostAddrs.set, hostAddrs.at, interfaceAddrs
	hostAddrs.set = nil
	interfaceAddrs = func() ([]net.Addr, error) { return nil, errors.New("listing interfaces failed") }
	hostAddrs.Unlock()
	defer func() {
		hostAddrs.Lock()
		hostAddrs.set, hostAddrs.at, interfaceAddrs = saved, savedAt, savedList
		hostAddrs.Unlock()
	}()
	if !ownAddr(netip.MustParseAddr("203.0.113.9")) {
		t.Errorf("with the host's addresses unknown, a public address was not counted as the host's: a name resolving to the host would pass unchecked")
	}
}
