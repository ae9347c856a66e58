// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/lineage.h"
#include "analysis/net.h"

_Static_assert(DL_LIN_EP_NAME == DL_NET_NAME_LEN, "an endpoint's name as analysis/net.h writes it");

const char *dl_wake_ctx_name(uint32_t ctx)
{
	switch (ctx) {
	case DL_WAKE_TASK: return "task";
	case DL_WAKE_HARDIRQ: return "hardirq";
	case DL_WAKE_SOFTIRQ: return "softirq";
	case DL_WAKE_KTHREAD: return "kthread";
	default: return "unknown";
	}
}

static void thread_free(struct dl_lin_thread *t)
{
	dl_vec_free(&t->spans);
	dl_vec_free(&t->woken);
	dl_vec_free(&t->gave);
	dl_vec_free(&t->reads);
	dl_vec_free(&t->recvs);
}

void dl_lineage_free(struct dl_lineage *l)
{
	for (size_t i = 0; i < l->threads.n; i++)
		thread_free(&l->threads.v[i]);
	for (size_t i = 0; i < l->procs.n; i++)
		dl_files_free(&l->procs.v[i].files);
	for (size_t i = 0; i < l->endpoints.n; i++)
		free(l->endpoints.v[i]);
	dl_vec_free(&l->endpoints);
	dl_u64map_free(&l->by_endpoint);
	dl_vec_free(&l->threads);
	dl_vec_free(&l->procs);
	dl_u64map_free(&l->by_tid);
	dl_u64map_free(&l->by_pid);
	memset(l, 0, sizeof(*l));
}

static struct dl_lin_thread *thread_of(struct dl_lineage *l, uint32_t tid, uint32_t tgid, uint64_t ts, bool create)
{
	struct dl_lin_thread *t;
	uint64_t i;

	if (dl_u64map_get(&l->by_tid, tid, &i))
		return &l->threads.v[i];
	if (!create)
		return NULL;
	dl_u64map_put(&l->by_tid, tid, l->threads.n);
	t = dl_vec_push(&l->threads);
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->tgid = tgid;
	t->first_ts = ts;
	return t;
}

static const struct dl_lin_thread *find_thread(const struct dl_lineage *l, uint32_t tid)
{
	uint64_t i;

	return dl_u64map_get(&l->by_tid, tid, &i) ? &l->threads.v[i] : NULL;
}

static struct dl_proc_files *files_of(struct dl_lineage *l, uint32_t pid)
{
	struct dl_lin_proc *p;
	uint64_t i;

	if (dl_u64map_get(&l->by_pid, pid, &i))
		return &l->procs.v[i].files;
	dl_u64map_put(&l->by_pid, pid, l->procs.n);
	p = dl_vec_push(&l->procs);
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return &p->files;
}

/* Edges come from every CPU: kept in time order by inserting from the back. */
static void insert_edge(struct dl_lin_edge **v, size_t *n, size_t *cap, const struct dl_lin_edge *e)
{
	size_t i;

	dl_grow((void **)v, cap, *n + 1, sizeof(**v));
	for (i = *n; i > 0 && (*v)[i - 1].ts > e->ts; i--)
		(*v)[i] = (*v)[i - 1];
	(*v)[i] = *e;
	(*n)++;
}

static void note_sched(struct dl_lineage *l, const struct dl_sched_ev *ev)
{
	struct dl_lin_thread *t = thread_of(l, ev->h.tid, ev->h.tgid, ev->h.ts, true);
	struct dl_span s = { ev->h.ts, ev->h.ts + ev->dur_ns, ev->state };

	if (t->spans.n && s.start < t->spans.v[t->spans.n - 1].end)
		s.start = t->spans.v[t->spans.n - 1].end;
	if (s.end > s.start)
		*dl_vec_push(&t->spans) = s;
	if (s.end >= t->until) {
		t->until = s.end;
		t->next = ev->next_state;
	}
}

static void note_wake(struct dl_lineage *l, const struct dl_wake_ev *ev)
{
	struct dl_lin_edge e = { ev->h.ts, ev->waker_tgid, ev->waker_tid, ev->wakee_tgid, ev->wakee_tid, ev->ctx };
	struct dl_lin_thread *t = thread_of(l, ev->wakee_tid, ev->wakee_tgid, ev->h.ts, true);

	insert_edge(&t->woken.v, &t->woken.n, &t->woken.cap, &e);
	if (ev->ctx != DL_WAKE_TASK)
		return;
	t = thread_of(l, ev->waker_tid, ev->waker_tgid, ev->h.ts, true);
	insert_edge(&t->gave.v, &t->gave.n, &t->gave.cap, &e);
}

