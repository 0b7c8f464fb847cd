package linux

import (
	"path/filepath"

	"github.com/jailsh/jail/jail"
)

// trustOp binds the CA bundle the jail's clients trust at CABundlePath and
// records in n where prepareNetwork writes it. Every TLS connection the
// proxy intercepts presents a leaf of the jail CA, so with no passthrough
// host and no forwarded port the jail CA alone is bound: clients that
// parse their whole bundle on every connection (curl, Python, OpenSSL 3)
// then parse one certificate, not a few hundred. Passthrough tunnels and
// forwarded ports reach servers with their own certificates, so then the
// host's CAs are bound too, in a bundle written for the session. (A
// server-speaks-first protocol's STARTTLS, tunnelled raw, still finds the
// system CAs: OpenSSL and Go also look in the host's hashed /etc/ssl/certs,
// and Node keeps its built-in roots.)
func trustOp(pol *jail.Policy, f *Facts, n *NetPlan) Op {
	if len(pol.Network.Passthrough) == 0 && len(pol.Forward) == 0 {
		return Op{Kind: "ro-bind", Src: filepath.Join(n.CADir, "ca.pem"), Dest: CABundlePath, Why: "jail CA: every TLS connection is intercepted"}
	}
	n.Bundle = filepath.Join(f.SessionDir, "ca-bundle.pem")
	return Op{Kind: "ro-bind", Src: n.Bundle, Dest: CABundlePath, Why: "host CAs + jail CA: passthrough hosts and forwarded ports are not intercepted"}
}
