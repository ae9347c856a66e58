// SPDX-License-Identifier: MIT
/*
 * train_device.c — the device's own timeline as ground truth. On the GPU
 * simulator, gpusimTimeline() hands out every item the device ran (kernel,
 * copy, memset) with its device start and end; after each step the new items
 * are merged into busy intervals and written as a truth line of their own:
 *   {"device":[[start_ns,end_ns],...],"late":[[due_ns,woke_ns],...]}
 * "late" holds the host's waits on the device that the host itself ended
 * late (gpusimLateWakes): a tracer sees a completion only as the waiter's
 * wake-up. With --devices N, "devices" holds each device's busy intervals
 * the same way (gpusimTimelineDevices says whose each item is). A tracer's inferred device-busy time is tested against these. On
 * the real runtime there is no such call and no such line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "train.h"

typedef unsigned long long (*timeline_fn)(unsigned long long, unsigned long long *, unsigned long long);

typedef unsigned long long (*devices_fn)(unsigned long long, int *, unsigned long long);

static timeline_fn timeline, late_wakes;
static devices_fn item_devices;
static unsigned long long next_item, next_wake;

void device_truth_start(void)
{
	timeline = (timeline_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimTimeline");
	late_wakes = (timeline_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimLateWakes");
	item_devices = (devices_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimTimelineDevices");
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

/* The union of the pairs v[0..n) (sorted by start) whose device is dev (all when dev < 0), as a JSON list. */
static void write_union(FILE *f, const unsigned long long *v, const int *devs, unsigned long long n, int dev)
{
	int w = 0;

	fputc('[', f);
	for (unsigned long long i = 0; i < n;) {
		unsigned long long s, e;

		if (dev >= 0 && devs[i] != dev) {
			i++;
			continue;
		}
		s = v[2 * i];
		e = v[2 * i + 1];
		for (i++; i < n && v[2 * i] <= e; i++)
			if ((dev < 0 || devs[i] == dev) && v[2 * i + 1] > e)
				e = v[2 * i + 1];
		fprintf(f, "%s[%llu,%llu]", w++ ? "," : "", s, e);
	}
	fputc(']', f);
}

/* Sorts the pairs by start, their devices with them. */
static void sort_items(unsigned long long *v, int *devs, unsigned long long n)
{
	for (unsigned long long i = 1; i < n; i++)
		for (unsigned long long j = i; j > 0 && v[2 * j] < v[2 * (j - 1)]; j--) {
			unsigned long long a = v[2 * j], b = v[2 * j + 1];
			int d = devs[j];

			v[2 * j] = v[2 * (j - 1)];
			v[2 * j + 1] = v[2 * (j - 1) + 1];
			devs[j] = devs[j - 1];
			v[2 * (j - 1)] = a;
			v[2 * (j - 1) + 1] = b;
			devs[j - 1] = d;
		}
}

void device_truth_write(FILE *f)
{
	unsigned long long *v, n, *late = NULL, nlate = 0, first = next_item;
	int *devs = NULL;

	if (!timeline || !f)
		return;
	v = take_pairs(timeline, &next_item, &n);
	if (late_wakes)
		late = take_pairs(late_wakes, &next_wake, &nlate);
	if (O.devices > 1 && item_devices && n && (devs = calloc((size_t)n, sizeof(*devs))))
		item_devices(first, devs, n);
	/* Items of several engines overlap: their union is the time the device was busy. */
	if (devs)
		sort_items(v, devs, n);   /* items come nearly sorted: an insertion sort is linear on them */
	else
		qsort(v, (size_t)n, 2 * sizeof(*v), cmp_start);
	fputs("{\"device\":", f);
	write_union(f, v, devs, n, -1);
	if (devs) {
		fputs(",\"devices\":[", f);
		for (int d = 0; d < O.devices; d++) {
			fputs(d ? "," : "", f);
			write_union(f, v, devs, n, d);
		}
		fputc(']', f);
	}
	fputs(",\"late\":[", f);
	for (unsigned long long i = 0; i < nlate; i++)
		fprintf(f, "%s[%llu,%llu]", i ? "," : "", late[2 * i], late[2 * i + 1]);
	fputs("]}\n", f);
	free(v);
	free(late);
	free(devs);
}
