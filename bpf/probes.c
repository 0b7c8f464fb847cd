// SPDX-License-Identifier: GPL-2.0
// eBPF probes for jail's learning and watch modes.
//
// Syscall tracepoints (sys_enter_* / sys_exit_*) record file, exec and
// network activity of the processes inside one PID namespace (and any
// namespace nested below it). The enter side captures the arguments into a
// per-thread "inflight" entry; the exit side adds the result (>= 0 or
// -errno) and pushes the complete event into a ring buffer.

//go:build ignore

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
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

// Fixed layout of syscalls:sys_enter_* / sys_exit_* tracepoints
// (see /sys/kernel/tracing/events/syscalls/*/format).
struct enter_ctx {
	__u64 common;
	__s64 nr;
	__u64 args[6];
};

struct exit_ctx {
	__u64 common;
	__s64 nr;
	__s64 ret;
};

// in_target reports whether the current task lives in the target PID
// namespace or in one nested below it.
static __always_inline int in_target(void)
{
	__u32 zero = 0;
	__u32 *target = bpf_map_lookup_elem(&target_pidns, &zero);
	if (!target || !*target)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pid *p = BPF_CORE_READ(task, thread_pid);
	if (!p)
		return 0;
	unsigned int level = BPF_CORE_READ(p, level);
	struct upid *numbers = &p->numbers[0];
	for (int i = 0; i < MAX_PIDNS_LEVEL; i++) {
		if (i > level)
			break;
		struct upid *u = numbers + i;
		struct pid_namespace *ns = BPF_CORE_READ(u, ns);
		if (!ns)
			continue;
		if (BPF_CORE_READ(ns, ns.inum) == *target)
			return 1;
	}
	return 0;
}

