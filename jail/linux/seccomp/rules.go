// Package seccomp holds the seccomp policy of the jail and turns it into a
// classic-BPF program that is installed in the jailed process.
//
// The policy itself (this file) is plain data: it builds on every OS and
// imports nothing platform specific, so `jail plan` can print it anywhere.
// The filter allows every system call except the ones listed by
// DefaultRules, which fail with an errno (never a kill, so tools degrade
// gracefully instead of dying). System calls made with a foreign calling
// convention (ia32 via int 0x80, x32 on x86_64, or any architecture other
// than the native one) fail with ENOSYS, see BadArchErrno.
package seccomp

import (
	"fmt"
	"strings"
)

// Errno names the error a denied system call returns, e.g. "EPERM".
// It is resolved to a number for the target architecture at compile time.
type Errno string

// Errnos used by the default policy.
const (
	EPERM           Errno = "EPERM"
	ENOSYS          Errno = "ENOSYS"
	EAFNOSUPPORT    Errno = "EAFNOSUPPORT"
	EPROTONOSUPPORT Errno = "EPROTONOSUPPORT"
)

// BadArchErrno is returned for system calls made through an ABI other than
// the native one: another AUDIT_ARCH (ia32 via int 0x80 on x86_64) or x32
// system call numbers (nr >= 0x40000000) on x86_64. The rules are written
// against native syscall numbers only, so such calls must never be allowed.
const BadArchErrno = ENOSYS

// Op is a comparison applied to a system call argument.
type Op string

// Comparison operators, as understood by libseccomp. All comparisons are on
// the full 64-bit register; use OpMaskedEq with Mask 0xffffffff to look at
// the 32 bits the kernel actually reads for an `int` argument.
const (
	OpEq       Op = "=="
	OpNe       Op = "!="
	OpGt       Op = ">"
	OpGe       Op = ">="
	OpLt       Op = "<"
	OpLe       Op = "<="
	OpMaskedEq Op = "&==" // (arg & Mask) == Value
)

// Cond is one condition on argument Arg (0-based) of a system call.
// Several "!=" conditions on the same argument mean "not in this set".
type Cond struct {
	Arg   uint
	Op    Op
	Value uint64
	Mask  uint64 // only for OpMaskedEq
}

// String renders the condition, e.g. "a1 &0xffffffff == 0x5412".
func (c Cond) String() string {
	if c.Op == OpMaskedEq {
		return fmt.Sprintf("a%d &%#x == %#x", c.Arg, c.Mask, c.Value)
	}
	return fmt.Sprintf("a%d %s %#x", c.Arg, c.Op, c.Value)
}

// Rule makes Syscall fail with Errno when all Conds hold (they are ANDed;
// separate rules for the same system call are ORed). A rule without
// conditions matches every call.
type Rule struct {
	Syscall string
	Errno   Errno
	Conds   []Cond
	Why     string
}

// String renders the rule on one line, e.g.
// "ioctl(a1 &0xffffffff == 0x5412) -> EPERM  # TIOCSTI: ...".
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(r.Syscall)
	if len(r.Conds) > 0 {
		b.WriteByte('(')
		for i, c := range r.Conds {
			if i > 0 {
				b.WriteString(" && ")
			}
			b.WriteString(c.String())
		}
		b.WriteByte(')')
	}
	b.WriteString(" -> ")
	b.WriteString(string(r.Errno))
	if r.Why != "" {
		b.WriteString("  # ")
		b.WriteString(r.Why)
	}
	return b.String()
}

