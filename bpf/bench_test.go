//go:build linux && (amd64 || arm64)

package bpf

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkOpenClose measures openat+close of an existing file: what every
// process on the machine pays while the probes are loaded (sys_enter and
// sys_exit run for all syscalls), and what a traced process pays.
//
//	go test -run - -bench OpenClose -benchtime 200000x ./bpf/
func BenchmarkOpenClose(b *testing.B) {
	file := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	loop := func(b *testing.B) {
		for b.Loop() {
			fd, err := unix.Openat(unix.AT_FDCWD, file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	}
	b.Run("no-probes", loop)

	tr, err := Start(0)
	if err != nil {
		if errors.Is(err, ErrPermission) {
			b.Skipf("needs CAP_BPF and CAP_PERFMON: %v", err)
		}
		b.Fatal(err)
	}
	defer tr.Close()
	drained := make(chan int)
	go func() {
		n := 0
		for range tr.Events() {
			n++
		}
		drained <- n
	}()
	b.Run("probes-no-target", loop)

	// Another process's namespace is traced: this process is not in it.
	other := exec.Command("/bin/sleep", "60")
	ino := startInPidNS(b, other)
	defer other.Wait()
	defer other.Process.Kill()
	if err := tr.Target(ino); err != nil {
		b.Fatal(err)
	}
	b.Run("probes-other-ns", loop)

	// This process's own namespace is traced: every openat is an event.
	self, err := PidNSInode(0)
	if err != nil {
		b.Fatal(err)
	}
	if err := tr.Target(self); err != nil {
		b.Fatal(err)
	}
	b.Run("probes-traced", loop)
	tr.Stop()
	b.Logf("events delivered: %d", <-drained)
}
