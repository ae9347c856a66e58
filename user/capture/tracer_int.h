/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What tracer.c shares with tracer_hot.c (the hot probes' switch) and tracer_maps.c, and no one else. */
#ifndef DLBPF_TRACER_INT_H
#define DLBPF_TRACER_INT_H

#include "capture/kretprobes.h"
#include "capture/pylines.h"
#include "capture/tracer.h"

struct dl_tracer {
	struct dlbpf *skel;
	struct dl_features feat;
	struct dl_uprobe_mode uprobes;  /* how CUDA probes attach here (capture/uprobes.h) */
	bool files;                 /* the files programs are loaded (dl_files_choose) */
	int files_mech;             /* on what: enum dl_files_mech (capture/files.h) */
	int net_mech;               /* what the network source runs on: enum dl_net_mech (capture/net.h) */
	struct dl_sysevents sysevents;  /* their events (capture/sysevents.h) */
	struct dl_kretprobes krets;     /* or their return probes' (capture/kretprobes.h) */
	DL_VEC(struct dl_cuda_attach) cuda;
	struct dl_u64map cuda_index;    /* hash of (pid, dev, inode) -> position in cuda */
	/* Files whose symbols hold no CUDA runtime: not read again. */
	DL_VEC(struct dl_file_id) plain;
	struct dl_u64map plain_index;   /* hash of (dev, inode) -> position in plain */
	/* Files a process maps that could not be read or probed: not tried again for that process. */
	DL_VEC(struct dl_refused_file) refused;
	struct dl_u64map refused_index; /* hash of (pid, dev, inode) -> position in refused */
	struct dl_u64map warned;        /* hash of (dev, inode): said once why, for every process */
	bool split_hot;           /* --duty: launches and copies on their own links */
	bool stacks;              /* --stacks: syncs and synchronous copies record their callers' stack */
	bool hot_on[DL_HOT_CLASSES];   /* those links are attached, per class */
	uint64_t last_attach_ns, last_detach_ns;  /* wall time of the last attach_library / dl_tracer_detach */
	uint64_t traced_full;     /* processes user space could not add to the full traced set */
	unsigned link_pause_ms;   /* test hook DLBPF_TEST_LINK_PAUSE_MS (capture/hooks.h) */
	bool entry_link_first;    /* test hook DLBPF_TEST_ENTRY_LINK_FIRST */
	uint32_t *consumer_asleep;  /* BPF map consumer_asleep, memory-mapped; NULL: it always says asleep */
	/*
	 * Return probes kill processes under a seccomp filter here (capture/seccomp_hazard.h):
	 * -1 not tried yet, 0 no, 1 yes (such processes get entry probes only).
	 */
	int uret_hazard;
	/*
	 * The CUDA probes follow each library file (pid 0 / -1) and BPF keeps the traced set's
	 * calls: nothing to attach per process, no child held at its fork (dl_tracer_open_load).
	 */
	bool file_probes;
	struct dl_pylines pylines;  /* Python lines of waits and CPU samples (capture/pylines.h) */
	bool no_py_lines;         /* test hook DLBPF_TEST_NO_PY_LINES */
};

/* Attaches the links of a's slots that sets names (NULL: not that slot); returns 0 or -errno. */
int dl_tracer_attach_links(struct dl_tracer *t, struct dl_cuda_attach *a, const struct dl_probe_set *sets[DL_LINK_MAX]);

/* The consumer's sleep flag (tracer_maps.c): mapped after load, unmapped before the skeleton goes. */
int dl_tracer_map_consumer_flag(struct dl_tracer *t);
void dl_tracer_unmap_consumer_flag(struct dl_tracer *t);

#endif
