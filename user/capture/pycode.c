// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "capture/elfsym.h"
#include "capture/glibctsd.h"
#include "capture/procfs.h"
#include "capture/pycode.h"
#include "capture/pyobj.h"
#include "capture/tfile.h"
#include "log.h"
#include "records/stream.h"

struct code_ent {
	uint64_t addr, checked_ns;
	struct dl_pycode_info id;   /* identity fields only */
	size_t table_len;           /* bytes of line table written */
	bool table_short;           /* written from fewer bytes than the process has: read again while it lives */
};

struct dl_pyproc {
	pid_t pid;
	bool python;                /* set up: BPF walks its frames */
	bool decided;               /* looked at: a CPython found (python) or refused with a notice */
	int mem;                    /* /proc/PID/mem, -1 */
	struct dl_py_layout layout;
	uint64_t code_type;         /* &PyCode_Type in the process */
	struct dl_py_cfg cfg;
	DL_VEC(struct code_ent) codes;
	struct dl_u64map code_of;   /* code address -> index in codes */
};

/* Until BPF's flag is set its return probes do not look in py_procs (bpf/common.bpf.h): set it first. */
static int map_put(struct dl_pyprocs *pp, pid_t pid, const struct dl_py_cfg *cfg)
{
	if (pp->map_fd < 0)
		return 0;
	if (pp->bpf_known)
		__atomic_store_n(pp->bpf_known, 1, __ATOMIC_SEQ_CST);
	if (!pp->python_seen && pp->first_python)
		pp->first_python(pp->first_python_ctx);
	pp->python_seen = true;
	return bpf_map_update_elem(pp->map_fd, &pid, cfg, BPF_ANY);
}

void dl_pyprocs_init(struct dl_pyprocs *pp, int map_fd)
{
	memset(pp, 0, sizeof(*pp));
	pp->map_fd = map_fd;
	pp->specific_off = dl_glibc_keys_off_self();
	/* The file's descriptors give what the measurement gave, or they are not read as glibc means them. */
	pp->own_glibc_agrees = pp->specific_off && dl_glibc_keys_off_of(getpid(), NULL) == pp->specific_off;
	if (pp->specific_off && !pp->own_glibc_agrees)
		dl_debug("glibc's libthread_db descriptors disagree with its pthread keys measured (%+d): "
			 "every process is taken to run dlbpf's glibc", (int32_t)pp->specific_off);
	pp->recheck_ns = 100 * 1000 * 1000ull;
}

static void proc_free(struct dl_pyproc *p)
{
	if (p->mem >= 0)
		close(p->mem);
	dl_vec_free(&p->codes);
	dl_u64map_free(&p->code_of);
	free(p);
}

void dl_pyprocs_free(struct dl_pyprocs *pp)
{
	if (pp->snapshots || pp->snapshots_refused)
		dl_debug("Python code objects read by BPF at a probe: %" PRIu64 " (%" PRIu64 " refused)", pp->snapshots,
			 pp->snapshots_refused);
	for (size_t i = 0; i < pp->v.n; i++)
		if (pp->v.v[i])
			proc_free(pp->v.v[i]);
	dl_vec_free(&pp->v);
	dl_u64map_free(&pp->by_pid);
}

static struct dl_pyproc *proc_of(struct dl_pyprocs *pp, pid_t pid, bool create)
{
	struct dl_pyproc *p;
	uint64_t i;

	if (dl_u64map_get(&pp->by_pid, (uint64_t)pid, &i) && pp->v.v[i])
		return pp->v.v[i];
	if (!create)
		return NULL;
	p = dl_xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->mem = -1;
	dl_u64map_put(&pp->by_pid, (uint64_t)pid, pp->v.n);
	*dl_vec_push(&pp->v) = p;
	return p;
}

static ssize_t mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct dl_pyproc *p = ctx;

	if (p->mem < 0 || addr > (uint64_t)INT64_MAX - len)
		return -1;
	return pread(p->mem, buf, len, (off_t)addr);
}

struct pybin {
	char path[4096];
	uint64_t start, offset;     /* the mapping of the binary that holds file offset 0 */
	bool lib;                   /* libpython (else the executable) */
	unsigned major, minor;      /* from its name; 0 when it has none */
};

