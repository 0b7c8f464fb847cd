package sysnum

import "testing"

func checkNative(t *testing.T, arch string, want map[string]uint32) {
	t.Helper()
	for name, nr := range want {
		if got, ok := Syscalls(arch)[name]; !ok || got != nr {
			t.Errorf("%s %s: table %d (present %v), x/sys %d", arch, name, got, ok, nr)
		}
	}
}
