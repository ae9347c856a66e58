// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE
/*
 * Events are drained after the fact, often after a short-lived process has
 * exited, so each traced process's executable mappings are remembered while it
 * lives (dl_symbolizer_note) and symbols are read from the files later.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "capture/elfsym.h"
#include "capture/procfs.h"
#include "capture/symbolize.h"
#include "capture/tfile.h"
#include "log.h"
#include "records/clock.h"
#include "util.h"

#define DL_SYMCACHE 16

struct cached_file {
	uint64_t dev, inode;
	struct dl_elf_syms syms;
	int loaded;
};

struct exec_map {
	uint64_t start, end, offset, dev, inode;
	char *path;
};

typedef DL_VEC(struct exec_map) exec_map_vec;

struct pid_maps {
	pid_t pid;
	bool paths_ours;    /* its maps' paths name files in dlbpf's view (the same mount namespace) */
	exec_map_vec maps;
	struct dl_u64map seen;   /* addresses asked about (dl_symbolizer_first) */
	uint64_t read_ns;        /* when its maps were last read (tried) */
};

/*
 * Files that processes of other mount namespaces map, and files deleted
 * since they were mapped, held open (O_PATH, no read) while their process
 * lives, so that its code is still named once it is gone: no path of
 * dlbpf's leads there then. Bounded: a descriptor each.
 */
#define DL_SYMHELD_MAX 256

struct held_file {
	uint64_t dev, inode;
	int fd;
};

struct dl_symbolizer {
	DL_VEC(struct held_file) held;
	bool held_full_said;
	bool held_refused;   /* map_files links cannot be opened here (no CAP_SYS_ADMIN) */
	struct cached_file files[DL_SYMCACHE];
	unsigned next;   /* round-robin eviction */
	DL_VEC(struct pid_maps) pids;
	struct dl_u64map pid_index;   /* pid -> position in pids */
};

struct dl_symbolizer *dl_symbolizer_new(void)
{
	return dl_xcalloc(1, sizeof(struct dl_symbolizer));
}

static void exec_maps_free(exec_map_vec *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->v[i].path);
	dl_vec_free(v);
}

void dl_symbolizer_free(struct dl_symbolizer *sz)
{
	if (!sz)
		return;
	for (int i = 0; i < DL_SYMCACHE; i++)
		if (sz->files[i].loaded)
			dl_elf_syms_free(&sz->files[i].syms);
	for (size_t i = 0; i < sz->pids.n; i++) {
		exec_maps_free(&sz->pids.v[i].maps);
		dl_u64map_free(&sz->pids.v[i].seen);
	}
	dl_vec_free(&sz->pids);
	dl_u64map_free(&sz->pid_index);
	for (size_t i = 0; i < sz->held.n; i++)
		close(sz->held.v[i].fd);
	dl_vec_free(&sz->held);
	free(sz);
}

static struct pid_maps *pid_maps_of(struct dl_symbolizer *sz, pid_t pid, bool create)
{
	uint64_t i;
	struct pid_maps *pm;

	if (dl_u64map_get(&sz->pid_index, (uint64_t)pid, &i))
		return &sz->pids.v[i];
	if (!create)
		return NULL;
	dl_u64map_put(&sz->pid_index, (uint64_t)pid, sz->pids.n);
	pm = dl_vec_push(&sz->pids);
	pm->pid = pid;
	return pm;
}

/*
 * The seen set's value: the misses so far (low 16 bits), the looks (the next
 * 32), and whether the address is settled (named, or missed
 * DL_SYMBOLIZE_TRIES times). An unsettled one is asked again.
 */
#define SEEN_SETTLED (1ull << 63)
#define SEEN_MISSES(v) ((v) & 0xffff)
#define SEEN_LOOKS(v) (((v) >> 16) & 0xffffffffu)
#define DL_SYMBOLIZE_TRIES 3
/*
 * An address no mapping holds has the maps read again, at most this often
 * per process: code in anonymous memory (a JIT) or a corrupt address would
 * otherwise cost a read of /proc/PID/maps per record.
 */
#define DL_SYMBOLIZE_REREAD_NS 100000000ull

bool dl_symbolizer_first(struct dl_symbolizer *sz, pid_t pid, uint64_t addr)
{
	struct pid_maps *pm = pid_maps_of(sz, pid, true);
	uint64_t v = 0;

	if (dl_u64map_get(&pm->seen, addr, &v) && (v & SEEN_SETTLED))
		return false;
	dl_u64map_put(&pm->seen, addr, v | SEEN_SETTLED);
	return true;
}

