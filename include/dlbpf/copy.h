/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Copies as BPF and user space both count them. The direction values are the
 * runtime's cudaMemcpyKind, which BPF stores as passed in --summary mode and
 * user space decodes from the raw arguments; they also index the summary's
 * per-direction copy counters. Shared by BPF and user space, so no kernel or
 * libbpf headers.
 */
#ifndef DLBPF_COPY_H
#define DLBPF_COPY_H

/*
 * DL_DIR_DEFAULT (cudaMemcpyDefault) leaves the direction to the runtime, which
 * infers it from the pointers; a kind past it is read as DL_DIR_DEFAULT too.
 */
enum dl_dir {
	DL_DIR_H2H = 0,
	DL_DIR_H2D = 1,
	DL_DIR_D2H = 2,
	DL_DIR_D2D = 3,
	DL_DIR_DEFAULT = 4,
	DL_DIR_COUNT,
};

/* Copies under this size are "small": per-transfer latency dominates them. */
#define DL_SMALL_COPY_BYTES (64u << 10)

#endif
