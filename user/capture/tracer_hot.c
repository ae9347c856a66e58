// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The hot probes (launches, copies) on links of their own, turned on and off
 * while tracing: by --duty both classes at once, by --overhead-budget
 * launches alone.
 */
#include <string.h>
#include <bpf/libbpf.h>
#include "records/clock.h"
#include "capture/tracer.h"
#include "capture/tracer_int.h"
#include "log.h"

void dl_tracer_split_hot(struct dl_tracer *t)
{
	t->split_hot = true;
	t->hot_on[DL_HOT_LAUNCH] = t->hot_on[DL_HOT_COPY] = true;
}

/* Attaches the slots in want of every runtime's hot sets; returns the first error. */
static int attach_hot_slots(struct dl_tracer *t, const int *want, int nwant)
{
	int first = 0;

	for (size_t i = 0; i < t->cuda.n; i++) {
		struct dl_cuda_attach *a = &t->cuda.v[i];
		const struct dl_probe_set *sets[DL_LINK_MAX] = {};
		const struct dl_probe_set *hot[DL_LINK_MAX] = {
			[DL_LINK_LAUNCH] = a->hot_launch,
			[DL_LINK_COPY_ENTER] = a->hot_copy, [DL_LINK_COPY_RETURN] = a->hot_copy,
		};
		int err;

		for (int k = 0; k < nwant; k++)
			sets[want[k]] = hot[want[k]];
		err = dl_tracer_attach_links(t, a, sets);
		if (err)
			dl_err("pid %d: cannot attach uprobes to %s: %s", a->pid, a->path, strerror(-err));
		if (err && !first)
			first = err;
	}
	return first;
}

static void destroy_slots(struct dl_tracer *t, const int *which, int n)
{
	for (size_t i = 0; i < t->cuda.n; i++)
		for (int k = 0; k < n; k++) {
			dl_plink_destroy(t->cuda.v[i].links[which[k]]);
			t->cuda.v[i].links[which[k]] = NULL;
		}
}

/*
 * The window edge [edge_lo, edge_hi] brackets the change of the entry probes,
 * which decide whether a call is counted: return probes are attached before
 * them and detached after them, so no call is left entered with no return to
 * pop it (a uprobe_multi detach takes 22-76 ms on kernel 6.18; most of it after
 * the probe stopped firing, so bracketing only the entry links keeps the edge
 * tight).
 */
static const int hot_entry[DL_HOT_CLASSES] = { [DL_HOT_LAUNCH] = DL_LINK_LAUNCH, [DL_HOT_COPY] = DL_LINK_COPY_ENTER };
static const int hot_returns[] = { DL_LINK_COPY_RETURN };

/* Class c's entry probes on or off, bracketed by e; a copy's return probes go on before and off after them. */
static int set_hot_class(struct dl_tracer *t, int c, bool on, struct dl_hot_edges *e)
{
	int err = 0;

	if (t->hot_on[c] == on)
		return 0;
	t->hot_on[c] = on;
	if (on && c == DL_HOT_COPY)
		err = attach_hot_slots(t, hot_returns, 1);
	e->lo[c] = dl_now_ns();
	if (on) {
		int e2 = attach_hot_slots(t, &hot_entry[c], 1);

		err = err ? err : e2;
	} else {
		destroy_slots(t, &hot_entry[c], 1);
	}
	e->hi[c] = dl_now_ns();
	if (!on && c == DL_HOT_COPY)
		destroy_slots(t, hot_returns, 1);
	return err;
}

int dl_tracer_set_hot(struct dl_tracer *t, bool on, struct dl_hot_edges *e)
{
	int err = 0;

	for (int c = 0; c < DL_HOT_CLASSES; c++)
		e->lo[c] = e->hi[c] = dl_now_ns();
	if (!t->split_hot)
		return 0;
	for (int c = 0; c < DL_HOT_CLASSES; c++) {
		int e2 = set_hot_class(t, c, on, e);

		err = err ? err : e2;
	}
	return err;
}

int dl_tracer_set_hot_class(struct dl_tracer *t, int c, bool on, struct dl_hot_edges *e)
{
	e->lo[c] = e->hi[c] = dl_now_ns();
	if (!t->split_hot || c < 0 || c >= DL_HOT_CLASSES)
		return 0;
	return set_hot_class(t, c, on, e);
}
