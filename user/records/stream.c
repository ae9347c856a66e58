// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "records/pyline.h"
#include "records/stream.h"
#include "util.h"

static const size_t min_size[DL_EV_KIND_MAX] = {
	/* Older recordings' calls end before the call site. */
	[DL_EV_CUDA] = offsetof(struct dl_cuda_ev, site),
	[DL_EV_BIO] = sizeof(struct dl_bio_ev),
	[DL_EV_SCHED] = sizeof(struct dl_sched_ev),
	[DL_EV_PROC] = offsetof(struct dl_proc_ev, flags),
	[DL_EV_MARK] = sizeof(struct dl_mark_ev),
	[DL_EV_TRACE_START] = sizeof(struct dl_trace_start_ev),
	[DL_EV_PROCINFO] = offsetof(struct dl_procinfo_ev, threads),
	[DL_EV_LIB] = sizeof(struct dl_lib_ev),
	[DL_EV_SYM] = offsetof(struct dl_sym_ev, name) + 1,
	/* Older recordings' trace end holds the drops only. */
	[DL_EV_TRACE_END] = offsetof(struct dl_trace_end_ev, recursion_misses),
	[DL_EV_BIO_SUBMIT] = sizeof(struct dl_bio_submit_ev),
	[DL_EV_PROG] = sizeof(struct dl_prog_ev),
	[DL_EV_FILE_OPEN] = sizeof(struct dl_file_open_ev),
	[DL_EV_FILE_READ] = sizeof(struct dl_file_read_ev),
	[DL_EV_FILE_CLOSE] = sizeof(struct dl_file_close_ev),
	[DL_EV_SITE] = offsetof(struct dl_site_ev, text) + 2,
	[DL_EV_WAKE] = sizeof(struct dl_wake_ev),
	[DL_EV_PYCODE] = offsetof(struct dl_pycode_ev, text) + 2,
	[DL_EV_LAUNCH] = sizeof(struct dl_launch_ev),
	[DL_EV_CALL_SHORT] = sizeof(struct dl_call_short_ev),
	[DL_EV_CGROUP] = sizeof(struct dl_cgroup_ev),
	[DL_EV_ENV] = sizeof(struct dl_env_ev),
	[DL_EV_PYSTACK] = sizeof(struct dl_pystack_ev),
	[DL_EV_NET_RECV] = sizeof(struct dl_net_recv_ev),
};

static size_t short_nargs(const struct dl_call_short_ev *e)
{
	size_t n = (e->h.size - sizeof(*e)) / sizeof(e->arg[0]);

	return n < DL_CALL_SHORT_ARGS_MAX ? n : DL_CALL_SHORT_ARGS_MAX;
}

/* A short call holds every argument its API's decoding reads (an API newer than this build is kept bare). */
static bool short_ok(const struct dl_call_short_ev *e)
{
	const struct dl_api *api = dl_api_by_id(e->api);

	return !api || dl_api_reg_args(api) <= short_nargs(e);
}

/* The dl_cuda_ev a DL_EV_CALL_SHORT stands for: the arguments and out it does not hold are 0. */
static void short_expand(const struct dl_call_short_ev *s, struct dl_cuda_ev *e)
{
	memset(e, 0, sizeof(*e));
	e->h = s->h;
	e->h.size = sizeof(*e);
	e->h.kind = DL_EV_CUDA;
	e->dur_ns = s->dur_ns;
	e->ret = s->ret;
	e->api = s->api;
	e->flags = s->flags;
	e->depth = s->depth;
	memcpy(e->arg, s->arg, short_nargs(s) * sizeof(s->arg[0]));
	e->site = s->site;
}

/* A launch record names a launch of cudaLaunchKernel's layout, or an API newer than this build (kept bare). */
static bool launch_ok(const struct dl_launch_ev *l)
{
	const struct dl_api *api = dl_api_by_id(l->api);

	return !api || api->layout == DL_L_LAUNCH;
}

#define LAUNCH_MASK(bits) ((1u << (bits)) - 1)

