/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the running system allows and has: privileges, BTF, tracepoint shapes. */
#ifndef DLBPF_ENV_H
#define DLBPF_ENV_H

#include <stdbool.h>
#include <stdio.h>

struct dl_features {
	bool block_io_start;        /* tracepoint block_io_start exists (6.5+) */
	bool switch_prev_state;     /* sched_switch passes prev_state */
	bool exit_group_dead;       /* sched_process_exit passes group_dead */
	bool bio_merge_bio_only;    /* block_bio_backmerge passes (bio), not (q, rq, bio) (5.11+) */
	bool getrq_bio_only;        /* block_getrq passes (bio), not (q, bio, rw) (5.11+) */
	/* BPF features, each by a probe of the kernel (dl_env_probe), never by its version: */
	bool uprobe_multi;          /* uprobe_multi links (6.6+); else one classic uprobe per function */
	bool attach_cookie;         /* bpf_get_attach_cookie on uprobes (5.15+); else cookies by file offset */
	bool vma_cache;             /* the per-thread VMA cache (3.15-6.0), which finds a classic uprobe's file offset */
	bool task_storage;          /* task-local storage from tracing programs (5.12+); else hashes by thread id */
	bool task_btf;              /* bpf_get_current_task_btf (5.11+); else probe reads of the task */
	bool global_ptr_args;       /* global BPF functions with pointer arguments (5.12+); else no Python frames in BPF */
	bool signal_task;           /* the kfunc bpf_send_signal_task (6.13+): a forked child is held until attached to */
	/*
	 * The uretprobe system call (x86-64, 6.11+) in the kernel's BTF: return probes return through
	 * it, which a seccomp filter may deny (capture/seccomp_hazard.h). Without it they trap (int3).
	 */
	bool uretprobe_syscall;
	/*
	 * The files source's cheaper mechanisms (capture/files.h), on the syscall handlers
	 * (__x64_sys_read, arm64's __arm64_sys_read, ...: dlbpf/syscall_handler.h): every one in BTF with its signature, then the kernel's answer. Without
	 * either, the syscall tracepoints, which tax every task on the machine.
	 */
	bool fentry;                /* fentry/fexit programs load and attach to them (a trial attach) */
	bool kprobes;               /* kprobes on them (a trial kprobe; 6.18 here has none) */
};

/* One line per feature: its name, whether the kernel has it, and what its absence costs. */
struct dl_feature_info {
	const char *name;
	bool have;
	const char *lost;           /* what dlbpf does without it, and what that costs */
};
#define DL_FEATURE_INFO_MAX 16
/* Fills out with the features' lines (every one, had or not); returns how many. */
int dl_features_list(const struct dl_features *f, struct dl_feature_info out[DL_FEATURE_INFO_MAX]);
/* At start: one line per missing feature, what dlbpf does instead and what it costs. */
void dl_features_log_missing(const struct dl_features *f);
/* dlbpf features: the kernel, each feature found or not, and the seccomp trial; 0 or -errno. */
int dl_features_print(FILE *out);

/* Fails with a message that says what to do when dlbpf cannot load BPF here. */
int dl_env_check(void);
/* Feature probes on the running kernel's BTF; never by kernel version. */
int dl_env_probe(struct dl_features *f);

#endif
