// Package inside is what runs inside the jail: jail's init (Landlock,
// seccomp, the network bridge, signals, reaping). It is kept apart from
// the planner and the proxy so that the init binary stays small and
// starts fast.
package inside

import (
	"encoding/binary"
	"errors"
	"syscall"
)

// InitPath is where jail's init binary is bound, read-only, inside the
// jail: the jail binary itself, or the smaller jail-init installed beside it.
const InitPath = "/run/jail/init"

// Where bubblewrap binds the real home read-only for the overlay's lower
// layer, and where init keeps the overlay's upper layer. Both are covered
// or detached before the command starts.
const (
	OverlayLower = "/run/jail/home"
	OverlayWork  = "/run/jail/overlay"
)

// LandlockRule grants an access class on a path inside the jail.
type LandlockRule struct {
	Path   string
	Access string // list, read (read+execute), write (everything), proc, dev, tty
	File   bool   // the path is a file, not a directory
}

// InitSpec is what init needs to finish the jail and start the command.
// It travels from the host to init on a pipe in a small binary form:
// decoding JSON by reflection cost init a few hundred microseconds on
// every start.
type InitSpec struct {
	Argv      []string
	Env       []string
	Dir       string
	LandlockV int
	Landlock  []LandlockRule
	Seccomp   []byte // compiled BPF program, 8 bytes per instruction
	Ignore    []int  // signals that were ignored when jail started
	Relays    []Relay
	WaitProxy bool // read a 0 byte on the control pipe before init mounts anything or starts the command
	// Notify: install the notify filter and hand its listener to the
	// host's supervisor: every exec (command rules), and with Trace the
	// traced calls too.
	Notify bool
	// Trace: the notify filter also sends every file, exec and connect
	// syscall the tracer watches (learning and watch modes without eBPF);
	// the host answers "continue" to all but denied execs.
	Trace bool
	// OverlayHome: init mounts an overlay over this directory (the real
	// home, bound read-only by bubblewrap) whose writes stay in memory, and
	// puts back the mounts bubblewrap made below it (masks, the project).
	OverlayHome string
	// Mounts are made by init, in order, after bubblewrap's and the
	// overlay, in a mount namespace of its own, before it drops every
	// capability: placeholders held read-only and directories pinned.
	Mounts []Mount
	// Capture: when Listen is set, init redirects every TCP connection
	// the jail opens outside its loopback to this port and hands each,
	// with its original destination, to Dial (the proxy's capture
	// socket). Programs that ignore proxy variables are decided by the
	// same rules.
	Capture Relay
}

// Mount is one mount init makes: the tree at Path (with what is mounted
// below it) bound onto itself, read-only when ReadOnly. A mount point
// cannot be renamed, removed or replaced from inside.
type Mount struct {
	Path     string
	ReadOnly bool
}

const specMagic = "jailspec7"

// MarshalBinary encodes the spec: a magic string, then each field in
// order; strings and byte slices as a uvarint length and the bytes, lists
// as a uvarint count, integers as varints.
func (s *InitSpec) MarshalBinary() ([]byte, error) {
	var b []byte
	str := func(v string) { b = binary.AppendUvarint(b, uint64(len(v))); b = append(b, v...) }
	strs := func(l []string) {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, v := range l {
			str(v)
		}
	}
	boolean := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	str(specMagic)
	strs(s.Argv)
	strs(s.Env)
	str(s.Dir)
	b = binary.AppendVarint(b, int64(s.LandlockV))
	b = binary.AppendUvarint(b, uint64(len(s.Landlock)))
	for _, r := range s.Landlock {
		str(r.Path)
		str(r.Access)
		boolean(r.File)
	}
	str(string(s.Seccomp))
	b = binary.AppendUvarint(b, uint64(len(s.Ignore)))
	for _, v := range s.Ignore {
		b = binary.AppendVarint(b, int64(v))
	}
	b = binary.AppendUvarint(b, uint64(len(s.Relays)))
	for _, r := range s.Relays {
		str(r.Listen)
		str(r.Dial)
		boolean(r.HandOff)
	}
	boolean(s.WaitProxy)
	boolean(s.Notify)
	boolean(s.Trace)
	str(s.OverlayHome)
	b = binary.AppendUvarint(b, uint64(len(s.Mounts)))
	for _, m := range s.Mounts {
		str(m.Path)
		boolean(m.ReadOnly)
	}
	str(s.Capture.Listen)
	str(s.Capture.Dial)
	boolean(s.Capture.HandOff)
	return b, nil
}

var errSpec = errors.New("malformed jail spec")

// UnmarshalBinary decodes what MarshalBinary wrote; malformed input is an
// error, never a panic.
func (s *InitSpec) UnmarshalBinary(b []byte) error {
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	sv := func() int {
		v, n := binary.Varint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return int(v)
	}
	count := func() int {
		n := uv()
		if n > uint64(len(b)) { // every element takes at least a byte
			bad = true
			return 0
		}
		return int(n)
	}
	str := func() string {
		n := count()
		if bad {
			return ""
		}
		v := string(b[:n])
		b = b[n:]
		return v
	}
	strs := func() []string {
		n := count()
		var l []string
		for i := 0; i < n && !bad; i++ {
			l = append(l, str())
		}
		return l
	}
	boolean := func() bool {
		if len(b) == 0 {
			bad = true
			return false
		}
		v := b[0] == 1
		b = b[1:]
		return v
	}
	if str() != specMagic {
		return errSpec
	}
	s.Argv = strs()
	s.Env = strs()
	s.Dir = str()
	s.LandlockV = sv()
	for i, n := 0, count(); i < n && !bad; i++ {
		s.Landlock = append(s.Landlock, LandlockRule{Path: str(), Access: str(), File: boolean()})
	}
	if sc := str(); sc != "" {
		s.Seccomp = []byte(sc)
	}
	for i, n := 0, count(); i < n && !bad; i++ {
		s.Ignore = append(s.Ignore, sv())
	}
	for i, n := 0, count(); i < n && !bad; i++ {
		s.Relays = append(s.Relays, Relay{Listen: str(), Dial: str(), HandOff: boolean()})
	}
	s.WaitProxy = boolean()
	s.Notify = boolean()
	s.Trace = boolean()
	s.OverlayHome = str()
	for i, n := 0, count(); i < n && !bad; i++ {
		s.Mounts = append(s.Mounts, Mount{Path: str(), ReadOnly: boolean()})
	}
	s.Capture = Relay{Listen: str(), Dial: str(), HandOff: boolean()}
	if bad || len(b) != 0 || len(s.Argv) == 0 {
		return errSpec
	}
	return nil
}

// ExitCode is the shell's code for a wait status: the exit status, or 128
// plus the signal that killed the process.
func ExitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
