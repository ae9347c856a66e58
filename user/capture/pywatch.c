// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "dlbpf.skel.h"
#include "capture/procfs.h"
#include "capture/pycode.h"
#include "capture/pywatch.h"
#include "capture/tracer.h"
#include "log.h"

/* Memory is read this much at a time while looking for code objects. */
#define SCAN_CHUNK (1u << 20)
/*
 * A process where the function is not (yet) is looked at again after this,
 * doubling up to the cap; and at the next rescan whenever its data grew past
 * its most by a MiB (it imports modules: new code objects), however long the
 * wait has grown. A loop whose memory is steady is not looked at again.
 */
#define RESCAN_FIRST_NS (250 * 1000 * 1000ull)
#define RESCAN_MAX_NS (8 * 1000 * 1000 * 1000ull)
#define RESCAN_GROWTH (1u << 20)
/*
 * A watched write costs the job a debug exception (1-30 us, the most in a
 * virtual machine): a function written more often than this a second is no
 * training step's and is unwatched, so that the job is never slowed much.
 * A step function's calls write its count twice each (the frame's reference
 * taken and dropped): 2000 a second is a step of 1 ms.
 */
#define MAX_WRITES_PER_S 2000

struct watched_thread {
	pid_t tid;
	struct bpf_link *links[DL_PYWATCH_MAX];
};

struct dl_pywatch_proc {
	pid_t pid;
	uint64_t codes[DL_PYWATCH_MAX];
	int ncodes;
	bool dropped[DL_PYWATCH_MAX];      /* unwatched: written too often */
	uint64_t writes[DL_PYWATCH_MAX], writes_ns;   /* BPF's count of writes at the last look, and when */
	uint64_t next_scan_ns, wait_ns;
	uint64_t data_most;                /* its data's size (/proc/PID/statm) at its largest, when last looked */
	DL_VEC(struct watched_thread) threads;
	struct dl_u64map by_tid;
};

struct scan {
	const struct dl_pywatches *w;
	const struct dl_pyreader *r;
	uint8_t *buf;
	uint64_t exact[DL_PYWATCH_MAX], ends[DL_PYWATCH_MAX];
	int nexact, nends, more;
	uint64_t bytes;
};

static void candidate(struct scan *s, uint64_t addr)
{
	struct dl_pycode_info id;
	char file[DL_PY_STR_MAX], qual[DL_PY_STR_MAX];
	bool exact;

	if (dl_pycode_identity(s->r->layout, s->r->code_type, s->r->rd, s->r->ctx, addr, &id))
		return;
	dl_pystr_read(s->r->layout, s->r->rd, s->r->ctx, id.id_name, qual);
	/* The name first: the file is read only for the few code objects of that name. */
	if (!dl_pycode_name_matches(strrchr(s->w->want, ':') ? strrchr(s->w->want, ':') + 1 : s->w->want, "", qual,
				s->r->layout->co_qualname != 0, &exact))
		return;
	dl_pystr_read(s->r->layout, s->r->rd, s->r->ctx, id.id_filename, file);
	if (!dl_pycode_name_matches(s->w->want, file, qual, s->r->layout->co_qualname != 0, &exact))
		return;
	if (exact ? s->nexact == DL_PYWATCH_MAX : s->nends == DL_PYWATCH_MAX) {
		s->more++;
		return;
	}
	if (exact)
		s->exact[s->nexact++] = addr;
	else
		s->ends[s->nends++] = addr;
}

/*
 * A code object is an object whose type word is &PyCode_Type: looked for in
 * the private writable mappings that are not a file's (the allocator's
 * arenas and the heap), where the interpreter makes them.
 */
