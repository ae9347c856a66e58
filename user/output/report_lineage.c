// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <string.h>
#include "output/report_lineage.h"
#include "strsafe.h"

/*
 * The Python stack thread tid blocked in longest over a step (bpf/pylines.bpf.c
 * writes the waits of a millisecond or more), or NULL; *own: its frame in the
 * job's own code, the line a user acts on.
 */
static const struct dl_pystack_stat *step_wait_line(const struct dl_pylines *py, const struct dl_step *st,
						    uint32_t *own)
{
	const struct dl_pystack_stat *s = py ? dl_pylines_wait_in(py, (uint32_t)st->tid, st->start_ns,
								   st->start_ns + st->dur_ns) : NULL;

	if (!s || !s->n)
		return NULL;
	*own = dl_pystack_own_frame(s);
	return s;
}

/* A producer's or a hop's window: where its time went and what it read. */
static void window_json(struct dl_json *j, uint64_t oncpu, uint64_t io_wait, uint64_t runq, uint64_t other,
			uint64_t idle, uint64_t read_bytes, uint64_t reads, uint64_t disk_bytes, uint64_t fault_bytes)
{
	dl_json_ku64(j, "cpu_ns", oncpu);
	dl_json_ku64(j, "oncpu_ns", oncpu);
	dl_json_ku64(j, "io_wait_ns", io_wait);
	dl_json_ku64(j, "runq_ns", runq);
	dl_json_ku64(j, "other_wait_ns", other);
	dl_json_ku64(j, "idle_ns", idle);
	dl_json_ku64(j, "read_bytes", read_bytes);
	dl_json_ku64(j, "reads", reads);
	dl_json_ku64(j, "disk_bytes", disk_bytes);
	dl_json_ku64(j, "fault_bytes", fault_bytes);
}