/*
 * The dl_cuda_ev a DL_EV_LAUNCH stands for (include/dlbpf/events.h): what
 * the probe writes for such a launch when it does not fit, but for the
 * fields no decoding reads (0 here).
 */
static void launch_expand(const struct dl_launch_ev *l, struct dl_cuda_ev *e)
{
	uint32_t bd = l->block_depth;

	memset(e, 0, sizeof(*e));
	e->h = l->h;
	e->h.size = sizeof(*e);
	e->h.kind = DL_EV_CUDA;
	e->api = l->api;
	e->flags = DL_CUDA_ENTRY_ONLY;
	e->depth = bd >> (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS + DL_LAUNCH_BZ_BITS);
	e->arg[0] = l->func;
	e->arg[1] = l->grid_x | (uint64_t)l->grid_y << 32;
	e->arg[2] = l->grid_z;
	e->arg[3] = (bd & LAUNCH_MASK(DL_LAUNCH_BX_BITS)) |
		    (uint64_t)((bd >> DL_LAUNCH_BX_BITS) & LAUNCH_MASK(DL_LAUNCH_BY_BITS)) << 32;
	e->arg[4] = (bd >> (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS)) & LAUNCH_MASK(DL_LAUNCH_BZ_BITS);
	e->arg[6] = l->shmem;
	e->arg[7] = l->stream;
	e->site = l->site;
}

/* A site record holds its two strings: function ends at func_len, object before the end. */
static bool site_ok(const struct dl_site_ev *e)
{
	size_t len = e->h.size - offsetof(struct dl_site_ev, text);

	return e->func_len >= 1 && e->func_len < len && e->text[e->func_len - 1] == '\0' &&
	       memchr(e->text + e->func_len, '\0', len - e->func_len);
}

/* The interval a timed record covers (0 for the others). */
static uint64_t dur_of(const void *rec, unsigned kind)
{
	uint64_t dur;
	size_t at;

	switch (kind) {
	case DL_EV_CUDA:
		at = offsetof(struct dl_cuda_ev, dur_ns);
		break;
	case DL_EV_CALL_SHORT:
		at = offsetof(struct dl_call_short_ev, dur_ns);
		break;
	case DL_EV_BIO:
		at = offsetof(struct dl_bio_ev, dur_ns);
		break;
	case DL_EV_SCHED:
		at = offsetof(struct dl_sched_ev, dur_ns);
		break;
	case DL_EV_FILE_READ:
		at = offsetof(struct dl_file_read_ev, dur_ns);
		break;
	case DL_EV_NET_RECV:
		at = offsetof(struct dl_net_recv_ev, dur_ns);
		break;
	default:
		return 0;
	}
	memcpy(&dur, (const char *)rec + at, sizeof(dur));
	return dur;
}

