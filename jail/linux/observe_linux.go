package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/jailsh/jail/bpf"
	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/learn"
)

// Observer watches a learning or watch run: every file access,
// exec and connect of every process in the jail.
type Observer struct {
	// Want is the tracer asked for: "" picks eBPF and falls back to the
	// seccomp tracer when eBPF cannot run; TracerEBPF or TracerSeccomp
	// insist on one.
	Want string
	// OnEvent, when set, is called for each event as it happens (watch
	// mode streams them to the log). It must not block for long.
	OnEvent func(learn.Event)

	// Used is the tracer that ran; Fallback says why it is not eBPF.
	Used, Fallback string

	mu      sync.Mutex
	initPid int // the jail's first process: bubblewrap's setup, then init
	events  []learn.Event
	ebpf    *bpf.Tracer
	done    chan struct{}
}

// Events returns what was observed, in arrival order.
func (o *Observer) Events() []learn.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]learn.Event(nil), o.events...)
}

func (o *Observer) add(e learn.Event) {
	o.mu.Lock()
	if e.Pid != 0 && e.Pid == o.initPid {
		// bubblewrap finishing the mounts, init mounting the overlay:
		// the jail's own doing, not the command's.
		o.mu.Unlock()
		return
	}
	o.events = append(o.events, e)
	o.mu.Unlock()
	if o.OnEvent != nil {
		o.OnEvent(e)
	}
}

// preloaded is the eBPF tracer PreloadTracer loads in the background.
var preloaded struct {
	once sync.Once
	done chan struct{}
	t    *bpf.Tracer
	err  error
}

// PreloadTracer starts loading the eBPF probes now (tens of milliseconds:
// the kernel's BTF, the verifier), so that the load overlaps planning the
// jail; Observer.Start takes the result.
func PreloadTracer() {
	preloaded.once.Do(func() {
		preloaded.done = make(chan struct{})
		go func() {
			preloaded.t, preloaded.err = bpf.Start(0)
			close(preloaded.done)
		}()
	})
}

// Start picks and prepares the tracer before the jail starts (RunObserved
// calls it when the caller did not): eBPF is loaded now and aimed at the
// jail's PID namespace once it exists.
func (o *Observer) Start() error {
	if o.Used != "" {
		return nil
	}
	if o.Want != "" && o.Want != jail.TracerEBPF && o.Want != jail.TracerSeccomp {
		return fmt.Errorf("unknown tracer %q; use %s or %s", o.Want, jail.TracerEBPF, jail.TracerSeccomp)
	}
	if o.Want != jail.TracerSeccomp {
		PreloadTracer()
		<-preloaded.done
		t, err := preloaded.t, preloaded.err
		preloaded.t, preloaded.err = nil, errors.New("bpf: the preloaded tracer is taken")
		if err == nil {
			o.ebpf, o.Used = t, jail.TracerEBPF
			o.done = make(chan struct{})
			go o.consume()
			return nil
		}
		if o.Want == jail.TracerEBPF {
			return fmt.Errorf("eBPF tracer: %w", err)
		}
		o.Fallback = err.Error()
		if errors.Is(err, bpf.ErrPermission) {
			o.Fallback = bpf.GrantHint
		}
	}
	o.Used = jail.TracerSeccomp
	return nil
}

// target aims the eBPF probes at the jail whose first process is pid.
func (o *Observer) target(pid int) error {
	if o.ebpf == nil {
		return nil
	}
	ino, err := bpf.PidNSInode(pid)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.initPid = pid
	o.mu.Unlock()
	return o.ebpf.Target(ino)
}

// stop delivers the events still in flight and releases the tracer.
func (o *Observer) stop() {
	if o.ebpf == nil {
		return
	}
	o.ebpf.Stop()
	<-o.done
	o.ebpf.Close()
	o.ebpf = nil
}

func (o *Observer) consume() {
	defer close(o.done)
	for e := range o.ebpf.Events() {
		for _, le := range fromBPF(e) {
			o.add(le)
		}
	}
}

// fromBPF turns one probe event into the events learning works on.
func fromBPF(e bpf.Event) []learn.Event {
	path := e.AbsPath
	if path == "" && len(e.Path) > 0 && e.Path[0] == '/' {
		path = e.Path
	}
	le := learn.Event{Path: path, Errno: e.Errno(), Pid: int(e.Tgid)}
	switch e.Kind {
	case bpf.KindOpen:
		le.Kind, le.Write = openKind(uint64(e.Flags))
	case bpf.KindExec:
		le.Kind = learn.Exec
	case bpf.KindMkdir:
		le.Kind, le.Write = learn.Mkdir, true
	case bpf.KindUnlink, bpf.KindRmdir:
		le.Kind, le.Write = learn.Unlink, true
	case bpf.KindRename:
		le.Kind, le.Write = learn.Rename, true
		to := le
		to.Path = e.AbsPath2
		if to.Path == "" && len(e.Path2) > 0 && e.Path2[0] == '/' {
			to.Path = e.Path2
		}
		return []learn.Event{le, to}
	case bpf.KindConnect:
		le.Kind = learn.Connect
		if e.Family == bpf.AFUnix {
			le.Path = e.Path
		} else if e.Addr.IsValid() {
			le.Path, le.Addr = "", e.Addr.String()
		} else {
			return nil
		}
	default:
		return nil
	}
	if le.Path == "" && le.Addr == "" {
		return nil
	}
	return []learn.Event{le}
}

// fdInfo is bubblewrap's --info-fd in the jail process's descriptors.
const fdInfo = 9

// childPid reads bubblewrap's --info-fd report: the PID of the jail's
// first process, in the host's PID namespace.
func childPid(r io.Reader) (int, error) {
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 64<<10)).Decode(&info); err != nil {
		return 0, fmt.Errorf("reading bubblewrap's info: %w", err)
	}
	if info.ChildPid <= 0 {
		return 0, errors.New("bubblewrap reported no child pid")
	}
	return info.ChildPid, nil
}
