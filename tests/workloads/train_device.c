// SPDX-License-Identifier: MIT
/*
 * train_device.c — the device's own timeline as ground truth. On the GPU
 * simulator, gpusimTimeline() hands out every item the device ran (kernel,
 * copy, memset) with its device start and end; after each step the new items
 * are merged into busy intervals and written as a truth line of their own:
 *   {"device":[[start_ns,end_ns],...],"late":[[due_ns,woke_ns],...]}
 * "late" holds the host's waits on the device that the host itself ended
 * late (gpusimLateWakes): a tracer sees a completion only as the waiter's
 * wake-up. A tracer's inferred device-busy time is tested against these. On
 * the real runtime there is no such call and no such line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "train.h"

typedef unsigned long long (*timeline_fn)(unsigned long long, unsigned long long *, unsigned long long);

static timeline_fn timeline, late_wakes;
static unsigned long long next_item, next_wake;

void device_truth_start(void)
{
	timeline = (timeline_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimTimeline");
	late_wakes = (timeline_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimLateWakes");
	if (timeline)
		timeline(0, NULL, 0);   /* recording starts now */
}

/* The pairs fn has recorded since *next, into a new array (NULL if none or out of memory). */
static unsigned long long *take_pairs(timeline_fn fn, unsigned long long *next, unsigned long long *count)
{
	enum { CHUNK = 4096 };
	unsigned long long *v = NULL, n = 0, got;

	do {
		unsigned long long *nv = realloc(v, (size_t)(n + CHUNK) * 2 * sizeof(*v));

		if (!nv)
			break;
		v = nv;
		got = fn(*next, v + 2 * n, CHUNK);
		*next += got;
		n += got;
	} while (got == CHUNK);
	*count = n;
	return v;
}

static int cmp_start(const void *a, const void *b)
{
	const unsigned long long *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

void device_truth_write(FILE *f)
{
	unsigned long long *v, n, *late = NULL, nlate = 0;

	if (!timeline || !f)
		return;
	v = take_pairs(timeline, &next_item, &n);
	if (late_wakes)
		late = take_pairs(late_wakes, &next_wake, &nlate);
	/* Items of several engines overlap: their union is the time the device was busy. */
	qsort(v, (size_t)n, 2 * sizeof(*v), cmp_start);
	fputs("{\"device\":[", f);
	for (unsigned long long i = 0, w = 0; i < n; w++) {
		unsigned long long s = v[2 * i], e = v[2 * i + 1];

		for (i++; i < n && v[2 * i] <= e; i++)
			if (v[2 * i + 1] > e)
				e = v[2 * i + 1];
		fprintf(f, "%s[%llu,%llu]", w ? "," : "", s, e);
	}
	fputs("],\"late\":[", f);
	for (unsigned long long i = 0; i < nlate; i++)
		fprintf(f, "%s[%llu,%llu]", i ? "," : "", late[2 * i], late[2 * i + 1]);
	fputs("]}\n", f);
	free(v);
	free(late);
}
