// Package proxy is the jailed command's only way out: an HTTP proxy (plain
// HTTP and CONNECT, with TLS interception) and a SOCKS5 proxy that run in
// the host-side jail process, outside every namespace, and decide every
// connection by one domain policy.
//
// Every path (HTTP, CONNECT, SOCKS5) takes the same steps: Rules.Decide on
// the name the client asked for (a name Rules.Ask holds waits here for a
// person's answer, unresolved), then resolution (unless the name is an IP
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
// first) is relayed raw to the checked address only when an Allow entry
// names the host with that port (or Unknown is "allow" and the host is a
// name), and logged once, with its byte counts, when it ends.
//
// Secrets (Config.Secrets) reach the jail as placeholders. In every
// request the proxy reads (plain HTTP, and each request in an
// intercepted tunnel) a placeholder is replaced by its value only when
// the decided host is bound to that secret and only at the places the
// binding names (Secret.Inject: header fields by default; the query,
// the path and textual bodies only when asked for). Bound, anywhere
// else, it is forwarded as it is and the log says where it was kept;
// toward any other host the request is refused with 403 before anything
// is sent and logged as an "exfiltration attempt". The real values
// themselves are searched for, in one pass with the placeholders, in
// every request to every host (header fields, host name, URL, bodies of
// any type, gzip bodies inflated, raw tunnels and upgraded connections),
// raw, JSON- and URL-escaped, hex and base64 at every alignment: a hit
// is refused with 403 and logged. Textual request bodies up to 4 MiB are
// read whole first; a larger chunked one is rewritten as it streams, a
// larger one with a Content-Length is refused (413) if a value should be
// injected into it; other bodies are streamed and checked. Every
// response, from any host and of any type, has the values' spellings
// replaced in its header fields and body (gzip decoded for that).
//
// Some command.deny rules (Config.DenyCommands) hold on the wire too, so
// that a library (libgit2, dulwich) or a renamed binary cannot do what
// the exec-time check refuses: while "git push" is denied, the requests
// of a smart-HTTP push (…/info/refs?service=git-receive-pack,
// …/git-receive-pack) are refused with 403, and so are tunnels to port
// 22 and tunnels in which the client speaks SSH, unless network.allow
// names the host with that port; while "npm publish" is denied, a PUT of
// a package document with "_attachments" (the registry's publish) is
// refused with 403. Each refusal is logged with the rule,
// "command.deny git push".
//
// What a client can make the proxy hold is bounded (Limits, Timeouts):
// connections per session and per process, the time of every wait,
// request and response heads, the leaf certificates kept, and the bodies
// read whole (Limits.Buffered for all of them together; a request waits
// for room, a response is streamed instead). A gzip request body that
// inflates past 64 MiB is refused (413) rather than checked. Nothing the
// proxy did not read can name another host: a tunnel's first request is
// read as HTTP however slowly it comes, an Upgrade to cleartext HTTP/2 is
// dropped, and request trailers lose their framing and routing fields.
//
// The proxy speaks HTTP/1.1 to clients (inside an intercepted tunnel too:
// ALPN offers only http/1.1) and HTTP/1.1 or HTTP/2 to upstream servers.
package proxy
