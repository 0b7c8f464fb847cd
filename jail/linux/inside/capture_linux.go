package inside

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ProgramCapture makes every TCP connection the jail opens to an address
// outside its own loopback reach the bridge's capture port on 127.0.0.1,
// whatever the program's proxy settings: a default route on lo (without
// one, connecting to any other address fails before the packet is sent),
// and an nftables nat output chain redirecting TCP to the port, in the
// jail's own network namespace. DNS (UDP and TCP to port 53, whatever
// the address: resolv.conf names 127.0.0.1, some programs name a public
// resolver) is redirected to the bridge's resolver port, and every other
// UDP datagram to an address outside the loopback is refused. It needs
// CAP_NET_ADMIN there, which init drops right after. In IPv6 only the
// resolver's synthetic prefix is routed, and captured the same way (to
// the port on ::1); a connection to any other IPv6 address fails with
// "network unreachable".
//
// An error means the capture was not made and the network is as without
// it: loopback only, no route out, the bridge's proxy ports the only way
// to the proxy. An error that wraps ErrNetworkLost means init is left
// without a network it can serve the bridge in, and must not run the
// command.
func ProgramCapture(port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("capture: bad port %d", port)
	}
	// Init leaves bubblewrap's network namespace for good: that one
	// belongs to a user namespace above init's, so no thread can go
	// back. Every thread must move, which the Go runtime does only when
	// built without cgo: find out before the first one leaves (from the
	// build, not by stopping every thread once more to ask).
	if builtWithCgo {
		return errors.New("capture: this jail binary is built with cgo, whose threads cannot all move to a network namespace of their own")
	}
	if err := enterOwnNetns(); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return programNetns(port)
}

// programNetns sets up the capture in the current network namespace, over
// one rtnetlink socket: lo up, the redirect, the route.
func programNetns(port int) error {
	rt, err := openRtnetlink()
	if err != nil {
		return fmt.Errorf("capture: bringing lo up: %w: %w", err, ErrNetworkLost)
	}
	defer unix.Close(rt)
	if err := setLoUp(rt); err != nil {
		return fmt.Errorf("capture: bringing lo up: %w: %w", err, ErrNetworkLost)
	}
	// The redirect before the route: when it cannot be made, no route
	// is left either, and a connection out fails at once as it would
	// without the capture.
	if err := addRedirect(port); err != nil {
		return fmt.Errorf("capture: programming nftables: %w", err)
	}
	// Best effort: without it, closed connections linger in the
	// namespace's connection tracking as they do by default.
	addShortTimeWait(nftables.TableFamilyIPv4, unix.NFPROTO_IPV4)
	if err := addDefaultRouteLo(rt); err != nil {
		return fmt.Errorf("capture: adding a default route on lo: %w", err)
	}
	// IPv6 is best effort: without it (a kernel without IPv6 or its nat)
	// the synthetic IPv6 addresses have no route, and a client falls
	// back to the IPv4 ones at once. The route comes after the redirect
	// here too, so that no synthetic address is routed without being
	// captured.
	if addRedirect6(port) == nil {
		addShortTimeWait(nftables.TableFamilyIPv6, unix.NFPROTO_IPV6)
		addRouteLo6(rt, SyntheticNet6)
	}
	return nil
}

// ErrNetworkLost is wrapped by a capture error after which init has no
// network namespace in which the bridge can listen.
var ErrNetworkLost = errors.New("the jail's network is lost")

// enterOwnNetns moves every thread of init into a new network namespace
// of init's own user namespace. bubblewrap made the jail's network
// namespace in an outer user namespace and runs init in a nested one (so
// that the command cannot make more): there, init's CAP_NET_ADMIN does not
// reach the jail's network. The new namespace is as empty (a loopback,
// down); the old one is left with nothing in it. Namespaces are per
// thread: this one unshares, then every thread joins it. An error before
// the unshare leaves every thread where it was; one after wraps
// ErrNetworkLost.
func enterOwnNetns() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("making a network namespace: %w", err)
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the new network namespace: %w: %w", err, ErrNetworkLost)
	}
	defer unix.Close(fd)
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_SETNS, uintptr(fd), unix.CLONE_NEWNET, 0); errno != 0 {
		return fmt.Errorf("moving every thread to the new network namespace: %w: %w", errno, ErrNetworkLost)
	}
	return nil
}

// addRedirect programs, in the ip family,
//
//	table ip jail {
//	  chain capture { type nat hook output priority -100
//	    udp dport 53 redirect to :DNSPort; tcp dport 53 redirect to :DNSPort
//	    ip daddr 127.0.0.0/8 accept; meta l4proto tcp redirect to :port }
//	  chain refuse { type filter hook output priority 0
//	    meta l4proto udp ip daddr != 127.0.0.0/8 reject } }
//
// Connections to the jail's own loopback (the bridge's ports, services
// the command runs) are left alone. A refused datagram fails its send at
// once (EPERM), so that a QUIC client falls back to TCP instead of
// waiting for an answer that cannot come.
func addRedirect(port int) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "jail"})
	policy := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name: "capture", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &policy,
	})
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port16(53)},
		}, redirectTo(DNSPort)...)})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(loopbackDst(expr.CmpOpEq),
		&expr.Verdict{Kind: expr.VerdictAccept})})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append([]expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}, redirectTo(port)...)})
	refuse := c.AddChain(&nftables.Chain{
		Name: "refuse", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &policy,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: refuse, Exprs: append(append([]expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
	}, loopbackDst(expr.CmpOpNeq)...),
		&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3}, // port unreachable
	)})
	return c.Flush()
}

