// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The record stream on arbitrary records, as the ring buffer hands them over:
 * the size check, the CUDA decoder and the address-space resolution of
 * records/stream.c, records/cuda_api.c and records/addrspace.c.
 *
 * The input is records back to back; each is handed over with the bytes that
 * remain (a ring-buffer sample may be longer than the record it holds) and the
 * next starts where its header says it ends. What a sink gets is checked
 * against the raw record and against a plain re-reading of the ABI here.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "records/cuda_api.h"
#include "records/stream.h"
#include "harness.h"
#include "mutate_records.h"


/* The smallest record of each kind the ABI (include/dlbpf/events.h) lets a reader use. */
static size_t abi_size(unsigned kind)
{
	switch (kind) {
	case DL_EV_CUDA: return sizeof(struct dl_cuda_ev);
	case DL_EV_BIO: return sizeof(struct dl_bio_ev);
	case DL_EV_SCHED: return sizeof(struct dl_sched_ev);
	case DL_EV_PROC: return sizeof(struct dl_proc_ev);
	case DL_EV_MARK: return sizeof(struct dl_mark_ev);
	case DL_EV_TRACE_START: return sizeof(struct dl_trace_start_ev);
	case DL_EV_PROCINFO: return sizeof(struct dl_procinfo_ev);
	case DL_EV_LIB: return sizeof(struct dl_lib_ev);
	case DL_EV_SYM: return offsetof(struct dl_sym_ev, name) + 1;
	case DL_EV_TRACE_END: return sizeof(struct dl_trace_end_ev);
	default: return sizeof(struct dl_hdr);   /* a newer kind: skipped by sinks, not rejected */
	}
}

/* The first name a symbol record gave (pid, addr): what a launch of addr must be named. */
struct name {
	uint32_t pid;
	uint64_t addr;
	const char *name;
};

struct check {
	struct name names[4096];
	size_t nnames;
	uint64_t seen;
};

static const char *first_name(const struct check *k, uint32_t pid, uint64_t addr)
{
	for (size_t i = 0; i < k->nnames; i++)
		if (k->names[i].pid == pid && k->names[i].addr == addr)
			return k->names[i].name;
	return NULL;
}

static void check_call(const struct check *k, const struct dl_cuda_ev *ev, const struct dl_call *c)
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
		const char *want = first_name(k, c->tgid, c->func);

		if (k->nnames < sizeof(k->names) / sizeof(k->names[0]) &&
		    (!want != !c->kernel || (want && strcmp(want, c->kernel))))
			FAIL("%s of %#llx named '%s', the first symbol record said '%s'", c->api->name,
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

	if (r->h->kind != DL_EV_SYM || first_name(k, e->h.tgid, e->addr))
		return 0;
	if (k->nnames < sizeof(k->names) / sizeof(k->names[0]))
		k->names[k->nnames] = (struct name){ e->h.tgid, e->addr, e->name };
	k->nnames++;
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fail_init();
	return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
	return mutate_records(data, size, max_size, seed, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct check k;
	/* Ring-buffer samples are 8-byte aligned; so is every copy handed over here. */
	static union {
		struct dl_hdr h;
		uint64_t align;
		unsigned char b[(1 << 16) + 64];   /* the largest record h.size can claim, and some */
	} *bufs;
	size_t nbufs = 0, off = 0, tries = 0;
	struct dl_stream s = {};

	/* Each record keeps its own buffer: symbol names stay where the check's table points. */
	if (!bufs)
		bufs = calloc(64, sizeof(*bufs));
	memset(&k, 0, sizeof(k));
	dl_stream_add(&s, check_sink, &k);
	dl_stream_add(&s, names_sink, &k);
	while (off < size && nbufs < 64) {
		size_t len = size - off > sizeof(bufs->b) ? sizeof(bufs->b) : size - off;
		uint16_t claimed;

		memcpy(bufs[nbufs].b, data + off, len);
		claimed = len >= sizeof(struct dl_hdr) ? bufs[nbufs].h.size : 0;
		tries++;
		if (dl_stream_emit(&s, bufs[nbufs].b, len) == 0) {
			if (claimed < sizeof(struct dl_hdr) || claimed > len)
				FAIL("a record claiming %u of %zu bytes was accepted", claimed, len);
			nbufs++;
		}
		/* A malformed record: the next starts after its header, as far as one can tell. */
		off += claimed >= sizeof(struct dl_hdr) ? claimed : sizeof(struct dl_hdr);
	}
	if (s.seq + s.malformed != tries)
		FAIL("%zu records handed over, %llu given to sinks, %llu counted malformed", tries,
		     (unsigned long long)s.seq, (unsigned long long)s.malformed);
	dl_stream_free(&s);
	return 0;
}
