//go:build linux && cgo

package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/jailsh/jail/internal/sysnum"
)

// Compile turns rules into a seccomp BPF program for the native
// architecture (amd64 or arm64). The program's default action is ALLOW, each
// rule returns SECCOMP_RET_ERRNO with its errno, and any system call made
// through a foreign ABI returns ENOSYS (BadArchErrno): another AUDIT_ARCH
// (e.g. ia32 via int 0x80 on x86_64, AArch32 on arm64) and, on x86_64, the
// x32 ABI (nr & 0x40000000). Compile does not touch the calling process:
// the program is only exported, see Load to install it.
func Compile(rules []Rule) ([]SockFilter, error) {
	return compileFor(runtime.GOARCH, rules)
}

// targets are the architectures a program can be made for, from any
// machine: libseccomp knows every architecture's system call numbers.
var targets = map[string]libseccomp.ScmpArch{
	"amd64": libseccomp.ArchAMD64,
	"arm64": libseccomp.ArchARM64,
}

// compileFor is Compile for architecture goarch, which need not be the one
// running: the embedded programs of all architectures are generated on one
// machine.
func compileFor(goarch string, rules []Rule) ([]SockFilter, error) {
	arch, ok := targets[goarch]
	if !ok {
		// The rules assume clone's flags are argument 0, among others.
		return nil, fmt.Errorf("compiling seccomp filter: architecture %s is not supported", goarch)
	}
	prog, err := compile(goarch, arch, rules)
	if err != nil {
		return nil, fmt.Errorf("compiling seccomp filter: %w", err)
	}
	return prog, nil
}

func compile(goarch string, arch libseccomp.ScmpArch, rules []Rule) ([]SockFilter, error) {
	errnos := sysnum.Errnos(goarch)
	badArch, err := errnoAction(errnos, BadArchErrno)
	if err != nil {
		return nil, err
	}
	f, err := newFilter(arch)
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
		if err := addRule(f, errnos, r); err != nil {
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
	if goarch == "amd64" {
		prog, err = guardX32(prog, errnos)
		if err != nil {
			return nil, err
		}
	}
	return prog, nil
}

// newFilter returns an empty filter with arch as its only architecture.
// libseccomp starts a filter with the native one; rules name system calls
// by their native numbers, which it translates by name to arch's.
func newFilter(arch libseccomp.ScmpArch) (*libseccomp.ScmpFilter, error) {
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return nil, err
	}
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		f.Release()
		return nil, fmt.Errorf("native architecture: %w", err)
	}
	if native == arch {
		return f, nil
	}
	if err := f.AddArch(arch); err != nil {
		f.Release()
		return nil, fmt.Errorf("adding architecture %s: %w", arch, err)
	}
	if err := f.RemoveArch(native); err != nil {
		f.Release()
		return nil, fmt.Errorf("removing architecture %s: %w", native, err)
	}
	return f, nil
}

func addRule(f *libseccomp.ScmpFilter, errnos map[string]uint32, r Rule) error {
	lowered, err := lower(r)
	if err != nil {
		return err
	}
	act, err := errnoAction(errnos, r.Errno)
	if err != nil {
		return fmt.Errorf("seccomp rule %q: %w", r, err)
	}
	nr, err := libseccomp.GetSyscallFromName(r.Syscall)
	if errors.Is(err, libseccomp.ErrSyscallDoesNotExist) {
		// libseccomp does not know this name at all (for instance a
		// system call newer than the installed libseccomp): there is no
		// number to filter on, and the rules are a deny-list, so skip it.
		// A name libseccomp knows but that does not exist on this machine
		// resolves to a negative pseudo number, which AddRuleConditional
		// below translates by name to the filter's architecture, or
		// ignores where that has no such call either. Any other error
		// fails. The tests check that every default rule resolves on each
		// architecture that has the call, and is in that one's program.
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

// errnoAction returns the action failing with errno name, numbered as in
// errnos (the target architecture's).
func errnoAction(errnos map[string]uint32, name Errno) (libseccomp.ScmpAction, error) {
	e, ok := errnos[string(name)]
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
