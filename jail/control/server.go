package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jailsh/jail/proxy"
)

const (
	maxCallBytes = 64 << 10         // one Call line
	callTimeout  = 10 * time.Second // to read a Call and write its Reply
	maxConns     = 32               // connections served at once
	maxSockPath  = 104              // sun_path, the smaller of Linux's and macOS's
	closeWait    = time.Second      // how long Close lets connections finish
)

// Listen serves the Hub on a control socket in dir (made 0700 when
// missing, refused when it is not the user's own and closed to others),
// named after the session.
func (h *Hub) Listen(dir string) error {
	if h.cfg.Info.ID == "" || strings.ContainsAny(h.cfg.Info.ID, "/\x00") {
		return fmt.Errorf("control socket: invalid session id %q", h.cfg.Info.ID)
	}
	if err := ensurePrivateDir(dir); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	path := filepath.Join(dir, h.cfg.Info.ID+".sock")
	// Made under another name (which Sessions does not dial), then
	// renamed into place: the socket is never seen half-made, bound but
	// not yet listening, which a client would take for a dead one.
	tmp := filepath.Join(dir, "."+h.cfg.Info.ID+".new")
	if len(tmp) >= maxSockPath {
		return fmt.Errorf("control socket: the path %s is too long for a unix socket; set TMPDIR to a shorter directory", path)
	}
	ln, err := listenPrivate(tmp)
	if err == nil {
		if err = os.Rename(tmp, path); err != nil {
			ln.Close()
			removeSocket(tmp)
		}
	}
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	h.mu.Lock()
	if h.closed || h.ln != nil {
		h.mu.Unlock()
		ln.Close()
		removeSocket(path)
		return errors.New("control socket: the hub is closed or served already")
	}
	h.ln, h.sock = ln, path
	h.mu.Unlock()
	go h.serve(ln)
	return nil
}

// umaskMu serializes the process-wide umask change of listenPrivate.
var umaskMu sync.Mutex

// listenPrivate listens on a unix socket at path created mode 0600: the
// umask is set while it is bound, so that it is never open to others.
func listenPrivate(path string) (net.Listener, error) {
	removeSocket(path) // a leftover of a run killed while it listened
	umaskMu.Lock()
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // Close removes it, once
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		removeSocket(path)
		return nil, err
	}
	return ln, nil
}

// removeSocket removes the socket at path, and nothing else.
func removeSocket(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
}

// ensurePrivateDir makes dir (mode 0700, parents too) or checks that an
// existing one is a real directory of this user's closed to others, under
// a parent that no one else may change.
func ensurePrivateDir(dir string) error {
	// The parent first: nothing is made in a directory others may change.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", parent, err)
	}
	if err := OwnDir(parent, 0o022); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return OwnDir(dir, 0o077)
}

// OwnDir checks that dir is a directory (not a symlink) owned by this
// user with none of the bits of others set.
func OwnDir(dir string, others os.FileMode) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&others != 0 {
		return fmt.Errorf("%s is not a private directory of yours (mode %v); remove it and try again", dir, fi.Mode())
	}
	return nil
}

// peerAllowed reports whether the other end of c may use the control
// socket (see peerFDAllowed). What cannot be checked is refused.
func peerAllowed(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	allowed := false
	if err := raw.Control(func(fd uintptr) { allowed = peerFDAllowed(int(fd)) }); err != nil {
		return false
	}
	return allowed
}

// serve accepts connections until the listener closes.
func (h *Hub) serve(ln net.Listener) {
	slots := make(chan struct{}, maxConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			c.Close() // too many at once
			continue
		}
		if !h.track(c) {
			c.Close()
			<-slots
			continue
		}
		go func() {
			defer func() { <-slots }()
			defer h.untrack(c)
			defer c.Close()
			// Another user, or a process in another user namespace (a
			// jailed one), gets nothing: not even an error.
			if !peerAllowed(c) {
				return
			}
			h.handle(c)
		}()
	}
}

func (h *Hub) track(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.conns[c] = struct{}{}
	h.served.Add(1)
	return true
}

func (h *Hub) untrack(c net.Conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	h.served.Done()
}

func (h *Hub) closeConns() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns {
		c.Close()
	}
}

// handle reads one Call from c and answers it.
func (h *Hub) handle(c net.Conn) {
	c.SetDeadline(time.Now().Add(callTimeout))
	r := bufio.NewReader(io.LimitReader(c, maxCallBytes))
	line, err := r.ReadBytes('\n')
	if err != nil {
		return
	}
	var call Call
	if err := json.Unmarshal(line, &call); err != nil {
		writeLine(c, Reply{Error: "control: the call is not valid JSON"})
		return
	}
	if call.Op == OpWatch {
		h.serveWatch(c)
		return
	}
	writeLine(c, h.reply(call))
}

// reply does what call asks.
func (h *Hub) reply(call Call) Reply {
	switch call.Op {
	case OpStatus:
		return Reply{Status: h.Status()}
	case OpPending:
		return Reply{Pending: h.Pending()}
	case OpAnswer:
		if call.Answer == nil {
			return Reply{Error: "control: an answer call needs an answer"}
		}
		return errReply(h.answer(call.ID, *call.Answer))
	case OpRule:
		if err := (proxy.Rules{Allow: []string{call.Host}}).Validate(); err != nil || call.Host == "" {
			return Reply{Error: fmt.Sprintf("control: %q is not a host entry", call.Host)}
		}
		return errReply(h.rule(call.Allow, call.Host, call.Scope))
	}
	return Reply{Error: fmt.Sprintf("control: unknown op %q", call.Op)}
}

func errReply(err error) Reply {
	if err != nil {
		return Reply{Error: err.Error()}
	}
	return Reply{}
}

// serveWatch streams Events to c until the client hangs up (what it
// sends after its Call is read and thrown away) or the
// session ends.
func (h *Hub) serveWatch(c net.Conn) {
	w, stop := h.watch()
	defer stop()
	c.SetDeadline(time.Time{})
	gone := make(chan struct{})
	go func() { io.Copy(io.Discard, c); close(gone) }()
	if !writeEvent(c, Event{Type: EventHello, Session: h.cfg.Info.ID, Status: h.Status()}) {
		return
	}
	for {
		select {
		case ev := <-w.ch:
			if !writeEvent(c, ev) || ev.Type == EventEnded {
				return
			}
		case <-h.done:
			// What was queued before the end, then the end.
			for {
				select {
				case ev := <-w.ch:
					if !writeEvent(c, ev) || ev.Type == EventEnded {
						return
					}
				default:
					writeEvent(c, Event{Type: EventEnded, Session: h.cfg.Info.ID})
					return
				}
			}
		case <-gone:
			return
		}
	}
}

// writeEvent writes ev within callTimeout: a client that does not read
// is dropped.
func writeEvent(c net.Conn, ev Event) bool {
	c.SetWriteDeadline(time.Now().Add(callTimeout))
	return writeLine(c, ev) == nil
}

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
