// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Record stream + steps → tracks, slices, counters and flows, handed to a
 * writer (timeline_writer.h). State is per thread and per lane, never per event:
 * memory does not grow with the trace's length.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "records/cuda_api.h"
#include "log.h"
#include "records/stream.h"
#include "analysis/callsites.h"
#include "analysis/net.h"
#include "output/timeline.h"
#include "records/clock.h"
#include "output/timeline_writer.h"
#include "output/timeline_args.h"
#include "output/timeline_calls.h"
#include "output/timeline_files.h"
#include "output/timeline_gpu.h"
#include "outfile.h"
#include "util.h"

#define TREE_PID 0x3fffffff      /* JSON pseudo process of tree-wide tracks (lanes, counters) */
#define PSEUDO_TID DL_TPSEUDO_TID   /* JSON tids of per-thread state tracks: PSEUDO_TID + tid */
#define PID_LIMIT (1u << 22)      /* the kernel's PID_MAX_LIMIT: no tid reaches it */
#define MAX_LANES 128
#define BIN_NS 10000000ull       /* counter resolution: 10 ms */
#define NBINS 512
#define BIN_LAG 50               /* bins kept open behind the newest end time (0.5 s, inside PF_WINDOW_NS) */

enum { C_H2D, C_DISK, C_RUNQ, NCOUNTERS };

struct tthread {
	pid_t tid, pid;
	struct dl_ttrack track, state;
	char name[48], state_name[48];
	struct dl_tcalls calls;      /* recent copies and syncs, and a batch's flow awaiting them */
	uint64_t state_end;          /* end of the last state slice: states never overlap */
	bool keep;                   /* made CUDA calls or hit a step marker: steps may be drawn on it */
};

struct tproc {
	pid_t pid;
	struct dl_ttrack track, steps;
	char name[40];
	bool named;                  /* comm known */
	bool steps_declared;
	bool cuda;                   /* a CUDA runtime attached (DL_EV_LIB): only then its steps get GPU tracks */
};

struct lane {
	struct dl_ttrack track;
	char name[24];
	uint64_t last_end;
};

struct dl_timeline {
	struct dl_tcanvas cv;        /* its writer, ids and counts, shared with the parts below */
	enum dl_timeline_format fmt;
	struct dl_outfile own;       /* opened by dl_timeline_open */
	DL_VEC(struct tproc) procs;
	struct dl_u64map proc_of;    /* pid -> index in procs */
	DL_VEC(struct tthread) threads;
	struct dl_u64map thread_of;  /* pid << 32 | tid -> index in threads */
	struct dl_ttrack tree, counters[NCOUNTERS];
	bool tree_declared;
	struct dl_tgpu *gpu;          /* the inferred device tracks */
	struct dl_tfiles *files;      /* the fd tables, for read slices' paths */
	struct lane lanes[MAX_LANES];
	int nlanes;
	double bins[NCOUNTERS][NBINS];
	double last_value[NCOUNTERS];
	uint64_t bin_base;           /* first bin not yet written */
	bool bins_started;
	struct dl_timeline_stats st;   /* the canvas's counts join them at the end */
	int err;
};

static const char *const state_names[] = {
	[DL_ST_RUNNING] = "running", [DL_ST_RUNQ] = "runnable",
	[DL_ST_SLEEP] = "blocked (S)", [DL_ST_DISK] = "blocked (D)",
};
static const char *const counter_names[NCOUNTERS] = {
	"H2D copy MB/s", "disk MB/s", "run-queue length (traced tree)",
};

static void declare(struct dl_timeline *t, struct dl_ttrack *tr)
{
	dl_tcanvas_track(&t->cv, tr);
}

/* Describes a process or thread track again; its name lives beside it, which growth of the table moves. */
static void redeclare(struct dl_timeline *t, struct dl_ttrack *tr, const char *name)
{
	tr->name = name;
	declare(t, tr);
}

static struct dl_ttrack *tree_track(struct dl_timeline *t)
{
	if (!t->tree_declared) {
		t->tree = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(&t->cv), .kind = DL_TT_PROCESS, .pid = TREE_PID,
					     .tid = TREE_PID, .name = "dlbpf: traced tree" };
		declare(t, &t->tree);
		t->tree_declared = true;
	}
	return &t->tree;
}

static struct tproc *find_proc(struct dl_timeline *t, pid_t pid)
{
	uint64_t i;