static void note_read(struct dl_lineage *l, const struct dl_file_read_ev *ev)
{
	struct dl_proc_files *pf = files_of(l, ev->h.tgid);
	struct dl_lin_thread *t;
	struct dl_lin_read *r;
	uint64_t at = 0;

	if (ev->ret <= 0)
		return;
	t = thread_of(l, ev->h.tid, ev->h.tgid, ev->h.ts, true);
	r = dl_vec_push(&t->reads);
	r->ts = ev->h.ts;
	r->bytes = (uint64_t)ev->ret;
	r->disk_bytes = ev->disk_bytes;
	r->path = dl_u64map_get(&pf->fds, (uint32_t)ev->fd, &at) && at ? pf->files.v[at - 1].path : NULL;
}

/* The lineage's copy of an endpoint's name: kept until the lineage is freed, as steps point to it. */
static const char *endpoint_name(struct dl_lineage *l, const char *name)
{
	uint64_t key = dl_hash_bytes(name, strlen(name)), i;

	for (;; key++) {
		if (!dl_u64map_get(&l->by_endpoint, key, &i))
			break;
		if (!strcmp(l->endpoints.v[i], name))
			return l->endpoints.v[i];
	}
	*dl_vec_push(&l->endpoints) = dl_xstrdup(name);
	dl_u64map_put(&l->by_endpoint, key, l->endpoints.n - 1);
	return l->endpoints.v[l->endpoints.n - 1];
}

/* A socket receive: what a loader that fetches over the network waits in. Peeks and failures bring nothing. */
static void note_recv(struct dl_lineage *l, const struct dl_net_recv_ev *ev)
{
	struct dl_net_endpoint ep;
	struct dl_lin_thread *t;
	struct dl_lin_recv *r;

	if (ev->ret < 0 || (ev->flags & DL_NET_PEEK))
		return;
	dl_net_endpoint_of(ev, &ep);
	t = thread_of(l, ev->h.tid, ev->h.tgid, ev->h.ts, true);
	r = dl_vec_push(&t->recvs);
	*r = (struct dl_lin_recv){ .ts = ev->h.ts, .dur_ns = ev->flags & DL_NET_NO_START ? 0 : ev->dur_ns,
				   .bytes = (uint64_t)ev->ret, .endpoint = endpoint_name(l, ep.name) };
}

/* A block read outside any read call into a file the process maps: a read of that file, by page faults. */
static void note_submit(struct dl_lineage *l, const struct dl_bio_submit_ev *ev)
{
	const struct dl_file_stat *f = dl_files_submit(files_of(l, ev->h.tgid), ev);
	struct dl_lin_thread *t;
	struct dl_lin_read *r;

	if (!f)
		return;
	t = thread_of(l, ev->h.tid, ev->h.tgid, ev->h.ts, true);
	r = dl_vec_push(&t->reads);
	*r = (struct dl_lin_read){ .ts = ev->h.ts, .fault_bytes = ev->bytes, .path = f->path };
}

void dl_lineage_note(struct dl_lineage *l, const struct dl_hdr *h)
{
	switch (h->kind) {
	case DL_EV_SCHED:
		note_sched(l, (const void *)h);
		break;
	case DL_EV_WAKE:
		note_wake(l, (const void *)h);
		break;
	case DL_EV_FILE_OPEN:
		dl_files_open(files_of(l, h->tgid), (const void *)h);
		break;
	case DL_EV_FILE_CLOSE:
		dl_files_close(files_of(l, h->tgid), (const void *)h);
		break;
	case DL_EV_FILE_READ:
		note_read(l, (const void *)h);
		break;
	case DL_EV_BIO_SUBMIT:
		note_submit(l, (const void *)h);
		break;
	case DL_EV_NET_RECV:
		note_recv(l, (const void *)h);
		break;
	case DL_EV_PROC: {
		const struct dl_proc_ev *e = (const void *)h;
		struct dl_lin_thread *t = thread_of(l, h->tid, h->tgid, h->ts, false);
		uint64_t i;

		/* A tid that comes back (reused, or exec's leader) is a live thread again. */
		if (t)
			t->exit_ts = e->what == DL_PROC_EXIT ? dl_max_u64(h->ts, 1) : 0;

		/* A forked worker reads through the fds it inherited (the data set opened before the fork). */
		if (e->what == DL_PROC_FORK && dl_u64map_get(&l->by_pid, e->ppid, &i)) {
			/* The child's table first: adding it may move the parent's. */
			struct dl_proc_files *child = files_of(l, h->tgid);

			if (dl_u64map_get(&l->by_pid, e->ppid, &i))
				dl_files_fork(child, &l->procs.v[i].files);
		}
		break;
	}
	default:
		break;
	}
}

/* Time of [a, b) outside the sorted, non-overlapping pieces. */
static uint64_t outside(const struct dl_span *p, size_t n, uint64_t a, uint64_t b)
{
	uint64_t in = 0;

	for (size_t i = dl_spans_first_after(p, n, a); i < n && p[i].start < b; i++) {
		uint64_t s = dl_max_u64(a, p[i].start), e = dl_min_u64(b, p[i].end);

		if (e > s)
			in += e - s;
	}
	return b - a - dl_min_u64(in, b - a);
}