static void scan_mapping(struct scan *s, const struct dl_mapping *m)
{
	if (strcmp(m->perms, "rw-p") || (m->path[0] && strcmp(m->path, "[heap]")))
		return;
	for (uint64_t at = m->start; at < m->end; at += SCAN_CHUNK - 16) {
		size_t want = m->end - at < SCAN_CHUNK ? (size_t)(m->end - at) : SCAN_CHUNK;
		ssize_t got = s->r->rd(s->r->ctx, at, s->buf, want);

		if (got < 16)
			break;
		s->bytes += (uint64_t)got;
		for (size_t i = 0; i + 16 <= (size_t)got; i += 8) {
			uint64_t type;

			memcpy(&type, s->buf + i + 8, sizeof(type));
			if (type == s->r->code_type)
				candidate(s, at + i);
		}
		if ((size_t)got < want)
			break;
	}
}

/* Every mapping of pid, a file's or not (dl_maps_foreach gives only files'). */
static void scan_maps(struct scan *s, pid_t pid)
{
	struct dl_mapping m;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = dl_proc_fopen(pid, "maps");

	if (!f)
		return;
	while (getline(&line, &cap, f) > 0)
		if (!dl_maps_parse_line(line, &m))
			scan_mapping(s, &m);
	free(line);
	fclose(f);
}

static uint64_t refs_of(const struct dl_pyreader *r, uint64_t code)
{
	uint64_t v = 0;

	return r->rd(r->ctx, code, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

/* The code objects other processes had, where pid has them too (a fork's child, a pool of forks). */
static int from_known(struct dl_pywatches *w, const struct dl_pyreader *r, struct dl_pywatch_proc *p)
{
	for (int i = 0; i < w->nknown; i++) {
		struct dl_pycode_info id;
		char file[DL_PY_STR_MAX], qual[DL_PY_STR_MAX];
		bool exact;

		if (dl_pycode_identity(r->layout, r->code_type, r->rd, r->ctx, w->known[i], &id))
			continue;
		dl_pystr_read(r->layout, r->rd, r->ctx, id.id_name, qual);
		dl_pystr_read(r->layout, r->rd, r->ctx, id.id_filename, file);
		if (dl_pycode_name_matches(w->want, file, qual, r->layout->co_qualname != 0, &exact))
			p->codes[p->ncodes++] = w->known[i];
	}
	return p->ncodes;
}

static void find_codes(struct dl_pywatches *w, const struct dl_pyreader *r, struct dl_pywatch_proc *p)
{
	struct scan s = { .w = w, .r = r, .buf = dl_xcalloc(1, SCAN_CHUNK) };
	uint64_t t0 = dl_now_ns();

	scan_maps(&s, p->pid);
	free(s.buf);
	dl_debug("pid %d: --step-on %s: %.1f MiB looked through for code objects in %.1f ms: %d of that name, "
		 "%d ending so", p->pid, w->want, (double)s.bytes / (1 << 20), (double)(dl_now_ns() - t0) / 1e6,
		 s.nexact, s.nends);
	/* A function of exactly that name wins over those whose names end so (Trainer.step over SGD.step). */
	if (s.nexact) {
		memcpy(p->codes, s.exact, sizeof(s.exact));
		p->ncodes = s.nexact;
	} else {
		memcpy(p->codes, s.ends, sizeof(s.ends));
		p->ncodes = s.nends;
	}
	if ((s.nexact ? s.nexact + s.more : s.nends + s.more) > DL_PYWATCH_MAX && !w->warned_many) {
		w->warned_many = true;
		dl_warn("--step-on %s: more than %d Python functions have that name in pid %d: the first %d mark "
			"steps (name it more closely: FILE.py:NAME, Class.NAME)", w->want, DL_PYWATCH_MAX, p->pid,
			DL_PYWATCH_MAX);
	}
	for (int i = 0; i < p->ncodes; i++) {
		int k;

		for (k = 0; k < w->nknown && w->known[k] != p->codes[i]; k++)
			;
		if (k == w->nknown && w->nknown < DL_PYWATCH_MAX)
			w->known[w->nknown++] = p->codes[i];
	}
}

static struct bpf_link *watch_thread(struct dl_tracer *t, pid_t tid, uint64_t code, int *err)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT, .size = sizeof(a), .bp_type = HW_BREAKPOINT_W, .bp_addr = code,
		.bp_len = HW_BREAKPOINT_LEN_8, .sample_period = 1, .exclude_kernel = 1, .exclude_hv = 1,
	};
	struct bpf_link *link;
	int fd = (int)syscall(__NR_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0) {
		*err = -errno;
		return NULL;
	}
	/* The link owns the event's descriptor from here: destroying it closes it. */
	link = bpf_program__attach_perf_event(dl_tracer_skel(t)->progs.py_call_watch, fd);
	if (!link) {
		*err = -errno;
		close(fd);
	}
	return link;
}