// Format renders a whole policy: a header stating the default and
// bad-architecture actions, then one line per rule.
func Format(rules []Rule) string {
	var b strings.Builder
	b.WriteString("# default: ALLOW\n")
	fmt.Fprintf(&b, "# foreign ABI (other AUDIT_ARCH, ia32 int 0x80, x32 nr >= 0x40000000) -> %s\n", BadArchErrno)
	for _, r := range rules {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Linux constants used by the default rules. They are the same on every
// architecture the jail supports (amd64, arm64).
const (
	cloneNewTime   = 0x00000080
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	tiocsti   = 0x5412
	tioclinux = 0x541C

	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16

	netlinkRoute = 0

	ipprotoICMP   = 1
	ipprotoTCP    = 6
	ipprotoUDP    = 17
	ipprotoICMPv6 = 58
	ipprotoMPTCP  = 262

	low32 = 0xffffffff
)

func deny(errno Errno, why string, names ...string) []Rule {
	rules := make([]Rule, 0, len(names))
	for _, n := range names {
		rules = append(rules, Rule{Syscall: n, Errno: errno, Why: why})
	}
	return rules
}

// DefaultRules returns the exceptions to the jail's default ALLOW action,
// in a stable order. The caller owns the returned slice.
func DefaultRules() []Rule {
	var rs []Rule
	add := func(r ...Rule) { rs = append(rs, r...) }

	// Reading or writing another process's memory defeats every other layer.
	add(deny(EPERM, "inspect/modify other processes' memory",
		"ptrace", "process_vm_readv", "process_vm_writev")...)
	// pidfd_getfd copies another process's open file into the caller under
	// the same ptrace check: the files of init or of another jailed
	// process are theirs.
	add(deny(EPERM, "take another process's open files", "pidfd_getfd")...)
	// Changing the mount table can undo the bind-mount view of the sandbox.
	add(deny(EPERM, "change the mount table",
		"mount", "umount2", "pivot_root", "move_mount", "open_tree",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")...)
	// Joining another namespace escapes the jail's namespaces.
	add(deny(EPERM, "join another namespace", "setns")...)
	// eBPF and perf are large kernel attack surfaces and leak kernel data.
	add(deny(EPERM, "eBPF: large kernel attack surface", "bpf")...)
	add(deny(EPERM, "perf: kernel attack surface, leaks addresses", "perf_event_open")...)
	// Replacing the kernel or loading code into it.
	add(deny(EPERM, "load a new kernel", "kexec_load", "kexec_file_load")...)
	add(deny(EPERM, "load/unload kernel modules", "init_module", "finit_module", "delete_module")...)
	// The kernel keyring is not namespaced: it could expose the host's secrets.
	add(deny(EPERM, "kernel keyring is not namespaced", "add_key", "request_key", "keyctl")...)
	// userfaultfd stalls the kernel on page faults: a classic exploit primitive.
	add(deny(EPERM, "exploit primitive (stalls kernel page faults)", "userfaultfd")...)
	// io_uring performs I/O without system calls, i.e. without seccomp checks.
	add(deny(EPERM, "io_uring: I/O that bypasses seccomp, frequent kernel bugs",
		"io_uring_setup", "io_uring_enter", "io_uring_register")...)
	// File handles open files without a path walk, escaping bind mounts.
	add(deny(EPERM, "open files by handle, bypassing path checks",
		"open_by_handle_at", "name_to_handle_at")...)
	// Host administration calls that a coding agent never needs.
	add(deny(EPERM, "change the root directory", "chroot")...)
	add(deny(EPERM, "process accounting (host administration)", "acct")...)
	add(deny(EPERM, "swap management (host administration)", "swapon", "swapoff")...)
	add(deny(EPERM, "reboot the host", "reboot")...)
	add(deny(EPERM, "kernel log: leaks addresses", "syslog")...)
	add(deny(EPERM, "disk quota management", "quotactl")...)
	add(deny(EPERM, "kernel profiling internals", "lookup_dcookie")...)
	add(deny(EPERM, "hang up other sessions' terminal", "vhangup")...)
	add(deny(EPERM, "raw I/O port access", "iopl", "ioperm")...)
	add(deny(EPERM, "obsolete a.out library loader", "uselib")...)
	add(deny(EPERM, "filesystem-wide event monitoring", "fanotify_init")...)
	add(deny(EPERM, "obsolete in-kernel NFS server control", "nfsservctl")...)

	// personality flags such as READ_IMPLIES_EXEC or ADDR_NO_RANDOMIZE
	// disable exploit mitigations; allow exactly what Docker allows:
	// PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32 and the query.
	persona := Rule{Syscall: "personality", Errno: EPERM,
		Why: "only PER_LINUX, PER_LINUX32, UNAME26 and the 0xffffffff query"}
	for _, v := range []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff} {
		persona.Conds = append(persona.Conds, Cond{Arg: 0, Op: OpNe, Value: v})
	}
	add(persona)

	// New namespaces (above all a user namespace) expose kernel code that
	// is otherwise reachable only by root. One rule per flag: rules are ORed.
	nsFlags := []struct {
		name string
		bit  uint64
	}{
		{"CLONE_NEWNS", cloneNewNS},
		{"CLONE_NEWCGROUP", cloneNewCgroup},
		{"CLONE_NEWUTS", cloneNewUTS},
		{"CLONE_NEWIPC", cloneNewIPC},
		{"CLONE_NEWUSER", cloneNewUser},
		{"CLONE_NEWPID", cloneNewPID},
		{"CLONE_NEWNET", cloneNewNet},
		{"CLONE_NEWTIME", cloneNewTime},
	}
	for _, sc := range []string{"unshare", "clone"} {
		for _, f := range nsFlags {
			// Flags are argument 0 of unshare, and of clone on x86_64
			// and arm64.
			add(Rule{Syscall: sc, Errno: EPERM,
				Conds: []Cond{{Arg: 0, Op: OpMaskedEq, Mask: f.bit, Value: f.bit}},
				Why:   f.name + ": new namespaces expose root-only kernel code"})
		}
	}
	// clone3 passes its flags in a struct seccomp cannot read; ENOSYS makes
	// glibc and Go fall back to clone, which is checked above.
	add(deny(ENOSYS, "flags unreadable by seccomp; libc falls back to clone", "clone3")...)

	// Pushing characters into the controlling terminal's input queue lets
	// the jail type commands into the user's shell. ioctl's request is an
	// unsigned int: compare only the low 32 bits the kernel looks at.
	add(Rule{Syscall: "ioctl", Errno: EPERM,
		Conds: []Cond{{Arg: 1, Op: OpMaskedEq, Mask: low32, Value: tiocsti}},
		Why:   "TIOCSTI: inject input into the terminal"})
	add(Rule{Syscall: "ioctl", Errno: EPERM,
		Conds: []Cond{{Arg: 1, Op: OpMaskedEq, Mask: low32, Value: tioclinux}},
		Why:   "TIOCLINUX: console selection can inject input"})

	// Only Unix, IP and rtnetlink sockets: other families (packet, vsock,
	// bluetooth, ...) are rarely needed and a rich source of kernel bugs.
	// The comparison is on the full register, so a family with garbage in
	// the high 32 bits is refused too (fail closed).
	fam := Rule{Syscall: "socket", Errno: EAFNOSUPPORT,
		Why: "only AF_UNIX, AF_INET, AF_INET6, AF_NETLINK"}
	for _, v := range []uint64{afUnix, afInet, afInet6, afNetlink} {
		fam.Conds = append(fam.Conds, Cond{Arg: 0, Op: OpNe, Value: v})
	}
	add(fam)
	add(Rule{Syscall: "socket", Errno: EPERM,
		Conds: []Cond{
			{Arg: 0, Op: OpEq, Value: afNetlink},
			{Arg: 2, Op: OpNe, Value: netlinkRoute},
		},
		Why: "netlink: only NETLINK_ROUTE (audit, netfilter, ... are kernel attack surface)"})
	// IP sockets of the protocols programs use. Asking for another one
	// (SCTP, L2TP, SMC, DCCP on older kernels) loads its module into the
	// host's kernel when it is not loaded yet: code the jail has no use
	// for, with a history of bugs. The full register is compared, so a
	// protocol with garbage in the high 32 bits is refused too.
	for _, f := range []uint64{afInet, afInet6} {
		proto := Rule{Syscall: "socket", Errno: EPROTONOSUPPORT,
			Conds: []Cond{{Arg: 0, Op: OpEq, Value: f}},
			Why:   "IP: only TCP, UDP, ICMP ping and MPTCP (another protocol loads a kernel module)"}
		for _, v := range []uint64{0, ipprotoICMP, ipprotoTCP, ipprotoUDP, ipprotoICMPv6, ipprotoMPTCP} {
			proto.Conds = append(proto.Conds, Cond{Arg: 2, Op: OpNe, Value: v})
		}
		add(proto)
	}
	add(Rule{Syscall: "socketpair", Errno: EAFNOSUPPORT,
		Conds: []Cond{{Arg: 0, Op: OpNe, Value: afUnix}},
		Why:   "only AF_UNIX"})

	return rs
}