/* The last edge into t with lo < ts <= hi, or NULL. */
static const struct dl_lin_edge *ending_edge(const struct dl_lin_thread *t, uint64_t lo, uint64_t hi)
{
	for (size_t i = t ? t->woken.n : 0; i-- > 0;) {
		const struct dl_lin_edge *e = &t->woken.v[i];

		if (e->ts <= lo)
			break;
		if (e->ts <= hi)
			return e;
	}
	return NULL;
}

/* Thread w's latest wake-up of thread to before ts, or NULL. */
static const struct dl_lin_edge *previous_handoff(const struct dl_lin_thread *w, uint32_t to, uint64_t ts)
{
	for (size_t i = w->gave.n; i-- > 0;)
		if (w->gave.v[i].ts < ts && w->gave.v[i].wakee_tid == to)
			return &w->gave.v[i];
	return NULL;
}

/* Thread t's work in [a, b): on a CPU or in D (reading), not runnable or asleep. */
static uint64_t work_ns(const struct dl_lin_thread *t, uint64_t a, uint64_t b)
{
	uint64_t n = 0, last = a;

	for (size_t i = dl_spans_first_after(t->spans.v, t->spans.n, a); i < t->spans.n && t->spans.v[i].start < b; i++) {
		const struct dl_span *s = &t->spans.v[i];
		uint64_t x = dl_max_u64(s->start, a), y = dl_min_u64(s->end, b);

		if (y > x && (s->kind == DL_ST_RUNNING || s->kind == DL_ST_DISK))
			n += y - x;
		last = dl_max_u64(last, y);
	}
	if ((t->next == DL_ST_RUNNING || t->next == DL_ST_DISK) && t->until <= b && b > dl_max_u64(t->until, last))
		n += b - dl_max_u64(t->until, last);
	return n;
}

/* A batch handed on: who made it, over which window. */
struct production {
	const struct dl_lin_thread *producer;
	uint64_t since;
	bool after_handoff;   /* since is a hand-off or the taking of work, not the first of the producer kept */
};

/*
 * The batch waker w handed to thread `to` (of process to_tgid) at h, which
 * `to` started to take at `before` (the step, or the downstream window).
 *
 * Its window opens at the previous hand-off to `to` by w's process before
 * then: by any of its threads, since a worker's hand-offs may come from
 * whichever thread writes its queue; before `before`, since one batch takes
 * several wake-ups when it is larger than the pipe it crosses. A thread of
 * to's own process hands off for itself only (a thread pool's threads each
 * make their own batches).
 *
 * The waker may only pass the batch on (a multiprocessing.Queue's feeder
 * thread, which pickles and writes what the worker's main thread made): the
 * thread of its process that worked most in the window, on a CPU or reading
 * (in D), made the batch. The wake-ups between them do not tell it: the
 * worker puts a batch while the feeder still writes the previous one, which
 * wakes no one, and the GIL passes between them all the time. Runnable time
 * is not work: with more workers than CPUs every thread waits for one. A
 * thread of to's own process is its own producer: the consumer's other
 * threads are loaders of other batches, or the consumer's own.
 *
 * A producer in another process that was handed work by the consumer's
 * process in the window (it blocked for the batch's indexes until then)
 * made the batch from then on: the wait for work is not the batch's cost.
 */
static void production_of(const struct dl_lineage *l, const struct dl_lin_query *q, const struct dl_lin_thread *w,
			  uint32_t to, uint32_t to_tgid, uint64_t before, uint64_t h, struct production *p)
{
	const bool own = w->tgid == to_tgid;
	const struct dl_lin_edge *prev = NULL;
	uint64_t best;

	for (size_t i = 0; i < l->threads.n; i++) {
		const struct dl_lin_thread *t = &l->threads.v[i];
		const struct dl_lin_edge *e;

		if (t == w || (!own && t->tgid == w->tgid && t->tid != q->main_tid)) {
			e = previous_handoff(t, to, dl_min_u64(before, h));
			if (e && (!prev || e->ts > prev->ts))
				prev = e;
		}
	}
	p->producer = w;
	p->after_handoff = prev != NULL;
	p->since = prev ? prev->ts : dl_min_u64(w->first_ts, h);
	if (own)
		return;
	best = work_ns(w, p->since, h);
	for (size_t i = 0; i < l->threads.n; i++) {
		const struct dl_lin_thread *t = &l->threads.v[i];
		uint64_t n;

		if (t->tgid == w->tgid && t != w && t->tid != q->main_tid && (n = work_ns(t, p->since, h)) > best) {
			best = n;
			p->producer = t;
		}
	}
	/* The last work the consumer's process handed the producer in the window: its batch started there. */
	if (w->tgid != q->pid)
		for (size_t i = p->producer->woken.n; i-- > 0;) {
			const struct dl_lin_edge *e = &p->producer->woken.v[i];

			if (e->ts <= p->since)
				break;
			if (e->ts < h && e->ctx == DL_WAKE_TASK && e->waker_tgid == q->pid) {
				p->since = e->ts;
				p->after_handoff = true;
				break;
			}
		}
}

