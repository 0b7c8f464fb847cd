package remote

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/linux"
)

// PrepareScript makes, on the remote, the fresh directory of one session's
// network, closed to others: net/ for the proxy's forwarded sockets and
// ca.pem, the proxy's CA certificate, read from stdin. It prints the
// directory's path. The path stays short, for the 108 bytes of a unix
// socket's name: the user's runtime directory when it is short and the
// user's own, else the temporary directory. mktemp makes a name no one
// had, so ssh binds each socket where none was (ssh's own unlinking of a
// stale one is the server's choice, not jail's).
const PrepareScript = `set -eu
umask 077
base=${XDG_RUNTIME_DIR:-}
if [ -z "$base" ] || [ ! -d "$base" ] || [ ! -O "$base" ] || [ ${#base} -gt 40 ]; then base=${TMPDIR:-/tmp}; fi
if [ ! -d "$base" ] || [ ${#base} -gt 40 ]; then base=/tmp; fi
d=$(mktemp -d "$base/jail-r.XXXXXXXXXX")
mkdir "$d/net"
cat >"$d/ca.pem"
printf '%s\n' "$d"
`

// CleanupScript removes, on the remote, the session directory dir that
// PrepareScript made, the forwarded sockets with it.
func CleanupScript(dir string) (string, error) {
	if err := ValidRemoteDir(dir); err != nil {
		return "", err
	}
	return "rm -rf -- " + jail.ShellQuote(dir) + "\n", nil
}

// remoteDirName is the shape of the directories PrepareScript makes.
var remoteDirName = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)*/jail-r\.[A-Za-z0-9]{10}$`)

// maxSocketPath is the longest path of a unix socket (108 bytes with the
// terminating zero).
const maxSocketPath = 107

// ValidRemoteDir checks that dir has the shape of a session directory
// PrepareScript made: an absolute path of plain names, short enough for
// the sockets in it, nothing ssh's forwarding syntax would read otherwise.
func ValidRemoteDir(dir string) error {
	longest := filepath.Join(linux.ExternalNet(dir), "capture.sock")
	if !remoteDirName.MatchString(dir) || filepath.Clean(dir) != dir || strings.Contains(dir, "/../") || len(longest) > maxSocketPath {
		return fmt.Errorf("the remote host gave %q as the session directory, not one jail makes; check the remote's TMPDIR", dir)
	}
	return nil
}

// ParseRemoteDir reads the directory PrepareScript printed.
func ParseRemoteDir(out string) (string, error) {
	dir := strings.TrimSuffix(out, "\n")
	return dir, ValidRemoteDir(dir)
}

// Forward is the local end of a remote jail's network: the proxy on this
// machine's unix sockets, in the local session directory, and the control
// socket, whose connection is the link: the remote jail ends when it does.
type Forward struct {
	LocalDir string // the proxy's sockets and control.sock
	CAFile   string // the proxy's CA certificate, which the remote jail trusts; "" without a proxy
	stop     func() string
	control  net.Listener
	linked   chan struct{}
	lost     chan struct{}
	link     *linux.Link
	mu       sync.Mutex
	closed   bool
}

// controlName is the control socket's name in the local session directory.
const controlName = "control.sock"

// listenControl opens the control socket in f.LocalDir and accepts its
// first connection, the remote jail's, in the background; any other is
// closed at once.
func (f *Forward) listenControl() error {
	l, err := net.Listen("unix", filepath.Join(f.LocalDir, controlName))
	if err != nil {
		return fmt.Errorf("opening the control socket: %w", err)
	}
	f.control, f.linked, f.lost = l, make(chan struct{}), make(chan struct{})
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.link = linux.WatchLink(c)
		f.mu.Unlock()
		close(f.linked)
		go func(lost <-chan struct{}) { <-lost; close(f.lost) }(f.link.Lost())
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return nil
}

// Linked is closed once the remote jail has connected to the control
// socket.
func (f *Forward) Linked() <-chan struct{} { return f.linked }

// Lost is closed once the link, after the remote jail made it, has ended:
// the remote jail closed it (it is done, and its exit status is on its
// way through ssh), or the link was cut or stalled (the remote jail stops
// itself then, and ssh may hang on a dead connection). A caller waits a
// few seconds for ssh to exit, then ends it and fails the run.
func (f *Forward) Lost() <-chan struct{} { return f.lost }

// CACert is the proxy's CA certificate (PEM), for PrepareScript's stdin;
// empty for a jail without network.
func (f *Forward) CACert() ([]byte, error) {
	if f.CAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the jail CA certificate: %w", err)
	}
	return b, nil
}

// SSHArgs are the arguments of the ssh that runs the remote jail: one
// remote forwarding per proxy socket into remoteDir's net/, and one for
// the control socket; ssh gives up when it cannot make one of them.
func (f *Forward) SSHArgs(remoteDir string) ([]string, error) {
	pairs, err := f.forwardings(remoteDir)
	if err != nil {
		return nil, err
	}
	args := []string{"-o", "ExitOnForwardFailure=yes"}
	for _, p := range pairs {
		args = append(args, "-R", p)
	}
	return args, nil
}

// CancelArgs are the arguments of `ssh -O cancel` ending SSHArgs'
// forwardings in a shared connection (ControlMaster), which keeps a
// session's forwardings after it.
func (f *Forward) CancelArgs(remoteDir string) ([]string, error) {
	pairs, err := f.forwardings(remoteDir)
	if err != nil {
		return nil, err
	}
	args := []string{"-O", "cancel"}
	for _, p := range pairs {
		args = append(args, "-R", p)
	}
	return args, nil
}

// forwardings are the REMOTE:LOCAL socket pairs of the session.
func (f *Forward) forwardings(remoteDir string) ([]string, error) {
	if err := ValidRemoteDir(remoteDir); err != nil {
		return nil, err
	}
	if strings.ContainsAny(f.LocalDir, ":[]") || !filepath.IsAbs(f.LocalDir) {
		return nil, fmt.Errorf("the session directory %s has a character ssh's forwarding cannot take; set XDG_RUNTIME_DIR or TMPDIR to a plain path", f.LocalDir)
	}
	var out []string
	for _, name := range linux.ProxySockets {
		if f.CAFile == "" {
			break // no network: the link alone
		}
		out = append(out, filepath.Join(linux.ExternalNet(remoteDir), name)+":"+filepath.Join(f.LocalDir, name))
	}
	return append(out, linux.ExternalControl(remoteDir)+":"+filepath.Join(f.LocalDir, controlName)), nil
}

// Close ends the link (the remote jail, if still running, stops), stops
// the proxy and removes the local session directory. It returns the
// proxy's one-line summary of what was denied ("" when nothing was).
func (f *Forward) Close() string {
	f.mu.Lock()
	f.closed = true
	link := f.link
	f.mu.Unlock()
	if link != nil {
		link.Close()
	}
	if f.control != nil {
		f.control.Close()
	}
	if f.stop == nil {
		return ""
	}
	return f.stop()
}

// startLink is the Forward of a remote jail without network: the control
// socket alone, in a fresh private directory of its own.
func startLink() (*Forward, error) {
	dir, err := os.MkdirTemp("", "jail-link-")
	if err != nil {
		return nil, fmt.Errorf("making the session directory: %w", err)
	}
	f := &Forward{LocalDir: dir, stop: func() string { os.RemoveAll(dir); return "" }}
	if err := f.listenControl(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return f, nil
}