void dl_report_step_input_json(struct dl_json *j, const struct dl_step *st, const struct dl_report_model *m)
{
	const struct dl_step_lineage *in = &st->input;
	const struct dl_proc *wp = in->woken && in->waker_pid ? dl_report_model_find(m, (pid_t)in->waker_pid) : NULL;
	const struct dl_pystack_stat *line;
	uint32_t own = 0;

	dl_json_key(j, "input");
	dl_json_obj_begin(j);
	dl_json_ku64(j, "wait_ns", in->wait_ns);
	dl_json_ku64(j, "waits", in->waits);
	dl_json_key(j, "python_line");
	if (!(line = step_wait_line(m->sum ? &m->sum->pylines : NULL, st, &own))) {
		dl_json_null(j);
	} else {
		dl_json_obj_begin(j);
		dl_json_kstr(j, "file", line->f[own].file);
		dl_json_ku64(j, "line", (uint64_t)(line->f[own].line > 0 ? line->f[own].line : 0));
		dl_json_kstr(j, "function", line->f[own].func);
		dl_json_kstr(j, "innermost", line->f[0].func);
		dl_json_obj_end(j);
	}
	dl_json_key(j, "woken_by");
	if (!in->woken) {
		dl_json_null(j);
	} else {
		dl_json_obj_begin(j);
		dl_json_ku64(j, "pid", in->waker_pid);
		dl_json_ku64(j, "tid", in->waker_tid);
		dl_json_kstr(j, "comm", wp ? wp->comm : "");
		dl_json_kstr(j, "context", dl_wake_ctx_name(in->waker_ctx));
		dl_json_ku64(j, "wait_ns", in->woken_wait_ns);
		dl_json_obj_end(j);
	}
	dl_json_key(j, "producer");
	if (!in->producer) {
		dl_json_null(j);
	} else {
		dl_json_obj_begin(j);
		dl_json_ku64(j, "pid", in->waker_pid);
		dl_json_ku64(j, "tid", in->producer_tid);
		dl_json_ku64(j, "since_ns", in->since_ns);
		dl_json_ku64(j, "handoff_ns", in->handoff_ns);
		dl_json_key(j, "after_handoff");
		dl_json_bool(j, in->after_handoff);
		window_json(j, in->oncpu_ns, in->io_wait_ns, in->runq_ns, in->other_wait_ns, in->idle_ns, in->read_bytes, in->reads,
			    in->disk_bytes, in->fault_bytes);
		dl_json_key(j, "files");
		dl_json_arr_begin(j);
		for (uint32_t i = 0; i < in->nfiles; i++) {
			dl_json_obj_begin(j);
			dl_json_kstr(j, "path", in->files[i].path);
			dl_json_ku64(j, "read_bytes", in->files[i].read_bytes);
			dl_json_ku64(j, "reads", in->files[i].reads);
			dl_json_ku64(j, "disk_bytes", in->files[i].disk_bytes);
			dl_json_ku64(j, "fault_bytes", in->files[i].fault_bytes);
			dl_json_obj_end(j);
		}
		dl_json_arr_end(j);
		/* Its process's socket receives in the window: a loader fetching from an object store. */
		dl_json_key(j, "net");
		dl_json_obj_begin(j);
		dl_json_ku64(j, "bytes", in->net_bytes);
		dl_json_ku64(j, "recvs", in->net_recvs);
		dl_json_ku64(j, "wait_ns", in->net_wait_ns);
		dl_json_key(j, "endpoints");
		dl_json_arr_begin(j);
		for (uint32_t i = 0; i < in->nendpoints; i++) {
			dl_json_obj_begin(j);
			dl_json_kstr(j, "endpoint", in->endpoints[i].name);
			dl_json_ku64(j, "bytes", in->endpoints[i].bytes);
			dl_json_ku64(j, "recvs", in->endpoints[i].recvs);
			dl_json_ku64(j, "wait_ns", in->endpoints[i].wait_ns);
			dl_json_obj_end(j);
		}
		dl_json_arr_end(j);
		dl_json_obj_end(j);
		dl_json_obj_end(j);
	}
	dl_json_key(j, "chain");
	dl_json_arr_begin(j);
	for (uint32_t i = 0; i < in->nchain; i++) {
		const struct dl_lin_hop *h = &in->chain[i];
		const struct dl_proc *hp = dl_report_model_find(m, (pid_t)h->pid);

		dl_json_obj_begin(j);
		dl_json_ku64(j, "pid", h->pid);
		dl_json_ku64(j, "tid", h->tid);
		dl_json_ku64(j, "waker_tid", h->waker_tid);
		dl_json_kstr(j, "comm", hp ? hp->comm : "");
		dl_json_ku64(j, "ended_wait_ns", h->ended_ns);
		dl_json_key(j, "traced");
		dl_json_bool(j, h->traced);
		dl_json_ku64(j, "since_ns", h->since_ns);
		dl_json_ku64(j, "handoff_ns", h->handoff_ns);
		window_json(j, h->oncpu_ns, h->io_wait_ns, h->runq_ns, h->other_wait_ns, h->idle_ns, h->read_bytes, h->reads,
			    h->disk_bytes, h->fault_bytes);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	dl_json_obj_end(j);
}

#define LONGEST_WAITS 3
#define LONGEST_WAIT_MIN_NS 1000000ull   /* shorter waits are scheduling noise, not a loader's batch */

/*
 * The steps that waited longest for input, a line each: whom they waited for,
 * what that producer did in its window, the files it read, and who it waited
 * on in turn.
 */
static void text_longest_waits(FILE *f, const struct dl_corr_proc *p, const struct dl_pylines *py)
{
	const struct dl_step *top[LONGEST_WAITS] = { 0 };
	struct dl_sbuf esc = { 0 };

	for (size_t i = 0; i < p->nsteps; i++) {
		const struct dl_step *st = &p->steps[i];
		int k = LONGEST_WAITS;

		if (!st->input.woken || st->input.wait_ns < LONGEST_WAIT_MIN_NS)
			continue;
		while (k > 0 && (!top[k - 1] || top[k - 1]->input.wait_ns < st->input.wait_ns))
			k--;
		if (k == LONGEST_WAITS)
			continue;
		memmove(&top[k + 1], &top[k], (LONGEST_WAITS - 1 - (size_t)k) * sizeof(top[0]));
		top[k] = st;
	}
	for (int k = 0; k < LONGEST_WAITS && top[k]; k++) {
		const struct dl_step_lineage *in = &top[k]->input;
		uint32_t tid = in->producer ? in->producer_tid : in->waker_tid, own = 0;
		const struct dl_pystack_stat *line;

		fprintf(f, "    step %u waited %.1f ms for ", top[k]->index, (double)in->wait_ns / 1e6);
		if (!in->waker_pid)
			fputs(dl_wake_ctx_name(in->waker_ctx), f);
		else if (in->waker_pid == (uint32_t)p->pid)
			fprintf(f, "loader thread %u of its own process", tid);
		else
			fprintf(f, "thread %u of worker process %u", tid, in->waker_pid);
		if (in->waker_pid && tid != in->waker_tid)
			fprintf(f, " (handed on by its thread %u)", in->waker_tid);
		if (in->producer)
			fprintf(f, ": %.1f ms on CPU, %.1f ms on disk, %.1f ms waiting for a CPU, %.1f ms blocked otherwise",
				(double)in->oncpu_ns / 1e6, (double)in->io_wait_ns / 1e6, (double)in->runq_ns / 1e6,
				(double)in->other_wait_ns / 1e6);
		if (in->producer && in->read_bytes)
			fprintf(f, ", reading %.1f %s (%.1f %s from disk)%s%s%s",
				(double)in->read_bytes / (in->read_bytes < 1000000 ? 1e3 : 1e6),
				in->read_bytes < 1000000 ? "KB" : "MB",
				(double)in->disk_bytes / (in->disk_bytes < 1000000 ? 1e3 : 1e6),
				in->disk_bytes < 1000000 ? "KB" : "MB", in->nfiles ? " from " : "",
				in->nfiles ? dl_text(&esc, in->files[0].path) : "", in->nfiles > 1 ? " and more" : "");
		else if (in->producer && in->fault_bytes)
			fprintf(f, ", faulting in %.1f %s from disk%s%s%s", (double)in->fault_bytes / (in->fault_bytes < 1000000 ? 1e3 : 1e6),
				in->fault_bytes < 1000000 ? "KB" : "MB", in->nfiles ? " of mapped " : "",
				in->nfiles ? dl_text(&esc, in->files[0].path) : "", in->nfiles > 1 ? " and more" : "");
		if (in->producer && in->nendpoints && in->endpoints[0].wait_ns) {
			uint64_t win = in->handoff_ns > in->since_ns ? in->handoff_ns - in->since_ns : 0;
			const struct dl_lin_endpoint *ep = &in->endpoints[0];

			fprintf(f, "; it waited on %s for %.0f%% of the batch: %.1f %s in %" PRIu64 " receive%s", ep->name,
				dl_pct(ep->wait_ns, win), (double)ep->bytes / (ep->bytes < 1000000 ? 1e3 : 1e6),
				ep->bytes < 1000000 ? "KB" : "MB", ep->recvs, ep->recvs == 1 ? "" : "s");
		}
		if (in->nchain)
			fprintf(f, "; it waited on thread %u of pid %u", in->chain[0].tid, in->chain[0].pid);
		if ((line = step_wait_line(py, top[k], &own))) {
			char at[160];

			dl_pyframe_text(line, own, at, sizeof(at));
			fprintf(f, "; the step waited at %s", dl_text(&esc, at));
		}
		fputc('\n', f);
	}
	dl_sbuf_free(&esc);
}

void dl_report_lineage_text(FILE *f, const struct dl_corr_proc *p, const struct dl_pylines *py)
{
	struct dl_lin_totals t = p->lineage;
	uint64_t woken = 0, window;

	if (!t.wait_ns)
		return;
	dl_lin_totals_sort(&t);
	for (uint32_t i = 0; i < t.nwakers; i++)
		woken += t.wakers[i].wait_ns;
	if (!woken) {
		fprintf(f, "  input    no wake-up of a traced task ended its waits%s\n",
			t.irq_wait_ns ? " (interrupts or kernel threads did)" : "");
		return;
	}
	/* Worker processes, then the process's own threads that handed it batches (loader or pin-memory threads). */
	fputs("  input    waited on", f);
	for (int own = 0, shown = 0, n; own < 2; own++) {
		for (uint32_t i = n = 0; i < t.nwakers; i++)
			n += !t.wakers[i].tid == !own;
		if (!n)
			continue;
		fprintf(f, "%s %s", shown ? ";" : "", own ? (n > 1 ? "threads of its own process" : "a thread of its own process")
							  : (n > 1 ? "worker processes" : "worker process"));
		for (uint32_t i = n = 0; i < t.nwakers; i++) {
			if (!t.wakers[i].tid != !own)
				continue;
			if (n++ == 4) {
				fputs(" and more", f);
				break;
			}
			fprintf(f, "%s %u (%.0f%%)", n > 1 ? "," : "", own ? t.wakers[i].tid : t.wakers[i].pid,
				dl_pct(t.wakers[i].wait_ns, t.wait_ns));
		}
		shown = 1;
	}
	window = t.oncpu_ns + t.io_wait_ns + t.runq_ns + t.other_ns;
	if (window)
		fprintf(f, ": making the batches, %s spent %.0f%% on CPU, %.0f%% on disk, %.0f%% waiting for a CPU",
			t.nwakers > 1 ? "they" : "it",
			dl_pct(t.oncpu_ns, window), dl_pct(t.io_wait_ns, window), dl_pct(t.runq_ns, window));
	fputc('\n', f);
	text_longest_waits(f, p, py);
}
