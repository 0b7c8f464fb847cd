// SPDX-License-Identifier: GPL-2.0
// eBPF probes for jail's learning and watch modes.
//
// Two BTF tracepoint programs, on sys_enter and sys_exit, record file, exec
// and network activity of the processes inside one PID namespace (and any
// namespace nested below it). They need no tracefs, so CAP_BPF and
// CAP_PERFMON are enough to load and attach them.
//
// sys_enter and sys_exit fire for every syscall of every process on the
// machine, so both programs first look the syscall number up in the
// syscall_handler array (filled by the Go side from a per-architecture
// table; 0 = not traced), then check the PID namespace, and only then do
// any work. The enter side captures the arguments from the saved user
// registers into a per-thread "inflight" entry; the exit side adds the
// result (>= 0 or -errno) and pushes the complete event into a ring buffer.

//go:build ignore

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "jail_core.h"

char LICENSE[] SEC("license") = "GPL";

#define PATH_MAX_LEN 256
#define MAX_PIDNS_LEVEL 8

enum kind {
	KIND_OPEN = 1,
	KIND_EXEC = 2,
	KIND_CONNECT = 3,
	KIND_MKDIR = 4,
	KIND_UNLINK = 5,
	KIND_RENAME = 6,
	KIND_RMDIR = 7,
	KIND_CHDIR = 8,  // chdir(path): path; fchdir(fd): dirfd, empty path
	KIND_FORK = 9,   // a new process: tgid is the parent, ret the child's tgid
};

struct event {
	__u32 pid;   // thread id (host namespace)
	__u32 tgid;  // process id (host namespace)
	__u32 kind;  // enum kind
	__u32 flags; // open flags / unlinkat flags / rename flags / mkdir mode
	__s64 ret;   // syscall result: >= 0 success, -errno on failure
	__s32 dirfd; // dirfd the path is relative to (AT_FDCWD = -100)
	__s32 dirfd2;
	__u16 family; // connect: address family
	__u16 port;   // connect: port, network byte order
	__u8 addr[16]; // connect: IPv4 (first 4 bytes) or IPv6 address
	char comm[16];
	char path[PATH_MAX_LEN];  // path, or unix socket path for connect
	char path2[PATH_MAX_LEN]; // rename: new path
};

const struct event *unused_event __attribute__((unused));

// What the probes do with a syscall, by its argument layout. The Go side
// maps the architecture's syscall numbers to these (0 = not traced).
enum handler {
	H_NONE = 0,
	H_OPEN = 1,      // open(path, flags, mode)
	H_OPENAT = 2,    // openat(dfd, path, flags, mode)
	H_OPENAT2 = 3,   // openat2(dfd, path, how, size)
	H_CREAT = 4,     // creat(path, mode)
	H_MKDIR = 5,     // mkdir(path, mode)
	H_MKDIRAT = 6,   // mkdirat(dfd, path, mode)
	H_UNLINK = 7,    // unlink(path)
	H_UNLINKAT = 8,  // unlinkat(dfd, path, flags)
	H_RMDIR = 9,     // rmdir(path)
	H_RENAME = 10,   // rename(old, new)
	H_RENAMEAT = 11, // renameat(olddfd, old, newdfd, new)
	H_RENAMEAT2 = 12, // renameat2(olddfd, old, newdfd, new, flags)
	H_EXECVE = 13,   // execve(path, argv, envp)
	H_EXECVEAT = 14, // execveat(dfd, path, argv, envp, flags)
	H_CONNECT = 15,  // connect(fd, addr, len)
	H_CHDIR = 16,    // chdir(path)
	H_FCHDIR = 17,   // fchdir(fd)
};

const enum handler *unused_handler __attribute__((unused));

#define MAX_SYSCALL_NR 512

// syscall_handler[nr] = enum handler for syscall nr of this architecture.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SYSCALL_NR);
	__type(key, __u32);
	__type(value, __u32);
} syscall_handler SEC(".maps");

// target_pidns[0] = inode of the jail's PID namespace (0 = trace nothing).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} target_pidns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct event);
} inflight SEC(".maps");

// exec_inflight: pending execs, keyed by process (see commit).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct event);
} exec_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} events SEC(".maps");

// in_target reports whether the current task lives in the target PID
// namespace or in one nested below it.
static __always_inline int in_target(void)
{
	__u32 zero = 0;
	__u32 *target = bpf_map_lookup_elem(&target_pidns, &zero);
	if (!target || !*target)
		return 0;
	// BTF pointers: plain loads, no helper calls.
	struct task_struct *task = bpf_get_current_task_btf();
	struct pid *p = task->thread_pid;
	if (!p)
		return 0;
	unsigned int level = p->level;
	for (int i = 0; i < MAX_PIDNS_LEVEL; i++) {
		if (i > level)
			break;
		struct pid_namespace *ns = p->numbers[i].ns;
		if (ns && ns->ns.inum == *target)
			return 1;
	}
	return 0;
}

