/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Step learning from periodicity: the iteration of a training loop is the
 * smallest period with which the main thread's call sequence repeats, whether
 * or not a blocking sync falls in every iteration. Pure: a function of the
 * calls it is given.
 */
#ifndef DLBPF_STEPLEARN_H
#define DLBPF_STEPLEARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A main-thread call as the sequence sees it: what it is, not when. */
struct dl_sl_call {
	uint64_t stream;
	uint16_t api;
	uint8_t dir;
	uint8_t size_log2;   /* copies and memsets: bytes' bit length; 0 otherwise */
	bool sync;           /* a sync point: left out of the sequence, its place kept */
};

struct dl_sl_period {
	bool found;
	uint32_t calls;          /* the period, in calls other than sync points */
	uint32_t periods;        /* whole periods in the window, from the first marker */
	uint32_t repeating;      /* of periods[1..], those identical to the period before */
	uint32_t synced;         /* periods holding a sync point */
	double score;            /* the match that chose the period (see steplearn.c) */
	size_t marker;           /* index in the calls of the first marker: its kind marks each step */
};

/* The size bucket of a copy of bytes. */
uint8_t dl_sl_size_log2(uint64_t bytes);
/* Looks for the period of v[0..n); out->found says whether one was. */
void dl_steplearn(const struct dl_sl_call *v, size_t n, struct dl_sl_period *out);

#endif
