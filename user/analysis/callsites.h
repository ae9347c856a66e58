/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Call sites: where a process's outermost CUDA calls come from, and what each
 * cost. A native site is the function and object the call returns to (the
 * stream resolves it from DL_EV_SITE records); one entry per distinct site.
 * Calls whose return address could not be read share one "unknown" entry,
 * so they are counted, never given someone else's name.
 */
#ifndef DLBPF_CALLSITES_H
#define DLBPF_CALLSITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/steps.h"
#include "records/cuda_api.h"
#include "util.h"

/* Keys: 0 is no site (a record from before call sites); user code never returns to UINT64_MAX. */
#define DL_SITE_NONE 0
#define DL_SITE_UNKNOWN UINT64_MAX

struct dl_site_frame {
	char *func, *obj;            /* a Python frame: its function and file */
	int32_t line;                /* a Python frame's line (-1 not known); 0 for a native one */
};

struct dl_site_stat {
	uint64_t key;
	char *func, *obj;            /* both NULL for the unknown site; a Python site: function and file */
	bool python;                 /* the frames are CPython's (func, obj and line are the innermost's) */
	int32_t line;
	struct dl_site_frame *callers;   /* --stacks: the frames above func, innermost first */
	uint32_t ncallers;
	uint64_t calls, total_ns;    /* every thread's outermost calls */
	uint64_t copies, small_copies, sync_copies;
	uint64_t sync_h2d_large;     /* synchronous host-to-device copies over 64 KiB (the sync-copies finding's) */
	uint64_t cat_ns[DL_CAT_COUNT];   /* the main thread's steps: its calls' share of the breakdown */
};

struct dl_sites {
	DL_VEC(struct dl_site_stat) v;
	struct dl_u64map of;         /* key -> index in v */
};

/* The key of a call's site: DL_SITE_NONE, DL_SITE_UNKNOWN, or one per distinct site. */
uint64_t dl_site_key(const struct dl_call *c);
/* Counts an outermost call at its site, key = dl_site_key(c) (DL_SITE_NONE: nothing). */
void dl_sites_count(struct dl_sites *s, const struct dl_call *c, uint64_t key);
const struct dl_site_stat *dl_sites_find(const struct dl_sites *s, uint64_t key);
/* Adds a step's time in category cat to the site with key (known from dl_sites_count). */
void dl_sites_add_cat(struct dl_sites *s, uint64_t key, enum dl_cat cat, uint64_t ns);
void dl_sites_free(struct dl_sites *s);
/*
 * Indexes of the sites with the most time in cat (or total_ns, for cat
 * DL_CAT_COUNT), most first, those with none left out; at most max of them.
 */
size_t dl_sites_top(const struct dl_sites *s, enum dl_cat cat, size_t *idx, size_t max);

/*
 * "func (object's file name)", or for func NULL "unknown (return address
 * unreadable)": how the report, the findings and the timeline name a site.
 */
void dl_site_label(const char *func, const char *obj, char *buf, size_t len);

/* A Python frame: "train.py:88 read_loss" (the file's base name; "?" for a line not known). */
void dl_py_frame_label(const char *file, const char *func, int32_t line, char *buf, size_t len);

/*
 * dl_site_label of the site (a Python site: dl_py_frame_label), and of its
 * first caller after " <- " when it has one.
 */
void dl_site_stat_label(const struct dl_site_stat *st, char *buf, size_t len);

/* A step's time by site (the bounded top list of struct dl_step), filled call by call. */
struct dl_step_sites {
	DL_VEC(struct dl_step_site) v;
	struct dl_u64map of;
};

void dl_step_sites_add(struct dl_step_sites *t, uint64_t key, enum dl_cat cat, uint64_t ns, uint32_t calls);
/* Keeps the DL_STEP_TOP_SITES with the most time in st, and empties t. */
void dl_step_sites_take(struct dl_step_sites *t, struct dl_step *st);

#endif