	return dl_u64map_get(&t->proc_of, (uint32_t)pid, &i) ? &t->procs.v[i] : NULL;
}

/* An id as its host gave it: a rank's (dl_timeline_rank_id) without its range. */
static pid_t own_id(pid_t id)
{
	return (pid_t)((uint32_t)id & (PID_LIMIT - 1));
}

static void name_proc(struct tproc *p, const char *comm)
{
	char rank[16] = "";

	if ((uint32_t)p->pid >= PID_LIMIT)
		snprintf(rank, sizeof(rank), "rank %u: ", ((uint32_t)p->pid >> DL_TIMELINE_RANK_SHIFT) - 1);
	if (comm && comm[0]) {
		snprintf(p->name, sizeof(p->name), "%s%.*s %d", rank, DL_COMM_LEN, comm, own_id(p->pid));
		p->named = true;
	} else {
		snprintf(p->name, sizeof(p->name), "%spid %d", rank, own_id(p->pid));
	}
}

static struct tproc *proc_of(struct dl_timeline *t, pid_t pid, const char *comm)
{
	struct tproc *p = find_proc(t, pid);

	if (p) {
		if (comm && comm[0] && (!p->named || strncmp(p->name, comm, strnlen(comm, DL_COMM_LEN)))) {
			name_proc(p, comm);   /* exec or late-learned name: describe the track again */
			redeclare(t, &p->track, p->name);
		}
		return p;
	}
	dl_u64map_put(&t->proc_of, (uint32_t)pid, t->procs.n);
	p = dl_vec_push(&t->procs);
	p->pid = pid;
	name_proc(p, comm);
	p->track = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(&t->cv), .kind = DL_TT_PROCESS, .pid = pid, .tid = pid,
				      .name = p->name };
	declare(t, &p->track);
	return p;
}

static struct tthread *thread_of(struct dl_timeline *t, pid_t pid, pid_t tid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid, i;
	struct tthread *th;
	struct tproc *p;

	if (dl_u64map_get(&t->thread_of, key, &i))
		return &t->threads.v[i];
	p = proc_of(t, pid, NULL);
	dl_u64map_put(&t->thread_of, key, t->threads.n);
	th = dl_vec_push(&t->threads);
	if (t->threads.n > t->st.threads_max)
		t->st.threads_max = t->threads.n;
	th->tid = tid;
	th->pid = pid;
	snprintf(th->name, sizeof(th->name), "%s %d", tid == pid ? "main" : "thread", own_id(tid));
	if (tid == pid && p->named)
		snprintf(th->name, sizeof(th->name), "%s", p->name);
	snprintf(th->state_name, sizeof(th->state_name), "state of %d", own_id(tid));
	th->track = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(&t->cv), .parent = p->track.uuid, .kind = DL_TT_THREAD,
				       .pid = pid, .tid = tid, .name = th->name };
	declare(t, &th->track);
	/*
	 * JSON pseudo tid for the state track, above any real tid (pid_max is at most 2^22). Only a
	 * corrupt record has a tid past that: kept to 22 bits, it cannot overflow into a negative id.
	 */
	th->state = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(&t->cv), .parent = p->track.uuid, .kind = DL_TT_PLAIN,
				       .pid = pid, .tid = PSEUDO_TID + (int)((uint32_t)tid & (PID_LIMIT - 1)),
				       .name = th->state_name };
	declare(t, &th->state);
	return th;
}

/*
 * A thread that exited is forgotten, unless steps may still be drawn on it
 * (they are written late): short-lived threads would otherwise hold their
 * state to the end of the trace, and a thread id given out again would
 * continue the dead thread's track. The last entry moves into its place.
 */
static void forget_thread(struct dl_timeline *t, pid_t pid, pid_t tid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid, i;
	struct tthread *th, *last;

	if (!dl_u64map_get(&t->thread_of, key, &i) || t->threads.v[i].keep)
		return;
	th = &t->threads.v[i];
	dl_tcalls_free(&th->calls);
	dl_u64map_del(&t->thread_of, key);
	last = &t->threads.v[--t->threads.n];
	if (th != last) {
		*th = *last;
		/* Track names live beside the tracks: they moved with them. */
		th->track.name = th->name;
		th->state.name = th->state_name;
		dl_u64map_put(&t->thread_of, (uint64_t)(uint32_t)th->pid << 32 | (uint32_t)th->tid, i);
	}
}

