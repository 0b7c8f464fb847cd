//go:build linux

package bpf

// syscallHandlers maps this architecture's syscall numbers to the probes'
// handlers; the probes trace nothing else.
var syscallHandlers = handlerTable(arm64Syscalls)
