//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// GrantHint tells the user how to give jail the capabilities eBPF needs.
const GrantHint = "eBPF tracing needs CAP_BPF and CAP_PERFMON; grant them with: sudo setcap cap_bpf,cap_perfmon+ep $(command -v jail)"

// ErrPermission is wrapped by Start's error when the kernel refused to load
// or attach the probes for lack of privileges.
var ErrPermission = errors.New("not permitted")

// Tracer is a running set of probes.
type Tracer struct {
	objs   *probesObjects
	links  []link.Link
	rd     *ringbuf.Reader
	events chan Event
	once   sync.Once
	stop   chan struct{} // closed by Close: stop sending
	done   chan struct{} // closed by the reader goroutine on exit
}

// PidNSInode returns the inode number of the PID namespace of process pid
// (0 = the caller), the value Start expects.
func PidNSInode(pid int) (uint32, error) {
	p := "/proc/self/ns/pid"
	if pid > 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/ns/pid"
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return 0, fmt.Errorf("bpf: pid namespace of %d: %w", pid, err)
	}
	return uint32(st.Ino), nil
}

// Start loads the probes and reports the syscalls of every process whose PID
// namespace is pidnsInode or nested below it (see PidNSInode). With 0 the
// probes are loaded and attached but trace nothing until Target names the
// namespace: loading takes tens of milliseconds and can be done before
// the namespace exists. The caller must Close the tracer.
//
// The probes are BTF tracepoints on sys_enter and sys_exit: attaching them
// needs CAP_BPF and CAP_PERFMON and the kernel's BTF, but no tracefs.
func Start(pidnsInode uint32) (*Tracer, error) {
	if len(syscallHandlers) == 0 {
		return nil, fmt.Errorf("bpf: eBPF tracing is not implemented for %s", runtime.GOARCH)
	}
	// No RLIMIT_MEMLOCK raise: BPF memory is charged to the memory cgroup
	// since Linux 5.11 (which learning's overlay needs anyway), and the
	// rlimit package would probe the kernel with bpf() in every jail's
	// start-up, learning or not.
	spec, err := loadProbes()
	if err != nil {
		return nil, fmt.Errorf("bpf: parsing embedded probes: %w", err)
	}
	var objs probesObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("bpf: kernel verifier rejected the probes: %+v", verr)
		}
		return nil, wrapPerm("loading the probes", err)
	}
	t := &Tracer{objs: &objs, events: make(chan Event, 1024), stop: make(chan struct{}), done: make(chan struct{})}
	for nr, h := range syscallHandlers {
		if err := objs.SyscallHandler.Put(nr, uint32(h)); err != nil {
			t.Close()
			return nil, fmt.Errorf("bpf: filling the syscall table (syscall %d): %w", nr, err)
		}
	}
	if err := t.Target(pidnsInode); err != nil {
		t.Close()
		return nil, err
	}
	for _, p := range []*ebpf.Program{objs.SysEnter, objs.SysExit, objs.SchedProcessFork} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			t.Close()
			return nil, wrapPerm("attaching "+p.String(), err)
		}
		t.links = append(t.links, l)
	}
	t.rd, err = ringbuf.NewReader(objs.Events)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("bpf: opening ring buffer: %w", err)
	}
	go t.read()
	return t, nil
}

// Target makes the probes trace the PID namespace pidnsInode (and those
// nested below it) from now on.
func (t *Tracer) Target(pidnsInode uint32) error {
	if err := t.objs.TargetPidns.Put(uint32(0), pidnsInode); err != nil {
		return fmt.Errorf("bpf: setting target pid namespace: %w", err)
	}
	return nil
}

// Stop stops tracing and waits until the events already recorded have been
// delivered; Events is closed then. Close must still be called.
func (t *Tracer) Stop() {
	t.Target(0)
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	if t.rd != nil {
		// Records already in the ring are read before the reader sees
		// ErrFlushed and ends.
		t.rd.Flush()
		<-t.done
	}
}

// Events returns the channel of events. It is closed when the tracer is
// closed.
func (t *Tracer) Events() <-chan Event { return t.events }

// Close detaches the probes and closes the events channel.
func (t *Tracer) Close() error {
	t.once.Do(func() {
		for _, l := range t.links {
			l.Close()
		}
		close(t.stop)
		if t.rd != nil {
			t.rd.Close()
			<-t.done
		} else {
			close(t.events)
		}
		t.objs.Close()
	})
	return nil
}

func (t *Tracer) read() {
	defer close(t.done)
	defer close(t.events)
	var rec ringbuf.Record
	var raw probesEvent
	res := resolver{procs: map[uint32]*procState{}}
	for {
		// The probes wake the reader only when much is waiting: poll.
		t.rd.SetDeadline(time.Now().Add(pollInterval))
		if err := t.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			return // closed, or drained after Stop
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(raw)) {
			continue
		}
		// The record is the C struct as the probes wrote it.
		raw = *(*probesEvent)(unsafe.Pointer(&rec.RawSample[0]))
		e, ok := res.event(&raw)
		if !ok {
			continue
		}
		select {
		case t.events <- e:
		case <-t.stop:
			return
		}
	}
}

