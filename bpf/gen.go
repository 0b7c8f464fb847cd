// Package bpf holds jail's eBPF probes for learning and watch modes.
//
// The probes (probes.c) are compiled with bpf2go; the generated
// probes_bpfel.go and probes_bpfel.o are committed so building jail needs
// no clang. Rebuilding them needs clang, llvm and libbpf-dev:
//
//	go generate ./bpf/
//
// The one little-endian object serves amd64 and arm64 alike: the probes
// read a system call's registers through CO-RE, with a local struct per
// layout (headers/jail_core.h), never through the PT_REGS macros that
// need __TARGET_ARCH; the x86_64 include directory below only provides
// asm/types.h, which is the same on both. core_test.go relocates the
// object against each architecture's struct pt_regs.
package bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -tags linux -type event -type handler probes probes.c -- -O2 -g -Wall -I./headers -I/usr/include/x86_64-linux-gnu