// handler_of returns the handler for syscall nr, H_NONE if it is not traced.
static __always_inline __u32 handler_of(__u64 nr)
{
	if (nr >= MAX_SYSCALL_NR)
		return H_NONE;
	__u32 key = nr;
	__u32 *h = bpf_map_lookup_elem(&syscall_handler, &key);
	return h ? *h : H_NONE;
}

#define TS_COMPAT 0x0002      // x86: thread_info.status during an ia32 syscall
#define PSR_MODE32_BIT 0x10   // arm64: pstate of an aarch32 task

// compat reports a 32-bit syscall on a 64-bit kernel: its number is from
// another table and its arguments are laid out differently, so it is skipped
// (as the per-syscall tracepoints did).
static __always_inline int compat(struct pt_regs *regs)
{
	if (bpf_core_field_exists(struct pt_regs___x86, orig_ax)) {
		if (!bpf_core_field_exists(struct thread_info, status))
			return 0;
		struct task_struct *task = bpf_get_current_task_btf();
		return (task->thread_info.status & TS_COMPAT) != 0;
	}
	if (bpf_core_field_exists(struct pt_regs___arm64, pstate))
		return (((struct pt_regs___arm64 *)regs)->pstate & PSR_MODE32_BIT) != 0;
	return 0;
}

// syscall_nr reads the syscall number at sys_exit; -1 if the kernel's
// struct pt_regs is of an unknown architecture.
static __always_inline __u64 syscall_nr(struct pt_regs *regs)
{
	if (bpf_core_field_exists(struct pt_regs___x86, orig_ax))
		return ((struct pt_regs___x86 *)regs)->orig_ax;
	if (bpf_core_field_exists(struct pt_regs___arm64, syscallno))
		return (__u64)(__s64)((struct pt_regs___arm64 *)regs)->syscallno;
	return (__u64)-1;
}

// Syscall argument n (0-5) from the saved user registers.
#define ARG(regs, n) syscall_arg(regs, n)

static __always_inline __u64 syscall_arg(struct pt_regs *regs, int n)
{
	if (bpf_core_field_exists(struct pt_regs___x86, orig_ax)) {
		struct pt_regs___x86 *r = (void *)regs;
		switch (n) {
		case 0: return r->di;
		case 1: return r->si;
		case 2: return r->dx;
		case 3: return r->r10;
		case 4: return r->r8;
		default: return r->r9;
		}
	}
	if (bpf_core_field_exists(struct pt_regs___arm64, orig_x0)) {
		struct pt_regs___arm64 *r = (void *)regs;
		switch (n) {
		case 0: return r->orig_x0;
		case 1: return r->regs[1];
		case 2: return r->regs[2];
		case 3: return r->regs[3];
		case 4: return r->regs[4];
		default: return r->regs[5];
		}
	}
	return 0;
}

static __always_inline struct event *begin(__u32 kind)
{
	__u32 zero = 0;
	struct event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	e->pid = (__u32)id;
	e->tgid = id >> 32;
	e->kind = kind;
	e->flags = 0;
	e->ret = 0;
	e->dirfd = -100;
	e->dirfd2 = -100;
	e->family = 0;
	e->port = 0;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	e->path[0] = 0;
	e->path2[0] = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

// WAKEUP_BYTES: the reader is woken when this much is waiting, not for
// every event (a wake-up per event costs the traced command more than the
// probes do); it also polls every few milliseconds for the rest.
#define WAKEUP_BYTES (256 * 1024)

static __always_inline void emit(struct event *e)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= WAKEUP_BYTES)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_output(&events, e, sizeof(*e), flags);
}

static __always_inline int commit(struct event *e)
{
	// An exec is keyed by process, not thread: when a thread other than
	// the leader execs, it returns from execve with the leader's id.
	__u32 key = e->kind == KIND_EXEC ? e->tgid : e->pid;
	bpf_map_update_elem(e->kind == KIND_EXEC ? (void *)&exec_inflight : (void *)&inflight, &key, e, BPF_ANY);
	return 0;
}

static __always_inline int path_event(__u32 kind, __s64 dfd, __u64 path, __u32 flags)
{
	struct event *e = begin(kind);
	if (!e)
		return 0;
	e->dirfd = (__s32)dfd;
	e->flags = flags;
	bpf_probe_read_user_str(e->path, sizeof(e->path), (const void *)path);
	return commit(e);
}

static __always_inline int rename_event(__s64 olddfd, __u64 oldp, __s64 newdfd, __u64 newp, __u32 flags)
{
	struct event *e = begin(KIND_RENAME);
	if (!e)
		return 0;
	e->dirfd = (__s32)olddfd;
	e->dirfd2 = (__s32)newdfd;
	e->flags = flags;
	bpf_probe_read_user_str(e->path, sizeof(e->path), (const void *)oldp);
	bpf_probe_read_user_str(e->path2, sizeof(e->path2), (const void *)newp);
	return commit(e);
}