/* dlbpf's BPF programs are named by their C functions: a name that is not an identifier is corrupt. */
static bool prog_name_ok(const struct dl_prog_ev *e)
{
	size_t n = strnlen(e->name, sizeof(e->name));

	if (n == 0 || n == sizeof(e->name) || (e->name[0] >= '0' && e->name[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = e->name[i];

		if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

/* A field of a struct dl_container: NUL-terminated, and only bytes of its kind (events.h). */
static bool container_field_ok(const char *f, size_t cap, bool hex)
{
	size_t n = strnlen(f, cap);

	if (n == cap)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = f[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-' ||
		      (!hex && ((c >= 'a' && c <= 'z') || c == '_' || c == '.'))))
			return false;
	}
	return true;
}

bool dl_container_ok(const struct dl_container *c)
{
	return container_field_ok(c->runtime, sizeof(c->runtime), false) &&
	       container_field_ok(c->id, sizeof(c->id), true) &&
	       container_field_ok(c->pod_uid, sizeof(c->pod_uid), true) &&
	       container_field_ok(c->slurm_job, sizeof(c->slurm_job), false);
}

/* Checks the size a record claims against its kind, and its times; 0 if it can be read as that kind. */
static int record_check(const void *rec, size_t len)
{
	const struct dl_hdr *h = rec;

	if (len < sizeof(*h) || h->size < sizeof(*h) || h->size > len)
		return -1;
	/* Kinds newer than this build are skipped by readers, not rejected. */
	if (h->kind == 0 || h->kind >= DL_EV_KIND_MAX)
		return 0;
	if (h->size < min_size[h->kind])
		return -1;
	if (h->kind == DL_EV_SYM && ((const char *)rec)[h->size - 1] != '\0')
		return -1;
	if (h->kind == DL_EV_PROG && !prog_name_ok(rec))
		return -1;
	/* Sinks read the path as a C string. */
	if (h->kind == DL_EV_FILE_OPEN &&
	    !memchr(((const struct dl_file_open_ev *)rec)->path, '\0', DL_PATH_LEN))
		return -1;
	if (h->kind == DL_EV_SITE && !site_ok(rec))
		return -1;
	if (h->kind == DL_EV_PYCODE && !dl_pycode_ok(rec))
		return -1;
	if (h->kind == DL_EV_LAUNCH && !launch_ok(rec))
		return -1;
	if (h->kind == DL_EV_CALL_SHORT && !short_ok(rec))
		return -1;
	if (h->kind == DL_EV_CGROUP && !dl_container_ok(&((const struct dl_cgroup_ev *)rec)->c))
		return -1;
	if (h->kind == DL_EV_ENV && !memchr(((const struct dl_env_ev *)rec)->cuda_visible_devices, '\0', DL_VISIBLE_LEN))
		return -1;
	/*
	 * The kernel's clock is an s64 (ktime_t): no real interval ends past
	 * INT64_MAX. One that does is corrupt, and would make sinks' ts + dur
	 * wrap, or walk a counter's bins for centuries.
	 */
	if (h->ts > INT64_MAX || dur_of(rec, h->kind) > INT64_MAX - h->ts)
		return -1;
	return 0;
}

void dl_stream_add(struct dl_stream *s, dl_sink_fn fn, void *ctx)
{
	if (s->n < DL_STREAM_MAX_SINKS) {
		s->sinks[s->n].fn = fn;
		s->sinks[s->n].ctx = ctx;
		s->n++;
	}
}

void dl_stream_free(struct dl_stream *s)
{
	dl_addrspaces_free(&s->mem);
}

int dl_stream_read(struct dl_stream *s, struct dl_rec_in *in, const void *rec, size_t len)
{
	in->h = rec;
	in->is_call = false;
	if (record_check(rec, len)) {
		s->malformed++;
		return -1;
	}
	if (in->h->kind == DL_EV_LAUNCH) {
		launch_expand(rec, &in->full);
		in->h = &in->full.h;
	} else if (in->h->kind == DL_EV_CALL_SHORT) {
		short_expand(rec, &in->full);
		in->h = &in->full.h;
	}
	/* An API newer than this build stays a bare record: sinks count it as unknown. */
	in->is_call = in->h->kind == DL_EV_CUDA && dl_call_decode((const struct dl_cuda_ev *)in->h, &in->call) == 0;
	return 0;
}

void dl_stream_put(struct dl_stream *s, struct dl_rec_in *in)
{
	struct dl_rec r = { .h = in->h, .call = in->is_call ? &in->call : NULL, .seq = ++s->seq };
	struct dl_pynamed named;

	if (in->is_call) {
		dl_addrspaces_resolve(&s->mem, &in->call);
		dl_addrspaces_note_call(&s->mem, &in->call);
	} else if (in->h->kind == DL_EV_SYM) {
		dl_addrspaces_note_sym(&s->mem, (const struct dl_sym_ev *)in->h);
	} else if (in->h->kind == DL_EV_SITE) {
		dl_addrspaces_note_site(&s->mem, (const struct dl_site_ev *)in->h);
	} else if (in->h->kind == DL_EV_PYCODE) {
		dl_addrspaces_note_pycode(&s->mem, (const struct dl_pycode_ev *)in->h);
	} else if (in->h->kind == DL_EV_PYSTACK) {
		dl_addrspaces_name_py(&s->mem, in->h->tgid, &((const struct dl_pystack_ev *)in->h)->py, &named);
		r.py = &named;
	}
	for (int i = 0; i < s->n; i++) {
		int err = s->sinks[i].fn(s->sinks[i].ctx, &r);

		if (err && !s->err)
			s->err = err;
	}
}

int dl_stream_emit(struct dl_stream *s, const void *rec, size_t len)
{
	struct dl_rec_in in;

	if (dl_stream_read(s, &in, rec, len))
		return -1;
	dl_stream_put(s, &in);
	return 0;
}

static void fill_hdr(struct dl_hdr *h, size_t size, enum dl_kind kind, uint64_t ts, pid_t pid)
{
	h->size = (uint16_t)size;
	h->kind = (uint16_t)kind;
	h->cpu = 0;
	h->ts = ts;
	h->tgid = (uint32_t)pid;
	h->tid = (uint32_t)pid;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strnlen(src, cap - 1) : 0;

	memcpy(dst, src ? src : "", n);
	memset(dst + n, 0, cap - n);
}

void dl_emit_trace_start_flags(struct dl_stream *s, uint64_t ts, uint32_t pcie_mbps, uint32_t flags)
{
	struct dl_trace_start_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_TRACE_START, ts, 0);
	e.flags = flags;
	e.pcie_mbps = pcie_mbps;
	dl_stream_emit(s, &e, sizeof(e));
}

void dl_emit_trace_start(struct dl_stream *s, uint64_t ts, uint32_t pcie_mbps)
{
	dl_emit_trace_start_flags(s, ts, pcie_mbps, 0);
}

void dl_emit_procinfo_threads(struct dl_stream *s, uint64_t ts, pid_t pid, pid_t ppid, const char *comm, pid_t nspid,
			      uint32_t threads)
{
	struct dl_procinfo_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_PROCINFO, ts, pid);
	e.ppid = (uint32_t)ppid;
	e.nspid = (uint32_t)(nspid > 0 ? nspid : pid);
	copy_str(e.comm, sizeof(e.comm), comm);
	e.threads = threads;
	dl_stream_emit(s, &e, sizeof(e));
}