// pollInterval bounds how long an event waits in the ring before the
// reader sees it (watch mode shows events this late at most).
const pollInterval = 10 * time.Millisecond

// procState is what the tracer knows of a process: its working directory
// and the directories its descriptors were opened on.
type procState struct {
	cwd string
	fds map[int32]string
}

// resolver makes the probes' paths absolute from the event stream itself:
// a process's chdir, fchdir, opens and forks arrive in order, so a
// relative path is resolved against the directory the process was in when
// it made the call, not when jail reads the event. /proc is asked only
// about a process first seen mid-way.
type resolver struct {
	procs map[uint32]*procState
}

func (r *resolver) state(tgid uint32) *procState {
	st := r.procs[tgid]
	if st == nil {
		st = &procState{fds: map[int32]string{}}
		r.procs[tgid] = st
	}
	return st
}

// dir is the directory a path relative to dirfd is taken against.
func (r *resolver) dir(tgid uint32, dirfd int32) string {
	st := r.state(tgid)
	if dirfd == AtFDCWD {
		if st.cwd == "" {
			st.cwd = readlink("/proc/" + strconv.Itoa(int(tgid)) + "/cwd")
		}
		return st.cwd
	}
	if d, ok := st.fds[dirfd]; ok {
		return d
	}
	return readlink("/proc/" + strconv.Itoa(int(tgid)) + "/fd/" + strconv.Itoa(int(dirfd)))
}

func (r *resolver) abs(tgid uint32, dirfd int32, p string) string {
	if p == "" {
		return ""
	}
	if p[0] == '/' {
		return filepath.Clean(p)
	}
	d := r.dir(tgid, dirfd)
	if d == "" {
		return ""
	}
	return filepath.Join(d, p)
}

// event updates the processes' state and returns the event to deliver,
// ok false for the bookkeeping kinds.
func (r *resolver) event(raw *probesEvent) (Event, bool) {
	switch Kind(raw.Kind) {
	case KindFork:
		parent := r.state(raw.Tgid)
		child := &procState{cwd: parent.cwd, fds: make(map[int32]string, len(parent.fds))}
		for fd, d := range parent.fds {
			child.fds[fd] = d
		}
		r.procs[uint32(raw.Ret)] = child
		return Event{}, false
	case KindChdir:
		if raw.Ret == 0 {
			var d string
			if p := cstr(raw.Path[:]); p != "" {
				d = r.abs(raw.Tgid, AtFDCWD, p)
			} else {
				d = r.dir(raw.Tgid, raw.Dirfd)
			}
			r.state(raw.Tgid).cwd = d
		}
		return Event{}, false
	}
	e := convert(raw, r)
	if e.Kind == KindOpen && e.Ret >= 0 && e.AbsPath != "" {
		r.state(e.Tgid).fds[int32(e.Ret)] = e.AbsPath
	}
	return e, true
}

func readlink(p string) string {
	d, err := os.Readlink(p)
	if err != nil || !filepath.IsAbs(d) {
		return ""
	}
	return d
}

func cstr(b []int8) string {
	s := unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b))
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return string(s)
}

func convert(r *probesEvent, res *resolver) Event {
	e := Event{
		Pid: r.Pid, Tgid: r.Tgid, Kind: Kind(r.Kind), Flags: r.Flags, Ret: r.Ret,
		Comm: cstr(r.Comm[:]), Dirfd: r.Dirfd, Dirfd2: r.Dirfd2, Family: r.Family,
	}
	switch {
	case e.Kind == KindConnect && r.Family == AFUnix:
		p := unsafe.Slice((*byte)(unsafe.Pointer(&r.Path[0])), 108)
		if len(p) > 0 && p[0] == 0 { // abstract
			e.Path = "@" + cstr(r.Path[1:108])
		} else {
			e.Path = cstr(r.Path[:108])
		}
	case e.Kind == KindConnect:
		port := binary.BigEndian.Uint16([]byte{byte(r.Port), byte(r.Port >> 8)})
		if r.Family == AFInet {
			e.Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte(r.Addr[:4])), port)
		} else if r.Family == AFInet6 {
			e.Addr = netip.AddrPortFrom(netip.AddrFrom16(r.Addr), port)
		}
	default:
		e.Path = cstr(r.Path[:])
		e.Path2 = cstr(r.Path2[:])
		e.AbsPath = res.abs(e.Tgid, e.Dirfd, e.Path)
		if e.Kind == KindRename {
			e.AbsPath2 = res.abs(e.Tgid, e.Dirfd2, e.Path2)
		}
	}
	return e
}

func wrapPerm(what string, err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		// The library's own hint (raise RLIMIT_MEMLOCK) does not apply:
		// the capabilities are missing.
		return fmt.Errorf("bpf: %s: %w: %s", what, ErrPermission, GrantHint)
	}
	return fmt.Errorf("bpf: %s: %w", what, err)
}
