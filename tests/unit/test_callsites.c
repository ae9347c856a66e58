// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Call sites from records: a site record names a return address for the
 * calls after it; calls whose return address was unreadable are one counted
 * unknown site; records from before call sites (shorter) have none; a site
 * record whose strings do not end inside it is refused. Per step, the sites
 * with the most time are kept, most first, and each call's pieces go to its
 * site, so the sites' CUDA time equals the breakdown's.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "analysis/callsites.h"
#include "analysis/correlate.h"
#include "records/stream.h"
#include "util.h"

#define US 1000ull
#define MS 1000000ull
#define PID 100
#define TID 101
#define SITE_COPY 0x401234ull
#define SITE_SYNC 0x401300ull
#define SITE_RELOADED 0x7f0000001234ull   /* the same function+offset, its object mapped elsewhere */

static struct dl_cuda_ev call(enum dl_api_id api, uint64_t ts, uint64_t dur, uint64_t site, uint16_t flags)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_CUDA, .ts = ts, .tgid = PID, .tid = TID };
	e.api = api;
	e.dur_ns = dur;
	e.site = site;
	e.flags = flags;
	return e;
}

/* A synchronous H2D copy of bytes from pageable memory (cudaMemcpy, kind 1). */
static struct dl_cuda_ev copy(uint64_t ts, uint64_t dur, uint64_t bytes, uint64_t site, uint16_t flags)
{
	struct dl_cuda_ev e = call(DL_API_MEMCPY, ts, dur, site, flags);

	e.arg[0] = 0x7f0000000000ull;
	e.arg[1] = 0x30000000ull;
	e.arg[2] = bytes;
	e.arg[3] = 1;
	return e;
}

static int emit(struct dl_stream *st, const void *rec)
{
	return dl_stream_emit(st, rec, ((const struct dl_hdr *)rec)->size);
}

static const struct dl_sites *sites_of(const struct dl_correlator *c)
{
	return dl_corr_nprocs(c) ? &dl_corr_proc(c, 0)->sites : NULL;
}

static const struct dl_site_stat *by_func(const struct dl_sites *s, const char *func)
{
	for (size_t i = 0; s && i < s->v.n; i++)
		if (s->v.v[i].func && !strcmp(s->v.v[i].func, func))
			return &s->v.v[i];
	return NULL;
}

/* Steps of a copy then a sync, as a training loop makes them; marker: the first copy after a sync. */
static void feed_steps(struct dl_stream *st, int nsteps, uint64_t copy_bytes)
{
	for (int i = 0; i < nsteps; i++) {
		uint64_t t = MS + (uint64_t)i * 10 * MS;
		struct dl_cuda_ev c = copy(t, 2 * MS, copy_bytes, i % 2 ? SITE_RELOADED : SITE_COPY, 0);
		struct dl_cuda_ev s = call(DL_API_DEVICE_SYNC, t + 3 * MS, 5 * MS, SITE_SYNC, 0);

		emit(st, &c);
		emit(st, &s);
	}
}

