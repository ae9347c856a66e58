/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The value of the BPF hash "requests" (key: the struct request pointer): a
 * block request started by a traced task or a kernel thread, not yet seen
 * completing. Shared by BPF (bpf/io.bpf.c) and user space, which turns what is
 * left at the end into DL_BIO_UNSEEN records. Not part of the recording format.
 */
#ifndef DLBPF_IO_H
#define DLBPF_IO_H

#include "dlbpf/events.h"

#define DL_MAX_REQUESTS 16384

enum dl_rq_flags {
	/* The low bits are enum dl_bio_flags. */
	DL_RQ_REQUEUED = 1u << 16,   /* requeued: its next insert is not a new request (older kernels) */
};

struct dl_rq_start {
	dl_u64 ts;
	dl_u64 sector;
	dl_u32 tgid;
	dl_u32 tid;
	dl_u32 flags;         /* enum dl_bio_flags | enum dl_rq_flags */
	dl_u32 remaining;     /* bytes not completed yet, as of the last issue */
	dl_u32 dev;
	dl_u32 pad;
};

#endif /* DLBPF_IO_H */
