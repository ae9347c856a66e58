/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * In-kernel aggregation of CUDA calls (--summary mode): the key and value of
 * the per-CPU hash "agg" the CUDA programs update instead of writing one
 * ring-buffer record per call. Shared by BPF and user space (user/aggregate.c).
 * Not part of the recording format: nothing here is stored on disk.
 */
#ifndef DLBPF_AGG_H
#define DLBPF_AGG_H

#include "dlbpf/copy.h"
#include "dlbpf/events.h"

#define DL_AGG_MAX_KEYS 8192
/* Bucket b > 0 holds durations in [2^(b-1), 2^b) ns; bucket 0 holds 0 (entry-only calls). */
#define DL_AGG_HIST 40

enum dl_agg_flags {
	DL_AGG_NESTED = 1u << 0,   /* called from inside another probed call */
	DL_AGG_ENTRY_ONLY = 1u << 1,
};

struct dl_agg_key {
	dl_u32 tgid;
	dl_u16 api;
	dl_u8 dir;        /* copies: enum dl_dir as passed; DL_DIR_DEFAULT ones stay records */
	dl_u8 flags;      /* enum dl_agg_flags */
	dl_u64 func;      /* launches: the kernel handle; 0 otherwise */
};

struct dl_agg_val {
	dl_u64 count, total_ns, errors, bytes, small;
	dl_u64 hist[DL_AGG_HIST];
};

#endif