static __always_inline struct event *begin(__u32 kind)
{
	if (!in_target())
		return 0;
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

static __always_inline int commit(struct event *e)
{
	__u32 tid = e->pid;
	bpf_map_update_elem(&inflight, &tid, e, BPF_ANY);
	return 0;
}

static __always_inline int path_event(__u32 kind, __s64 dfd, const char *path, __u32 flags)
{
	struct event *e = begin(kind);
	if (!e)
		return 0;
	e->dirfd = (__s32)dfd;
	e->flags = flags;
	bpf_probe_read_user_str(e->path, sizeof(e->path), path);
	return commit(e);
}

static __always_inline int rename_event(__s64 olddfd, const char *oldp, __s64 newdfd, const char *newp, __u32 flags)
{
	struct event *e = begin(KIND_RENAME);
	if (!e)
		return 0;
	e->dirfd = (__s32)olddfd;
	e->dirfd2 = (__s32)newdfd;
	e->flags = flags;
	bpf_probe_read_user_str(e->path, sizeof(e->path), oldp);
	bpf_probe_read_user_str(e->path2, sizeof(e->path2), newp);
	return commit(e);
}

// finish pairs a sys_exit with the thread's pending sys_enter.
static __always_inline int finish(struct exit_ctx *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct event *e = bpf_map_lookup_elem(&inflight, &tid);
	if (!e)
		return 0;
	e->ret = ctx->ret;
	bpf_ringbuf_output(&events, e, sizeof(*e), 0);
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

#define AT_FDCWD -100

SEC("tracepoint/syscalls/sys_enter_openat")
int enter_openat(struct enter_ctx *ctx)
{
	return path_event(KIND_OPEN, ctx->args[0], (const char *)ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_openat2")
int enter_openat2(struct enter_ctx *ctx)
{
	// open_how.flags is the first u64 of struct open_how.
	__u64 flags = 0;
	bpf_probe_read_user(&flags, sizeof(flags), (void *)ctx->args[2]);
	return path_event(KIND_OPEN, ctx->args[0], (const char *)ctx->args[1], (__u32)flags);
}

SEC("tracepoint/syscalls/sys_enter_open")
int enter_open(struct enter_ctx *ctx)
{
	return path_event(KIND_OPEN, AT_FDCWD, (const char *)ctx->args[0], ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_enter_creat")
int enter_creat(struct enter_ctx *ctx)
{
	// creat(path, mode) == open(path, O_CREAT|O_WRONLY|O_TRUNC, mode)
	return path_event(KIND_OPEN, AT_FDCWD, (const char *)ctx->args[0], 01 | 0100 | 01000);
}

SEC("tracepoint/syscalls/sys_enter_execve")
int enter_execve(struct enter_ctx *ctx)
{
	return path_event(KIND_EXEC, AT_FDCWD, (const char *)ctx->args[0], 0);
}

SEC("tracepoint/syscalls/sys_enter_execveat")
int enter_execveat(struct enter_ctx *ctx)
{
	return path_event(KIND_EXEC, ctx->args[0], (const char *)ctx->args[1], ctx->args[4]);
}

SEC("tracepoint/syscalls/sys_enter_mkdirat")
int enter_mkdirat(struct enter_ctx *ctx)
{
	return path_event(KIND_MKDIR, ctx->args[0], (const char *)ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_mkdir")
int enter_mkdir(struct enter_ctx *ctx)
{
	return path_event(KIND_MKDIR, AT_FDCWD, (const char *)ctx->args[0], ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_enter_unlinkat")
int enter_unlinkat(struct enter_ctx *ctx)
{
	__u32 kind = (ctx->args[2] & 0x200 /* AT_REMOVEDIR */) ? KIND_RMDIR : KIND_UNLINK;
	return path_event(kind, ctx->args[0], (const char *)ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_unlink")
int enter_unlink(struct enter_ctx *ctx)
{
	return path_event(KIND_UNLINK, AT_FDCWD, (const char *)ctx->args[0], 0);
}

SEC("tracepoint/syscalls/sys_enter_rmdir")
int enter_rmdir(struct enter_ctx *ctx)
{
	return path_event(KIND_RMDIR, AT_FDCWD, (const char *)ctx->args[0], 0);
}

SEC("tracepoint/syscalls/sys_enter_renameat2")
int enter_renameat2(struct enter_ctx *ctx)
{
	return rename_event(ctx->args[0], (const char *)ctx->args[1], ctx->args[2], (const char *)ctx->args[3], ctx->args[4]);
}

SEC("tracepoint/syscalls/sys_enter_renameat")
int enter_renameat(struct enter_ctx *ctx)
{
	return rename_event(ctx->args[0], (const char *)ctx->args[1], ctx->args[2], (const char *)ctx->args[3], 0);
}

SEC("tracepoint/syscalls/sys_enter_rename")
int enter_rename(struct enter_ctx *ctx)
{
	return rename_event(AT_FDCWD, (const char *)ctx->args[0], AT_FDCWD, (const char *)ctx->args[1], 0);
}

struct sockaddr_any {
	__u16 family;
	__u16 port;     // inet/inet6
	__u32 v4;       // inet: address; inet6: flowinfo
	__u8 v6[16];    // inet6: address
};

SEC("tracepoint/syscalls/sys_enter_connect")
int enter_connect(struct enter_ctx *ctx)
{
	struct event *e = begin(KIND_CONNECT);
	if (!e)
		return 0;
	const void *uaddr = (const void *)ctx->args[1];
	e->dirfd = (__s32)ctx->args[0]; // socket fd
	struct sockaddr_any sa = {};
	bpf_probe_read_user(&sa, sizeof(sa), uaddr);
	e->family = sa.family;
	if (sa.family == 2 /* AF_INET */) {
		e->port = sa.port;
		__builtin_memcpy(e->addr, &sa.v4, 4);
	} else if (sa.family == 10 /* AF_INET6 */) {
		e->port = sa.port;
		__builtin_memcpy(e->addr, sa.v6, 16);
	} else if (sa.family == 1 /* AF_UNIX */) {
		// sun_path follows the 2-byte family; abstract sockets start with NUL.
		bpf_probe_read_user(e->path, 108, uaddr + 2);
	}
	return commit(e);
}

#define EXIT(name)                                         \
	SEC("tracepoint/syscalls/sys_exit_" #name)         \
	int exit_##name(struct exit_ctx *ctx) { return finish(ctx); }

EXIT(openat)
EXIT(openat2)
EXIT(open)
EXIT(creat)
EXIT(execve)
EXIT(execveat)
EXIT(mkdirat)
EXIT(mkdir)
EXIT(unlinkat)
EXIT(unlink)
EXIT(rmdir)
EXIT(renameat2)
EXIT(renameat)
EXIT(rename)
EXIT(connect)