static void emit_slice(struct dl_timeline *t, const struct dl_tslice *s)
{
	dl_tcanvas_slice(&t->cv, s);
}

/* --- counters: per 10 ms bins of the traced tree, written once they can no longer change --- */

static void flush_bin(struct dl_timeline *t)
{
	size_t b = t->bin_base % NBINS;

	for (int c = 0; c < NCOUNTERS; c++) {
		double v = t->bins[c][b];

		/* bytes per bin → MB/s; runnable ns per bin → mean number of runnable threads */
		v = c == C_RUNQ ? v / (double)BIN_NS : v / 1e6 / ((double)BIN_NS / 1e9);
		t->bins[c][b] = 0;
		if (v == t->last_value[c])
			continue;
		if (!t->counters[c].uuid) {
			uint64_t parent = tree_track(t)->uuid;

			t->counters[c] = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(&t->cv), .parent = parent,
							    .kind = DL_TT_COUNTER, .pid = TREE_PID, .tid = TREE_PID,
							    .name = counter_names[c] };
			declare(t, &t->counters[c]);
		}
		dl_tcanvas_counter(&t->cv, &t->counters[c], t->bin_base * BIN_NS, v);
		t->last_value[c] = v;
	}
	t->bin_base++;
}

/* Spreads amount over [s, e) into the bins, writing bins that fall BIN_LAG behind e. */
static void bin_add(struct dl_timeline *t, int c, uint64_t s, uint64_t e, double amount)
{
	uint64_t first, last;

	if (!t->bins_started) {
		t->bin_base = s / BIN_NS;
		t->bins_started = true;
	}
	last = e / BIN_NS;
	/*
	 * A far jump writes out the NBINS bins held (and one more, zero, so each
	 * series has said it fell to 0); every bin after those is zero and writes
	 * nothing, so the base jumps over them. A corrupt end years away costs
	 * NBINS + 1 flushes, not one per 10 ms of the gap.
	 */
	for (int k = 0; k <= NBINS && last - dl_min_u64(last, t->bin_base + BIN_LAG) >= NBINS - BIN_LAG; k++)
		flush_bin(t);
	if (last - dl_min_u64(last, t->bin_base + BIN_LAG) >= NBINS - BIN_LAG)
		t->bin_base = last - BIN_LAG;
	while (t->bin_base + BIN_LAG < last)
		flush_bin(t);
	if (e <= s)
		e = s + 1;
	first = s / BIN_NS < t->bin_base ? t->bin_base : s / BIN_NS;
	for (uint64_t b = first; b <= last && b < t->bin_base + NBINS; b++) {
		uint64_t lo = b * BIN_NS > s ? b * BIN_NS : s, hi = (b + 1) * BIN_NS < e ? (b + 1) * BIN_NS : e;

		if (hi > lo)
			t->bins[c][b % NBINS] += amount * (double)(hi - lo) / (double)(e - s);
	}
}

/* --- records --- */

static void add_cuda(struct dl_timeline *t, const struct dl_call *c)
{
	struct dl_targ a[DL_TMAX_ARGS];
	struct dl_call_arg_text text;
	struct tthread *th;
	int n;

	if (!c)
		return;
	th = thread_of(t, (pid_t)c->tgid, (pid_t)c->tid);
	th->keep = true;
	if ((c->api->cls == DL_CLS_COPY || c->api->cls == DL_CLS_MEMSET) && c->dir == DL_DIR_H2D && c->depth == 0) {
		bin_add(t, C_H2D, c->ts, c->ts + c->dur_ns, (double)c->bytes);
		dl_tcalls_copy(&th->calls, c->ts, c->dur_ns);
	}
	if (c->api->cls == DL_CLS_LAUNCH && c->depth == 0)
		dl_tcalls_launch(&th->calls, t->cv.out, &th->track, c->ts, c->entry_only ? 0 : c->dur_ns);
	if (c->api->cls == DL_CLS_SYNC && c->depth == 0)
		dl_tcalls_sync(&th->calls, c->ts, c->dur_ns);
	n = dl_call_slice_args(c, a, &text);
	emit_slice(t, &(struct dl_tslice){ .track = &th->track, .ts = c->ts, .dur = c->entry_only ? 0 : c->dur_ns,
					   .cat = "cuda", .name = c->api->name, .args = a, .nargs = n });
}

static const struct dl_ttrack *known_thread_track(void *tl, pid_t pid, pid_t tid);