static void add_state(const struct dl_lin_query *q, struct dl_step_lineage *o, uint32_t state, uint64_t a, uint64_t b)
{
	uint64_t io;

	if (b <= a)
		return;
	switch (state) {
	case DL_ST_RUNNING:
		o->oncpu_ns += b - a;
		break;
	case DL_ST_RUNQ:
		o->runq_ns += b - a;
		break;
	case DL_ST_DISK:
		/* As the breakdown's io_wait: in D while the tree's reads are in flight. */
		io = dl_spans_overlap(q->disk, q->ndisk, a, b);
		o->io_wait_ns += io;
		o->other_wait_ns += b - a - io;
		break;
	default:
		o->other_wait_ns += b - a;
		break;
	}
}

/* What a file brought the window: the bytes its read calls returned, or its page faults read from the disk. */
static uint64_t file_weight(const struct dl_lin_file *f)
{
	return f->read_bytes + f->fault_bytes;
}

/*
 * A window's files and endpoints, tallied whole before the step keeps the
 * first few (DL_LIN_FILES, DL_LIN_ENDPOINTS): a short table that evicts would
 * lose an evicted file's bytes when it came back, and list it short. Past
 * this many in one window, the table evicts the least (a window of a batch
 * touches a few files, not dozens).
 */
#define SCAN_FILES 64
#define SCAN_ENDPOINTS 16

struct window_scan {
	struct dl_lin_file files[SCAN_FILES];
	uint32_t nfiles;
	struct dl_lin_endpoint endpoints[SCAN_ENDPOINTS];
	uint32_t nendpoints;
};

static void add_file(struct dl_step_lineage *o, struct window_scan *w, const struct dl_lin_read *r)
{
	uint32_t i;

	/* Only a read call counts as a read; a page fault's block read has its own count. */
	o->reads += !r->fault_bytes;
	o->read_bytes += r->bytes;
	o->disk_bytes += r->disk_bytes;
	o->fault_bytes += r->fault_bytes;
	if (!r->path)
		return;
	for (i = 0; i < w->nfiles && w->files[i].path != r->path; i++)
		;
	if (i == w->nfiles) {
		if (w->nfiles == SCAN_FILES) {
			/* Full: the new file takes the place of the one with the fewest bytes, if it has more. */
			uint32_t least = 0;

			for (uint32_t k = 1; k < w->nfiles; k++)
				if (file_weight(&w->files[k]) < file_weight(&w->files[least]))
					least = k;
			if (file_weight(&w->files[least]) >= r->bytes + r->fault_bytes)
				return;
			i = least;
		} else {
			w->nfiles++;
		}
		w->files[i] = (struct dl_lin_file){ .path = r->path };
	}
	w->files[i].read_bytes += r->bytes;
	w->files[i].disk_bytes += r->disk_bytes;
	w->files[i].fault_bytes += r->fault_bytes;
	w->files[i].reads += !r->fault_bytes;
}

static int by_file_bytes(const void *a, const void *b)
{
	const struct dl_lin_file *x = a, *y = b;

	if (file_weight(x) != file_weight(y))
		return file_weight(x) < file_weight(y) ? 1 : -1;
	return strcmp(x->path, y->path);
}

/* The reads of thread t in (a, b]. */
static void window_reads(const struct dl_lin_thread *t, uint64_t a, uint64_t b, struct dl_step_lineage *o,
			 struct window_scan *w)
{
	for (size_t i = dl_vec_lower_bound(&t->reads, ts, a); i < t->reads.n && t->reads.v[i].ts <= b; i++)
		if (t->reads.v[i].ts > a)
			add_file(o, w, &t->reads.v[i]);
}

/*
 * The time thread t was blocked (S or D) inside its receive r within (a, b]:
 * waiting for the data, not copying it or waiting for a CPU once it came.
 */
static uint64_t recv_blocked(const struct dl_lin_thread *t, const struct dl_lin_recv *r, uint64_t a, uint64_t b)
{
	uint64_t lo = dl_max_u64(r->ts, a), hi = dl_min_u64(r->ts + r->dur_ns, b), sum = 0, last = lo;

	if (hi <= lo)
		return 0;
	for (size_t i = dl_spans_first_after(t->spans.v, t->spans.n, lo); i < t->spans.n && t->spans.v[i].start < hi; i++) {
		const struct dl_span *s = &t->spans.v[i];

		last = dl_max_u64(last, s->end);
		if (s->kind == DL_ST_SLEEP || s->kind == DL_ST_DISK)
			sum += dl_net_wait_in(s->start, s->end - s->start, lo, hi);
	}
	/* Past its last closed interval the thread is in the state it entered then. */
	if ((t->next == DL_ST_SLEEP || t->next == DL_ST_DISK) && t->until < hi)
		sum += hi - dl_max_u64(dl_max_u64(t->until, lo), last);
	return sum;
}