// addRedirect6 programs, in the ip6 family,
//
//	table ip6 jail {
//	  chain capture { type nat hook output priority -100
//	    ip6 daddr SyntheticNet6 meta l4proto tcp redirect to :port }
//	  chain refuse { type filter hook output priority 0
//	    meta l4proto udp ip6 daddr != ::1 reject } }
func addRedirect6(port int) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv6, Name: "jail"})
	policy := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name: "capture", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &policy,
	})
	prefix := SyntheticNet6.Addr().As16()
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append([]expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 8},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: prefix[:8]},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}, redirectTo(port)...)})
	refuse := c.AddChain(&nftables.Chain{
		Name: "refuse", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &policy,
	})
	lo := netip.IPv6Loopback().As16()
	c.AddRule(&nftables.Rule{Table: t, Chain: refuse, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: lo[:]},
		&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 4}, // port unreachable
	}})
	return c.Flush()
}

// conntrackTimeWait is how long, in seconds, the jail's connection
// tracking keeps a TCP connection closed both ways (TIME_WAIT), instead of
// the kernel's two minutes. Every captured connection has an entry, so a
// command that opens and closes connections fast would otherwise fill its
// namespace's table, after which its new connections fail. The jail's
// only interface is lo, which loses no packet: no late one is left to
// track after a few seconds. The half-closed states (FIN_WAIT,
// CLOSE_WAIT) keep their defaults: data still flows one way there, and a
// redirected connection whose entry expires is cut, so a client waiting
// for an answer after closing its side must keep its entry.
const conntrackTimeWait = 5

// addShortTimeWait programs, in family's table jail (l3 the same family
// for connection tracking),
//
//	ct timeout tcp-short { protocol tcp; l3proto ip; policy = { time_wait: 5 } }
//	chain timeouts { type filter hook output priority 0
//	  meta l4proto tcp ct timeout set "tcp-short" }
//
// The chain runs after connection tracking has made the entry of a new
// connection's first packet and before it is confirmed, when a timeout
// policy can still be attached. The other states keep the kernel's
// timeouts (the library's defaults, but for ESTABLISHED: five days).
func addShortTimeWait(family nftables.TableFamily, l3 uint16) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := c.AddTable(&nftables.Table{Family: family, Name: "jail"})
	const name = "tcp-short"
	c.AddObj(&nftables.NamedObj{Table: t, Name: name, Type: nftables.ObjTypeCtTimeout, Obj: &expr.CtTimeout{
		L3Proto: l3, L4Proto: unix.IPPROTO_TCP,
		Policy: expr.CtStatePolicyTimeout{expr.CtStateTCPESTABLISHED: 432000, expr.CtStateTCPTIMEWAIT: conntrackTimeWait},
	}})
	policy := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name: "timeouts", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &policy,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Objref{Type: int(nftables.ObjTypeCtTimeout), Name: name},
	}})
	return c.Flush()
}

// addRouteLo6 adds "PREFIX dev lo src ::1" to the main IPv6 table.
func addRouteLo6(rt int, p netip.Prefix) error {
	msg := unix.RtMsg{Family: unix.AF_INET6, Dst_len: uint8(p.Bits()), Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST}
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, loIndex)
	dst, src := p.Addr().As16(), netip.IPv6Loopback().As16()
	body := append(unsafe.Slice((*byte)(unsafe.Pointer(&msg)), unix.SizeofRtMsg), rtattr(unix.RTA_DST, dst[:])...)
	body = append(body, rtattr(unix.RTA_OIF, oif)...)
	body = append(body, rtattr(unix.RTA_PREFSRC, src[:])...)
	return rtnetlink(rt, unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
}

// loopbackDst compares the destination's first byte with 127.
func loopbackDst(op expr.CmpOp) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: op, Register: 1, Data: []byte{127, 0, 0, 0}},
	}
}

// redirectTo redirects to port on the loopback.
func redirectTo(port int) []expr.Any {
	return []expr.Any{&expr.Immediate{Register: 1, Data: port16(port)}, &expr.Redir{RegisterProtoMin: 1}}
}

func port16(port int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(port)) }

// loIndex is lo's interface index: the kernel gives every network
// namespace's loopback index 1, before any other interface exists (no
// need to list the interfaces to find it).
const loIndex = 1

// setLoUp sets lo up.
func setLoUp(rt int) error {
	msg := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: loIndex, Flags: unix.IFF_UP, Change: unix.IFF_UP}
	return rtnetlink(rt, unix.RTM_NEWLINK, 0, unsafe.Slice((*byte)(unsafe.Pointer(&msg)), unix.SizeofIfInfomsg))
}