void dl_emit_procinfo(struct dl_stream *s, uint64_t ts, pid_t pid, pid_t ppid, const char *comm, pid_t nspid)
{
	dl_emit_procinfo_threads(s, ts, pid, ppid, comm, nspid, 0);
}

void dl_emit_cgroup(struct dl_stream *s, uint64_t ts, pid_t pid, const struct dl_container *c)
{
	struct dl_cgroup_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_CGROUP, ts, pid);
	e.c = *c;
	dl_stream_emit(s, &e, sizeof(e));
}

void dl_emit_env(struct dl_stream *s, uint64_t ts, pid_t pid, const char *cuda_visible_devices)
{
	struct dl_env_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_ENV, ts, pid);
	copy_str(e.cuda_visible_devices, sizeof(e.cuda_visible_devices), cuda_visible_devices);
	dl_stream_emit(s, &e, sizeof(e));
}

void dl_emit_lib(struct dl_stream *s, uint64_t ts, pid_t pid, const char *path, unsigned nsyms, unsigned flags)
{
	struct dl_lib_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_LIB, ts, pid);
	e.nsyms = nsyms;
	e.flags = flags;
	copy_str(e.path, sizeof(e.path), path);
	dl_stream_emit(s, &e, sizeof(e));
}

void dl_emit_sym(struct dl_stream *s, uint64_t ts, pid_t pid, uint64_t addr, const char *name)
{
	union {
		struct dl_sym_ev e;
		char buf[sizeof(struct dl_sym_ev) + DL_SYM_NAME_MAX + 8];
	} u;
	size_t n = strnlen(name, DL_SYM_NAME_MAX - 1), size;

	size = (offsetof(struct dl_sym_ev, name) + n + 1 + 7) & ~(size_t)7;
	memset(&u, 0, size);
	fill_hdr(&u.e.h, size, DL_EV_SYM, ts, pid);
	u.e.addr = addr;
	memcpy(u.e.name, name, n);
	dl_stream_emit(s, &u, size);
}

