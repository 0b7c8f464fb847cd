package sysnum

import (
	"bufio"
	"maps"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/jailsh/jail/internal/sysnum/xsys"
)

// TestTablesCurrent: the tables are what the x/sys version in go.mod says.
// After updating x/sys, regenerate with go generate ./internal/sysnum.
func TestTablesCurrent(t *testing.T) {
	dir, err := xsys.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range Architectures {
		sys, err := xsys.Syscalls(dir, arch)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(sys, Syscalls(arch)) {
			t.Errorf("%s: system call table differs from %s; run go generate ./internal/sysnum", arch, dir)
		}
		errs, err := xsys.Errnos(dir, arch)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(errs, Errnos(arch)) {
			t.Errorf("%s: errno table differs from %s; run go generate ./internal/sysnum", arch, dir)
		}
	}
}

// TestKnownNumbers pins numbers of both architectures that the jail's own
// tables hard-code, so a generator that read the wrong file or column fails.
func TestKnownNumbers(t *testing.T) {
	want := map[string]map[string]uint32{
		"amd64": {"read": 0, "open": 2, "connect": 42, "execve": 59, "ptrace": 101, "openat": 257, "execveat": 322, "clone3": 435},
		"arm64": {"io_setup": 0, "mkdirat": 34, "openat": 56, "connect": 203, "execve": 221, "ptrace": 117, "execveat": 281, "clone3": 435},
	}
	for arch, calls := range want {
		for name, nr := range calls {
			if got, ok := Syscalls(arch)[name]; !ok || got != nr {
				t.Errorf("%s %s: %d (present %v), want %d", arch, name, got, ok, nr)
			}
			if got := Name(arch, nr); got != name {
				t.Errorf("%s Name(%d) = %q, want %q", arch, nr, got, name)
			}
		}
	}
	for _, legacy := range []string{"open", "mkdir", "rename", "unlink", "iopl"} {
		if _, ok := Syscalls("arm64")[legacy]; ok {
			t.Errorf("arm64 has %s: the table is not arm64's", legacy)
		}
	}
	for _, arch := range Architectures {
		e := Errnos(arch)
		if e["EPERM"] != 1 || e["ENOSYS"] != 38 || e["EAFNOSUPPORT"] != 97 {
			t.Errorf("%s errnos: EPERM %d ENOSYS %d EAFNOSUPPORT %d", arch, e["EPERM"], e["ENOSYS"], e["EAFNOSUPPORT"])
		}
	}
	if Syscalls("riscv64") != nil || Errnos("s390x") != nil {
		t.Error("tables for an architecture that is not covered")
	}
}

// asmGeneric is the kernel's generic system call table, which arm64 uses.
const asmGeneric = "/usr/include/asm-generic/unistd.h"

// TestArm64AgainstKernelHeader checks the arm64 table against the kernel's
// own numbers (asm-generic/unistd.h, the table arm64 is built from), a
// second source independent of x/sys.
func TestArm64AgainstKernelHeader(t *testing.T) {
	f, err := os.Open(asmGeneric)
	if os.IsNotExist(err) {
		t.Skipf("%s is missing: install the kernel's user-space headers (linux-libc-dev)", asmGeneric)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	define := regexp.MustCompile(`^#define __NR_([a-z0-9_]+)\s+([0-9]+)\s*$`)
	arm64 := Syscalls("arm64")
	compared := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := define.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		nr, _ := strconv.ParseUint(m[2], 10, 32)
		got, ok := arm64[m[1]]
		if !ok {
			continue
		}
		compared++
		if got != uint32(nr) {
			t.Errorf("arm64 %s: table %d, kernel header %d", m[1], got, nr)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if compared < 250 {
		t.Errorf("only %d system calls compared with %s", compared, asmGeneric)
	}
	t.Logf("%d arm64 system calls agree with %s", compared, asmGeneric)
}
