package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// maxReplyBytes bounds one Reply or Event line a client reads.
const maxReplyBytes = 16 << 20

// Dir is the directory of this user's control sockets:
// $XDG_RUNTIME_DIR/jail/ctl when XDG_RUNTIME_DIR is an absolute directory
// this user owns, else jail-UID/ctl under the temporary directory.
func Dir() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		if fi, err := os.Stat(x); err == nil && fi.IsDir() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Getuid() {
				return filepath.Join(x, "jail", "ctl")
			}
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("jail-%d", os.Getuid()), "ctl")
}

// Client talks to one session's control socket.
type Client struct {
	Path string
}

// Sessions returns a Client for every live session in dir, in the order of
// their start; sockets nobody answers on are removed.
func Sessions(dir string) ([]*Client, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	if err := OwnDir(dir, 0o077); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	type live struct {
		c       *Client
		started time.Time
	}
	var out []live
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sock") || e.Type()&os.ModeSocket == 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		c, err := Dial(path)
		if errors.Is(err, syscall.ECONNREFUSED) {
			removeSocket(path) // its jail is gone
			continue
		}
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := c.Status(ctx)
		cancel()
		if err != nil {
			continue
		}
		out = append(out, live{c, st.Started})
	}
	slices.SortStableFunc(out, func(a, b live) int { return a.started.Compare(b.started) })
	cs := make([]*Client, len(out))
	for i, l := range out {
		cs[i] = l.c
	}
	return cs, nil
}

// Dial connects to the control socket at path and checks that the server
// is this user's.
func Dial(path string) (*Client, error) {
	c := &Client{Path: path}
	conn, err := c.dial(context.Background())
	if err != nil {
		return nil, err
	}
	conn.Close()
	return c, nil
}

// dial connects to the socket and checks its server: this user's, in this
// user namespace.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	if _, ok := ctx.Deadline(); !ok {
		d.Timeout = callTimeout
	}
	conn, err := d.DialContext(ctx, "unix", c.Path)
	if err != nil {
		return nil, err
	}
	if !peerAllowed(conn) {
		conn.Close()
		return nil, fmt.Errorf("the control socket %s is not served by you", c.Path)
	}
	return conn, nil
}

// call sends one Call and reads its Reply.
func (c *Client) call(ctx context.Context, call Call) (*Reply, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(callTimeout)
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := writeLine(conn, call); err != nil {
		return nil, fmt.Errorf("calling %s: %w", c.Path, err)
	}
	var rep Reply
	if err := readLine(bufio.NewReaderSize(conn, 4096), &rep); err != nil {
		return nil, fmt.Errorf("calling %s: %w", c.Path, err)
	}
	if rep.Error != "" {
		return &rep, errors.New(rep.Error)
	}
	return &rep, nil
}

// readLine reads one JSON line of at most maxReplyBytes into v.
func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxReplyBytes {
			return errors.New("the answer is too long")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return fmt.Errorf("no answer: %w", err)
		}
		break
	}
	return json.Unmarshal(line, v)
}

// Status returns the session's Status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	rep, err := c.call(ctx, Call{Op: OpStatus})
	if err != nil {
		return nil, err
	}
	if rep.Status == nil {
		return nil, fmt.Errorf("calling %s: no status in the answer", c.Path)
	}
	return rep.Status, nil
}

// Pending returns the session's held requests, oldest first.
func (c *Client) Pending(ctx context.Context) ([]Request, error) {
	rep, err := c.call(ctx, Call{Op: OpPending})
	if err != nil {
		return nil, err
	}
	return rep.Pending, nil
}

// Answer answers the held request id.
func (c *Client) Answer(ctx context.Context, id string, a Answer) error {
	_, err := c.call(ctx, Call{Op: OpAnswer, ID: id, Answer: &a})
	return err
}

// Rule allows or denies host in the session (scope ScopeSession) and, for
// ScopeProject or ScopeUser, also writes it into that config.
func (c *Client) Rule(ctx context.Context, allow bool, host, scope string) error {
	_, err := c.call(ctx, Call{Op: OpRule, Allow: allow, Host: host, Scope: scope})
	return err
}

// Watch calls fn with each Event of the session (EventHello first) until
// ctx ends or the session ends (EventEnded, then a nil error).
func (c *Client) Watch(ctx context.Context, fn func(Event)) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetWriteDeadline(time.Now().Add(callTimeout))
	if err := writeLine(conn, Call{Op: OpWatch}); err != nil {
		return fmt.Errorf("watching %s: %w", c.Path, err)
	}
	conn.SetWriteDeadline(time.Time{})
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		var ev Event
		if err := readLine(r, &ev); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watching %s: %w", c.Path, err)
		}
		fn(ev)
		if ev.Type == EventEnded {
			return nil
		}
	}
}
