/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the running system allows and has: privileges, BTF, tracepoint shapes. */
#ifndef DLBPF_ENV_H
#define DLBPF_ENV_H

#include <stdbool.h>

struct dl_features {
	bool block_io_start;        /* tracepoint block_io_start exists (6.5+) */
	bool switch_prev_state;     /* sched_switch passes prev_state */
	bool exit_group_dead;       /* sched_process_exit passes group_dead */
	bool bio_merge_bio_only;    /* block_bio_backmerge passes (bio), not (q, rq, bio) (5.11+) */
	bool getrq_bio_only;        /* block_getrq passes (bio), not (q, bio, rw) (5.11+) */
};

/* Fails with a message that says what to do when dlbpf cannot load BPF here. */
int dl_env_check(void);
/* Feature probes on the running kernel's BTF; never by kernel version. */
int dl_env_probe(struct dl_features *f);

#endif
