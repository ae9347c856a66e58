/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --step-on NAME of a Python function ("train_step", "train.py:train_step",
 * "Trainer.step"): each call of it marks a step. A Python-to-Python call runs
 * no machine instruction of its own (3.11+ call inline in the interpreter's
 * loop), but every call takes a reference on the function's code object as it
 * makes the call's frame: a hardware watchpoint on that reference count, in
 * each thread of the process, hands BPF each write (bpf/mark.bpf.c), and BPF
 * marks the increments that are calls. Nothing fires on any other call.
 *
 * The code objects are found in the process's memory by their type and
 * names: they exist from the compilation of their module, before the
 * function is defined and so before its first call.
 */
#ifndef DLBPF_PYWATCH_H
#define DLBPF_PYWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "util.h"

struct dl_pyprocs;
struct dl_tracer;
struct dl_pywatch_proc;

/* Watchpoints a thread can hold (x86-64's and arm64's debug registers: 4). */
#define DL_PYWATCH_MAX 4

struct dl_pywatches {
	const char *want;             /* the name as given */
	uint64_t known[DL_PYWATCH_MAX]; /* code objects found in some process: a forked child has them at the same address */
	int nknown;
	bool found;                   /* watched in some process, at some time */
	bool warned_many, warned_arm;
	/*
	 * Whether watchpoints may be set (--python-watchpoint): on some virtual
	 * machines a watched write can end the process with SIGTRAP, so it is
	 * the user's choice. refused: a code object was found and not watched.
	 */
	bool allowed, refused;
	DL_VEC(struct dl_pywatch_proc *) procs;
	struct dl_u64map by_pid;
};

/*
 * In pid, a set-up CPython (pycode.h): looks for the function's code objects
 * (again as time passes while none is found) and watches them in each of the
 * process's threads not watched yet. Returns 1 when some are watched in pid,
 * 0 when not (yet), -errno when watching failed.
 */
int dl_pywatch_attach(struct dl_pywatches *w, struct dl_tracer *t, struct dl_pyprocs *pp, pid_t pid);
/* Whether pid's code objects were found (its files need no looking at for the name again). */
bool dl_pywatch_watching(const struct dl_pywatches *w, pid_t pid);
void dl_pywatch_detach(struct dl_pywatches *w);

#endif
