// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "capture/aggregate.h"
#include "records/cuda_api.h"

int dl_agg_init(struct dl_agg *a, int map_fd)
{
	memset(a, 0, sizeof(*a));
	a->map_fd = map_fd;
	a->ncpu = libbpf_num_possible_cpus();
	if (a->ncpu <= 0)
		return a->ncpu ? a->ncpu : -EINVAL;
	a->percpu = dl_xcalloc((size_t)a->ncpu, sizeof(*a->percpu));
	return 0;
}

void dl_agg_free(struct dl_agg *a)
{
	dl_vec_free(a);
	dl_u64map_free(&a->index);
	free(a->percpu);
	memset(a, 0, sizeof(*a));
}

static struct dl_agg_entry *entry(struct dl_agg *a, const struct dl_agg_key *k)
{
	uint64_t h = dl_hash_bytes(k, sizeof(*k)), i;
	struct dl_agg_entry *e;

	if (dl_u64map_get(&a->index, h, &i)) {
		if (!memcmp(&a->v[i].key, k, sizeof(*k)))
			return &a->v[i];
		/* Two keys of one hash: the map has the first; the others are found by a scan. */
		for (i = 0; i < a->n; i++)
			if (!memcmp(&a->v[i].key, k, sizeof(*k)))
				return &a->v[i];
	} else {
		dl_u64map_put(&a->index, h, a->n);
	}
	e = dl_vec_push(a);
	e->key = *k;
	return e;
}

/* Launches aggregate per kernel handle: grid and block are not kept (they stay 0). */
static void add_kernel(struct dl_proc *p, uint64_t func, uint64_t count, struct dl_symbolizer *sz,
		       struct dl_stream *stream, uint64_t now)
{
	static const uint32_t none[3];
	struct dl_kernel_stat *k;
	const char *known;
	char name[DL_SYM_NAME_MAX];
	bool fresh;

	k = dl_proc_kernel(p, func, none, none, 0, &fresh);
	k->count += count;
	if (!fresh)
		return;
	known = stream ? dl_addrspace_name(&stream->mem, (uint32_t)p->pid, func) : NULL;
	snprintf(name, sizeof(name), "%s", known ? known : "");
	if (!name[0] && sz) {
		dl_symbolize(sz, p->pid, func, name, sizeof(name));
		/* The symbol record keeps a recording of this run self-contained. */
		if (name[0] && stream && dl_symbolizer_first(sz, p->pid, func))
			dl_emit_sym(stream, now, p->pid, func, name);
	}
	if (!name[0])
		snprintf(name, sizeof(name), "0x%" PRIx64, func);
	k->name = dl_xstrdup(name);
}

static void apply(struct dl_summary *s, const struct dl_agg_key *k, const struct dl_agg_val *d,
		  struct dl_symbolizer *sz, struct dl_stream *stream, uint64_t now)
{
	const struct dl_api *api = dl_api_by_id(k->api);
	struct dl_proc *p;

	if (!api) {
		s->unknown_records += d->count;
		return;
	}
	p = dl_summary_proc(s, (pid_t)k->tgid);
	/* Counted as records too, so the status line's rate and the event total stay meaningful. */
	s->records[DL_EV_CUDA] += d->count;
	p->calls[api->id].count += d->count;
	p->calls[api->id].total_ns += d->total_ns;
	p->calls[api->id].errors += d->errors;
	if (k->flags & DL_AGG_NESTED)
		return;  /* part of the outer call, as in summary.c */
	if (api->cls == DL_CLS_COPY && k->dir < DL_DIR_DEFAULT) {
		struct dl_copy_stat *c = &p->copies[k->dir];

		c->count += d->count;
		c->bytes += d->bytes;
		c->total_ns += d->total_ns;
		c->small += d->small;
	} else if (api->cls == DL_CLS_LAUNCH && d->count) {
		add_kernel(p, k->func, d->count, sz, stream, now);
	}
}

int dl_agg_poll(struct dl_agg *a, struct dl_summary *s, struct dl_symbolizer *sz, struct dl_stream *stream,
		uint64_t now)
{
	struct dl_agg_key key, next;
	bool first = true;

	while (!bpf_map_get_next_key(a->map_fd, first ? NULL : &key, &next)) {
		struct dl_agg_val sum = {}, delta;
		struct dl_agg_entry *e;

		first = false;
		key = next;
		if (bpf_map_lookup_elem(a->map_fd, &key, a->percpu))
			continue;  /* entries are never deleted while tracing; a miss is a race with insertion */
		for (int c = 0; c < a->ncpu; c++) {
			const struct dl_agg_val *v = &a->percpu[c];

			sum.count += v->count;
			sum.total_ns += v->total_ns;
			sum.errors += v->errors;
			sum.bytes += v->bytes;
			sum.small += v->small;
			for (int b = 0; b < DL_AGG_HIST; b++)
				sum.hist[b] += v->hist[b];
		}
		e = entry(a, &key);
		if (sum.count == e->val.count)
			continue;
		delta.count = sum.count - e->val.count;
		delta.total_ns = sum.total_ns - e->val.total_ns;
		delta.errors = sum.errors - e->val.errors;
		delta.bytes = sum.bytes - e->val.bytes;
		delta.small = sum.small - e->val.small;
		e->val = sum;
		apply(s, &key, &delta, sz, stream, now);
	}
	return 0;
}

static const char *bucket_label(int b, char *buf, size_t len)
{
	static const char *const unit[] = { "ns", "us", "ms", "s" };
	uint64_t lo = b ? 1ull << (b - 1) : 0;
	int u = 0;

	while (lo >= 1000 && u < 3) {
		lo /= 1000;
		u++;
	}
	snprintf(buf, len, ">=%" PRIu64 "%s", lo, unit[u]);
	return buf;
}

void dl_agg_report(FILE *f, const struct dl_agg *a)
{
	bool header = false;

	for (size_t i = 0; i < a->n; i++) {
		const struct dl_agg_entry *e = &a->v[i];
		const struct dl_api *api = dl_api_by_id(e->key.api);
		uint64_t merged[DL_AGG_HIST] = {}, total = 0;
		bool done = false;
		char lab[32];

		if (!api || (e->key.flags & DL_AGG_ENTRY_ONLY))
			continue;
		/* One histogram per (process, API): merge the entries that differ only by direction or nesting. */
		for (size_t j = 0; j < i && !done; j++)
			done = a->v[j].key.tgid == e->key.tgid && a->v[j].key.api == e->key.api;
		if (done)
			continue;
		for (size_t j = i; j < a->n; j++) {
			if (a->v[j].key.tgid != e->key.tgid || a->v[j].key.api != e->key.api)
				continue;
			for (int b = 0; b < DL_AGG_HIST; b++) {
				merged[b] += a->v[j].val.hist[b];
				total += a->v[j].val.hist[b];
			}
		}
		if (!total)
			continue;
		if (!header) {
			fprintf(f, "\nCUDA call durations (in-kernel log2 histograms, --summary):\n");
			header = true;
		}
		fprintf(f, "  pid %u %s (%" PRIu64 " calls):", e->key.tgid, api->name, total);
		for (int b = 0; b < DL_AGG_HIST; b++)
			if (merged[b])
				fprintf(f, " %s:%" PRIu64, bucket_label(b, lab, sizeof(lab)), merged[b]);
		fputc('\n', f);
	}
}
