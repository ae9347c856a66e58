// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/summary.h"

uint64_t dl_summary_trace_end(const struct dl_summary *s, uint64_t t0, uint64_t end)
{
	uint64_t last_exit = 0;
	bool all_exited = s->n > 0;

	for (size_t i = 0; i < s->n; i++) {
		all_exited = all_exited && s->procs[i].exited && s->procs[i].exit_ts;
		if (s->procs[i].exit_ts > last_exit)
			last_exit = s->procs[i].exit_ts;
	}
	return all_exited && last_exit > t0 && last_exit < end ? last_exit : end;
}

void dl_summary_init(struct dl_summary *s)
{
	memset(s, 0, sizeof(*s));
}

static void proc_free(struct dl_proc *p)
{
	for (size_t i = 0; i < p->nkernels; i++)
		free(p->kernels[i].name);
	free(p->kernels);
	dl_u64map_free(&p->kernel_of);
	free(p->graphs);
	dl_u64map_free(&p->tids);
	dl_u64map_free(&p->lib_paths);
	dl_files_free(&p->files);
	dl_net_free(&p->net);
}

void dl_summary_free(struct dl_summary *s)
{
	for (size_t i = 0; i < s->n; i++)
		proc_free(&s->procs[i]);
	free(s->procs);
	dl_u64map_free(&s->proc_of);
	dl_vec_free(&s->prog_misses);
	dl_pylines_free(&s->pylines);
	memset(s, 0, sizeof(*s));
}

struct dl_proc *dl_summary_find(const struct dl_summary *s, pid_t pid)
{
	uint64_t i;

	return dl_u64map_get(&s->proc_of, (uint32_t)pid, &i) ? &s->procs[i] : NULL;
}

struct dl_proc *dl_summary_proc(struct dl_summary *s, pid_t pid)
{
	struct dl_proc *p = dl_summary_find(s, pid);

