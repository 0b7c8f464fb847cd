// Package bpf holds jail's eBPF probes for learning and watch modes.
//
// The probes (probes.c) are compiled with bpf2go; the generated
// probes_bpfel.go and probes_bpfel.o are committed so building jail needs
// no clang. Rebuilding them needs clang, llvm and libbpf-dev:
//
//	go generate ./bpf/
package bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -tags linux -type event -type handler probes probes.c -- -O2 -g -Wall -I./headers -I/usr/include/x86_64-linux-gnu
