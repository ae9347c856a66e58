// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The record stream on arbitrary records, as the ring buffer hands them over:
 * the size check, the CUDA decoder and the address-space resolution of
 * records/stream.c, records/cuda_api.c and records/addrspace.c, then the sinks
 * that read records (summary, correlator, timeline).
 *
 * The input is records back to back; the next starts where a record's header
 * says it ends. What a sink gets is checked against the raw record and a plain
 * re-reading of the ABI here; each record lives in memory of its own, freed
 * once handed over, so a sink that reads past a record or keeps it is caught.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/correlate.h"
#include "analysis/summary.h"
#include "output/timeline.h"
#include "records/cuda_api.h"
#include "records/stream.h"
#include "util.h"
#include "harness.h"
#include "mutate_records.h"


/*
 * The smallest record of each kind the ABI (include/dlbpf/events.h) lets a reader use:
 * fields appended later are absent from older recordings, whose h.size ends before them.
 */
static size_t abi_size(unsigned kind)
{
	switch (kind) {
	case DL_EV_CUDA: return offsetof(struct dl_cuda_ev, site);
	case DL_EV_BIO: return sizeof(struct dl_bio_ev);
	case DL_EV_SCHED: return sizeof(struct dl_sched_ev);
	case DL_EV_PROC: return offsetof(struct dl_proc_ev, flags);
	case DL_EV_MARK: return sizeof(struct dl_mark_ev);
	case DL_EV_TRACE_START: return sizeof(struct dl_trace_start_ev);
	case DL_EV_PROCINFO: return offsetof(struct dl_procinfo_ev, threads);
	case DL_EV_LIB: return sizeof(struct dl_lib_ev);
	case DL_EV_SYM: return offsetof(struct dl_sym_ev, name) + 1;
	case DL_EV_TRACE_END: return offsetof(struct dl_trace_end_ev, recursion_misses);
	case DL_EV_BIO_SUBMIT: return sizeof(struct dl_bio_submit_ev);
	case DL_EV_PROG: return sizeof(struct dl_prog_ev);
	case DL_EV_FILE_OPEN: return sizeof(struct dl_file_open_ev);
	case DL_EV_FILE_READ: return sizeof(struct dl_file_read_ev);
	case DL_EV_FILE_CLOSE: return sizeof(struct dl_file_close_ev);
	case DL_EV_SITE: return offsetof(struct dl_site_ev, text) + 2;
	case DL_EV_WAKE: return sizeof(struct dl_wake_ev);
	case DL_EV_LAUNCH: return sizeof(struct dl_launch_ev);
	case DL_EV_CALL_SHORT: return sizeof(struct dl_call_short_ev);
	case DL_EV_CGROUP: return sizeof(struct dl_cgroup_ev);
	default: return sizeof(struct dl_hdr);   /* a newer kind: skipped by sinks, not rejected */
	}
}

/* The name the latest symbol record gave (pid, addr): what a launch of addr must be named. */
struct name {
	uint32_t pid;
	uint64_t addr;
	char *name;                  /* a copy: the record is gone once the stream is done with it */
};

struct check {
	struct name names[256];
	size_t nnames;
	bool names_full;             /* more named addresses than the table holds: launches go unchecked */
	uint64_t seen;
	bool launch;                 /* the record handed over is a DL_EV_LAUNCH: sinks must get it expanded */
	struct dl_launch_ev l;
	bool shortc;                 /* the record handed over is a DL_EV_CALL_SHORT: likewise */
	unsigned char sc[sizeof(struct dl_call_short_ev) + DL_CALL_SHORT_ARGS_MAX * sizeof(uint64_t)];
	size_t sc_len;
};