/* "python3.11", "libpython3.11.so.1.0": the version a name gives. */
static bool name_version(const char *base, unsigned *major, unsigned *minor)
{
	const char *p = strstr(base, "python");

	return p && sscanf(p + 6, "%u.%u", major, minor) == 2;
}

static int find_bin(const struct dl_mapping *m, void *arg)
{
	struct pybin *b = arg;
	const char *base = dl_basename(m->path);
	bool lib = strncmp(base, "libpython", 9) == 0;

	if (m->offset != 0 || (!lib && strncmp(base, "python", 6)))
		return 0;
	/* A libpython wins over the executable that loaded it: the interpreter is in the library. */
	if (b->path[0] && (b->lib || !lib))
		return 0;
	snprintf(b->path, sizeof(b->path), "%s", m->path);
	b->start = m->start;
	b->lib = lib;
	if (!name_version(base, &b->major, &b->minor))
		b->major = b->minor = 0;
	return 0;
}

enum { SYM_RUNTIME, SYM_VERSION, SYM_CODE_TYPE, NSYMS };

/* The interpreter's symbols in path; *needs_lib: whether it is linked with a libpython (1), or not (0, or -errno). */
static int bin_symbols(pid_t pid, const char *path, uint64_t vals[NSYMS], uint64_t *first_vaddr, int *needs_lib)
{
	struct dl_elf_want want[NSYMS] = { { .name = "_PyRuntime" }, { .name = "Py_Version" }, { .name = "PyCode_Type" } };
	struct dl_tfile f;
	int err;

	memset(vals, 0, NSYMS * sizeof(*vals));
	if (dl_tfile_open(pid, path, &f, NULL, 0))
		return -1;
	err = dl_elf_find_fd(f.fd, want, NSYMS, first_vaddr);
	*needs_lib = dl_elf_needs_fd(f.fd, "libpython");
	dl_tfile_close(&f);
	for (int k = 0; k < NSYMS; k++)
		vals[k] = want[k].value;
	return err ? -1 : 0;
}

/* What BPF's snapshot of a code object reads (bpf/pyframes.bpf.h), from the layout dl_pycode_read reads it with. */
static void snapshot_offsets(struct dl_py_cfg *cfg, const struct dl_py_layout *l)
{
	cfg->co_filename = l->co_filename;
	cfg->co_name = l->co_qualname ? l->co_qualname : l->co_name;
	cfg->co_linetable = l->co_linetable;
	cfg->str_ascii = l->ascii_size;
	cfg->str_utf8_len = l->compact_utf8_len;
	cfg->str_utf8 = l->compact_utf8;
}

