/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* --step-on SYMBOL: a uprobe on a function of the traced program marks each step. */
#ifndef DLBPF_MARKER_H
#define DLBPF_MARKER_H

#include <stdbool.h>
#include <sys/types.h>
#include "util.h"
#include "capture/pywatch.h"

struct dl_maps;   /* capture/procfs.h: a snapshot of a process's mappings */
struct dl_pyprocs;

struct dl_tracer;
struct bpf_link;

struct dl_marker_link {
	pid_t pid;
	struct bpf_link *link;
};

/*
 * Without --step-on, where PyTorch's Python extension is mapped: autograd's
 * entry from Python, once a backward pass. Steps are learned from it where
 * the job calls no CUDA (analysis/correlate_learn.c).
 */
#define DL_AUTOGRAD_SYMBOL "_Z22THPEngine_run_backwardP7_objectS0_S0_"
#define DL_AUTOGRAD_LIB "libtorch_python"

struct dl_markers {
	const char *symbol;   /* a symbol's name as the ELF file has it, or a C++ function's demangled */
	bool autograd;        /* no symbol given: DL_AUTOGRAD_SYMBOL in DL_AUTOGRAD_LIB, where mapped */
	bool found;           /* attached in some process, at some time (or py.found) */
	DL_VEC(struct dl_marker_link) links;
	struct dl_u64map by_pid;   /* pids in links (rescans ask for every traced process) */
	struct dl_pywatches py;    /* the symbol as a Python function, where no file has it */
};

/*
 * Attaches the marker in pid if not yet done: the symbol is looked up in the
 * executable first, then in every other mapped file; by its name, then (a
 * name not mangled) as a C++ function's demangled name, with or without its
 * parameters; in a CPython process none of whose files has it, as a Python
 * function (pywatch.h: its new threads are watched at each call). Returns 1
 * when attached now, 0 when already attached or not found, -errno on failure.
 */
int dl_markers_attach(struct dl_markers *m, struct dl_tracer *t, pid_t pid, const struct dl_maps *maps,
		      struct dl_pyprocs *pp);
int dl_markers_attached(const struct dl_markers *m, pid_t pid);
void dl_markers_detach(struct dl_markers *m);

#endif
