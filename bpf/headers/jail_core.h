/* Minimal CO-RE type definitions for the jail probes.
 *
 * Only the fields the probes read are declared; preserve_access_index makes
 * clang emit CO-RE relocations, so libbpf/cilium-ebpf fix the offsets up
 * against the running kernel's BTF (/sys/kernel/btf/vmlinux) at load time.
 * This avoids committing a multi-megabyte vmlinux.h.
 *
 * The "___flavor" suffixes are ignored when relocating: struct pt_regs___x86
 * and struct pt_regs___arm64 both match the kernel's struct pt_regs, and
 * bpf_core_field_exists tells at load time which layout the kernel has. */
#pragma once

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct ns_common {
	unsigned int inum;
};

struct pid_namespace {
	struct ns_common ns;
};

struct upid {
	int nr;
	struct pid_namespace *ns;
};

struct pid {
	unsigned int level;
	struct upid numbers[1];
};

struct thread_info {
	__u32 status; /* x86: TS_COMPAT while a 32-bit syscall runs */
};

struct task_struct {
	struct thread_info thread_info;
	int pid;
	int tgid;
	struct pid *thread_pid;
};

struct pt_regs;

/* x86_64: syscall arguments in di, si, dx, r10, r8, r9; number in orig_ax. */
struct pt_regs___x86 {
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
};

/* arm64: arguments in orig_x0 (x0 is overwritten by the result) and
 * regs[1..5]; number in syscallno; pstate has PSR_MODE32_BIT for aarch32. */
struct pt_regs___arm64 {
	__u64 regs[31];
	__u64 pstate;
	__u64 orig_x0;
	__s32 syscallno;
};

#pragma clang attribute pop