struct sockaddr_any {
	__u16 family;
	__u16 port;     // inet/inet6
	__u32 v4;       // inet: address; inet6: flowinfo
	__u8 v6[16];    // inet6: address
};

static __always_inline int connect_event(__u64 fd, __u64 uaddr)
{
	struct event *e = begin(KIND_CONNECT);
	if (!e)
		return 0;
	e->dirfd = (__s32)fd; // socket fd
	struct sockaddr_any sa = {};
	bpf_probe_read_user(&sa, sizeof(sa), (const void *)uaddr);
	e->family = sa.family;
	if (sa.family == 2 /* AF_INET */) {
		e->port = sa.port;
		__builtin_memcpy(e->addr, &sa.v4, 4);
	} else if (sa.family == 10 /* AF_INET6 */) {
		e->port = sa.port;
		__builtin_memcpy(e->addr, sa.v6, 16);
	} else if (sa.family == 1 /* AF_UNIX */) {
		// sun_path follows the 2-byte family; abstract sockets start with NUL.
		bpf_probe_read_user(e->path, 108, (const void *)(uaddr + 2));
	}
	return commit(e);
}

#define AT_FDCWD -100
#define AT_REMOVEDIR 0x200
#define O_CREAT_WRONLY_TRUNC (01 | 0100 | 01000)

// sys_enter(struct pt_regs *regs, long id)
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	__u32 h = handler_of(id);
	if (h == H_NONE)
		return 0;
	if (!in_target() || compat(regs))
		return 0;

	__u64 a0 = ARG(regs, 0), a1 = ARG(regs, 1), a2 = ARG(regs, 2);
	switch (h) {
	case H_OPEN:
		return path_event(KIND_OPEN, AT_FDCWD, a0, a1);
	case H_OPENAT:
		return path_event(KIND_OPEN, a0, a1, a2);
	case H_OPENAT2: {
		// open_how.flags is the first u64 of struct open_how.
		__u64 flags = 0;
		bpf_probe_read_user(&flags, sizeof(flags), (const void *)a2);
		return path_event(KIND_OPEN, a0, a1, (__u32)flags);
	}
	case H_CREAT:
		// creat(path, mode) == open(path, O_CREAT|O_WRONLY|O_TRUNC, mode)
		return path_event(KIND_OPEN, AT_FDCWD, a0, O_CREAT_WRONLY_TRUNC);
	case H_MKDIR:
		return path_event(KIND_MKDIR, AT_FDCWD, a0, a1);
	case H_MKDIRAT:
		return path_event(KIND_MKDIR, a0, a1, a2);
	case H_UNLINK:
		return path_event(KIND_UNLINK, AT_FDCWD, a0, 0);
	case H_UNLINKAT:
		return path_event((a2 & AT_REMOVEDIR) ? KIND_RMDIR : KIND_UNLINK, a0, a1, a2);
	case H_RMDIR:
		return path_event(KIND_RMDIR, AT_FDCWD, a0, 0);
	case H_RENAME:
		return rename_event(AT_FDCWD, a0, AT_FDCWD, a1, 0);
	case H_RENAMEAT:
		return rename_event(a0, a1, a2, ARG(regs, 3), 0);
	case H_RENAMEAT2:
		return rename_event(a0, a1, a2, ARG(regs, 3), ARG(regs, 4));
	case H_EXECVE:
		return path_event(KIND_EXEC, AT_FDCWD, a0, 0);
	case H_EXECVEAT:
		return path_event(KIND_EXEC, a0, a1, ARG(regs, 4));
	case H_CONNECT:
		return connect_event(a0, a1);
	case H_CHDIR:
		return path_event(KIND_CHDIR, AT_FDCWD, a0, 0);
	case H_FCHDIR: {
		// fchdir(fd): the Go side knows the directory fd from the open
		// that returned it (relative paths are resolved there, in order).
		struct event *e = begin(KIND_CHDIR);
		if (!e)
			return 0;
		e->dirfd = (__s32)a0;
		return commit(e);
	}
	}
	return 0;
}

// A new process inherits its parent's working directory and descriptors:
// the Go side copies what it knows of them, so relative paths resolve
// without asking /proc after the fact. Threads share them already.
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	if (parent->tgid == child->tgid || !in_target())
		return 0;
	struct event *e = begin(KIND_FORK);
	if (!e)
		return 0;
	e->ret = child->tgid;
	emit(e);
	return 0;
}

// sys_exit(struct pt_regs *regs, long ret) pairs the result with the
// thread's pending sys_enter.
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u32 h = handler_of(syscall_nr(regs));
	if (h == H_NONE)
		return 0;
	if (!in_target())
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	void *map = &inflight;
	__u32 key = (__u32)id;
	if (h == H_EXECVE || h == H_EXECVEAT) {
		map = &exec_inflight;
		key = id >> 32;
	}
	struct event *e = bpf_map_lookup_elem(map, &key);
	if (!e)
		return 0;
	e->ret = ret;
	emit(e);
	bpf_map_delete_elem(map, &key);
	return 0;
}
