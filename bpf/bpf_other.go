//go:build !linux || !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package bpf

import "errors"

// GrantHint tells the user how to give jail the capabilities eBPF needs.
const GrantHint = "eBPF tracing is only available on Linux"

// ErrPermission is wrapped by Start's error when privileges are missing.
var ErrPermission = errors.New("not permitted")

// ErrUnsupported is returned by Start on platforms without eBPF.
var ErrUnsupported = errors.New("bpf: eBPF tracing is only available on Linux")

// Tracer is a running set of probes (never created on this platform).
type Tracer struct{}

// PidNSInode is not available on this platform.
func PidNSInode(pid int) (uint32, error) { return 0, ErrUnsupported }

// Start always fails on this platform.
func Start(pidnsInode uint32) (*Tracer, error) { return nil, ErrUnsupported }

// Events returns nil on this platform.
func (t *Tracer) Events() <-chan Event { return nil }

// Close does nothing on this platform.
func (t *Tracer) Close() error { return nil }

// Target does nothing on this platform.
func (t *Tracer) Target(pidnsInode uint32) error { return ErrUnsupported }

// Stop does nothing on this platform.
func (t *Tracer) Stop() {}
