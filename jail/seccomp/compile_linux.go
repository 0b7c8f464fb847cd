//go:build linux && cgo

package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Compile turns rules into a seccomp BPF program for the native
// architecture (amd64 or arm64). The program's default action is ALLOW, each
// rule returns SECCOMP_RET_ERRNO with its errno, and any system call made
// through a foreign ABI returns ENOSYS (BadArchErrno): another AUDIT_ARCH
// (e.g. ia32 via int 0x80 on x86_64) and, on x86_64, the x32 ABI
// (nr & 0x40000000). Compile does not touch the calling process: the
// program is only exported, see Load to install it.
func Compile(rules []Rule) ([]SockFilter, error) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		// The rules assume clone's flags are argument 0, among others.
		return nil, fmt.Errorf("compiling seccomp filter: architecture %s is not supported", runtime.GOARCH)
	}
	prog, err := compile(rules)
	if err != nil {
		return nil, fmt.Errorf("compiling seccomp filter: %w", err)
	}
	return prog, nil
}

func compile(rules []Rule) ([]SockFilter, error) {
	badArch, err := errnoAction(BadArchErrno)
	if err != nil {
		return nil, err
	}
	// NewFilter only registers the native architecture.
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	if err := f.SetBadArchAction(badArch); err != nil {
		return nil, fmt.Errorf("setting bad-arch action: %w", err)
	}
	// The filter is only exported, never loaded by libseccomp: Load sets
	// no_new_privs itself, so do not make the attribute part of the filter.
	if err := f.SetNoNewPrivsBit(false); err != nil {
		return nil, fmt.Errorf("clearing no_new_privs attribute: %w", err)
	}
	for _, r := range rules {
		if err := addRule(f, r); err != nil {
			return nil, err
		}
	}
	raw, err := export(f)
	if err != nil {
		return nil, err
	}
	prog, err := Unmarshal(raw)
	if err != nil {
		return nil, err
	}
	if runtime.GOARCH == "amd64" {
		prog, err = guardX32(prog)
		if err != nil {
			return nil, err
		}
	}
	return prog, nil
}

func addRule(f *libseccomp.ScmpFilter, r Rule) error {
	lowered, err := lower(r)
	if err != nil {
		return err
	}
	act, err := errnoAction(r.Errno)
	if err != nil {
		return fmt.Errorf("seccomp rule %q: %w", r, err)
	}
	nr, err := libseccomp.GetSyscallFromName(r.Syscall)
	if errors.Is(err, libseccomp.ErrSyscallDoesNotExist) {
		// libseccomp does not know this name at all (for instance a
		// system call newer than the installed libseccomp): there is no
		// number to filter on, and the rules are a deny-list, so skip it.
		// A name libseccomp knows but that does not exist on this
		// architecture resolves to a negative pseudo number, which
		// AddRuleConditional below accepts and ignores. Any other error
		// fails. The tests check that every default rule resolves on amd64.
		return nil
	}
	if err != nil {
		return fmt.Errorf("seccomp rule %q: resolving %s: %w", r, r.Syscall, err)
	}
	for _, l := range lowered {
		conds := make([]libseccomp.ScmpCondition, 0, len(l.Conds))
		for _, c := range l.Conds {
			sc, err := condition(c)
			if err != nil {
				return fmt.Errorf("seccomp rule %q: %w", r, err)
			}
			conds = append(conds, sc)
		}
		if err := f.AddRuleConditional(nr, act, conds); err != nil {
			return fmt.Errorf("seccomp rule %q: %w", l, err)
		}
	}
	return nil
}

func condition(c Cond) (libseccomp.ScmpCondition, error) {
	switch c.Op {
	case OpEq:
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareEqual, c.Value)
	case OpNe:
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareNotEqual, c.Value)
	case OpGt:
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareGreater, c.Value)
	case OpGe:
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareGreaterEqual, c.Value)
	case OpLt:
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareLess, c.Value)
	case OpLe:
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareLessOrEqual, c.Value)
	case OpMaskedEq:
		// libseccomp: (arg & datum_a) == datum_b, mask first.
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareMaskedEqual, c.Mask, c.Value)
	}
	return libseccomp.ScmpCondition{}, fmt.Errorf("unknown operator %q", c.Op)
}

// errnos maps errno names to numbers for this architecture.
var errnos = sync.OnceValue(func() map[string]unix.Errno {
	m := map[string]unix.Errno{}
	for e := unix.Errno(1); e < 4096; e++ {
		if n := unix.ErrnoName(e); n != "" {
			if _, dup := m[n]; !dup {
				m[n] = e
			}
		}
	}
	return m
})

func errnoAction(name Errno) (libseccomp.ScmpAction, error) {
	e, ok := errnos()[string(name)]
	if !ok {
		return 0, fmt.Errorf("unknown errno %q", name)
	}
	return libseccomp.ActErrno.SetReturnCode(int16(e)), nil
}

// export returns the program in the kernel's format (struct sock_filter
// array). libseccomp >= 2.6 can export to memory; 2.5 only writes to a file
// descriptor, for which a memfd is used (no filesystem access, no size
// limit like a pipe's buffer).
func export(f *libseccomp.ScmpFilter) ([]byte, error) {
	if raw, err := f.ExportBPFMem(); err == nil {
		return raw, nil
	}
	fd, err := unix.MemfdCreate("jail-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	file := os.NewFile(uintptr(fd), "jail-seccomp")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("exporting BPF: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(file)
}
