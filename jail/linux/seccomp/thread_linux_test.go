//go:build linux && cgo

package seccomp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jailsh/jail/internal/sysnum"
)

// programEnv names the program file a "thread" victim loads.
const programEnv = "JAIL_SECCOMP_TEST_PROGRAM"

// threadVictim loads the program file named by programEnv, as the kernel
// gets it, on one thread only (no TSYNC: a filter belongs to the thread
// that installs it), makes a few system calls there and prints what the
// kernel answered. The other threads stay unfiltered, so the process can
// still report and exit; the filtered thread blocks every signal and
// spins, never entering the Go runtime again, which could not work
// there if the filter refuses everything.
func threadVictim() int {
	b, err := os.ReadFile(os.Getenv(programEnv))
	if err != nil {
		fmt.Println("read", err)
		return 1
	}
	prog, err := Unmarshal(b)
	if err != nil || len(prog) == 0 {
		fmt.Println("unmarshal", err)
		return 1
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	var errnos [4]unix.Errno
	var pid uintptr
	var done atomic.Bool
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the process
		all := ^uint64(0)
		unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, uintptr(unsafe.Pointer(&all)), 0, 8, 0, 0)
		_, _, errnos[0] = unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0)
		_, _, errnos[1] = unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
		pid, _, errnos[2] = unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
		// Unfiltered, a multithreaded process gets EINVAL.
		_, _, errnos[3] = unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
		done.Store(true)
		for {
		}
	}()
	for !done.Load() {
		time.Sleep(time.Millisecond)
	}
	name := func(e unix.Errno) string {
		if e == 0 {
			return "ok"
		}
		return unix.ErrnoName(e)
	}
	fmt.Printf("prctl %s\nseccomp %s\ngetpid %s\nunshare %s\n", name(errnos[0]), name(errnos[1]), name(errnos[2]), name(errnos[3]))
	if errnos[2] == 0 && int(pid) != os.Getpid() {
		fmt.Println("getpid wrong")
	}
	return 0
}

// TestEmbeddedProgramsInKernel hands every architecture's embedded
// program, byte for byte as a jail built for it loads it, to this
// machine's kernel: the kernel must accept it as a seccomp filter. The
// native one then denies what it should and allows the rest; a foreign
// one, seeing this machine's AUDIT_ARCH, must refuse every call with
// ENOSYS, which proves its architecture check in a real kernel.
func TestEmbeddedProgramsInKernel(t *testing.T) {
	for _, goarch := range sysnum.Architectures {
		t.Run(goarch, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			// No collector or preemption signals for the spinning thread.
			cmd.Env = append(os.Environ(), roleEnv+"=thread", programEnv+"=default_"+goarch+".bpf",
				"GOGC=off", "GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=4")
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("thread victim: %v\n%s", err, out)
			}
			want := "prctl ok\nseccomp ok\ngetpid ENOSYS\nunshare ENOSYS\n"
			if goarch == runtime.GOARCH {
				want = "prctl ok\nseccomp ok\ngetpid ok\nunshare EPERM\n"
			}
			if got := string(out); got != want {
				t.Errorf("%s program on %s:\n%s\nwant\n%s", goarch, runtime.GOARCH, strings.TrimSpace(got), strings.TrimSpace(want))
			}
		})
	}
}