static struct lane *lane_for(struct dl_timeline *t, uint64_t s)
{
	for (int i = 0; i < t->nlanes; i++)
		if (t->lanes[i].last_end <= s)
			return &t->lanes[i];
	if (t->nlanes < MAX_LANES) {
		struct lane *l = &t->lanes[t->nlanes];
		uint64_t parent = tree_track(t)->uuid;

		snprintf(l->name, sizeof(l->name), "disk I/O lane %d", t->nlanes);
		l->track = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(&t->cv), .parent = parent,
					      .kind = DL_TT_PLAIN, .pid = TREE_PID, .tid = t->nlanes + 1, .name = l->name };
		declare(t, &l->track);
		t->nlanes++;
		return l;
	}
	return NULL;   /* more concurrent requests than lanes: none can take it without overlapping */
}

static void add_bio(struct dl_timeline *t, const struct dl_bio_ev *ev)
{
	bool async = ev->flags & DL_BIO_ASYNC, write = ev->flags & DL_BIO_WRITE;
	struct dl_targ a[DL_TMAX_ARGS];
	uint64_t e = ev->h.ts + ev->dur_ns;
	char dev[24];
	struct lane *l;
	int n = 0;

	if (ev->flags & DL_BIO_UNSEEN)
		return;   /* no completion, so no duration to draw */
	bin_add(t, C_DISK, ev->h.ts, e, (double)ev->bytes);
	if (ev->flags & DL_BIO_PARTIAL)
		return;   /* one slice per request, at its final completion */
	l = lane_for(t, ev->h.ts);
	if (!l) {
		t->st.lane_overflow++;
		return;
	}
	l->last_end = e > ev->h.ts ? e : ev->h.ts + 1;
	dl_targ_add(a, &n, "bytes", DL_TA_U64)->u = ev->bytes;
	dl_targ_add(a, &n, "sector", DL_TA_U64)->u = ev->sector;
	snprintf(dev, sizeof(dev), "%u:%u", ev->dev >> 20, ev->dev & 0xfffff);
	dl_targ_add(a, &n, "dev", DL_TA_STR)->s = dev;
	if (!async) {
		dl_targ_add(a, &n, "pid", DL_TA_U64)->u = ev->h.tgid;
		dl_targ_add(a, &n, "tid", DL_TA_U64)->u = ev->h.tid;
	}
	if (ev->flags & DL_BIO_ERROR)
		dl_targ_add(a, &n, "error", DL_TA_U64)->u = 1;
	emit_slice(t, &(struct dl_tslice){ .track = &l->track, .ts = ev->h.ts, .dur = ev->dur_ns, .cat = "io",
					   .name = async ? (write ? "write (async)" : "read (async)") : write ? "write" : "read",
					   .args = a, .nargs = n });
	if (!async && !write && ev->h.tid) {
		dl_tfiles_bio(&t->cv, t->files, (pid_t)ev->h.tgid, (pid_t)ev->h.tid, ev->h.ts, e, &l->track);
	}
}

static void add_sched(struct dl_timeline *t, const struct dl_sched_ev *ev)
{
	struct tthread *th = thread_of(t, (pid_t)ev->h.tgid, (pid_t)ev->h.tid);
	struct dl_targ a[2];
	int n = 0;

	uint64_t ts = ev->h.ts, end = ev->h.ts + ev->dur_ns;

	if (ev->state < DL_ST_RUNNING || ev->state > DL_ST_DISK)
		return;
	/* A thread's intervals close in order; should one overlap the last, keep the track strictly nested. */
	if (ts < th->state_end) {
		t->st.clipped++;
		if (end <= th->state_end)
			return;
		ts = th->state_end;
	}
	th->state_end = end;
	if (ev->state == DL_ST_RUNQ)
		bin_add(t, C_RUNQ, ev->h.ts, ev->h.ts + ev->dur_ns, (double)ev->dur_ns);
	if (ev->waker_tid)
		dl_targ_add(a, &n, "woken by", DL_TA_U64)->u = ev->waker_tid;
	emit_slice(t, &(struct dl_tslice){ .track = &th->state, .ts = ts, .dur = end - ts, .cat = "sched",
					   .name = state_names[ev->state], .args = a, .nargs = n });
}

