/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Python lines for waits and for CPU time (bpf/pylines.bpf.c): whether their
 * programs load here, and the CPU sampler's perf events, one software
 * cpu-clock event per CPU (no hardware counter is needed), at DL_PY_SAMPLE_HZ.
 */
#ifndef DLBPF_CAPTURE_PYLINES_H
#define DLBPF_CAPTURE_PYLINES_H

#include <stdbool.h>
#include <stdint.h>

struct dlbpf;
struct bpf_link;

/*
 * Samples a second on each CPU: tens of Hz keep the cost a few dozen walks a
 * second per CPU whatever the number of threads, and a thread busy for ten
 * seconds gets about 500, enough to rank its lines (a share p of n samples
 * has a standard error of sqrt(p (1 - p) / n): under 2.3 points at 500).
 */
#define DL_PY_SAMPLE_HZ 49
/*
 * Waits shorter than this are walked at the block but not written: a
 * millisecond is above the GIL's hand-offs (its switch interval is 5 ms, most
 * hand-offs far shorter) and below a step's input wait worth naming.
 */
#define DL_PY_WAIT_MIN_NS 1000000ull

struct dl_pylines {
	bool loaded;                /* the programs are loaded (the walker passes this kernel's verifier) */
	bool started;               /* attached (at the first CPython process: a job without one pays nothing) */
	struct bpf_link *on_switch; /* py_wait_switch's link */
	struct bpf_link **samplers; /* one per CPU that has one */
	int nsamplers;
};

/* Before load: the programs load where walk_ok (dl_tracer_py_no_walk said nothing) and want. */
void dl_pylines_choose(struct dl_pylines *pl, struct dlbpf *skel, bool walk_ok, bool want);
/*
 * Once a traced process runs CPython: attaches the switch program and the CPU
 * sampler to each online CPU (once; later calls do nothing). A sampler that
 * cannot be opened leaves the samples off, said once; the waits go on.
 */
void dl_pylines_attach(struct dl_pylines *pl, struct dlbpf *skel);
void dl_pylines_detach(struct dl_pylines *pl);

#endif