static void set_up(struct dl_pyprocs *pp, struct dl_pyproc *p, const struct pybin *b, const struct dl_maps *maps)
{
	uint64_t vals[NSYMS], first_vaddr = 0, bias;
	const struct dl_py_layout *l;
	unsigned major = b->major, minor = b->minor;
	uint8_t dbg[44 * 8];
	uint32_t ver, keys_off = 0;
	int needs_lib = 0;

	p->decided = true;
	if (bin_symbols(p->pid, b->path, vals, &first_vaddr, &needs_lib) || !vals[SYM_RUNTIME] || !vals[SYM_CODE_TYPE]) {
		/*
		 * An executable linked with libpython (pyenv's, --enable-shared
		 * builds) has no interpreter of its own; seen before the dynamic
		 * linker mapped the library (held at its exec), it is looked at
		 * again once the library is there (find_bin prefers it).
		 */
		if (!b->lib && needs_lib > 0) {
			p->decided = false;
			return;
		}
		dl_warn("pid %d: %s has no _PyRuntime or PyCode_Type symbol: native call sites only", p->pid, b->path);
		return;
	}
	bias = b->start - first_vaddr;
	p->mem = dl_proc_open(p->pid, "mem");
	/* Py_Version (3.11+) is the running interpreter's own word; 3.10 has only its name. */
	if (vals[SYM_VERSION] && mem_read(p, bias + vals[SYM_VERSION], &ver, sizeof(ver)) == sizeof(ver)) {
		major = ver >> 24;
		minor = (ver >> 16) & 0xff;
	}
	l = dl_py_layout_of(major, minor);
	if (pp->own_glibc_agrees && (keys_off = dl_glibc_keys_off_of(p->pid, maps)) && keys_off != pp->specific_off)
		dl_info("pid %d: its glibc keeps pthread keys at %+d (dlbpf's at %+d)", p->pid, (int32_t)keys_off,
			(int32_t)pp->specific_off);
	if (!keys_off)
		keys_off = pp->specific_off;
	if (!l || !keys_off || p->mem < 0) {
		dl_warn("pid %d: CPython %u.%u (%s): Python frames need %s and a readable process; native call sites only",
			p->pid, major, minor, dl_basename(b->path), dl_py_versions_supported());
		return;
	}
	if (pp->no_walk) {
		dl_warn("pid %d: CPython %u.%u (%s): %s; native call sites only, and no lines of its waits or CPU time",
			p->pid, major, minor, dl_basename(b->path), pp->no_walk);
		return;
	}
	p->layout = *l;
	if (mem_read(p, bias + vals[SYM_RUNTIME], dbg, sizeof(dbg)) == sizeof(dbg) &&
	    dl_py_debug_offsets(dbg, sizeof(dbg), &p->layout))
		dl_debug("pid %d: CPython %u.%u: offsets from its _Py_DebugOffsets", p->pid, major, minor);
	p->code_type = bias + vals[SYM_CODE_TYPE];
	p->cfg = p->layout.bpf;
	p->cfg.tss_addr = bias + vals[SYM_RUNTIME] + dl_py_runtime_tss(&p->layout);
	p->cfg.specific_off = keys_off;
	snapshot_offsets(&p->cfg, &p->layout);
	p->cfg.epoch = ++pp->epochs;
	if (map_put(pp, p->pid, &p->cfg)) {
		dl_warn("pid %d: cannot add it to the Python frame map (%s): native call sites only", p->pid,
			strerror(errno));
		return;
	}
	p->python = true;
	dl_info("pid %d: CPython %u.%u (%s): call sites name Python lines", p->pid, major, minor,
		dl_basename(b->path));
}

void dl_pyprocs_scan(struct dl_pyprocs *pp, pid_t pid, const struct dl_maps *maps)
{
	struct dl_pyproc *p = proc_of(pp, pid, false);
	struct pybin b = { .path = "" };

	if (p && p->decided)
		return;
	if (dl_maps_foreach_in(maps, pid, find_bin, &b) < 0 || !b.path[0])
		return;   /* no interpreter (yet: a later rescan looks again) */
	set_up(pp, proc_of(pp, pid, true), &b, maps);
}

bool dl_pyprocs_reader(struct dl_pyprocs *pp, pid_t pid, struct dl_pyreader *out)
{
	struct dl_pyproc *p = proc_of(pp, pid, false);

	if (!p || !p->python || p->mem < 0)
		return false;
	*out = (struct dl_pyreader){ .layout = &p->layout, .code_type = p->code_type, .rd = mem_read, .ctx = p };
	return true;
}

void dl_pyprocs_fork(struct dl_pyprocs *pp, pid_t child, pid_t parent)
{
	struct dl_pyproc *from = proc_of(pp, parent, false), *p;

	if (!from || !from->python)
		return;
	dl_pyprocs_forget(pp, child);
	p = proc_of(pp, child, true);
	p->decided = p->python = true;
	p->layout = from->layout;
	p->code_type = from->code_type;
	p->cfg = from->cfg;
	p->mem = dl_proc_open(child, "mem");
	/*
	 * Gone already: a child that was not held at its fork (probes that follow the file) can run its
	 * calls and exit before its fork is read. Its memory was its parent's at the fork, and the code
	 * objects it ran were made before it, or read by BPF at the probe (dl_pyprocs_snapshot).
	 */
	if (p->mem < 0 && from->mem >= 0)
		p->mem = fcntl(from->mem, F_DUPFD_CLOEXEC, 0);
	if (p->mem < 0 || map_put(pp, child, &p->cfg))
		p->python = false;
}

void dl_pyprocs_forget(struct dl_pyprocs *pp, pid_t pid)
{
	uint64_t i;

	if (!dl_u64map_get(&pp->by_pid, (uint64_t)pid, &i) || !pp->v.v[i])
		return;
	if (pp->map_fd >= 0)
		bpf_map_delete_elem(pp->map_fd, &pid);
	proc_free(pp->v.v[i]);
	pp->v.v[i] = NULL;
	dl_u64map_del(&pp->by_pid, (uint64_t)pid);
}

