// SPDX-License-Identifier: MIT
/*
 * train_device.c — the device's own timeline as ground truth. On the GPU
 * simulator, gpusimTimeline() hands out every item the device ran (kernel,
 * copy, memset) with its device start and end; after each step the new items
 * are merged into busy intervals and written as a truth line of their own:
 *   {"device":[[start_ns,end_ns],...]}
 * A tracer's inferred device-busy time is tested against these. On the real
 * runtime there is no such call and no such line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "train.h"

typedef unsigned long long (*timeline_fn)(unsigned long long, unsigned long long *, unsigned long long);

static timeline_fn timeline;
static unsigned long long next_item;

void device_truth_start(void)
{
	timeline = (timeline_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimTimeline");
	if (timeline)
		timeline(0, NULL, 0);   /* recording starts now */
}

static int cmp_start(const void *a, const void *b)
{
	const unsigned long long *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

void device_truth_write(FILE *f)
{
	enum { CHUNK = 4096 };
	unsigned long long *v = NULL, n = 0, got;

	if (!timeline || !f)
		return;
	do {
		unsigned long long *nv = realloc(v, (size_t)(n + CHUNK) * 2 * sizeof(*v));

		if (!nv)
			break;
		v = nv;
		got = timeline(next_item, v + 2 * n, CHUNK);
		next_item += got;
		n += got;
	} while (got == CHUNK);
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
	fputs("]}\n", f);
	free(v);
}