static void test_named_unknown_and_none(void)
{
	struct dl_stream st = { 0 };
	struct dl_corr_opts o = { 0 };
	struct dl_correlator *c = dl_corr_new(&o);
	struct dl_cuda_ev unreadable = call(DL_API_DEVICE_SYNC, 500 * MS, US, 0, DL_CUDA_SITE_FAULT);
	struct dl_cuda_ev old = call(DL_API_DEVICE_SYNC, 501 * MS, US, 0, 0);
	const struct dl_site_stat *cp, *sy, *unk;
	uint64_t cuda_ns = 0, site_ns = 0;

	dl_stream_add(&st, dl_corr_sink, c);
	dl_emit_site(&st, 1, PID, SITE_COPY, "load_batch+0x1c", "/opt/job/train");
	dl_emit_site(&st, 1, PID, SITE_RELOADED, "load_batch+0x1c", "/opt/job/train");
	dl_emit_site(&st, 1, PID, SITE_SYNC, "wait_gpu+0x11", "/opt/job/train");
	feed_steps(&st, 12, 4096);
	/* Unreadable, and an old record: as long as the struct was before the site field. */
	CHECK(emit(&st, &unreadable) == 0, "unreadable call refused");
	CHECK(emit(&st, &unreadable) == 0, "unreadable call refused");
	old.h.size = offsetof(struct dl_cuda_ev, site);
	CHECK(emit(&st, &old) == 0, "a record from before call sites refused");
	dl_corr_finish(c);
	CHECK_EQ_U64(st.malformed, 0);

	cp = by_func(sites_of(c), "load_batch+0x1c");
	sy = by_func(sites_of(c), "wait_gpu+0x11");
	unk = dl_sites_find(sites_of(c), DL_SITE_UNKNOWN);
	CHECK(cp && sy && unk, "sites missing");
	if (!cp || !sy || !unk)
		goto out;
	/* One site for the same function+offset and object, wherever it was mapped. */
	CHECK_EQ_U64(sites_of(c)->v.n, 3);
	CHECK_EQ_U64(cp->calls, 12);
	CHECK_EQ_U64(cp->copies, 12);
	CHECK_EQ_U64(cp->small_copies, 12);
	CHECK_EQ_U64(cp->sync_copies, 12);
	CHECK_EQ_U64(cp->sync_h2d_large, 0);
	CHECK_EQ_U64(cp->total_ns, 12 * 2 * MS);
	CHECK(!strcmp(cp->obj, "/opt/job/train"), "object %s", cp->obj);
	CHECK_EQ_U64(sy->calls, 12);
	CHECK_EQ_U64(sy->total_ns, 12 * 5 * MS);
	/* Counted, never named; the old record has no site at all. */
	CHECK_EQ_U64(unk->calls, 2);
	CHECK(!unk->func && !unk->obj, "the unknown site has a name");

	/* Every step's CUDA time is its sites' (each call has one): nothing lost, nothing twice. */
	for (size_t i = 0; i < dl_corr_proc(c, 0)->nsteps; i++) {
		const struct dl_step *s = &dl_corr_proc(c, 0)->steps[i];

		for (int k = DL_CAT_GPU_WAIT; k <= DL_CAT_CUDA_OTHER; k++)
			cuda_ns += s->cat_ns[k];
	}
	for (size_t i = 0; i < sites_of(c)->v.n; i++)
		for (int k = 0; k < DL_CAT_COUNT; k++)
			site_ns += sites_of(c)->v.v[i].cat_ns[k];
	CHECK(cuda_ns > 0, "no CUDA time in the steps");
	CHECK_EQ_U64(site_ns, cuda_ns);
	/* The sync waits on the GPU: its time is gpu_wait, the copy's none of it. */
	CHECK(sy->cat_ns[DL_CAT_GPU_WAIT] > 0 && sy->cat_ns[DL_CAT_H2D] == 0, "sync's categories");
	CHECK(cp->cat_ns[DL_CAT_H2D] > 0, "copy's categories");
out:
	dl_corr_free(c);
	dl_stream_free(&st);
}

static void test_step_top_sites(void)
{
	struct dl_step_sites t = { 0 };
	struct dl_step st;

	memset(&st, 0, sizeof(st));
	/* Five sites, added out of order; the top three by time are kept, most first. */
	dl_step_sites_add(&t, 11, DL_CAT_H2D, 5, 1);
	dl_step_sites_add(&t, 12, DL_CAT_GPU_WAIT, 50, 1);
	dl_step_sites_add(&t, 13, DL_CAT_LAUNCH, 1, 3);
	dl_step_sites_add(&t, 14, DL_CAT_D2H, 20, 1);
	dl_step_sites_add(&t, 11, DL_CAT_GPU_WAIT, 30, 0);   /* the same call's second piece */
	dl_step_sites_add(&t, 15, DL_CAT_CUDA_OTHER, 2, 1);
	dl_step_sites_add(&t, DL_SITE_NONE, DL_CAT_GPU_WAIT, 99, 1);   /* no site: not a site */
	dl_step_sites_take(&t, &st);
	CHECK_EQ_U64(st.nsites, 3);
	CHECK_EQ_U64(st.top_sites[0].key, 12);
	CHECK_EQ_U64(st.top_sites[1].key, 11);
	CHECK_EQ_U64(st.top_sites[1].ns, 35);
	CHECK_EQ_U64(st.top_sites[1].calls, 1);
	CHECK_EQ_U64(st.top_sites[1].cat_ns[DL_CAT_GPU_WAIT], 30);
	CHECK_EQ_U64(st.top_sites[2].key, 14);
	CHECK_EQ_U64(t.v.n, 0);
}