static void add_proc(struct dl_timeline *t, const struct dl_proc_ev *ev)
{
	char comm[DL_COMM_LEN + 1];

	memcpy(comm, ev->comm, DL_COMM_LEN);
	comm[DL_COMM_LEN] = '\0';
	if (ev->what == DL_PROC_FORK || ev->what == DL_PROC_EXEC)
		proc_of(t, (pid_t)ev->h.tgid, comm);
	else if (ev->what == DL_PROC_THREAD) {
		struct tthread *th = thread_of(t, (pid_t)ev->h.tgid, (pid_t)ev->h.tid);

		/* a new thread's own name (data-loader threads often have one) */
		if (comm[0] && th->tid != th->pid) {
			snprintf(th->name, sizeof(th->name), "%s %d", comm, own_id(th->tid));
			redeclare(t, &th->track, th->name);
		}
	} else if (ev->what == DL_PROC_EXIT) {
		forget_thread(t, (pid_t)ev->h.tgid, (pid_t)ev->h.tid);
		dl_tfiles_thread_exit(t->files, (pid_t)ev->h.tgid, (pid_t)ev->h.tid);
	}
}

/* The first write error stops the trace, said at once: tracing may go on for hours. */
static void check_write(struct dl_timeline *t)
{
	if (t->err || !t->cv.out->f || !ferror(t->cv.out->f))
		return;
	t->err = errno ? -errno : -EIO;
	dl_err("writing the trace failed: %s; the rest of the trace is left out", strerror(-t->err));
}


/* A read call on its thread's track, named by its file: what a loader spent on which file. */
static void add_read(struct dl_timeline *t, const struct dl_file_read_ev *e)
{
	struct dl_targ a[3] = { { .name = "bytes", .type = DL_TA_U64, .u = (uint64_t)e->ret },
				{ .name = "disk bytes", .type = DL_TA_U64, .u = e->disk_bytes } };
	const char *path = e->h.size >= sizeof(*e) && e->ret >= 0 ? dl_tfiles_path(t->files, e) : NULL;
	if (!path)
		return;
	a[2] = (struct dl_targ){ .name = "file", .type = DL_TA_STR, .s = path };
	emit_slice(t, &(struct dl_tslice){ .track = &thread_of(t, (pid_t)e->h.tgid, (pid_t)e->h.tid)->track,
					   .ts = e->h.ts, .dur = e->dur_ns, .cat = "file", .name = "read", .args = a,
					   .nargs = 3 });
	dl_tfiles_read(&t->cv, t->files, (pid_t)e->h.tgid, (pid_t)e->h.tid, e->h.ts, e->h.ts + e->dur_ns);
}

/* A socket receive on its thread's track, named by its endpoint: what a loader waited on which server. */
static void add_recv(struct dl_timeline *t, const struct dl_net_recv_ev *e)
{
	struct dl_net_endpoint ep;
	struct dl_targ a[2] = { { .name = "bytes", .type = DL_TA_U64, .u = (uint64_t)e->ret } };

	if (e->ret < 0 || (e->flags & DL_NET_PEEK))
		return;
	dl_net_endpoint_of(e, &ep);
	a[1] = (struct dl_targ){ .name = "endpoint", .type = DL_TA_STR, .s = ep.name };
	emit_slice(t, &(struct dl_tslice){ .track = &thread_of(t, (pid_t)e->h.tgid, (pid_t)e->h.tid)->track,
					   .ts = e->h.ts, .dur = e->dur_ns, .cat = "net", .name = "recv", .args = a,
					   .nargs = 2 });
}

int dl_timeline_sink(void *trace, const struct dl_rec *r)
{
	struct dl_timeline *t = trace;
	const struct dl_hdr *h = r->h;
	const void *rec = h;

	if (t->err)
		return t->err;
	t->st.records++;
	switch (h->kind) {
	case DL_EV_CUDA:
		add_cuda(t, r->call);
		break;
	case DL_EV_BIO:
		add_bio(t, rec);
		break;
	case DL_EV_SCHED:
		add_sched(t, rec);
		break;
	case DL_EV_PROC:
		dl_tfiles_note(t->files, h);
		add_proc(t, rec);
		break;
	case DL_EV_LIB:
		/* Probed or not (a runtime mapped but unprobed still drives a GPU): as the reports count it. */
		proc_of(t, (pid_t)h->tgid, NULL)->cuda = true;
		break;
	case DL_EV_MARK:
		thread_of(t, (pid_t)h->tgid, (pid_t)h->tid)->keep = true;
		break;
	case DL_EV_FILE_OPEN:
	case DL_EV_FILE_CLOSE:
		dl_tfiles_note(t->files, h);
		break;
	case DL_EV_FILE_READ:
		add_read(t, rec);
		break;
	case DL_EV_NET_RECV:
		add_recv(t, rec);
		break;
	case DL_EV_WAKE: {
		const struct dl_wake_ev *e = rec;

		if (h->size >= sizeof(*e) && e->ctx == DL_WAKE_TASK)
			dl_tfiles_wake(t->files, (pid_t)e->waker_tgid, (pid_t)e->waker_tid, h->ts);
		break;
	}
	case DL_EV_PROCINFO: {
		const struct dl_procinfo_ev *e = rec;
		char comm[DL_COMM_LEN + 1];

		memcpy(comm, e->comm, DL_COMM_LEN);
		comm[DL_COMM_LEN] = '\0';
		proc_of(t, (pid_t)h->tgid, comm);
		break;
	}
	default:
		break;
	}
	check_write(t);
	return t->err;
}

