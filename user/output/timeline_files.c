// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/files.h"
#include "output/timeline_files.h"
#include "util.h"

struct tproc_files {
	uint32_t pid;
	struct dl_proc_files f;
};

/*
 * A thread's last reads and its last disk requests, to draw the path of a
 * batch's bytes: request -> the read that waited for it -> the hand-off.
 */
#define IO_RECENT 16

struct io_span {
	uint64_t ts, end;
	const struct dl_ttrack *lane;   /* a request's lane; NULL for a read */
	bool linked;                    /* a request already drawn into its read */
};

/* A wake-up the thread made, with its last read before it: a hand-off and where the batch's bytes came in. */
struct io_wake {
	uint64_t ts;
	struct io_span read;
};

struct io_thread {
	uint64_t key;                   /* pid << 32 | tid */
	struct io_span reads[IO_RECENT], bios[IO_RECENT];
	struct io_wake wakes[IO_RECENT];
	unsigned nreads, nbios, nwakes; /* total pushed; ring index = n % IO_RECENT */
};

struct dl_tfiles {
	DL_VEC(struct tproc_files *) procs;   /* pointers: a fork copies from one into another that may grow the vector */
	struct dl_u64map by_pid;
	DL_VEC(struct io_thread) io;
	struct dl_u64map io_of;                /* pid << 32 | tid -> index in io */
};

struct dl_tfiles *dl_tfiles_new(void)
{
	return dl_xcalloc(1, sizeof(struct dl_tfiles));
}

static struct dl_proc_files *files_of(struct dl_tfiles *t, uint32_t pid, bool create)
{
	struct tproc_files *p;
	uint64_t i;

	if (dl_u64map_get(&t->by_pid, pid, &i))
		return &t->procs.v[i]->f;
	if (!create)
		return NULL;
	p = dl_xcalloc(1, sizeof(*p));
	p->pid = pid;
	dl_u64map_put(&t->by_pid, pid, t->procs.n);
	*dl_vec_push(&t->procs) = p;
	return &p->f;
}

void dl_tfiles_note(struct dl_tfiles *t, const struct dl_hdr *h)
{
	switch (h->kind) {
	case DL_EV_FILE_OPEN:
		if (h->size >= sizeof(struct dl_file_open_ev))
			dl_files_open(files_of(t, h->tgid, true), (const void *)h);
		break;
	case DL_EV_FILE_CLOSE:
		if (h->size >= sizeof(struct dl_file_close_ev))
			dl_files_close(files_of(t, h->tgid, true), (const void *)h);
		break;
	case DL_EV_PROC: {
		const struct dl_proc_ev *e = (const void *)h;
		struct dl_proc_files *child, *parent;

		if (h->size < offsetof(struct dl_proc_ev, flags) || e->what != DL_PROC_FORK || e->ppid == h->tgid)
			break;
		/* Each table is allocated apart: making the child's cannot move the parent's. */
		if ((parent = files_of(t, e->ppid, false)) && (child = files_of(t, h->tgid, true)))
			dl_files_fork(child, parent);
		break;
	}
	default:
		break;
	}
}

const char *dl_tfiles_path(struct dl_tfiles *t, const struct dl_file_read_ev *e)
{
	struct dl_proc_files *f = files_of(t, e->h.tgid, false);
	uint64_t i;

	if (!f || !dl_u64map_get(&f->fds, (uint32_t)e->fd, &i) || !i || i > f->files.n)
		return NULL;
	return f->files.v[i - 1].path;
}

static uint64_t io_key(pid_t pid, pid_t tid)
{
	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
}

static struct io_thread *io_of(struct dl_tfiles *f, pid_t pid, pid_t tid, bool create)
{
	struct io_thread *io;
	uint64_t i;

	if (dl_u64map_get(&f->io_of, io_key(pid, tid), &i))
		return &f->io.v[i];
	if (!create)
		return NULL;
	dl_u64map_put(&f->io_of, io_key(pid, tid), f->io.n);
	io = memset(dl_vec_push(&f->io), 0, sizeof(struct io_thread));
	io->key = io_key(pid, tid);
	return io;
}

void dl_tfiles_thread_exit(struct dl_tfiles *f, pid_t pid, pid_t tid)
{
	uint64_t i;

	if (!dl_u64map_get(&f->io_of, io_key(pid, tid), &i))
		return;
	dl_u64map_del(&f->io_of, io_key(pid, tid));
	if (i != f->io.n - 1) {
		f->io.v[i] = f->io.v[f->io.n - 1];
		dl_u64map_put(&f->io_of, f->io.v[i].key, i);
	}
	f->io.n--;
}

/* A request drawn from its lane into the read slice that waited for it. */
static void link_bio(struct dl_tcanvas *cv, const struct dl_ttrack *reader, struct io_span *bio,
		     const struct io_span *rd)
{
	uint64_t flow, at = bio->end < rd->end ? bio->end : rd->end;

	if (bio->linked || bio->ts < rd->ts || bio->ts > rd->end)
		return;
	bio->linked = true;
	flow = dl_tcanvas_flow(cv);
	cv->out->flow_mark(cv->out, bio->lane, bio->ts, "disk request", flow, 0);
	cv->out->flow_mark(cv->out, reader, at > rd->ts ? at : rd->ts, "disk request", flow, 1);
}