/* A receive of the window's: what it brought, and (the producer's own) its blocked time, under its endpoint. */
static void add_recv(struct dl_step_lineage *o, struct window_scan *w, const struct dl_lin_recv *r, uint64_t a,
		     uint64_t b, uint64_t wait)
{
	uint64_t end = r->ts + r->dur_ns;
	bool returned = end > a && end <= b;
	uint32_t i;

	o->net_wait_ns += wait;
	o->net_bytes += returned ? r->bytes : 0;
	o->net_recvs += returned;
	for (i = 0; i < w->nendpoints && strcmp(w->endpoints[i].name, r->endpoint); i++)
		;
	if (i == w->nendpoints) {
		if (i == SCAN_ENDPOINTS) {
			/* Full: the one waited on least gives its place to this one, if this one waited more. */
			uint32_t least = 0;

			for (uint32_t k = 1; k < w->nendpoints; k++)
				if (w->endpoints[k].wait_ns < w->endpoints[least].wait_ns)
					least = k;
			if (w->endpoints[least].wait_ns >= wait)
				return;
			i = least;
		} else {
			w->nendpoints++;
		}
		memset(&w->endpoints[i], 0, sizeof(w->endpoints[i]));
		snprintf(w->endpoints[i].name, sizeof(w->endpoints[i].name), "%s", r->endpoint);
	}
	w->endpoints[i].wait_ns += wait;
	w->endpoints[i].bytes += returned ? r->bytes : 0;
	w->endpoints[i].recvs += returned;
}

/*
 * The receives of thread t that returned or waited in (a, b]; the producer's
 * own (producer set) count their blocked time as the window's wait on the network.
 */
static void window_recvs(const struct dl_lin_thread *t, uint64_t a, uint64_t b, bool producer, struct dl_step_lineage *o,
			 struct window_scan *w)
{
	size_t i = dl_vec_lower_bound(&t->recvs, ts, a);

	/* The one before may still be blocked at a: a thread's receives do not overlap, so only that one. */
	if (i && t->recvs.v[i - 1].ts + t->recvs.v[i - 1].dur_ns > a)
		i--;
	for (; i < t->recvs.n && t->recvs.v[i].ts <= b; i++)
		add_recv(o, w, &t->recvs.v[i], a, b, producer ? recv_blocked(t, &t->recvs.v[i], a, b) : 0);
}

static int by_endpoint_wait(const void *x, const void *y)
{
	const struct dl_lin_endpoint *p = x, *q = y;

	if (p->wait_ns != q->wait_ns)
		return p->wait_ns < q->wait_ns ? 1 : -1;
	return strcmp(p->name, q->name);
}

/*
 * What producer w did in (since, handoff], and what its process read then:
 * a worker's reads are its batch's whichever of its threads made them. In
 * the consumer's own process only w's own count (the others are the
 * consumer, or loaders of other batches).
 */
static void producer_window(const struct dl_lineage *l, const struct dl_lin_query *q, const struct dl_lin_thread *w,
			    struct dl_step_lineage *o)
{
	uint64_t a = o->since_ns, b = o->handoff_ns, last = a;
	struct window_scan *scan = dl_xcalloc(1, sizeof(*scan));

	size_t from = dl_spans_first_after(w->spans.v, w->spans.n, a);
	uint64_t prev_end = from ? w->spans.v[from - 1].end : 0;

	/* Spans and reads are in time order and hold seconds of history: only the window's are visited. */
	for (size_t i = from; i < w->spans.n; i++) {
		const struct dl_span *s = &w->spans.v[i];
		uint64_t lo = dl_max_u64(prev_end, s->start > DL_LIN_RACE_NS ? s->start - DL_LIN_RACE_NS : 0);
		const struct dl_lin_edge *e;

		if (s->start >= b)
			break;
		prev_end = s->end;
		last = dl_max_u64(last, dl_min_u64(s->end, b));
		/*
		 * A worker blocked until the consumer's process woke it waited for work (the next
		 * batch's indexes, room in the pipe): idle, not what the batch cost. It made the batch
		 * before such a wait when it ran ahead.
		 */
		if ((s->kind == DL_ST_SLEEP || s->kind == DL_ST_DISK) && w->tgid != q->pid &&
		    (e = ending_edge(w, lo, s->end)) && e->ctx == DL_WAKE_TASK && e->waker_tgid == q->pid) {
			o->idle_ns += dl_min_u64(s->end, b) - dl_max_u64(s->start, a);
			continue;
		}
		add_state(q, o, s->kind, dl_max_u64(s->start, a), dl_min_u64(s->end, b));
	}
	/* Past its last closed interval the producer is in the state it entered then (running, at a hand-off). */
	if (w->next && w->until <= b)
		add_state(q, o, w->next, dl_max_u64(w->until, dl_max_u64(a, last)), b);
	if (w->tgid == q->pid) {
		window_reads(w, a, b, o, scan);
		window_recvs(w, a, b, true, o, scan);
	} else {
		for (size_t i = 0; i < l->threads.n; i++)
			if (l->threads.v[i].tgid == w->tgid) {
				window_reads(&l->threads.v[i], a, b, o, scan);
				window_recvs(&l->threads.v[i], a, b, l->threads.v[i].tid == w->tid, o, scan);
			}
	}
	/* The window's files and endpoints, most first: the step keeps the first few. */
	qsort(scan->files, scan->nfiles, sizeof(scan->files[0]), by_file_bytes);
	qsort(scan->endpoints, scan->nendpoints, sizeof(scan->endpoints[0]), by_endpoint_wait);
	o->nfiles = dl_min_u64(scan->nfiles, DL_LIN_FILES);
	memcpy(o->files, scan->files, o->nfiles * sizeof(o->files[0]));
	o->nendpoints = dl_min_u64(scan->nendpoints, DL_LIN_ENDPOINTS);
	memcpy(o->endpoints, scan->endpoints, o->nendpoints * sizeof(o->endpoints[0]));
	free(scan);
}