// addDefaultRouteLo adds "default dev lo src 127.0.0.1" to the main IPv4
// table.
func addDefaultRouteLo(rt int) error {
	msg := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST}
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, loIndex)
	body := append(unsafe.Slice((*byte)(unsafe.Pointer(&msg)), unix.SizeofRtMsg), rtattr(unix.RTA_OIF, oif)...)
	// Connections leave from 127.0.0.1: lo's address is of host scope,
	// which the kernel would not pick for a route of link scope.
	body = append(body, rtattr(unix.RTA_PREFSRC, []byte{127, 0, 0, 1})...)
	return rtnetlink(rt, unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
}

// openRtnetlink opens and binds an rtnetlink socket.
func openRtnetlink() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// rtnetlink sends one request on the socket and waits for the kernel's
// answer.
func rtnetlink(fd int, typ, flags uint16, body []byte) error {
	hdr := unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr + len(body)), Type: typ,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | flags, Seq: uint32(typ)}
	msg := append(unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unix.SizeofNlMsghdr), body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && m.Header.Seq == hdr.Seq && len(m.Data) >= 4 {
			if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				return syscall.Errno(-errno)
			}
			return nil
		}
	}
	return fmt.Errorf("no answer from the kernel")
}

// rtattr encodes one route attribute, padded to 4 bytes.
func rtattr(typ uint16, data []byte) []byte {
	n := unix.SizeofRtAttr + len(data)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[unix.SizeofRtAttr:], data)
	return b
}

// OriginalDst is where a connection redirected to the capture port was
// going: SO_ORIGINAL_DST, from the connection tracking entry of the
// redirect.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var sa4 unix.RawSockaddrInet4
	var sa6 unix.RawSockaddrInet6
	v6 := c.LocalAddr().(*net.TCPAddr).IP.To4() == nil
	level, opt, p, size := unix.SOL_IP, unix.SO_ORIGINAL_DST, unsafe.Pointer(&sa4), uint32(unsafe.Sizeof(sa4))
	if v6 {
		level, opt, p, size = unix.SOL_IPV6, ip6tSoOriginalDst, unsafe.Pointer(&sa6), uint32(unsafe.Sizeof(sa6))
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt),
			uintptr(p), uintptr(unsafe.Pointer(&size)), 0)
		if errno != 0 {
			serr = errno
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("reading the original destination: %w", err)
	}
	if v6 {
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa6.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(sa6.Addr), port), nil
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port), nil
}

// ip6tSoOriginalDst is IP6T_SO_ORIGINAL_DST, SO_ORIGINAL_DST's IPv6
// counterpart (linux/netfilter_ipv6/ip6_tables.h).
const ip6tSoOriginalDst = 80

// StartCapture listens on r.Listen (the capture port) and hands every
// connection redirected there to r.Dial (the proxy's capture socket),
// with one line naming its original destination: the socket itself with
// r.HandOff when r.Dial is a unix socket (handOff), its bytes relayed
// otherwise (a proxy reached over a forwarding, which carries no socket). A connection that was
// not redirected (one dialled to the port itself) names the port, which
// the proxy refuses as it would any loopback address.
func StartCapture(r Relay) (net.Listener, error) {
	network, addr, err := splitAddr(r.Listen)
	if err != nil {
		return nil, err
	}
	if network != "tcp" {
		return nil, fmt.Errorf("capture %s: want tcp:HOST:PORT", r)
	}
	l, err := listenTCP(addr)
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", r, err)
	}
	network, dial, err := splitAddr(r.Dial)
	if err != nil {
		l.Close()
		return nil, err
	}
	handle := func(c net.Conn) { capture(c.(*net.TCPConn), network, dial, r.HandOff) }
	go acceptLoop(l, handle)
	// The same port on ::1, where the synthetic IPv6 addresses are
	// redirected; without IPv6 there is nothing to listen for.
	if l6, err := listenTCP(net.JoinHostPort("::1", strconv.Itoa(CapturePort(r)))); err == nil {
		go acceptLoop(l6, handle)
	}
	return l, nil
}

// listenTCP listens on addr over plain TCP. The original destination is
// asked of the TCP connection: a Multipath TCP socket, which Go listens
// with by default, does not answer for it, and a Multipath TCP client
// would be cut unlogged; on a TCP listener it falls back to TCP.
func listenTCP(addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return lc.Listen(context.Background(), "tcp", addr)
}

func capture(c *net.TCPConn, network, addr string, handOver bool) {
	dst, err := OriginalDst(c)
	if err != nil {
		c.Close()
		return
	}
	up, err := net.Dial(network, addr)
	if err != nil {
		c.Close()
		return
	}
	if handOver && handOff(c, up, []byte(dst.String()+"\n")) {
		return
	}
	if _, err := up.Write([]byte(dst.String() + "\n")); err != nil {
		c.Close()
		up.Close()
		return
	}
	join(c, up)
}