/* A plain re-reading of a short call against the dl_cuda_ev given to sinks. */
CHECKER static void check_short(const unsigned char *rec, size_t len, const struct dl_hdr *h)
{
	struct dl_call_short_ev s;
	const struct dl_cuda_ev *ev = (const void *)h;
	uint64_t arg[8] = { 0 };
	size_t n;

	memcpy(&s, rec, sizeof(s));
	n = (s.h.size - sizeof(s)) / 8;
	if (n > DL_CALL_SHORT_ARGS_MAX)
		n = DL_CALL_SHORT_ARGS_MAX;
	if (sizeof(s) + n * 8 > len)
		FAIL("short call of %u bytes accepted from %zu", s.h.size, len);
	memcpy(arg, rec + sizeof(s), n * 8);
	if (h->kind != DL_EV_CUDA || h->size != sizeof(struct dl_cuda_ev) || h->ts != s.h.ts || h->tgid != s.h.tgid ||
	    h->tid != s.h.tid || ev->api != s.api || ev->flags != s.flags || ev->depth != s.depth ||
	    ev->dur_ns != s.dur_ns || ev->ret != s.ret || ev->site != s.site || ev->out ||
	    memcmp(ev->arg, arg, sizeof(arg)))
		FAIL("short call of api %u: given to sinks as kind %u of %u bytes, not as its dl_cuda_ev", s.api,
		     h->kind, h->size);
}

/* A plain re-reading of a launch record (include/dlbpf/events.h) against the call given to sinks. */
CHECKER static void check_launch(const struct dl_launch_ev *l, const struct dl_hdr *h, const struct dl_call *c)
{
	const struct dl_cuda_ev *ev = (const void *)h;
	uint32_t bd = l->block_depth;
	uint32_t block[3] = { bd & 0x7ff, (bd >> 11) & 0x7ff, (bd >> 22) & 0x7f };
	uint32_t grid[3] = { l->grid_x, l->grid_y, l->grid_z };

	if (h->kind != DL_EV_CUDA || h->size != sizeof(struct dl_cuda_ev) || h->ts != l->h.ts ||
	    h->tgid != l->h.tgid || h->tid != l->h.tid || ev->api != l->api || ev->flags != DL_CUDA_ENTRY_ONLY ||
	    ev->depth != bd >> 29 || ev->site != l->site || ev->dur_ns || ev->ret)
		FAIL("launch record of api %u: given to sinks as kind %u of %u bytes, not as its dl_cuda_ev", l->api,
		     h->kind, h->size);
	if (c && (c->func != l->func || c->stream != l->stream || c->shmem != l->shmem ||
		  memcmp(c->grid, grid, sizeof(grid)) || memcmp(c->block, block, sizeof(block)) || !c->entry_only))
		FAIL("%s: a launch record decoded to another launch", c->api->name);
}

static struct name *find_name(struct check *k, uint32_t pid, uint64_t addr)
{
	for (size_t i = 0; i < k->nnames; i++)
		if (k->names[i].pid == pid && k->names[i].addr == addr)
			return &k->names[i];
	return NULL;
}