struct candidate {
	uint32_t tid, ctx;
	uint64_t wait_ns, longest;
	const struct dl_lin_edge *edge;   /* the wake-up that ended its longest wait */
};

/* Whether tid is the main thread or already a task of the chain: a wake-up from there closes a loop. */
static bool in_chain(const struct dl_lin_query *q, const struct dl_step_lineage *o, uint32_t tid)
{
	if (tid == q->main_tid || tid == o->waker_tid || tid == o->producer_tid)
		return true;
	for (uint32_t i = 0; i < o->nchain; i++)
		if (o->chain[i].tid == tid || o->chain[i].waker_tid == tid)
			return true;
	return false;
}

/*
 * The hops up from the producer: the task whose wake-ups ended most of the
 * last task's blocked time in its window (a pin-memory thread's waits end on
 * the worker process that filled the batch), the thread of its process that
 * made what it handed on, over its own window, and so on while edges exist.
 * A task in another process woken by the consumer's process was handed work
 * (the batch's indexes, a free slot): that is not upstream. A wake-up by the
 * main thread or a task already in the chain (a relay named, a feeder
 * thread) closes a loop. A thread of the task's own process may be upstream:
 * a reader thread that hands a decoding thread its bytes.
 */
static void walk_up(const struct dl_lineage *l, const struct dl_lin_query *q, const struct dl_lin_thread *w,
		    uint64_t a, uint64_t b, struct dl_step_lineage *o)
{
	while (o->nchain < DL_LIN_HOPS && w && b > a) {
		struct candidate cand[DL_LIN_WAKERS], best = { 0 };
		struct dl_step_lineage win;
		struct production made;
		struct dl_lin_hop *h;
		const struct dl_lin_thread *u;
		size_t ncand = 0, from = dl_spans_first_after(w->spans.v, w->spans.n, a);
		uint64_t prev_end = from ? w->spans.v[from - 1].end : 0;

		for (size_t i = from; i < w->spans.n && w->spans.v[i].end <= b; i++) {
			const struct dl_span *s = &w->spans.v[i];
			uint64_t lo = dl_max_u64(prev_end, s->start > DL_LIN_RACE_NS ? s->start - DL_LIN_RACE_NS : 0);
			const struct dl_lin_edge *e;
			size_t k;

			prev_end = s->end;
			if (s->kind != DL_ST_SLEEP && s->kind != DL_ST_DISK)
				continue;
			e = ending_edge(w, lo, s->end);
			if (!e || e->ctx != DL_WAKE_TASK || in_chain(q, o, e->waker_tid) ||
			    (e->waker_tgid == q->pid && w->tgid != q->pid))
				continue;
			for (k = 0; k < ncand && cand[k].tid != e->waker_tid; k++)
				;
			if (k == ncand) {
				if (ncand == DL_LIN_WAKERS)
					continue;
				cand[ncand++] = (struct candidate){ .tid = e->waker_tid };
			}
			cand[k].wait_ns += dl_min_u64(s->end, b) - dl_max_u64(s->start, a);
			cand[k].edge = e;   /* the latest: the hand-off closest to the window's end */
		}
		/* One upstream task per hop: the one that ended the most of these waits. */
		for (size_t k = 0; k < ncand; k++)
			if (cand[k].wait_ns > best.wait_ns)
				best = cand[k];
		if (!best.edge)
			return;
		h = &o->chain[o->nchain++];
		memset(h, 0, sizeof(*h));
		h->pid = best.edge->waker_tgid;
		h->tid = h->waker_tid = best.tid;
		h->ended_ns = best.wait_ns;
		h->handoff_ns = best.edge->ts;
		u = find_thread(l, best.tid);
		if (!u || (!u->spans.n && !u->next && !u->reads.n))
			return;
		production_of(l, q, u, w->tid, w->tgid, a, h->handoff_ns, &made);
		u = made.producer;
		h->tid = u->tid;
		memset(&win, 0, sizeof(win));
		win.since_ns = h->since_ns = made.since;
		win.handoff_ns = h->handoff_ns;
		producer_window(l, q, u, &win);
		h->traced = true;
		h->oncpu_ns = win.oncpu_ns;
		h->io_wait_ns = win.io_wait_ns;
		h->runq_ns = win.runq_ns;
		h->other_wait_ns = win.other_wait_ns;
		h->idle_ns = win.idle_ns;
		h->read_bytes = win.read_bytes;
		h->reads = win.reads;
		h->disk_bytes = win.disk_bytes;
		h->fault_bytes = win.fault_bytes;
		w = u;
		a = h->since_ns;
		b = h->handoff_ns;
	}
}

