package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"time"
	"unsafe"

	"github.com/jailsh/jail/jail/linux/inside"
	"github.com/jailsh/jail/jail/linux/seccomp"
	"golang.org/x/sys/unix"
)

// probeSeccompArg makes `jail check` the child that probeSeccomp runs in.
const probeSeccompArg = "--probe-seccomp"

// runSeccompProbe runs probeSeccomp in a child process (the filters it
// loads cannot be removed) and reads its report.
func runSeccompProbe() seccompReport {
	exe, err := os.Executable()
	if err != nil {
		err = fmt.Errorf("finding the jail binary: %w", err)
		return seccompReport{Filter: err, Enforce: err, Notify: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, runErr := exec.CommandContext(ctx, exe, "check", probeSeccompArg).Output()
	rep := parseSeccompProbe(string(out))
	if runErr != nil {
		// A step the child did not report died with it.
		for _, e := range []*error{&rep.Filter, &rep.Enforce, &rep.Notify} {
			if *e == errNotReported {
				*e = fmt.Errorf("the probe process failed: %v", runErr)
			}
		}
	}
	return rep
}

// probeSeccomp is the probe child: it loads the filter every jail loads
// (the program embedded for this architecture, or compiled from the same
// rules), checks that it refuses a call it lists and, on x86_64, x32 calls,
// then installs the notify filter the exec supervisor uses. One line per
// step on w.
func probeSeccomp(w io.Writer) int {
	runtime.LockOSThread() // no_new_privs and the notify filter are per thread
	report := func(step string, err error, detail string) {
		switch {
		case err != nil:
			fmt.Fprintf(w, "%s %v\n", step, err)
		case detail != "":
			fmt.Fprintf(w, "%s ok %s\n", step, detail)
		default:
			fmt.Fprintf(w, "%s ok\n", step)
		}
	}
	var prog []seccomp.SockFilter
	raw, err := seccomp.Program(seccomp.DefaultRules())
	if err == nil {
		prog, err = seccomp.Unmarshal(raw)
	}
	if err == nil {
		err = seccomp.Load(prog)
	}
	report("filter", err, fmt.Sprintf("(%s, %d instructions)", runtime.GOARCH, len(prog)))
	if err == nil {
		report("enforce", checkEnforced(), "")
	} else {
		report("enforce", errors.New("no filter loaded"), "")
	}
	report("notify", loadNotifyFilter(), "")
	return 0
}

// checkEnforced makes calls the loaded filter refuses and the kernel
// would allow: personality(READ_IMPLIES_EXEC) and, on x86_64, getpid
// through the x32 ABI.
func checkEnforced() error {
	const readImpliesExec = 0x0400000
	if _, _, errno := unix.Syscall(unix.SYS_PERSONALITY, readImpliesExec, 0, 0); errno != unix.EPERM {
		return fmt.Errorf("personality(READ_IMPLIES_EXEC) gave %q, want EPERM from the filter", errnoText(errno))
	}
	if runtime.GOARCH == "amd64" {
		const x32 = 0x40000000
		if _, _, errno := unix.RawSyscall(unix.SYS_GETPID|x32, 0, 0, 0); errno != unix.ENOSYS {
			return fmt.Errorf("an x32 getpid gave %q, want ENOSYS from the filter", errnoText(errno))
		}
	}
	return nil
}

func errnoText(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return e.Error()
}

// loadNotifyFilter installs the exec supervisor's filter with a listener,
// as jail's init does, and closes the listener. The caller must not exec
// afterwards: nobody would answer.
func loadNotifyFilter() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	prog := inside.NotifyFilter(false)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): %w", errno)
	}
	unix.Close(int(fd))
	return nil
}