static void check_call(struct check *k, const struct dl_cuda_ev *ev, const struct dl_call *c)
{
	struct dl_call raw;

	if (c->api != dl_api_by_id(ev->api))
		FAIL("api %u decoded as %s", ev->api, c->api ? c->api->name : "nothing");
	if (dl_call_decode(ev, &raw))
		FAIL("api %u: the stream decoded what the decoder refuses", ev->api);
	/* Fields resolution leaves alone are the record's, as decoded. */
	if (c->ts != ev->h.ts || c->tgid != ev->h.tgid || c->tid != ev->h.tid || c->dur_ns != ev->dur_ns ||
	    c->ret != ev->ret || c->depth != ev->depth || c->bytes != raw.bytes || c->stream != raw.stream ||
	    c->func != raw.func || memcmp(c->grid, raw.grid, sizeof(raw.grid)) ||
	    memcmp(c->block, raw.block, sizeof(raw.block)))
		FAIL("%s: the call given to sinks differs from the record", c->api->name);
	if (c->api->cls == DL_CLS_COPY || c->api->cls == DL_CLS_MEMSET) {
		uint64_t host = c->dir == DL_DIR_H2D ? c->src : c->dir == DL_DIR_D2H ? c->dst : 0;

		if (c->dir >= DL_DIR_DEFAULT)
			FAIL("%s: direction %d left unresolved", c->api->name, c->dir);
		if (raw.dir != DL_DIR_DEFAULT && c->dir != raw.dir)
			FAIL("%s: direction %d passed, %d resolved", c->api->name, raw.dir, c->dir);
		if (c->host_mem != host || (c->pageable && !c->host_mem))
			FAIL("%s: host side %#llx (pageable %d) for direction %d", c->api->name,
			     (unsigned long long)c->host_mem, c->pageable, c->dir);
	} else if (c->dir != raw.dir || c->host_mem || c->pageable) {
		FAIL("%s: not a copy, yet resolved as one", c->api->name);
	}
	if (c->api->cls == DL_CLS_LAUNCH) {
		const struct name *n = find_name(k, c->tgid, c->func);
		const char *want = n ? n->name : NULL;

		if (!k->names_full && (!want != !c->kernel || (want && strcmp(want, c->kernel))))
			FAIL("%s of %#llx named '%s', the latest symbol record said '%s'", c->api->name,
			     (unsigned long long)c->func, c->kernel ? c->kernel : "(none)", want ? want : "(none)");
	} else if (c->kernel) {
		FAIL("%s: not a launch, yet named", c->api->name);
	}
	if (!dl_dir_name(c->dir))
		FAIL("direction %d has no name", c->dir);
}

static int check_sink(void *ctx, const struct dl_rec *r)
{
	struct check *k = ctx;
	const struct dl_hdr *h = r->h;

	k->seen++;
	if (r->seq != k->seen)
		FAIL("record %llu given as number %llu", (unsigned long long)k->seen, (unsigned long long)r->seq);
	if (h->size < abi_size(h->kind))
		FAIL("kind %u of %u bytes given to sinks; it needs %zu", h->kind, h->size, abi_size(h->kind));
	if (h->kind == DL_EV_SYM && ((const char *)h)[h->size - 1])
		FAIL("a symbol record without its terminating NUL given to sinks");
	if (h->kind == DL_EV_LAUNCH)
		FAIL("a launch record given to sinks unexpanded");
	if (k->launch)
		check_launch(&k->l, h, r->call);
	if (k->shortc)
		check_short(k->sc, k->sc_len, h);
	if (h->kind == DL_EV_CALL_SHORT)
		FAIL("a short call given to sinks unexpanded");
	if (h->kind == DL_EV_CUDA) {
		const struct dl_cuda_ev *ev = (const void *)h;

		if (!r->call != !dl_api_by_id(ev->api))
			FAIL("api %u: %s", ev->api, r->call ? "an unknown API decoded" : "a known API left undecoded");
		if (r->call)
			check_call(k, ev, r->call);
	} else if (r->call) {
		FAIL("kind %u given with a decoded call", h->kind);
	}
	return 0;
}

/* Runs after check_sink has judged the record: later launches see this name. */
static int names_sink(void *ctx, const struct dl_rec *r)
{
	struct check *k = ctx;
	const struct dl_sym_ev *e = (const void *)r->h;
	struct name *n;

	if (r->h->kind != DL_EV_SYM)
		return 0;
	/* A later record for an address names what was loaded there since. */
	n = find_name(k, e->h.tgid, e->addr);
	if (n) {
		free(n->name);
		n->name = dl_xstrdup(e->name);
	} else if (k->nnames < sizeof(k->names) / sizeof(k->names[0])) {
		k->names[k->nnames++] = (struct name){ e->h.tgid, e->addr, dl_xstrdup(e->name) };
	} else {
		k->names_full = true;
	}
	return 0;
}

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fail_init();
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
	return mutate_records(data, size, max_size, seed, 0);
}