void dl_lineage_step(const struct dl_lineage *l, const struct dl_lin_query *q, struct dl_step_lineage *o)
{
	const struct dl_lin_thread *main = find_thread(l, q->main_tid), *w;
	struct candidate cand[DL_LIN_WAKERS];
	struct production made;
	size_t ncand = 0, best = 0;
	uint64_t prev_end = 0;

	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < q->nsched; i++) {
		const struct dl_span *s = &q->sched[i];
		uint64_t a = dl_max_u64(s->start, q->start), b = dl_min_u64(s->end, q->end), ns, lo;
		const struct dl_lin_edge *e;
		size_t k;

		if (s->kind != DL_ST_SLEEP && s->kind != DL_ST_DISK)
			continue;
		lo = dl_max_u64(prev_end, s->start > DL_LIN_RACE_NS ? s->start - DL_LIN_RACE_NS : 0);
		prev_end = s->end;
		if (b <= a || !(ns = outside(q->cuda, q->ncuda, a, b)))
			continue;
		o->waits++;
		o->wait_ns += ns;
		/* Still blocked at the step's end: the wake-up that ends it belongs to the next step. */
		if (s->end > q->end || !(e = ending_edge(main, lo, s->end)))
			continue;
		for (k = 0; k < ncand; k++)
			if (cand[k].ctx == e->ctx && cand[k].tid == (e->ctx == DL_WAKE_TASK ? e->waker_tid : 0))
				break;
		if (k == ncand) {
			if (ncand == DL_LIN_WAKERS)
				continue;
			cand[ncand++] = (struct candidate){ e->ctx == DL_WAKE_TASK ? e->waker_tid : 0, e->ctx, 0, 0, e };
		}
		cand[k].wait_ns += ns;
		if (ns > cand[k].longest) {
			cand[k].longest = ns;
			cand[k].edge = e;
		}
	}
	if (!ncand)
		return;
	for (size_t k = 1; k < ncand; k++)
		if (cand[k].wait_ns > cand[best].wait_ns)
			best = k;
	o->woken = true;
	o->waker_ctx = cand[best].ctx;
	o->woken_wait_ns = cand[best].wait_ns;
	if (o->waker_ctx != DL_WAKE_TASK)
		return;
	o->waker_pid = cand[best].edge->waker_tgid;
	o->waker_tid = cand[best].edge->waker_tid;
	o->handoff_ns = cand[best].edge->ts;
	/* Known only when something of it was traced besides the wake-ups it made. */
	w = find_thread(l, o->waker_tid);
	if (!w || (!w->spans.n && !w->next && !w->reads.n))
		return;
	production_of(l, q, w, q->main_tid, q->pid, q->start, o->handoff_ns, &made);
	o->producer = true;
	o->producer_tid = made.producer->tid;
	o->after_handoff = made.after_handoff;
	o->since_ns = made.since;
	producer_window(l, q, made.producer, o);
	walk_up(l, q, made.producer, o->since_ns, o->handoff_ns, o);
}

/* Swaps the last thread into i: a job that starts and ends threads by the thousand keeps none of the dead. */
static void thread_drop(struct dl_lineage *l, size_t i)
{
	thread_free(&l->threads.v[i]);
	dl_u64map_del(&l->by_tid, l->threads.v[i].tid);
	if (i + 1 < l->threads.n) {
		l->threads.v[i] = l->threads.v[l->threads.n - 1];
		dl_u64map_put(&l->by_tid, l->threads.v[i].tid, i);
	}
	l->threads.n--;
}