int dl_symbolize_once(struct dl_symbolizer *sz, pid_t pid, uint64_t key, uint64_t addr, struct dl_code_loc *loc)
{
	struct pid_maps *pm = pid_maps_of(sz, pid, true);
	uint64_t v = 0, misses, looks;

	if (dl_u64map_get(&pm->seen, key, &v) && (v & SEEN_SETTLED))
		return -1;
	misses = SEEN_MISSES(v);
	looks = SEEN_LOOKS(v);
	dl_symbolize_loc(sz, pid, addr, loc);
	/* A miss counts when something was read anew for it: the maps or the file. */
	if (!loc->final && !loc->reused)
		misses++;
	/* The symbolizer's own maps may have grown: look the entry up anew. */
	pm = pid_maps_of(sz, pid, true);
	dl_u64map_put(&pm->seen, key, loc->final || misses >= DL_SYMBOLIZE_TRIES ? SEEN_SETTLED :
		      (dl_min_u64(looks + 1, 0xffffffffu) << 16) | misses);
	return (int)dl_min_u64(looks, INT32_MAX);
}

static int note_mapping(const struct dl_mapping *m, void *arg)
{
	exec_map_vec *maps = arg;

	if (m->perms[2] != 'x')
		return 0;
	*dl_vec_push(maps) = (struct exec_map){
		.start = m->start, .end = m->end, .offset = m->offset,
		.dev = (uint64_t)m->dev_major << 32 | m->dev_minor, .inode = m->inode,
		.path = dl_xstrdup(m->path),
	};
	return 0;
}

static bool same_map(const struct exec_map *a, const struct exec_map *b)
{
	return a->start == b->start && a->end == b->end && a->dev == b->dev && a->inode == b->inode &&
	       a->offset == b->offset;
}

/*
 * Addresses asked about inside code that is no longer mapped (a dlclose) are
 * forgotten: what is mapped there next is named afresh, and a library loaded
 * and unloaded in a loop does not add to the set. /proc/PID/maps is sorted
 * by address, so one pass over both lists finds the mappings that went.
 */
static void forget_unmapped(struct pid_maps *pm, const exec_map_vec *fresh)
{
	DL_VEC(uint64_t) gone = { 0 };
	size_t k = 0;

	for (size_t i = 0; i < pm->maps.n; i++) {
		const struct exec_map *m = &pm->maps.v[i];

		while (k < fresh->n && fresh->v[k].start < m->start)
			k++;
		if (k < fresh->n && same_map(&fresh->v[k], m))
			continue;
		for (size_t s = 0; s < pm->seen.cap; s++) {
			uint64_t key = pm->seen.slots[s].key, addr = key & ~DL_SYMBOLIZE_SITE_KEY;

			if (pm->seen.slots[s].used && addr >= m->start && addr < m->end)
				*dl_vec_push(&gone) = key;
		}
	}
	for (size_t i = 0; i < gone.n; i++)
		dl_u64map_del(&pm->seen, gone.v[i]);
	dl_vec_free(&gone);
}

static const struct held_file *held_of(const struct dl_symbolizer *sz, uint64_t dev, uint64_t inode)
{
	for (size_t i = 0; i < sz->held.n; i++)
		if (sz->held.v[i].dev == dev && sz->held.v[i].inode == inode)
			return &sz->held.v[i];
	return NULL;
}

/* Whether m's file has no path of dlbpf's to name it by once pid is gone. */
static bool needs_holding(const struct pid_maps *pm, const struct exec_map *m)
{
	return !pm->paths_ours || dl_tfile_path_deleted(m->path);
}

/* pm's mapped files that need it, each held once (by dev and inode) while there is room. */
static void hold_files(struct dl_symbolizer *sz, pid_t pid, const struct pid_maps *pm)
{
	for (size_t i = 0; i < pm->maps.n; i++) {
		const struct exec_map *m = &pm->maps.v[i];
		int fd;

		if (!needs_holding(pm, m) || held_of(sz, m->dev, m->inode))
			continue;
		if (sz->held.n >= DL_SYMHELD_MAX) {
			if (!sz->held_full_said)
				dl_info("%d files of other mount namespaces (or deleted) held for naming their code: those of "
					"processes after them are named only while their process lives", DL_SYMHELD_MAX);
			sz->held_full_said = true;
			return;
		}
		fd = dl_tfile_hold_mapped(pid, m->start, m->end);
		if (fd >= 0) {
			*dl_vec_push(&sz->held) = (struct held_file){ .dev = m->dev, .inode = m->inode, .fd = fd };
		} else if (fd == -EPERM || fd == -EACCES) {
			/* Without CAP_SYS_ADMIN no link opens: not tried again at every rescan. */
			sz->held_refused = true;
			return;
		}
	}
}

int dl_symbolizer_note(struct dl_symbolizer *sz, pid_t pid, const struct dl_maps *maps)
{
	struct pid_maps *pm = pid_maps_of(sz, pid, true);
	exec_map_vec fresh = { 0 };
	int err;

	pm->read_ns = dl_now_ns();
	err = dl_maps_foreach_in(maps, pid, note_mapping, &fresh);

	/* An exiting process shows no mappings: keep what was known (its events are still being named). */
	if (!err && (!fresh.n || !dl_proc_running(pid)))
		err = -ESRCH;
	if (err) {
		exec_maps_free(&fresh);
		return err;
	}
	if (pm->seen.n)
		forget_unmapped(pm, &fresh);
	exec_maps_free(&pm->maps);
	pm->maps = fresh;
	pm->paths_ours = dl_tfile_paths_ours(pid);
	if (!sz->held_refused)
		hold_files(sz, pid, pm);
	return 0;
}

