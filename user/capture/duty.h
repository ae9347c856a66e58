/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --duty M/N: the hottest probes (kernel launches, copies) are attached for M
 * of every N seconds, so the traced job pays for them only that fraction of
 * the time. Every other probe stays on. The report scales the hot APIs' counts
 * by the observed fraction, with an uncertainty from the attach/detach
 * boundaries and from how much the rate varied between windows, and lists the
 * windows that were fully observed.
 */
#ifndef DLBPF_DUTY_H
#define DLBPF_DUTY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "analysis/summary.h"
#include "capture/tracer.h"
#include "util.h"

/* Scaled values: one per API (call count), then copy count and bytes per direction. */
#define DL_DUTY_NVALS (DL_API_COUNT + 2 * DL_DIR_COUNT)

struct dl_duty_window {
	/* Per class (DL_HOT_LAUNCH, DL_HOT_COPY): before / after its entry probes were attached, detached */
	uint64_t start_lo[DL_HOT_CLASSES], start_hi[DL_HOT_CLASSES];
	uint64_t end_lo[DL_HOT_CLASSES], end_hi[DL_HOT_CLASSES];
	uint64_t v[DL_DUTY_NVALS];     /* what the window added */
};

struct dl_duty {
	unsigned on_s, period_s;
	uint64_t t0, t_end;
	uint64_t next_toggle;
	bool on;
	DL_VEC(struct dl_duty_window) windows;
	uint64_t snap[DL_DUTY_NVALS];  /* totals at the end of the last window */
	int err;
};

/* Makes everything read so far visible in the summary (drain the ring buffer, read aggregates). */
typedef void (*dl_duty_sync_fn)(void *ctx);

/* Parses "M/N" (seconds, 0 < M < N); 0 or -1. */
int dl_duty_parse(const char *s, unsigned *on_s, unsigned *period_s);
/* The hot probes were attached in [t0, attached]: the first window is open. */
void dl_duty_start(struct dl_duty *d, unsigned on_s, unsigned period_s, uint64_t t0, uint64_t attached);
/* Toggles the hot probes when due. */
void dl_duty_tick(struct dl_duty *d, struct dl_tracer *t, uint64_t now, const struct dl_summary *s,
		  dl_duty_sync_fn sync, void *ctx);
/* Closes an open window at the end of the trace; end is when the traced job ended (or now). */
void dl_duty_finish(struct dl_duty *d, struct dl_tracer *t, uint64_t end, const struct dl_summary *s,
		    dl_duty_sync_fn sync, void *ctx);

struct dl_duty_estimate {
	double observed;     /* fraction of the trace the hot probes were on (midpoint) */
	double seen;         /* counted while on */
	double scaled;       /* estimate over the whole trace */
	double uncertainty;  /* about 95%: scaled +- uncertainty */
};

/* Estimate of value index i (an API id, or DL_API_COUNT + dir / + DL_DIR_COUNT + dir). */
void dl_duty_estimate(const struct dl_duty *d, int i, struct dl_duty_estimate *e);
void dl_duty_report(FILE *f, const struct dl_duty *d, const struct dl_summary *s);
void dl_duty_free(struct dl_duty *d);

#endif
