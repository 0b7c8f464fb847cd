package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Without a terminal, the session's stdin carries frames: the user's
// input, its end, and a heartbeat. The remote command's end of the link
// is then told apart from the end of its input: the input ends with an
// end frame, a link that drops (a killed jail or ssh, a dead network)
// ends without one, or goes silent past LinkTimeout.
const (
	frameData = 'd'
	frameEnd  = 'e'
	frameBeat = 'h'
)

// Heartbeat is how often the local side says it is there; LinkTimeout is
// how long the remote side waits for a frame before it ends the jail.
const (
	Heartbeat   = 5 * time.Second
	LinkTimeout = 30 * time.Second
)

// maxFrame bounds one frame's payload.
const maxFrame = 1 << 16

// ErrLinkLost is the link ending before the input did.
var ErrLinkLost = errors.New("the link to the local jail ended")

// WriteFrames sends in as frames to w, then an end frame, with a
// heartbeat every interval until stop is closed.
func WriteFrames(w io.Writer, in io.Reader, interval time.Duration, stop <-chan struct{}) {
	var mu sync.Mutex
	send := func(kind byte, p []byte) error {
		mu.Lock()
		defer mu.Unlock()
		var h [5]byte
		h[0] = kind
		binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
		if _, err := w.Write(h[:]); err != nil {
			return err
		}
		_, err := w.Write(p)
		return err
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if send(frameBeat, nil) != nil {
					return
				}
			case <-stop:
				return
			}
		}
	}()
	buf := make([]byte, maxFrame)
	for {
		n, err := in.Read(buf)
		if n > 0 && send(frameData, buf[:n]) != nil {
			return
		}
		if err != nil {
			send(frameEnd, nil)
			return
		}
	}
}

// ReadFrames writes the input the frames on r carry to out, closing out
// at the end frame, and keeps reading heartbeats. It returns ErrLinkLost
// when r ends, breaks or stays silent for timeout before the end frame,
// or after it (the link still matters once the input is over).
func ReadFrames(r io.Reader, out io.WriteCloser, timeout time.Duration) error {
	frames := make(chan error, 1)
	beat := make(chan struct{}, 1)
	var writing atomic.Bool // a command not reading its input holds the frames back, not the link
	go func() { frames <- readFrames(r, out, beat, &writing) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case err := <-frames:
			return fmt.Errorf("%w: %v", ErrLinkLost, err)
		case <-beat:
			if !t.Stop() {
				<-t.C
			}
			t.Reset(timeout)
		case <-t.C:
			if writing.Load() {
				t.Reset(timeout)
				continue
			}
			return fmt.Errorf("%w: nothing heard for %v", ErrLinkLost, timeout)
		}
	}
}

// readFrames reads frames until r fails, signalling each on beat.
func readFrames(r io.Reader, out io.WriteCloser, beat chan<- struct{}, writing *atomic.Bool) error {
	var h [5]byte
	buf := make([]byte, maxFrame)
	outOpen := true
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		select {
		case beat <- struct{}{}:
		default:
		}
		n := binary.BigEndian.Uint32(h[1:])
		if n > maxFrame {
			return fmt.Errorf("a frame of %d bytes", n)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return err
		}
		switch h[0] {
		case frameData:
			if outOpen {
				writing.Store(true)
				_, err := out.Write(buf[:n])
				writing.Store(false)
				if err != nil {
					out.Close() // the command stopped reading: drop the rest
					outOpen = false
				}
			}
		case frameEnd:
			if outOpen {
				out.Close()
				outOpen = false
			}
		case frameBeat:
		default:
			return fmt.Errorf("an unknown frame %q", h[0])
		}
	}
}
