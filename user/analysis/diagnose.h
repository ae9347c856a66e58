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

#define DL_MAX_EVIDENCE 12
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

struct dl_diagnosis {
	size_t nsteps;
	uint64_t total_ns;
	uint64_t cat_ns[DL_CAT_COUNT];   /* over every step of every process */
	enum dl_verdict verdict;
	enum dl_severity severity;
	double share;
	char message[640];
	struct {
		enum dl_verdict verdict;
		enum dl_severity severity;
		double share;
	} secondary[DL_V_COUNT];
	int nsecondary;
	struct dl_finding findings[DL_MAX_FINDINGS];
	int nfindings;
	struct dl_sketch sketch;
};

void dl_diagnose(const struct dl_correlator *c, const struct dl_summary *s, const struct dl_diag_opts *o,
		 struct dl_diagnosis *d);

#endif