void dl_emit_site(struct dl_stream *s, uint64_t ts, pid_t pid, uint64_t addr, const char *func, const char *obj)
{
	union {
		struct dl_site_ev e;
		char buf[sizeof(struct dl_site_ev) + DL_SYM_NAME_MAX + DL_PATH_LEN + 8];
	} u;
	size_t nf = strnlen(func, DL_SYM_NAME_MAX - 1), no = strnlen(obj, DL_PATH_LEN - 1), size;

	size = (offsetof(struct dl_site_ev, text) + nf + 1 + no + 1 + 7) & ~(size_t)7;
	memset(&u, 0, size);
	fill_hdr(&u.e.h, size, DL_EV_SITE, ts, pid);
	u.e.addr = addr;
	u.e.func_len = (uint32_t)nf + 1;
	memcpy(u.e.text, func, nf);
	memcpy(u.e.text + nf + 1, obj, no);
	dl_stream_emit(s, &u, size);
}

void dl_emit_pycode(struct dl_stream *s, uint64_t ts, pid_t pid, uint64_t addr, const char *file, const char *func,
		    int32_t firstlineno, unsigned format, const uint8_t *table, size_t table_len)
{
	/* h.size is 16 bits: what the strings leave of it goes to the table. */
	const size_t max = 65528, head = offsetof(struct dl_pycode_ev, text);
	size_t nf = strnlen(file, DL_PATH_LEN - 1), nn = strnlen(func, DL_SYM_NAME_MAX - 1), size;
	struct dl_pycode_ev *e;
	uint16_t flags = 0;

	if (head + nf + 1 + nn + 1 + table_len > max) {
		table_len = max - (head + nf + 1 + nn + 1);
		flags |= DL_PYCODE_TABLE_CUT;
	}
	size = (head + nf + 1 + nn + 1 + table_len + 7) & ~(size_t)7;
	e = dl_xcalloc(1, size);
	fill_hdr(&e->h, size, DL_EV_PYCODE, ts, pid);
	e->addr = addr;
	e->firstlineno = firstlineno;
	e->format = (uint16_t)format;
	e->flags = flags;
	e->file_len = (uint16_t)(nf + 1);
	e->func_len = (uint16_t)(nn + 1);
	e->table_len = (uint32_t)table_len;
	memcpy(e->text, file, nf);
	memcpy(e->text + nf + 1, func, nn);
	if (table_len)
		memcpy(e->text + nf + 1 + nn + 1, table, table_len);
	dl_stream_emit(s, e, size);
	free(e);
}

void dl_emit_trace_end_misses(struct dl_stream *s, uint64_t ts, const uint64_t drops[DL_DROP_MAX],
			      uint64_t recursion_misses)
{
	struct dl_trace_end_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_TRACE_END, ts, 0);
	memcpy(e.drops, drops, sizeof(e.drops));
	e.recursion_misses = recursion_misses;
	dl_stream_emit(s, &e, sizeof(e));
}

void dl_emit_trace_end(struct dl_stream *s, uint64_t ts, const uint64_t drops[DL_DROP_MAX])
{
	dl_emit_trace_end_misses(s, ts, drops, 0);
}

void dl_emit_prog(struct dl_stream *s, uint64_t ts, const char *name, uint64_t recursion_misses)
{
	struct dl_prog_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_PROG, ts, 0);
	e.recursion_misses = recursion_misses;
	copy_str(e.name, sizeof(e.name), name);
	dl_stream_emit(s, &e, sizeof(e));
}

void dl_emit_bio_unseen(struct dl_stream *s, uint64_t ts, pid_t tgid, pid_t tid, uint64_t sector, uint32_t bytes,
			uint32_t dev, uint32_t flags)
{
	struct dl_bio_ev e;

	memset(&e, 0, sizeof(e));
	fill_hdr(&e.h, sizeof(e), DL_EV_BIO, ts, tgid);
	e.h.tid = (uint32_t)tid;
	e.sector = sector;
	e.bytes = bytes;
	e.dev = dev;
	e.flags = flags | DL_BIO_UNSEEN;
	dl_stream_emit(s, &e, sizeof(e));
}
