package remote

import (
	"context"
	"io"
	"strings"

	"github.com/jailsh/jail/jail"
)

// SyncConn runs a fixed sh script on the remote host, with stdin, stdout
// and stderr streamed: what the sync needs of a connection (*Conn is
// one). Scripts are constants; user data reaches them only as quoted
// positional arguments (see withArgs).
type SyncConn interface {
	Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error
}

// limitedConn is a SyncConn that can bound what a script sends back
// (*Conn is one): past the bound, the run fails.
type limitedConn interface {
	RunLimit(ctx context.Context, limit int64, script string, stdin io.Reader, stdout, stderr io.Writer) error
}

// runLimited runs script on c reading at most limit bytes of its stdout
// and stderr together, when c can bound them.
func runLimited(ctx context.Context, c SyncConn, limit int64, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	if lc, ok := c.(limitedConn); ok {
		return lc.RunLimit(ctx, limit, script, stdin, stdout, stderr)
	}
	return c.Run(ctx, script, stdin, stdout, stderr)
}

// maxChatter bounds what the scripts that send nothing back may write.
const maxChatter = 1 << 20

// withArgs is script run with args as its positional parameters, each
// quoted for the shell: the script's text never holds user data.
func withArgs(script string, args ...string) string {
	var b strings.Builder
	b.WriteString("set --")
	for _, a := range args {
		b.WriteString(" ")
		b.WriteString(quoteArg(a))
	}
	b.WriteString("\n")
	b.WriteString(script)
	return b.String()
}

// quoteArg is s in single quotes (always, so that a leading "-" or "~"
// stays data).
func quoteArg(s string) string {
	q := jail.ShellQuote(s)
	if !strings.HasPrefix(q, "'") {
		q = "'" + q + "'"
	}
	return q
}