static int thread_of(const struct dirent *d, pid_t *tid)
{
	char *end;
	long v = strtol(d->d_name, &end, 10);

	if (*end || v <= 0)
		return -1;
	*tid = (pid_t)v;
	return 0;
}

/* Each thread of p not watched yet gets a watchpoint on each code object; the threads watched. */
static int watch_threads(struct dl_pywatches *w, struct dl_tracer *t, struct dl_pywatch_proc *p)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)p->pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		struct watched_thread th = { 0 };
		pid_t tid;
		int e = 0;

		if (thread_of(d, &tid) || dl_u64map_get(&p->by_tid, (uint64_t)tid, NULL))
			continue;
		th.tid = tid;
		for (int i = 0; i < p->ncodes; i++)
			if (!p->dropped[i] && !(th.links[i] = watch_thread(t, tid, p->codes[i], &e)) && e != -ESRCH)
				err = e;
		dl_u64map_put(&p->by_tid, (uint64_t)tid, p->threads.n);
		*dl_vec_push(&p->threads) = th;
	}
	closedir(dir);
	if (err && !w->warned_arm) {
		w->warned_arm = true;
		dl_warn("pid %d: --step-on %s: cannot watch the Python function in every thread (%s%s)", p->pid, w->want,
			strerror(-err), err == -ENOSPC ? ": the CPU's debug registers are taken, by a debugger?" : "");
	}
	return err;
}

