// Package proxy is the jailed command's only way out: an HTTP proxy (plain
// HTTP and CONNECT, with TLS interception) and a SOCKS5 proxy that run in
// the host-side jail process, outside every namespace, and decide every
// connection by one domain policy.
//
// Every path (HTTP, CONNECT, SOCKS5) takes the same steps: Rules.Decide on
// the name the client asked for, then resolution (unless the name is an IP
// literal a rule names, or is mapped in Rules.Hosts), then refusal of any
// loopback, private, link-local, CGNAT, multicast or unspecified address,
// then a dial to exactly the address that was checked. Nothing is resolved
// twice, so DNS rebinding cannot move a connection after its decision.
//
// A tunnel (CONNECT or SOCKS5) is decided once, then served by what the
// client speaks first. TLS is intercepted with a leaf certificate for the
// tunnel's host signed by the per-user CA (except for Rules.Passthrough
// hosts, tunnelled raw), and each request inside is forwarded over TLS
// verified with the host's trust. Plain HTTP is served request by request.
// In both, every request must name the tunnel's host, and is logged with
// its path. Anything else (SSH, a protocol in which the server speaks
// first) is relayed raw to the checked address and logged once, with its
// byte counts, when it ends.
//
// The proxy speaks HTTP/1.1 to clients (inside an intercepted tunnel too:
// ALPN offers only http/1.1) and HTTP/1.1 or HTTP/2 to upstream servers.
package proxy
