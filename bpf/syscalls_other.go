//go:build linux && (386 || arm || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package bpf

// syscallHandlers is empty: the probes read syscall arguments from the
// x86_64 or arm64 register layout only, so Start reports the architecture
// as unsupported and jail uses its other tracer.
var syscallHandlers map[uint32]probesHandler
