/* Minimal CO-RE type definitions for the jail probes.
 *
 * Only the fields the probes read are declared; preserve_access_index makes
 * clang emit CO-RE relocations, so libbpf/cilium-ebpf fix the offsets up
 * against the running kernel's BTF (/sys/kernel/btf/vmlinux) at load time.
 * This avoids committing a multi-megabyte vmlinux.h. */
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

struct task_struct {
	struct pid *thread_pid;
};

#pragma clang attribute pop