void dl_tfiles_bio(struct dl_tcanvas *cv, struct dl_tfiles *f, pid_t pid, pid_t tid, uint64_t ts,
		   uint64_t end, const struct dl_ttrack *lane)
{
	struct io_thread *io = io_of(f, pid, tid, true);
	const struct dl_ttrack *reader = dl_tcanvas_thread(cv, pid, tid);
	struct io_span *b = &io->bios[io->nbios++ % IO_RECENT];

	*b = (struct io_span){ .ts = ts, .end = end, .lane = lane };
	/* Records come in the order the ring buffer took them: a completion before its read's return, as a rule. */
	for (unsigned i = io->nreads > IO_RECENT ? io->nreads - IO_RECENT : 0; reader && i < io->nreads; i++)
		link_bio(cv, reader, b, &io->reads[i % IO_RECENT]);
}

void dl_tfiles_read(struct dl_tcanvas *cv, struct dl_tfiles *f, pid_t pid, pid_t tid, uint64_t ts,
		    uint64_t end)
{
	struct io_thread *io = io_of(f, pid, tid, true);
	const struct dl_ttrack *reader = dl_tcanvas_thread(cv, pid, tid);
	struct io_span *rd = &io->reads[io->nreads++ % IO_RECENT];

	*rd = (struct io_span){ .ts = ts, .end = end };
	for (unsigned i = io->nbios > IO_RECENT ? io->nbios - IO_RECENT : 0; reader && i < io->nbios; i++)
		link_bio(cv, reader, &io->bios[i % IO_RECENT], rd);
}

/*
 * Steps are written after they close, by when a producer has read much of its
 * next batch: its last read before a hand-off is kept at the wake-up itself.
 */
void dl_tfiles_wake(struct dl_tfiles *f, pid_t pid, pid_t tid, uint64_t ts)
{
	struct io_thread *io = io_of(f, pid, tid, false);
	const struct io_span *last = NULL;

	for (unsigned i = io && io->nreads > IO_RECENT ? io->nreads - IO_RECENT : 0; io && i < io->nreads; i++) {
		const struct io_span *r = &io->reads[i % IO_RECENT];

		if (r->end <= ts && (!last || r->end > last->end))
			last = r;
	}
	if (last)
		io->wakes[io->nwakes++ % IO_RECENT] = (struct io_wake){ .ts = ts, .read = *last };
}

/* The producer's last read before its hand-off at by, when it lies in its window (since, by]. */
static const struct io_span *last_read(struct dl_tfiles *f, pid_t pid, pid_t tid, uint64_t since, uint64_t by)
{
	const struct io_thread *io = io_of(f, pid, tid, false);

	for (unsigned i = io ? io->nwakes : 0; i > 0 && i + IO_RECENT > io->nwakes; i--) {
		const struct io_wake *w = &io->wakes[(i - 1) % IO_RECENT];

		if (w->ts == by)
			return w->read.ts >= since ? &w->read : NULL;
	}
	return NULL;
}

/*
 * One hand-off as a flow from the waker's track to the woken task's, begun
 * at the producer's last read in its window when it read (the producer: the
 * thread that made the batch, which a feeder thread hands on). Returns the
 * flow, left open on the woken side when open_end (the caller continues it),
 * or 0 when a track is unknown.
 */
static uint64_t handoff(struct dl_tcanvas *cv, struct dl_tfiles *f, pid_t from_pid, pid_t from_tid, pid_t maker_tid,
			pid_t to_pid, pid_t to_tid, uint64_t since, uint64_t ts, bool open_end)
{
	const struct dl_ttrack *from = dl_tcanvas_thread(cv, from_pid, from_tid);
	const struct dl_ttrack *maker = dl_tcanvas_thread(cv, from_pid, maker_tid);
	const struct dl_ttrack *to = dl_tcanvas_thread(cv, to_pid, to_tid);
	const struct io_span *rd;
	uint64_t flow;

	if (!from || !to || from == to)
		return 0;
	flow = dl_tcanvas_flow(cv);
	rd = maker ? last_read(f, from_pid, maker_tid, since, ts) : NULL;
	if (rd)
		cv->out->flow_mark(cv->out, maker, rd->ts + (rd->end - rd->ts) / 2, "batch read", flow, 0);
	cv->out->flow_mark(cv->out, from, ts, "hand-off", flow, 0);
	if (!open_end)
		cv->out->flow_mark(cv->out, to, ts, "hand-off", flow, 1);
	return flow;
}

uint64_t dl_tfiles_step_flows(struct dl_tcanvas *cv, struct dl_tfiles *f, const struct dl_step *s)
{
	const struct dl_step_lineage *in = &s->input;
	pid_t pid = (pid_t)in->waker_pid, tid = (pid_t)(in->producer ? in->producer_tid : in->waker_tid);
	uint64_t flow;

	if (!in->woken || in->waker_ctx != DL_WAKE_TASK || !in->waker_tid)
		return 0;
	flow = handoff(cv, f, pid, (pid_t)in->waker_tid, tid, s->pid, s->tid, in->since_ns, in->handoff_ns, true);
	/* Each hop handed on to the thread that made the previous one's batch. */
	for (uint32_t i = 0; i < in->nchain; i++) {
		const struct dl_lin_hop *h = &in->chain[i];

		handoff(cv, f, (pid_t)h->pid, (pid_t)h->waker_tid, (pid_t)h->tid, pid, tid, h->since_ns, h->handoff_ns, false);
		pid = (pid_t)h->pid;
		tid = (pid_t)h->tid;
	}
	return flow;
}

void dl_tfiles_free(struct dl_tfiles *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->procs.n; i++) {
		dl_files_free(&t->procs.v[i]->f);
		free(t->procs.v[i]);
	}
	dl_vec_free(&t->procs);
	dl_u64map_free(&t->by_pid);
	dl_vec_free(&t->io);
	dl_u64map_free(&t->io_of);
	free(t);
}
