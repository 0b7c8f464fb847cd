package inside

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
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
// jail's own network namespace. It needs CAP_NET_ADMIN there, which init
// drops right after. IPv6 gets no route: an IPv6 connection fails with
// "network unreachable". UDP is not captured: it reaches nothing.
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
	// built without cgo: find out before the first one leaves.
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_GETPID, 0, 0, 0); errno != 0 {
		return errors.New("capture: this jail binary is built with cgo, whose threads cannot all move to a network namespace of their own")
	}
	if err := enterOwnNetns(); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return programNetns(port)
}

// programNetns sets up the capture in the current network namespace.
func programNetns(port int) error {
	if err := setLinkUp("lo"); err != nil {
		return fmt.Errorf("capture: bringing lo up: %w: %w", err, ErrNetworkLost)
	}
	// The redirect before the route: when it cannot be made, no route
	// is left either, and a connection out fails at once as it would
	// without the capture.
	if err := addRedirect(port); err != nil {
		return fmt.Errorf("capture: programming nftables: %w", err)
	}
	if err := addDefaultRouteLo(); err != nil {
		return fmt.Errorf("capture: adding a default route on lo: %w", err)
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
//	table ip jail { chain capture { type nat hook output priority -100
//	  ip daddr 127.0.0.0/8 accept; meta l4proto tcp redirect to :port } }
//
// Connections to the jail's own loopback (the bridge's ports, services
// the command runs) are left alone.
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
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	p := make([]byte, 2)
	binary.BigEndian.PutUint16(p, uint16(port))
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Immediate{Register: 1, Data: p},
		&expr.Redir{RegisterProtoMin: 1},
	}})
	return c.Flush()
}

// setLinkUp sets an interface up over rtnetlink.
func setLinkUp(name string) error {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return err
	}
	msg := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: int32(ifc.Index), Flags: unix.IFF_UP, Change: unix.IFF_UP}
	return rtnetlink(unix.RTM_NEWLINK, 0, unsafe.Slice((*byte)(unsafe.Pointer(&msg)), unix.SizeofIfInfomsg))
}

// addDefaultRouteLo adds "default dev lo src 127.0.0.1" to the main IPv4
// table.
func addDefaultRouteLo() error {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return err
	}
	rt := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST}
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, uint32(lo.Index))
	body := append(unsafe.Slice((*byte)(unsafe.Pointer(&rt)), unix.SizeofRtMsg), rtattr(unix.RTA_OIF, oif)...)
	// Connections leave from 127.0.0.1: lo's address is of host scope,
	// which the kernel would not pick for a route of link scope.
	body = append(body, rtattr(unix.RTA_PREFSRC, []byte{127, 0, 0, 1})...)
	return rtnetlink(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
}

// rtnetlink sends one request and waits for the kernel's answer.
func rtnetlink(typ, flags uint16, body []byte) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	hdr := unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr + len(body)), Type: typ,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | flags, Seq: 1}
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
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
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
	var sa unix.RawSockaddrInet4
	var serr error
	err = rc.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(sa))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_IP, unix.SO_ORIGINAL_DST,
			uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&size)), 0)
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
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port), nil
}

// StartCapture listens on r.Listen (the capture port) and hands every
// connection redirected there to r.Dial (the proxy's capture socket),
// after one line naming its original destination. A connection that was
// not redirected (one dialled to the port itself) names the port, which
// the proxy refuses as it would any loopback address.
func StartCapture(r Relay) (net.Listener, error) {
	l, err := listenTCP(r)
	if err != nil {
		return nil, err
	}
	network, addr, err := splitAddr(r.Dial)
	if err != nil {
		l.Close()
		return nil, err
	}
	go acceptLoop(l, func(c net.Conn) { capture(c.(*net.TCPConn), network, addr) })
	return l, nil
}

// listenTCP listens on r.Listen over plain TCP. The original destination
// is asked of the TCP connection: a Multipath TCP socket, which Go listens
// with by default, does not answer for it, and a Multipath TCP client
// would be cut unlogged; on a TCP listener it falls back to TCP.
func listenTCP(r Relay) (net.Listener, error) {
	network, addr, err := splitAddr(r.Listen)
	if err != nil {
		return nil, err
	}
	if network != "tcp" {
		return nil, fmt.Errorf("capture %s: want tcp:HOST:PORT", r)
	}
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(context.Background(), network, addr)
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", r, err)
	}
	return l, nil
}

func capture(c *net.TCPConn, network, addr string) {
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
	if _, err := up.Write([]byte(dst.String() + "\n")); err != nil {
		c.Close()
		up.Close()
		return
	}
	join(c, up)
}
