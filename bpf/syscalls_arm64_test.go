//go:build linux

package bpf

import "unsafe"

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// legacySyscalls: arm64 has only the *at path syscalls.
func legacySyscalls(fail func(string, error)) {}

func legacyWants(abs func(string) string) []want { return nil }