/* A site record's two strings must end inside it; the stream refuses one that does not. */
static void test_site_record_checked(void)
{
	struct dl_stream st = { 0 };
	union {
		struct dl_site_ev e;
		char buf[64];
	} u;

	memset(&u, 0, sizeof(u));
	u.e.h = (struct dl_hdr){ .size = sizeof(u), .kind = DL_EV_SITE, .ts = 1, .tgid = PID, .tid = PID };
	memcpy(u.e.text, "f+0x1\0/bin/x", 13);
	u.e.func_len = 6;
	CHECK(emit(&st, &u) == 0, "a good site record refused");
	u.e.func_len = 0;
	CHECK(emit(&st, &u) == -1, "func_len 0 accepted");
	u.e.func_len = 5;                     /* function not NUL-terminated where it says */
	CHECK(emit(&st, &u) == -1, "unterminated function accepted");
	u.e.func_len = (uint32_t)(sizeof(u) - offsetof(struct dl_site_ev, text));   /* no room for the object */
	CHECK(emit(&st, &u) == -1, "function to the end accepted");
	u.e.func_len = 6;
	memset(u.e.text + 6, 'x', sizeof(u) - offsetof(struct dl_site_ev, text) - 6);   /* object unterminated */
	CHECK(emit(&st, &u) == -1, "unterminated object accepted");
	CHECK_EQ_U64(st.malformed, 4);
	dl_stream_free(&st);
}

/* --stacks: the record's tail is the stack, innermost first; each frame is named by its site record. */
static void test_stack_tail(void)
{
	struct dl_stream st = { 0 };
	struct dl_corr_opts o = { 0 };
	struct dl_correlator *c = dl_corr_new(&o);
	union {
		struct dl_cuda_ev e;
		unsigned char buf[sizeof(struct dl_cuda_ev) + (DL_STACK_MAX + 4) * 8];
	} u;
	uint64_t frames[3] = { SITE_SYNC, 0x401500, 0x401600 };
	const struct dl_site_stat *s3, *s2;

	dl_stream_add(&st, dl_corr_sink, c);
	dl_emit_site(&st, 1, PID, SITE_SYNC, "wait_gpu+0x11", "/opt/job/train");
	dl_emit_site(&st, 1, PID, 0x401500, "train_step+0x40", "/opt/job/train");
	/* 0x401600 has no site record: its address stands in for its name. */
	memset(&u, 0, sizeof(u));
	u.e = call(DL_API_DEVICE_SYNC, MS, US, SITE_SYNC, 0);
	memcpy(u.e.stack, frames, sizeof(frames));
	u.e.h.size = sizeof(u.e) + sizeof(frames);
	CHECK(emit(&st, &u) == 0, "a call with a stack refused");
	/* The same site with a shorter stack is another site; a tail past DL_STACK_MAX is cut there. */
	u.e.h.size = sizeof(u.e) + 2 * 8;
	CHECK(emit(&st, &u) == 0, "a call with a stack refused");
	u.e.h.size = sizeof(u.e) + (DL_STACK_MAX + 4) * 8;
	CHECK(emit(&st, &u) == 0, "a call with a long tail refused");
	dl_corr_finish(c);
	CHECK_EQ_U64(sites_of(c)->v.n, 3);
	s3 = sites_of(c)->v.n == 3 ? &sites_of(c)->v.v[0] : NULL;
	s2 = sites_of(c)->v.n == 3 ? &sites_of(c)->v.v[1] : NULL;
	if (s3 && s2) {
		CHECK_EQ_U64(s3->ncallers, 2);
		CHECK(!strcmp(s3->func, "wait_gpu+0x11"), "%s", s3->func);
		CHECK(!strcmp(s3->callers[0].func, "train_step+0x40"), "%s", s3->callers[0].func);
		CHECK(!strcmp(s3->callers[1].func, "0x401600") && !strcmp(s3->callers[1].obj, ""), "%s",
		      s3->callers[1].func);
		CHECK_EQ_U64(s2->ncallers, 1);
		CHECK_EQ_U64(sites_of(c)->v.v[2].ncallers, DL_STACK_MAX - 1);
	}
	dl_corr_free(c);
	dl_stream_free(&st);
}

static void test_label(void)
{
	char b[64];

	dl_site_label("train_step+0x4c", "/opt/job/train", b, sizeof(b));
	CHECK(!strcmp(b, "train_step+0x4c (train)"), "%s", b);
	dl_site_label("0x1234", "", b, sizeof(b));
	CHECK(!strcmp(b, "0x1234"), "%s", b);
	dl_site_label(NULL, NULL, b, sizeof(b));
	CHECK(!strncmp(b, "unknown", 7), "%s", b);
}

int main(void)
{
	test_named_unknown_and_none();
	test_step_top_sites();
	test_site_record_checked();
	test_stack_tail();
	test_label();
	return check_report("test_callsites");
}