static void on_step(void *ctx, const struct dl_step *st)
{
	uint64_t sum = 0;

	(void)ctx;
	for (int c = 0; c < DL_CAT_COUNT; c++)
		sum += st->cat_ns[c];
	if (sum != st->dur_ns)
		FAIL("step %u of pid %d: categories add up to %llu ns, the step lasts %llu ns", st->index, st->pid,
		     (unsigned long long)sum, (unsigned long long)st->dur_ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct check k;
	struct dl_corr_opts copts = { 0 };
	struct dl_summary sum;
	struct dl_correlator *corr;
	struct dl_step_stage stage;
	struct dl_timeline *trace;
	size_t off = 0, tries = 0;
	struct dl_stream s = {};
	int err;

	memset(&k, 0, sizeof(k));
	dl_summary_init(&sum);
	corr = dl_corr_new(&copts);
	stage = (struct dl_step_stage){ .corr = corr, .fn = on_step };
	trace = dl_timeline_new(devnull, DL_TIMELINE_JSON);
	dl_stream_add(&s, check_sink, &k);
	dl_stream_add(&s, names_sink, &k);
	/* The sinks that read records' fields (the Perfetto writer reads what the timeline read). */
	dl_stream_add(&s, dl_summary_sink, &sum);
	dl_stream_add(&s, dl_corr_sink, corr);
	dl_stream_add(&s, dl_timeline_sink, trace);
	dl_stream_add(&s, dl_step_stage_sink, &stage);
	while (off < size) {
		uint16_t claimed = 0;
		size_t len;
		uint8_t *rec;

		if (size - off >= sizeof(struct dl_hdr))
			memcpy(&claimed, data + off, sizeof(claimed));
		/*
		 * As the ring buffer hands it over: exactly the record, in memory of its own that is
		 * gone once the stream is done with it. A sink reading past the record's size, or
		 * keeping a pointer into it, is an AddressSanitizer report. A record whose size does
		 * not fit is handed over with what is left, to be refused.
		 */
		len = claimed >= sizeof(struct dl_hdr) && claimed <= size - off ? claimed : size - off;
		rec = malloc(len);
		if (!rec)
			abort();
		memcpy(rec, data + off, len);
		tries++;
		k.launch = len >= sizeof(k.l) && ((const struct dl_hdr *)rec)->kind == DL_EV_LAUNCH;
		if (k.launch)
			memcpy(&k.l, rec, sizeof(k.l));
		k.shortc = len >= sizeof(struct dl_call_short_ev) &&
			   ((const struct dl_hdr *)rec)->kind == DL_EV_CALL_SHORT;
		if (k.shortc) {
			k.sc_len = len < sizeof(k.sc) ? len : sizeof(k.sc);
			memcpy(k.sc, rec, k.sc_len);
		}
		err = dl_stream_emit(&s, rec, len);
		k.launch = k.shortc = false;
		free(rec);
		if (err == 0 && (claimed < sizeof(struct dl_hdr) || claimed > len))
			FAIL("a record claiming %u of %zu bytes was accepted", claimed, len);
		/* A malformed record: the next starts after its header, as far as one can tell. */
		off += claimed >= sizeof(struct dl_hdr) ? claimed : sizeof(struct dl_hdr);
	}
	if (s.seq + s.malformed != tries)
		FAIL("%zu records handed over, %llu given to sinks, %llu counted malformed", tries,
		     (unsigned long long)s.seq, (unsigned long long)s.malformed);
	dl_corr_finish(corr);
	dl_corr_take_steps(corr, on_step, NULL);
	if (dl_timeline_finish(trace, NULL))
		FAIL("writing the JSON timeline to /dev/null failed");
	dl_corr_free(corr);
	dl_summary_free(&sum);
	dl_stream_free(&s);
	for (size_t i = 0; i < k.nnames; i++)
		free(k.names[i].name);
	return 0;
}
