package proxy

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// hostAddrsTTL is how long the list of this host's addresses is kept.
const hostAddrsTTL = 5 * time.Second

// hostAddrs caches the addresses of this host's interfaces.
var hostAddrs struct {
	sync.Mutex
	at  time.Time
	set map[netip.Addr]bool
}

// interfaceAddrs lists this host's interface addresses.
var interfaceAddrs = net.InterfaceAddrs

// ownAddr reports whether ip is an address of one of this host's
// interfaces. A name that resolves to one reaches the services the host
// runs on every interface, as its loopback would, whatever range the
// address is in (a public address of a server is in none that is
// blocked). While the addresses have never been listed (the listing
// fails), every address counts as the host's: refused, not let through
// unchecked.
func ownAddr(ip netip.Addr) bool {
	hostAddrs.Lock()
	defer hostAddrs.Unlock()
	if hostAddrs.set == nil || time.Since(hostAddrs.at) > hostAddrsTTL {
		if addrs, err := interfaceAddrs(); err == nil {
			set := map[netip.Addr]bool{}
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					if a, ok := netip.AddrFromSlice(n.IP); ok {
						set[a.Unmap()] = true
					}
				}
			}
			hostAddrs.set, hostAddrs.at = set, time.Now()
		}
	}
	if hostAddrs.set == nil {
		return true
	}
	return hostAddrs.set[ip.Unmap()]
}