/* A thread forgotten (exited) is not brought back for a flow. */
static const struct dl_ttrack *known_thread_track(void *tl, pid_t pid, pid_t tid)
{
	struct dl_timeline *t = tl;
	uint64_t i;

	return dl_u64map_get(&t->thread_of, (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid, &i) ? &t->threads.v[i].track
												: NULL;
}

static void write_step(struct dl_timeline *t, const struct dl_step *s)
{
	struct dl_targ a[DL_TMAX_ARGS];
	const struct dl_tcall *copy, *sync;
	struct tthread *th;
	struct tproc *p;
	uint64_t end = s->start_ns + s->dur_ns, flow = 0, batch;
	int n = 0;

	if (t->err)
		return;
	th = thread_of(t, s->pid, s->tid);
	p = find_proc(t, s->pid);
	if (!p->steps_declared) {
		p->steps = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(&t->cv), .parent = p->track.uuid, .kind = DL_TT_PLAIN,
					      .pid = s->pid, .tid = PSEUDO_TID - 1, .name = "steps" };
		declare(t, &p->steps);
		p->steps_declared = true;
	}
	dl_tcalls_in(&th->calls, s->start_ns, end, &copy, &sync);
	if (copy || sync) {
		flow = dl_tcanvas_flow(&t->cv);
	}
	dl_targ_add(a, &n, "index", DL_TA_U64)->u = s->index;
	dl_targ_add(a, &n, "share", DL_TA_DBL)->d = s->share;
	for (int c = 0; c < DL_CAT_COUNT; c++)
		if (s->cat_ns[c])
			dl_targ_add(a, &n, dl_cat_name((enum dl_cat)c), DL_TA_U64)->u = s->cat_ns[c];
	if (s->h2d_bytes)
		dl_targ_add(a, &n, "h2d_bytes", DL_TA_U64)->u = s->h2d_bytes;
	if (s->io_read_bytes)
		dl_targ_add(a, &n, "io_read_bytes", DL_TA_U64)->u = s->io_read_bytes;
	if (s->kernels)
		dl_targ_add(a, &n, "kernels", DL_TA_U64)->u = s->kernels;
	if (s->wakeup_runq_ns)
		dl_targ_add(a, &n, "wakeup_runq", DL_TA_U64)->u = s->wakeup_runq_ns;
	emit_slice(t, &(struct dl_tslice){ .track = &p->steps, .ts = s->start_ns, .dur = s->dur_ns, .cat = "step",
					   .name = (unsigned)s->verdict < DL_V_COUNT ? dl_verdict_name(s->verdict) : "step",
					   .args = a, .nargs = n, .flow_out = flow });
	if (copy)
		t->cv.out->flow_mark(t->cv.out, &th->track, copy->ts + copy->dur / 2, "step h2d", flow, !sync);
	if (sync)
		t->cv.out->flow_mark(t->cv.out, &th->track, sync->ts + sync->dur / 2, "step sync", flow, 1);
	if (p->cuda)   /* a process that never loaded a CUDA runtime has no GPU to draw */
		dl_tgpu_step(t->gpu, &t->cv, &p->track, s);
	batch = dl_tfiles_step_flows(&t->cv, t->files, s);
	if (batch)
		dl_tcalls_batch(&th->calls, t->cv.out, &th->track, batch, s->input.handoff_ns);
	check_write(t);
}