	if (p)
		return p;
	dl_grow((void **)&s->procs, &s->cap, s->n + 1, sizeof(*s->procs));
	dl_u64map_put(&s->proc_of, (uint32_t)pid, s->n);
	p = &s->procs[s->n++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

static void note_thread(struct dl_proc *p, uint32_t tid)
{
	if (p->threads_known)
		return;
	dl_u64map_put(&p->tids, tid, 0);
	p->threads = (uint32_t)p->tids.n;
}

/* From now on threads counts starts, from n: the set of tids is no longer needed. */
static void threads_from(struct dl_proc *p, uint32_t n)
{
	p->threads_known = true;
	p->threads = n;
	dl_u64map_free(&p->tids);
}

unsigned dl_copy_size_bucket(uint64_t bytes)
{
	unsigned b;

	if (bytes < 1024)
		return 0;
	b = 1 + (unsigned)(63 - __builtin_clzll(bytes) - 10) / 2;
	return b < DL_COPY_SIZE_BUCKETS ? b : DL_COPY_SIZE_BUCKETS - 1;
}

uint64_t dl_copy_size_bucket_floor(unsigned b)
{
	return b ? 1024ull << (2 * (b - 1)) : 0;
}

static void add_copy(struct dl_proc *p, const struct dl_call *c)
{
	struct dl_copy_stat *cs = &p->copies[c->dir];

	cs->count++;
	cs->bytes += c->bytes;
	cs->total_ns += c->dur_ns;
	if (c->bytes < DL_SMALL_COPY_BYTES)
		cs->small++;
	cs->pageable += c->pageable;
	cs->sizes[dl_copy_size_bucket(c->bytes)]++;
	if (c->pageable)
		cs->pageable_bytes += c->bytes;
}

/* Whether the n bytes at v are one entry of a plain list: an index, or a GPU- or MIG- UUID. */
static bool visible_entry(const char *v, size_t n)
{
	if (n && strspn(v, "0123456789") >= n)
		return true;
	return n > 4 && (!strncmp(v, "GPU-", 4) || !strncmp(v, "MIG-", 4)) &&
	       strspn(v + 4, "GPU-abcdefABCDEF0123456789/") >= n - 4;
}

bool dl_proc_visible_id(const struct dl_proc *p, uint32_t dev, char *out, size_t len)
{
	const char *v = p->cuda_visible, *hit = NULL;
	size_t hit_n = 0;

	/* Every entry must be one: the runtime stops at the first that is not, which is not ours to guess. */
	for (uint32_t i = 0; *v; i++) {
		size_t n = strcspn(v, ",");

		if (!visible_entry(v, n) || (v[n] == ',' && !v[n + 1]))
			return false;
		if (i == dev) {
			hit = v;
			hit_n = n;
		}
		v += n + (v[n] == ',');
	}
	if (!hit || hit_n >= len)
		return false;
	memcpy(out, hit, hit_n);
	out[hit_n] = '\0';
	return true;
}

struct dl_kernel_stat *dl_proc_kernel(struct dl_proc *p, uint64_t func, const uint32_t grid[3],
				      const uint32_t block[3], uint64_t shmem, bool *fresh)
{
	struct dl_kernel_stat *k;
	uint64_t i = 0;

	*fresh = false;
	dl_u64map_get(&p->kernel_of, func, &i);
	for (size_t at = (size_t)i; at; at = k->same_func) {
		k = &p->kernels[at - 1];
		if (k->shmem == shmem && !memcmp(k->grid, grid, sizeof(k->grid)) &&
		    !memcmp(k->block, block, sizeof(k->block)))
			return k;
	}
	dl_grow((void **)&p->kernels, &p->kcap, p->nkernels + 1, sizeof(*p->kernels));
	k = &p->kernels[p->nkernels++];
	memset(k, 0, sizeof(*k));
	k->func = func;
	memcpy(k->grid, grid, sizeof(k->grid));
	memcpy(k->block, block, sizeof(k->block));
	k->shmem = shmem;
	k->same_func = (size_t)i;
	dl_u64map_put(&p->kernel_of, func, p->nkernels);
	*fresh = true;
	return k;
}

static void add_launch(struct dl_proc *p, const struct dl_call *c)
{
	static const uint32_t unknown[3];
	bool fresh;
	/* A shape read from memory that faulted is not the launch's: the zero shape says unknown. */
	struct dl_kernel_stat *k = c->args_fault ? dl_proc_kernel(p, c->func, unknown, unknown, 0, &fresh)
						 : dl_proc_kernel(p, c->func, c->grid, c->block, c->shmem, &fresh);
	char name[32];

	k->count++;
	if (!fresh) {
		/* A name found after the first launch (its lookup failed then, and was retried) replaces the address. */
		if (c->kernel && k->unnamed) {
			free(k->name);
			k->name = dl_xstrdup(c->kernel);
			k->unnamed = false;
		}
		return;
	}
	/* By the symbol record the stream had for it by then. */
	if (!c->kernel)
		snprintf(name, sizeof(name), "0x%llx", (unsigned long long)c->func);
	k->name = dl_xstrdup(c->kernel ? c->kernel : name);
	k->unnamed = !c->kernel;
}

static void add_graph(struct dl_proc *p, const struct dl_call *c)
{
	for (size_t i = 0; i < p->ngraphs; i++)
		if (p->graphs[i].graph == c->func) {
			p->graphs[i].count++;
			return;
		}
	dl_grow((void **)&p->graphs, &p->gcap, p->ngraphs + 1, sizeof(*p->graphs));
	p->graphs[p->ngraphs++] = (struct dl_graph_stat){ .graph = c->func, .count = 1 };
}

static void add_cuda(struct dl_summary *s, const struct dl_call *c)
{
	struct dl_proc *p;

	if (!c) {
		s->unknown_records++;
		return;
	}
	p = dl_summary_proc(s, (pid_t)c->tgid);
	note_thread(p, c->tid);
	/* A driver call the runtime made inside a runtime call is that call: counted once, there. */
	if (c->depth > 0 && c->api->driver) {
		p->driver_inner++;
		return;
	}
	p->calls[c->api->id].count++;
	p->calls[c->api->id].total_ns += c->dur_ns;
	/* A query's "not ready" (600 in the runtime and the driver alike) is its answer, not a failure. */
	if (!c->entry_only && c->ret != 0 && !(c->api->cls == DL_CLS_QUERY && c->ret == 600))
		p->calls[c->api->id].errors++;
	if (c->args_fault)
		p->calls[c->api->id].args_faults++;
	/* A probed API called from inside another is part of the outer call. */
	if (c->depth > 0)
		return;
	switch (c->api->cls) {
	case DL_CLS_COPY:
		add_copy(p, c);
		break;
	case DL_CLS_LAUNCH:
		add_launch(p, c);
		break;
	case DL_CLS_GRAPH:
		add_graph(p, c);
		break;
	default:
		break;
	}
}

static void add_bio(struct dl_summary *s, const struct dl_bio_ev *ev)
{
	bool final = !(ev->flags & DL_BIO_PARTIAL), write = ev->flags & DL_BIO_WRITE;
	struct dl_proc *p;

	if (ev->flags & DL_BIO_ASYNC) {
		if (ev->flags & DL_BIO_UNSEEN) {
			s->async_io_unseen++;
			return;
		}
		s->async_io_bytes += ev->bytes;
		s->async_io_ops += final;
		return;
	}
	p = dl_summary_proc(s, (pid_t)ev->h.tgid);
	if (!s->bio_submits) {
		*(write ? &p->io.write_bytes : &p->io.read_bytes) += ev->bytes;
		*(write ? &p->io.write_ops : &p->io.read_ops) += final;
	}
	if (ev->flags & DL_BIO_UNSEEN) {
		p->io.unseen_ops++;
		p->io.unseen_bytes += ev->bytes;
		return;
	}
	p->io.done_bytes += ev->bytes;
	p->io.done_ops += final;
	if (ev->flags & DL_BIO_ERROR) {
		p->io.error_ops++;
		p->io.error_bytes += ev->bytes;
	}
	if (final)
		p->io.wait_ns += ev->dur_ns;
}

static void add_bio_submit(struct dl_summary *s, const struct dl_bio_submit_ev *ev)
{
	struct dl_proc *p = dl_summary_proc(s, (pid_t)ev->h.tgid);
	bool write = ev->flags & DL_BIO_WRITE;

	*(write ? &p->io.write_bytes : &p->io.read_bytes) += ev->bytes;
	if (write && (ev->flags & DL_BIO_META))
		p->io.write_meta_bytes += ev->bytes;
	if (!(ev->flags & DL_BIO_MERGED))
		*(write ? &p->io.write_ops : &p->io.read_ops) += 1;
	dl_files_submit(&p->files, ev);
}

static void add_sched(struct dl_summary *s, const struct dl_sched_ev *ev)
{
	struct dl_proc *p = dl_summary_proc(s, (pid_t)ev->h.tgid);

	note_thread(p, ev->h.tid);
	dl_files_note_sched(&p->files, ev->h.tid, ev->dur_ns);
	switch (ev->state) {
	case DL_ST_RUNNING:
		p->sched.oncpu_ns += ev->dur_ns;
		p->sched.switches++;
		break;
	case DL_ST_RUNQ:
		p->sched.runq_ns += ev->dur_ns;
		break;
	case DL_ST_SLEEP:
		p->sched.sleep_ns += ev->dur_ns;
		p->sched.blocked_ns += ev->dur_ns;
		break;
	case DL_ST_DISK:
		p->sched.disk_ns += ev->dur_ns;
		p->sched.blocked_ns += ev->dur_ns;
		break;
	default:
		s->unknown_records++;
		break;
	}
}

static void set_comm(struct dl_proc *p, const char *comm)
{
	memcpy(p->comm, comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = '\0';
}

static void add_proc(struct dl_summary *s, const struct dl_proc_ev *ev)
{
	struct dl_proc *p = dl_summary_proc(s, (pid_t)ev->h.tgid);

	switch (ev->what) {
	case DL_PROC_FORK: {
		const struct dl_proc *parent = dl_summary_find(s, (pid_t)ev->ppid);

		p->ppid = (pid_t)ev->ppid;
		p->seen_start = true;
		set_comm(p, ev->comm);
		threads_from(p, 1);
		if (parent && parent != p) {
			dl_files_fork(&p->files, &parent->files);
			p->container = parent->container;
			memcpy(p->cuda_visible, parent->cuda_visible, sizeof(p->cuda_visible));
		}
		break;
	}
	case DL_PROC_THREAD:
		if (p->threads_known)
			p->threads++;
		else
			note_thread(p, ev->h.tid);
		break;
	case DL_PROC_EXEC:
		set_comm(p, ev->comm);
		break;
	case DL_PROC_EXIT:
		if (ev->group_dead) {
			p->exited = true;
			/* Like a wait status: exit code in bits 8-15, terminating signal in 0-6. */
			p->exit_code = ev->exit_code & 0x7f ? 128 + (ev->exit_code & 0x7f) : (ev->exit_code >> 8) & 0xff;
			p->exit_ts = ev->h.ts;
		}
		break;
	default:
		s->unknown_records++;
		break;
	}
}

int dl_summary_sink(void *summary, const struct dl_rec *r)
{
	struct dl_summary *s = summary;
	const struct dl_hdr *h = r->h;
	const void *rec = h;

	if (h->kind == 0 || h->kind >= DL_EV_KIND_MAX) {
		s->unknown_records++;
		return 0;
	}
	s->records[h->kind]++;
	if (h->kind <= DL_EV_MARK || h->kind == DL_EV_BIO_SUBMIT) {
		if (!s->first_ts || h->ts < s->first_ts)
			s->first_ts = h->ts;
		if (h->ts > s->last_ts)
			s->last_ts = h->ts;
	}
	switch (h->kind) {
	case DL_EV_CUDA:
		add_cuda(s, r->call);
		break;
	case DL_EV_BIO:
		add_bio(s, rec);
		break;
	case DL_EV_SCHED:
		add_sched(s, rec);
		break;
	case DL_EV_PROC:
		add_proc(s, rec);
		break;
	case DL_EV_PYSTACK:
		if (r->py)
			dl_pylines_add(&s->pylines, rec, r->py);
		break;
	case DL_EV_TRACE_START:
		s->start_ts = h->ts;
		s->pcie_mbps = ((const struct dl_trace_start_ev *)rec)->pcie_mbps;
		s->bio_submits = ((const struct dl_trace_start_ev *)rec)->flags & DL_TRACE_BIO_SUBMITS;
		break;
	case DL_EV_BIO_SUBMIT:
		add_bio_submit(s, rec);
		break;
	case DL_EV_FILE_OPEN:
		dl_files_open(&dl_summary_proc(s, (pid_t)h->tgid)->files, rec);
		break;
	case DL_EV_FILE_READ:
		note_thread(dl_summary_proc(s, (pid_t)h->tgid), h->tid);
		dl_files_read(&dl_summary_proc(s, (pid_t)h->tgid)->files, rec);
		break;
	case DL_EV_NET_RECV:
		note_thread(dl_summary_proc(s, (pid_t)h->tgid), h->tid);
		dl_net_recv(&dl_summary_proc(s, (pid_t)h->tgid)->net, rec);
		break;
	case DL_EV_FILE_CLOSE:
		dl_files_close(&dl_summary_proc(s, (pid_t)h->tgid)->files, rec);
		break;
	case DL_EV_PROG: {
		const struct dl_prog_ev *e = rec;
		struct dl_prog_miss *m = dl_vec_push(&s->prog_misses);

		memcpy(m->name, e->name, sizeof(m->name));
		m->name[sizeof(m->name) - 1] = '\0';
		m->misses = e->recursion_misses;
		break;
	}
	case DL_EV_PROCINFO: {
		const struct dl_procinfo_ev *e = rec;
		struct dl_proc *p = dl_summary_proc(s, (pid_t)h->tgid);

		p->ppid = (pid_t)e->ppid;
		set_comm(p, e->comm);
		p->nspid = (pid_t)e->nspid;
		if (h->size >= offsetof(struct dl_procinfo_ev, threads) + sizeof(e->threads) && e->threads)
			threads_from(p, e->threads);
		break;
	}
	case DL_EV_CGROUP:
		dl_summary_proc(s, (pid_t)h->tgid)->container = ((const struct dl_cgroup_ev *)rec)->c;
		break;
	case DL_EV_ENV:
		/* The stream checked that it ends within its array. */
		memcpy(dl_summary_proc(s, (pid_t)h->tgid)->cuda_visible, ((const struct dl_env_ev *)rec)->cuda_visible_devices,
		       DL_VISIBLE_LEN);
		break;
	case DL_EV_LIB: {
		/* A library unloaded and loaded again (dlclose, dlopen) is attached again: one library still. */
		const struct dl_lib_ev *e = rec;
		struct dl_proc *p = dl_summary_proc(s, (pid_t)h->tgid);
		uint64_t key = dl_hash_bytes(e->path, strnlen(e->path, sizeof(e->path)));

		if (e->flags & DL_LIB_NOT_PROBED) {
			/* The first one says why the process has no calls; the others are counted. */
			if (!p->unprobed++) {
				p->unprobed_errno = (int)e->nsyms;
				snprintf(p->unprobed_path, sizeof(p->unprobed_path), "%.*s",
					 (int)strnlen(e->path, sizeof(e->path)), e->path);
			}
			break;
		}
		if (!dl_u64map_get(&p->lib_paths, key, NULL)) {
			dl_u64map_put(&p->lib_paths, key, 0);
			p->cuda_libs++;
		}
		break;
	}
	case DL_EV_SYM:
	case DL_EV_SITE:
		dl_summary_proc(s, (pid_t)h->tgid);   /* the names themselves are the stream's */
		break;
	case DL_EV_TRACE_END: {
		const struct dl_trace_end_ev *e = rec;

		s->end_ts = h->ts;
		s->drops_total = 0;
		for (int i = 0; i < DL_DROP_MAX; i++) {
			s->drops[i] = e->drops[i];
			s->drops_total += e->drops[i];
		}
		if (h->size >= offsetof(struct dl_trace_end_ev, recursion_misses) + sizeof(e->recursion_misses))
			s->recursion_misses = e->recursion_misses;
		break;
	}
	default:
		break;
	}
	return 0;
}

uint64_t dl_summary_kernel_events(const struct dl_summary *s)
{
	uint64_t n = s->records[DL_EV_BIO_SUBMIT] + s->records[DL_EV_FILE_OPEN] + s->records[DL_EV_FILE_READ] +
		     s->records[DL_EV_FILE_CLOSE] + s->records[DL_EV_WAKE] + s->records[DL_EV_PYSTACK] +
		     s->records[DL_EV_NET_RECV];

	for (int k = 0; k < DL_EV_TRACE_START; k++)
		n += s->records[k];
	return n;
}

uint64_t dl_summary_duration(const struct dl_summary *s)
{
	uint64_t start = s->start_ts ? s->start_ts : s->first_ts;
	uint64_t end = s->end_ts ? s->end_ts : s->last_ts;

	return end > start ? end - start : 0;
}

bool dl_summary_cuda_loaded(const struct dl_summary *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->procs[i].cuda_libs || s->procs[i].unprobed)
			return true;
	return false;
}

bool dl_proc_bystander(const struct dl_summary *s, const struct dl_proc *p)
{
	if (!p->ppid || !dl_summary_find(s, p->ppid))
		return false;
	for (int a = 0; a < DL_API_COUNT; a++)
		if (p->calls[a].count)
			return false;
	if (p->io.read_ops || p->io.write_ops || p->io.error_ops || p->io.unseen_ops)
		return false;
	return p->sched.oncpu_ns * 100 < dl_summary_duration(s);
}