void dl_symbolizer_fork(struct dl_symbolizer *sz, pid_t child, pid_t parent)
{
	struct pid_maps *pm;
	exec_map_vec maps = { 0 };
	bool paths_ours;
	uint64_t read_ns;

	pm = pid_maps_of(sz, parent, false);
	if (!pm || child == parent)
		return;
	for (size_t i = 0; i < pm->maps.n; i++) {
		*dl_vec_push(&maps) = pm->maps.v[i];
		maps.v[maps.n - 1].path = dl_xstrdup(pm->maps.v[i].path);
	}
	paths_ours = pm->paths_ours;
	read_ns = pm->read_ns;
	/* Looked up again: the child's entry may move the parent's. A pid seen before is another process now. */
	pm = pid_maps_of(sz, child, true);
	exec_maps_free(&pm->maps);
	dl_u64map_free(&pm->seen);
	pm->maps = maps;
	pm->paths_ours = paths_ours;
	pm->read_ns = read_ns;
}

/*
 * m's file, the mapped one (or inside pid's root) while it lives; once it is gone, the one held for it
 * (needs_holding), else by its path in dlbpf's root (pid's paths were ours).
 */
static int open_mapped(const struct dl_symbolizer *sz, const struct pid_maps *pm, pid_t pid, const struct exec_map *m,
		       struct dl_tfile *f)
{
	int rootfd, err = dl_tfile_open_mapped(pid, m->start, m->end, m->path, f, NULL, 0);
	const struct held_file *h;

	if (err != -ENOENT || !pm)
		return err;
	if (needs_holding(pm, m)) {
		h = held_of(sz, m->dev, m->inode);
		return h ? dl_tfile_open_held(h->fd, f, NULL, 0) : err;
	}
	rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	err = dl_tfile_open_in(rootfd, m->path, f, NULL, 0);
	close(rootfd);
	return err;
}

static struct cached_file *file_syms(struct dl_symbolizer *sz, pid_t pid, const struct exec_map *m)
{
	struct cached_file *cf;
	struct dl_tfile f;

	for (int i = 0; i < DL_SYMCACHE; i++)
		if (sz->files[i].loaded && sz->files[i].dev == m->dev && sz->files[i].inode == m->inode)
			return &sz->files[i];
	cf = &sz->files[sz->next++ % DL_SYMCACHE];
	if (cf->loaded)
		dl_elf_syms_free(&cf->syms);
	cf->loaded = 0;
	if (open_mapped(sz, pid_maps_of(sz, pid, false), pid, m, &f))
		return NULL;
	if (dl_elf_syms_load_fd(f.fd, &cf->syms)) {
		dl_tfile_close(&f);
		return NULL;
	}
	dl_tfile_close(&f);
	cf->dev = m->dev;
	cf->inode = m->inode;
	cf->loaded = 1;
	return cf;
}

static const struct exec_map *find_map(const struct pid_maps *pm, uint64_t addr)
{
	for (size_t i = 0; pm && i < pm->maps.n; i++)
		if (addr >= pm->maps.v[i].start && addr < pm->maps.v[i].end)
			return &pm->maps.v[i];
	return NULL;
}

void dl_symbolize_loc(struct dl_symbolizer *sz, pid_t pid, uint64_t addr, struct dl_code_loc *loc)
{
	const struct exec_map *m = find_map(pid_maps_of(sz, pid, false), addr);
	const struct dl_elf_sym *sym;
	struct cached_file *cf;

	memset(loc, 0, sizeof(*loc));
	if (!m) {
		const struct pid_maps *pm = pid_maps_of(sz, pid, false);

		if (pm && dl_now_ns() - pm->read_ns < DL_SYMBOLIZE_REREAD_NS)
			loc->reused = true;
		else if (dl_symbolizer_note(sz, pid, NULL) == 0)
			m = find_map(pid_maps_of(sz, pid, false), addr);
	}
	if (!m) {
		dl_debug("pid %d: no mapping holds %#" PRIx64, (int)pid, addr);
		return;
	}
	snprintf(loc->obj, sizeof(loc->obj), "%s", m->path);
	loc->file_off = addr - m->start + m->offset;
	cf = file_syms(sz, pid, m);
	if (!cf) {
		dl_debug("pid %d: %#" PRIx64 ": no symbols read from %s", (int)pid, addr, m->path);
		return;
	}
	sym = dl_elf_sym_by_offset(&cf->syms, loc->file_off);
	loc->final = true;
	if (sym) {
		snprintf(loc->sym, sizeof(loc->sym), "%s", sym->name);
		loc->sym_off = loc->file_off - sym->offset;
	}
}

void dl_symbolize(struct dl_symbolizer *sz, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	struct dl_code_loc loc;

	dl_symbolize_loc(sz, pid, addr, &loc);
	snprintf(buf, len, "%s", loc.sym);
}