/* The step stage (analysis/correlate.h): a step comes once the record that closed it has been written. */
void dl_timeline_step(void *trace, const struct dl_step *s)
{
	struct dl_timeline *t = trace;

	if (t->err)
		return;
	write_step(t, s);
}

/* --- life cycle --- */

int dl_timeline_format_parse(const char *name)
{
	if (!strcmp(name, "pftrace") || !strcmp(name, "perfetto") || !strcmp(name, "proto"))
		return DL_TIMELINE_PFTRACE;
	if (!strcmp(name, "json") || !strcmp(name, "chrome"))
		return DL_TIMELINE_JSON;
	return -1;
}

enum dl_timeline_format dl_timeline_format_of_path(const char *path)
{
	size_t n = strlen(path);

	return n >= 5 && !strcmp(path + n - 5, ".json") ? DL_TIMELINE_JSON : DL_TIMELINE_PFTRACE;
}

struct dl_timeline *dl_timeline_new(FILE *f, enum dl_timeline_format fmt)
{
	struct dl_timeline *t = dl_xcalloc(1, sizeof(*t));

	t->fmt = fmt;
	t->cv.thread_track = known_thread_track;
	t->cv.tl = t;
	t->gpu = dl_tgpu_new();
	t->files = dl_tfiles_new();
	t->cv.out = fmt == DL_TIMELINE_JSON ? dl_chrome_json_out(f)
				       : dl_perfetto_out(f, dl_clock_ns(CLOCK_MONOTONIC), dl_clock_ns(CLOCK_BOOTTIME),
							 dl_clock_ns(CLOCK_REALTIME));
	return t;
}

void dl_timeline_set_clocks(struct dl_timeline *t, uint64_t mono, uint64_t boot, uint64_t real)
{
	if (t->cv.out->clocks)
		t->cv.out->clocks(t->cv.out, mono, boot ? boot : mono, real);
}

int dl_timeline_finish(struct dl_timeline *t, struct dl_timeline_stats *stats)
{
	int err;

	if (!t)
		return -EINVAL;
	/* Batches whose copy or launch never came: their flows end where they got to. */
	for (size_t i = 0; i < t->threads.n; i++)
		dl_tcalls_close(&t->threads.v[i].calls, t->cv.out, &t->threads.v[i].track);
	/* The counters' last bins: each series ends with a sample at its last value change. */
	for (int i = 0; t->bins_started && i < NBINS; i++)
		flush_bin(t);
	err = t->cv.out->finish(t->cv.out);
	if (!err)
		err = t->err;
	t->st.tracks = t->cv.tracks;
	t->st.slices = t->cv.slices;
	t->st.counters = t->cv.counters;
	t->st.flows = t->cv.flows;
	t->st.events = t->cv.out->events;
	t->st.late = t->cv.out->late;
	if (t->cv.out->f) {
		long pos = ftell(t->cv.out->f);

		t->st.bytes = pos > 0 ? (uint64_t)pos : 0;
	}
	if (stats)
		*stats = t->st;
	t->cv.out->destroy(t->cv.out);
	dl_tgpu_free(t->gpu);
	dl_tfiles_free(t->files);
	dl_vec_free(&t->procs);
	dl_u64map_free(&t->proc_of);
	for (size_t i = 0; i < t->threads.n; i++)
		dl_tcalls_free(&t->threads.v[i].calls);
	dl_vec_free(&t->threads);
	dl_u64map_free(&t->thread_of);
	free(t);
	return err;
}

struct dl_timeline *dl_timeline_open(const char *path, enum dl_timeline_format fmt, int *err)
{
	struct dl_outfile o;
	struct dl_timeline *t;

	*err = dl_outfile_open(&o, path);
	if (*err)
		return NULL;
	t = dl_timeline_new(o.f, fmt);
	t->own = o;
	return t;
}

int dl_timeline_close(struct dl_timeline *t, struct dl_timeline_stats *stats)
{
	struct dl_outfile o = {};
	int err;

	if (t)
		o = t->own;
	err = dl_timeline_finish(t, stats);
	/* Incomplete, it is not put in place: an existing file of that name stays as it was. */
	if (err)
		dl_outfile_abort(&o);
	else
		err = dl_outfile_commit(&o);
	return err;
}

void dl_timeline_discard(struct dl_timeline *t)
{
	struct dl_outfile o = {};

	if (t)
		o = t->own;
	dl_timeline_finish(t, NULL);
	dl_outfile_abort(&o);
}