/* The process's data and stack (statm's data, in bytes); 0 when unknown. */
static uint64_t data_bytes(pid_t pid)
{
	unsigned long long size, res, shared, text, lib, data = 0;
	FILE *f = dl_proc_fopen(pid, "statm");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu %llu %llu %llu %llu", &size, &res, &shared, &text, &lib, &data) != 6)
		data = 0;
	fclose(f);
	return (uint64_t)data * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Whether to look for the code objects now: the wait is over, or the process grew (it imported more). */
static bool scan_due(struct dl_pywatch_proc *p, uint64_t now)
{
	uint64_t data = data_bytes(p->pid);
	bool grew = data > p->data_most + RESCAN_GROWTH;

	if (now < p->next_scan_ns && !grew)
		return false;
	if (data > p->data_most)
		p->data_most = data;
	if (grew && now < p->next_scan_ns)
		return true;
	p->next_scan_ns = now + p->wait_ns;
	p->wait_ns = p->wait_ns * 2 < RESCAN_MAX_NS ? p->wait_ns * 2 : RESCAN_MAX_NS;
	return true;
}

static struct dl_pywatch_proc *proc_of(struct dl_pywatches *w, pid_t pid)
{
	struct dl_pywatch_proc *p;
	uint64_t i;

	if (dl_u64map_get(&w->by_pid, (uint64_t)pid, &i))
		return w->procs.v[i];
	p = dl_xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->wait_ns = RESCAN_FIRST_NS;
	dl_u64map_put(&w->by_pid, (uint64_t)pid, w->procs.n);
	*dl_vec_push(&w->procs) = p;
	return p;
}

/* Unwatches, in every thread of p, a code object written too often since the last look. */
static void check_rates(struct dl_pywatches *w, struct dl_pywatch_proc *p, int fd, uint64_t now)
{
	for (int i = 0; i < p->ncodes; i++) {
		struct dl_pywatch_key k = { .tgid = (uint32_t)p->pid, .code = p->codes[i] };
		struct dl_pywatch v;
		double rate;

		if (p->dropped[i] || bpf_map_lookup_elem(fd, &k, &v))
			continue;
		rate = p->writes_ns && now > p->writes_ns ? (double)(v.writes - p->writes[i]) * 1e9 / (double)(now - p->writes_ns)
							  : 0;
		p->writes[i] = v.writes;
		if (rate <= MAX_WRITES_PER_S)
			continue;
		p->dropped[i] = true;
		for (size_t th = 0; th < p->threads.n; th++) {
			bpf_link__destroy(p->threads.v[th].links[i]);
			p->threads.v[th].links[i] = NULL;
		}
		bpf_map_delete_elem(fd, &k);
		dl_warn("pid %d: --step-on %s: a Python function of that name is called %.0f times a second, too often "
			"for a training step's: no longer watched (each call would cost the job a debug exception)", p->pid,
			w->want, rate / 2);
	}
	p->writes_ns = now;
}

int dl_pywatch_attach(struct dl_pywatches *w, struct dl_tracer *t, struct dl_pyprocs *pp, pid_t pid)
{
	struct dl_pyreader r;
	struct dl_pywatch_proc *p;
	uint64_t now = dl_now_ns();
	int fd = bpf_map__fd(dl_tracer_skel(t)->maps.py_watches);

	if (!w->want || fd < 0 || bpf_program__fd(dl_tracer_skel(t)->progs.py_call_watch) < 0 ||
	    !dl_pyprocs_reader(pp, pid, &r))
		return 0;
	p = proc_of(w, pid);
	if (!w->allowed && p->ncodes)
		return 0;
	if (!p->ncodes) {
		if (!from_known(w, &r, p) && (!scan_due(p, now) || (find_codes(w, &r, p), !p->ncodes)))
			return 0;
		if (!w->allowed) {
			if (!w->refused)
				dl_warn("pid %d: --step-on %s is a Python function: dlbpf marks it only with "
					"--python-watchpoint, a hardware watchpoint on its code object, which on some "
					"virtual machines can end the process with SIGTRAP (see the manual). Without "
					"--step-on, a PyTorch job's steps are learned from its backward passes",
					pid, w->want);
			w->refused = true;
			return 0;
		}
		for (int i = 0; i < p->ncodes; i++) {
			struct dl_pywatch_key k = { .tgid = (uint32_t)pid, .code = p->codes[i] };
			struct dl_pywatch v = { .refs = refs_of(&r, p->codes[i]), .mark_id = DL_MARK_ID_PYFUNC,
						.op_load_const = r.layout->op_load_const,
						.op_make_function = r.layout->op_make_function,
						.co_code = r.layout->co_code, .code_type = r.code_type };

			if (bpf_map_update_elem(fd, &k, &v, BPF_ANY)) {
				int err = -errno;

				dl_err("pid %d: --step-on %s: cannot add its code object to BPF's map: %s", pid, w->want,
				       strerror(-err));
				p->ncodes = 0;
				return err;
			}
		}
		dl_info("pid %d: step marker on the Python function %s (%d code object%s, watched)", pid, w->want,
			p->ncodes, p->ncodes == 1 ? "" : "s");
	}
	check_rates(w, p, fd, now);
	watch_threads(w, t, p);
	w->found = true;
	return 1;
}

bool dl_pywatch_watching(const struct dl_pywatches *w, pid_t pid)
{
	uint64_t i;

	return dl_u64map_get(&w->by_pid, (uint64_t)pid, &i) && w->procs.v[i]->ncodes;
}

void dl_pywatch_detach(struct dl_pywatches *w)
{
	for (size_t i = 0; i < w->procs.n; i++) {
		struct dl_pywatch_proc *p = w->procs.v[i];

		for (size_t k = 0; k < p->threads.n; k++)
			for (int c = 0; c < DL_PYWATCH_MAX; c++)
				bpf_link__destroy(p->threads.v[k].links[c]);
		dl_vec_free(&p->threads);
		dl_u64map_free(&p->by_tid);
		free(p);
	}
	dl_vec_free(&w->procs);
	dl_u64map_free(&w->by_pid);
}
