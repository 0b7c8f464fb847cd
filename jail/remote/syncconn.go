package remote

import (
	"context"
	"io"
	"strings"

	"github.com/jailsh/jail/jail"
)

// Conn runs a fixed sh script on the remote host, with stdin, stdout and
// stderr streamed. Scripts are constants; user data reaches them only as
// quoted positional arguments (see withArgs).
type Conn interface {
	Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error
}

// RsyncConn is a Conn that rsync can ride: RsyncShell is the remote shell
// for `rsync -e` (the ssh program and its options, the host left out)
// and the host argument rsync puts after it.
type RsyncConn interface {
	Conn
	RsyncShell() (argv []string, host string)
}

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