static bool same_code(const struct dl_pycode_info *a, const struct dl_pycode_info *b)
{
	return a->id_filename == b->id_filename && a->id_name == b->id_name && a->id_linetable == b->id_linetable &&
	       a->firstlineno == b->firstlineno;
}

/*
 * Reads the code object at addr through rd and writes its record, unless the
 * one written says the same (the same identity, a table no shorter).
 */
static void remember(struct dl_pyproc *p, struct dl_stream *st, uint64_t addr, dl_pymem_fn rd, void *ctx,
		     uint64_t now)
{
	struct dl_pycode_info info;
	struct code_ent *e = NULL;
	uint64_t i;

	if (dl_pycode_read(&p->layout, p->code_type, rd, ctx, addr, &info))
		return;
	if (dl_u64map_get(&p->code_of, addr, &i))
		e = &p->codes.v[i];
	if (e && same_code(&info, &e->id) && info.table_len <= e->table_len) {
		e->checked_ns = now;
		e->table_short = e->table_short && info.table_short;
		dl_pycode_info_free(&info);
		return;
	}
	dl_emit_pycode(st, now, p->pid, addr, info.file, info.func, info.firstlineno, p->layout.lines_format,
		       info.table, info.table_len);
	if (!e) {
		dl_u64map_put(&p->code_of, addr, p->codes.n);
		e = dl_vec_push(&p->codes);
	}
	e->addr = addr;
	e->checked_ns = now;
	e->table_len = info.table_len;
	e->table_short = info.table_short;
	dl_pycode_info_free(&info);
	e->id = info;
}

/*
 * From the live process: writes the code record of addr unless the one
 * written (from BPF's snapshot, or an earlier read) still holds, its identity
 * checked now and then; a table a snapshot cut is read whole.
 */
static void name_code(struct dl_pyproc *p, struct dl_stream *st, uint64_t addr, struct dl_lazy_now *clock,
		      uint64_t recheck)
{
	uint64_t now = dl_lazy_now(clock);
	struct dl_pycode_info id;
	struct code_ent *e;
	uint64_t i;

	if (dl_u64map_get(&p->code_of, addr, &i) && !p->codes.v[i].table_short) {
		e = &p->codes.v[i];
		if (now - e->checked_ns < recheck)
			return;
		/* An unreadable one (gone with its process or freed) keeps what was written. */
		if (dl_pycode_identity(&p->layout, p->code_type, mem_read, p, addr, &id) || same_code(&id, &e->id)) {
			e->checked_ns = now;
			return;
		}
	}
	remember(p, st, addr, mem_read, p, now);
}

void dl_pyprocs_snapshot(struct dl_pyprocs *pp, struct dl_stream *st, const struct dl_pysnap_ev *ev, size_t len)
{
	struct dl_pyproc *p = len >= sizeof(ev->h) ? proc_of(pp, (pid_t)ev->h.tgid, false) : NULL;
	struct dl_pysnap_mem m;

	if (!p || !p->python || !dl_pysnap_mem_init(&m, ev, len)) {
		pp->snapshots_refused++;
		return;
	}
	pp->snapshots++;
	remember(p, st, ev->code, dl_pysnap_read, &m, ev->h.ts);
}

void dl_pyprocs_name_frames(struct dl_pyprocs *pp, struct dl_stream *st, pid_t tgid, const struct dl_py_stack *py,
			    struct dl_lazy_now *now)
{
	struct dl_pyproc *p;

	if (!py->n)
		return;
	p = proc_of(pp, tgid, false);
	if (!p || !p->python)
		return;
	for (uint32_t k = 0; k < py->n && k < DL_PY_MAX; k++)
		if (py->f[k].code)
			name_code(p, st, py->f[k].code, now, pp->recheck_ns);
}

void dl_pyprocs_name_call(struct dl_pyprocs *pp, struct dl_stream *st, const struct dl_call *c,
			  struct dl_lazy_now *now)
{
	if (c->has_py && c->depth == 0)
		dl_pyprocs_name_frames(pp, st, (pid_t)c->tgid, &c->py, now);
}
