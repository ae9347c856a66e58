// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdlib.h>
#include "analysis/files.h"
#include "output/timeline_files.h"
#include "util.h"

struct tproc_files {
	uint32_t pid;
	struct dl_proc_files f;
};

struct dl_tfiles {
	DL_VEC(struct tproc_files *) procs;   /* pointers: a fork copies from one into another that may grow the vector */
	struct dl_u64map by_pid;
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

static void handoff(const struct dl_tgpu_ctx *ctx, pid_t from_pid, pid_t from_tid, pid_t to_pid, pid_t to_tid,
		    uint64_t ts)
{
	const struct dl_ttrack *from = ctx->thread_track(ctx->tl, from_pid, from_tid);
	const struct dl_ttrack *to = ctx->thread_track(ctx->tl, to_pid, to_tid);
	uint64_t flow;

	if (!from || !to || from == to)
		return;
	flow = ++*ctx->next_flow;
	ctx->st->flows++;
	ctx->out->flow_mark(ctx->out, from, ts, "hand-off", flow, 0);
	ctx->out->flow_mark(ctx->out, to, ts, "hand-off", flow, 1);
}

void dl_tfiles_step_flows(const struct dl_tgpu_ctx *ctx, const struct dl_step *s)
{
	const struct dl_step_lineage *in = &s->input;
	pid_t pid = (pid_t)in->waker_pid, tid = (pid_t)in->waker_tid;

	if (!in->woken || in->waker_ctx != DL_WAKE_TASK || !tid)
		return;
	handoff(ctx, pid, tid, s->pid, s->tid, in->handoff_ns);
	for (uint32_t i = 0; i < in->nchain; i++) {
		const struct dl_lin_hop *h = &in->chain[i];

		handoff(ctx, (pid_t)h->pid, (pid_t)h->tid, pid, tid, h->handoff_ns);
		pid = (pid_t)h->pid;
		tid = (pid_t)h->tid;
	}
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
	free(t);
}
