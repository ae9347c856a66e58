// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Chrome JSON Trace Event Format writer (timeline_writer.h): complete "X" events,
 * "M" process/thread names, "C" counters, "s"/"t"/"f" flows. Each event is
 * written as it comes; viewers sort by timestamp themselves.
 */
#include <errno.h>
#include <stdlib.h>
#include "output/json.h"
#include "output/timeline_writer.h"
#include "util.h"

struct json_out {
	struct dl_tout base;
	struct dl_json j;
	/* Flows begun (at a slice, or a first mark) and not yet ended: a flow begun by a mark needs its "s". */
	struct dl_u64map open_flows;
};

static struct dl_json *J(struct dl_tout *o)
{
	return &((struct json_out *)o)->j;
}

static void head(struct dl_tout *o, const char *ph, const char *name, pid_t pid, pid_t tid)
{
	struct dl_json *j = J(o);

	fputc('\n', o->f);
	dl_json_obj_begin(j);
	dl_json_kstr(j, "ph", ph);
	dl_json_kstr(j, "name", name);
	dl_json_ki64(j, "pid", pid);
	dl_json_ki64(j, "tid", tid);
	o->events++;
}

static void meta(struct dl_tout *o, const char *what, pid_t pid, pid_t tid, const char *name)
{
	struct dl_json *j = J(o);

	head(o, "M", what, pid, tid);
	dl_json_key(j, "args");
	dl_json_obj_begin(j);
	dl_json_kstr(j, "name", name);
	dl_json_obj_end(j);
	dl_json_obj_end(j);
}

static void js_track(struct dl_tout *o, const struct dl_ttrack *t)
{
	if (t->kind == DL_TT_PROCESS)
		meta(o, "process_name", t->pid, t->tid, t->name);
	else if (t->kind != DL_TT_COUNTER)
		meta(o, "thread_name", t->pid, t->tid, t->name);
}

static void js_slice(struct dl_tout *o, const struct dl_tslice *s)
{
	struct dl_json *j = J(o);

	head(o, "X", s->name, s->track->pid, s->track->tid);
	if (s->cat)
		dl_json_kstr(j, "cat", s->cat);
	dl_json_key(j, "ts");
	dl_json_milli(j, s->ts);
	dl_json_key(j, "dur");
	dl_json_milli(j, s->dur);
	if (s->nargs) {
		dl_json_key(j, "args");
		dl_json_obj_begin(j);
		for (int i = 0; i < s->nargs; i++) {
			const struct dl_targ *a = &s->args[i];

			dl_json_key(j, a->name);
			switch (a->type) {
			case DL_TA_U64: dl_json_u64(j, a->u); break;
			case DL_TA_I64: dl_json_i64(j, a->i); break;
			case DL_TA_DBL: dl_json_double(j, a->d); break;
			case DL_TA_STR: dl_json_str(j, a->s); break;
			case DL_TA_BOOL: dl_json_bool(j, a->u != 0); break;
			}
		}
		dl_json_obj_end(j);
	}
	dl_json_obj_end(j);
	if (s->flow_out) {
		bool begun = dl_u64map_get(&((struct json_out *)o)->open_flows, s->flow_out, NULL);

		if (!begun)
			dl_u64map_put(&((struct json_out *)o)->open_flows, s->flow_out, 1);
		/* flow start (or step) bound to this slice (flow events bind to the slice enclosing their ts) */
		head(o, begun ? "t" : "s", "step", s->track->pid, s->track->tid);
		dl_json_kstr(j, "cat", "flow");
		dl_json_ku64(j, "id", s->flow_out);
		dl_json_key(j, "ts");
		dl_json_milli(j, s->ts);
		dl_json_obj_end(j);
	}
}

static void js_flow_mark(struct dl_tout *o, const struct dl_ttrack *t, uint64_t ts, const char *name,
			 uint64_t flow, int terminate)
{
	struct json_out *jo = (struct json_out *)o;
	struct dl_json *j = J(o);
	bool begun = dl_u64map_get(&jo->open_flows, flow, NULL);

	if (terminate)
		dl_u64map_del(&jo->open_flows, flow);
	else if (!begun)
		dl_u64map_put(&jo->open_flows, flow, 1);
	head(o, terminate ? "f" : begun ? "t" : "s", name, t->pid, t->tid);
	dl_json_kstr(j, "cat", "flow");
	dl_json_ku64(j, "id", flow);
	if (terminate)
		dl_json_kstr(j, "bp", "e");
	dl_json_key(j, "ts");
	dl_json_milli(j, ts);
	dl_json_obj_end(j);
}

static void js_counter(struct dl_tout *o, const struct dl_ttrack *t, uint64_t ts, double v)
{
	struct dl_json *j = J(o);

	head(o, "C", t->name, t->pid, t->tid);
	dl_json_key(j, "ts");
	dl_json_milli(j, ts);
	dl_json_key(j, "args");
	dl_json_obj_begin(j);
	dl_json_key(j, "value");
	dl_json_double(j, v);
	dl_json_obj_end(j);
	dl_json_obj_end(j);
}

static int js_finish(struct dl_tout *o)
{
	struct dl_json *j = J(o);

	dl_json_arr_end(j);
	dl_json_kstr(j, "displayTimeUnit", "ns");
	dl_json_obj_end(j);
	fputc('\n', o->f);
	if (fflush(o->f))
		return errno ? -errno : -EIO;
	return ferror(o->f) ? -EIO : 0;
}

static void js_destroy(struct dl_tout *o)
{
	dl_u64map_free(&((struct json_out *)o)->open_flows);
	free(o);
}

struct dl_tout *dl_chrome_json_out(FILE *f)
{
	struct json_out *o = dl_xcalloc(1, sizeof(*o));

	o->base = (struct dl_tout){ .track = js_track, .slice = js_slice, .flow_mark = js_flow_mark,
				    .counter = js_counter, .finish = js_finish, .destroy = js_destroy, .f = f };
	dl_json_init(&o->j, f);
	dl_json_obj_begin(&o->j);
	dl_json_key(&o->j, "traceEvents");
	dl_json_arr_begin(&o->j);
	return &o->base;
}