void dl_lineage_forget_before(struct dl_lineage *l, uint64_t t, uint64_t dead_before)
{
	for (size_t i = 0; i < l->threads.n; i++) {
		struct dl_lin_thread *th = &l->threads.v[i];
		size_t k;

		if (th->exit_ts && (th->exit_ts < t || th->exit_ts < dead_before)) {
			thread_drop(l, i--);
			continue;
		}

		/* Called every thousand records over seconds of history: searched, and moved only when halved. */
		dl_vec_drop_front_amortized(&th->spans, dl_vec_lower_bound(&th->spans, end, t));
		dl_vec_drop_front_amortized(&th->woken, dl_vec_lower_bound(&th->woken, ts, t));
		/* The last hand-off before t stays: it starts the window of the next. */
		k = dl_vec_lower_bound(&th->gave, ts, t);
		dl_vec_drop_front_amortized(&th->gave, k ? k - 1 : 0);
		dl_vec_drop_front_amortized(&th->reads, dl_vec_lower_bound(&th->reads, ts, t));
		/* A receive blocked across t stays: a window from t takes its wait. */
		k = dl_vec_lower_bound(&th->recvs, ts, t);
		dl_vec_drop_front_amortized(&th->recvs, k && th->recvs.v[k - 1].ts + th->recvs.v[k - 1].dur_ns > t ? k - 1 : k);
		if (th->first_ts < t)
			th->first_ts = t;
	}
}

void dl_lin_totals_add(struct dl_lin_totals *t, const struct dl_step_lineage *s, uint32_t pid)
{
	uint64_t window;
	uint32_t k, tid;

	t->wait_ns += s->wait_ns;
	if (!s->woken || s->waker_ctx != DL_WAKE_TASK) {
		t->other_wait_ns += s->wait_ns;
		if (s->woken)
			t->irq_wait_ns += s->wait_ns;
		return;
	}
	t->other_wait_ns += s->wait_ns - s->woken_wait_ns;
	tid = s->waker_pid == pid ? s->waker_tid : 0;
	for (k = 0; k < t->nwakers && (t->wakers[k].pid != s->waker_pid || t->wakers[k].tid != tid); k++)
		;
	if (k == t->nwakers) {
		if (k == DL_LIN_WAKERS) {
			t->other_wait_ns += s->woken_wait_ns;
			return;
		}
		t->wakers[t->nwakers].pid = s->waker_pid;
		t->wakers[t->nwakers++].tid = tid;
	}
	t->wakers[k].wait_ns += s->woken_wait_ns;
	t->wakers[k].steps++;
	if (!s->producer)
		return;
	/* A window from the first of a producer kept, not from a hand-off, is not one batch's. */
	if (s->after_handoff)
		t->wakers[k].window_ns[t->wakers[k].windows++ % DL_LIN_WINDOWS] =
			s->oncpu_ns + s->io_wait_ns + s->runq_ns + s->other_wait_ns;
	t->producers++;
	/*
	 * What the producer's window went to, weighed by the wait of the consumer's it ended: a
	 * thread that ended a short wait (another of the consumer's threads handing over the GIL)
	 * can have a window as long as its sleep, which counted whole would outweigh the batches.
	 */
	window = s->oncpu_ns + s->io_wait_ns + s->runq_ns + s->other_wait_ns;
	if (window) {
		double f = (double)s->woken_wait_ns / (double)window;

		t->oncpu_ns += (uint64_t)((double)s->oncpu_ns * f);
		t->io_wait_ns += (uint64_t)((double)s->io_wait_ns * f);
		t->runq_ns += (uint64_t)((double)s->runq_ns * f);
		t->other_ns += (uint64_t)((double)s->other_wait_ns * f);
		/* The producer's blocked time in its receives: of other_ns (S), or io_wait_ns (D), the network's part. */
		t->net_wait_ns += (uint64_t)((double)s->net_wait_ns * f);
		t->disk_rate_weighed += (double)(s->disk_bytes + s->fault_bytes) * f;
	}
	t->read_bytes += s->read_bytes;
	t->disk_bytes += s->disk_bytes;
	t->fault_bytes += s->fault_bytes;
	t->net_bytes += s->net_bytes;
	t->net_recvs += s->net_recvs;
	for (uint32_t i = 0; i < s->nendpoints; i++) {
		const struct dl_lin_endpoint *e = &s->endpoints[i];
		uint32_t j;

		for (j = 0; j < t->nendpoints && strcmp(t->endpoints[j].name, e->name); j++)
			;
		if (j == t->nendpoints) {
			if (j == DL_LIN_ENDPOINTS) {
				t->endpoints_more_wait_ns += e->wait_ns;
				continue;
			}
			t->nendpoints++;
			snprintf(t->endpoints[j].name, sizeof(t->endpoints[j].name), "%s", e->name);
		}
		t->endpoints[j].wait_ns += e->wait_ns;
		t->endpoints[j].bytes += e->bytes;
		t->endpoints[j].recvs += e->recvs;
	}
}

void dl_lin_totals_sort(struct dl_lin_totals *t)
{
	for (uint32_t i = 1; i < t->nwakers; i++)
		for (uint32_t k = i; k > 0 && t->wakers[k].wait_ns > t->wakers[k - 1].wait_ns; k--) {
			__typeof__(t->wakers[0]) x = t->wakers[k];

			t->wakers[k] = t->wakers[k - 1];
			t->wakers[k - 1] = x;
		}
}
