/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The diagnosis: the overall verdict with its severity and evidence, and the
 * findings (rule id, a message a person can act on, the numbers behind it).
 * Computed from the correlator's steps and the summary, nothing else.
 */
#ifndef DLBPF_DIAGNOSE_H
#define DLBPF_DIAGNOSE_H

#include <stdbool.h>
#include "analysis/correlate.h"
#include "analysis/summary.h"

#define DL_MAX_EVIDENCE 16
#define DL_MAX_FINDINGS 16

struct dl_evidence {
	const char *key;
	double value;
	const char *text;     /* a string value instead of a number, when set */
};

struct dl_finding {
	const char *rule;
	char message[640];
	struct dl_evidence ev[DL_MAX_EVIDENCE];
	int nev;
};

struct dl_diag_opts {
	double disk_mbps;     /* peak disk read bandwidth; 0: measured */
	double pcie_gbps;     /* peak PCIe bandwidth; 0: sysfs link (in the recording) or 24 */
};

/*
 * The paper sketch of a median step: what it moves from disk and over PCIe
 * (PCIe only in a job that loaded a CUDA runtime), the CPU it used,
 * the time that takes at the peaks, and how far the step is from it. Filled
 * whenever there are steps; below-paper-sketch is the finding made of it.
 */
struct dl_sketch {
	double disk_bytes, pcie_bytes;   /* per step, averaged over every step */
	double disk_mbps, pcie_gbps;     /* the peaks used; disk_mbps 0: unknown */
	const char *disk_src, *pcie_src; /* "measured", "option", "sysfs link", ... */
	double disk_ns, pcie_ns;         /* the bytes at the peaks */
	double bound_ns;                 /* the larger of the two */
	const char *bound_by;            /* "disk" or "PCIe" */
	double step_ns;                  /* the median step */
	bool cuda;                       /* a CUDA runtime was loaded: without one, no PCIe hop (disk and CPU only) */
	double cpu_ns;                   /* per step: the stepping thread's CPU and the workers' (measured, not a peak) */
};

/*
 * The stepping thread's Python lines, from its own frames: where it waited
 * (its waits long enough to be written, bpf/pylines.bpf.c), behind
 * input-bound, and where its CPU samples landed, behind host-compute-bound.
 * Pointers into the summary's dl_pylines.
 */
#define DL_DIAG_PYLINES 3
struct dl_diag_pylines {
	uint32_t why;                 /* DL_PYSTACK_WAIT or DL_PYSTACK_CPU */
	uint32_t pid, tid;            /* the stepping thread */
	uint64_t from, to;            /* the time counted: its first step's start (or the oldest event kept) to its last step's end */
	bool others;                  /* every other thread's, by line (top[i] a stack of each line) */
	uint64_t total;               /* its wait ns, or its samples, of that kind from its first step to its last */
	size_t n;
	const struct dl_pystack_stat *top[DL_DIAG_PYLINES];   /* most first */
	uint64_t weight[DL_DIAG_PYLINES];   /* each one's wait ns or samples in that time */
	uint64_t line_weight[DL_DIAG_PYLINES];  /* ... of every stack whose own frame is the same line as each one's */
};

struct dl_diagnosis {
	size_t nsteps;
	uint64_t total_ns;
	uint64_t cat_ns[DL_CAT_COUNT];   /* over every step of every process */
	enum dl_verdict verdict;
	enum dl_severity severity;
	double share;
	char message[1024];
	struct {
		enum dl_verdict verdict;
		enum dl_severity severity;
		double share;
	} secondary[DL_V_COUNT];
	int nsecondary;
	struct dl_finding findings[DL_MAX_FINDINGS];
	int nfindings;
	struct dl_sketch sketch;
	struct dl_diag_pylines py_wait, py_cpu;
	struct dl_diag_pylines py_others_cpu;   /* the other threads' CPU samples (the loaders'), by line */
};

/* The top line of py in words ("train.py:40 (main), 80% of its CPU samples"); 0 when it has none. */
int dl_diag_pyline_text(const struct dl_diag_pylines *py, char *buf, size_t len);
void dl_diagnose(const struct dl_correlator *c, const struct dl_summary *s, const struct dl_diag_opts *o,
		 struct dl_diagnosis *d);

#endif
