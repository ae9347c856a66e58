/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef DLBPF_TIMELINE_ARGS_H
#define DLBPF_TIMELINE_ARGS_H

#include <string.h>
#include "records/cuda_api.h"
#include "output/timeline_writer.h"

/* The next of a slice's arguments, zeroed but for its name and type. */
static inline struct dl_targ *dl_targ_add(struct dl_targ *a, int *n, const char *name, enum dl_targ_type type)
{
	struct dl_targ *x = &a[(*n)++];

	memset(x, 0, sizeof(*x));
	x->name = name;
	x->type = type;
	return x;
}

/* The text the arguments point into: it must outlive the slice's writing. */
struct dl_call_arg_text {
	char grid[40], block[40], site[1400], stack[4096];
};

/* Fills a with c's slice arguments (what it moved, launched or joined, its stream, its site); returns how many. */
int dl_call_slice_args(const struct dl_call *c, struct dl_targ a[DL_TMAX_ARGS], struct dl_call_arg_text *x);

#endif
