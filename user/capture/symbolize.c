// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Events are drained after the fact, often after a short-lived process has
 * exited, so each traced process's executable mappings are remembered while it
 * lives (dl_symbolizer_note) and symbols are read from the files later.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture/elfsym.h"
#include "capture/procfs.h"
#include "capture/symbolize.h"

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

struct pid_maps {
	pid_t pid;
	struct exec_map *v;
	size_t n, cap;
};

struct seen_key {
	uint64_t addr;
	pid_t pid;
	int used;
};

struct dl_symbolizer {
	struct seen_key *seen;   /* open addressing, power-of-two capacity */
	size_t nseen, seen_cap;
	struct cached_file files[DL_SYMCACHE];
	unsigned next;   /* round-robin eviction */
	struct pid_maps *pids;
	size_t npids, pcap;
};

struct dl_symbolizer *dl_symbolizer_new(void)
{
	return calloc(1, sizeof(struct dl_symbolizer));
}

static void pid_maps_clear(struct pid_maps *pm)
{
	for (size_t i = 0; i < pm->n; i++)
		free(pm->v[i].path);
	pm->n = 0;
}

void dl_symbolizer_free(struct dl_symbolizer *sz)
{
	if (!sz)
		return;
	for (int i = 0; i < DL_SYMCACHE; i++)
		if (sz->files[i].loaded)
			dl_elf_syms_free(&sz->files[i].syms);
	for (size_t i = 0; i < sz->npids; i++) {
		pid_maps_clear(&sz->pids[i]);
		free(sz->pids[i].v);
	}
	free(sz->pids);
	free(sz->seen);
	free(sz);
}

static size_t seen_slot(const struct seen_key *v, size_t cap, pid_t pid, uint64_t addr)
{
	uint64_t h = (addr ^ ((uint64_t)(uint32_t)pid << 32)) * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 20) & (cap - 1);

	while (v[i].used && (v[i].addr != addr || v[i].pid != pid))
		i = (i + 1) & (cap - 1);
	return i;
}

bool dl_symbolizer_first(struct dl_symbolizer *sz, pid_t pid, uint64_t addr)
{
	size_t i;

	if (2 * (sz->nseen + 1) > sz->seen_cap) {
		size_t cap = sz->seen_cap ? sz->seen_cap * 2 : 256;
		struct seen_key *v = calloc(cap, sizeof(*v));

		if (!v)
			return false;
		for (size_t k = 0; k < sz->seen_cap; k++)
			if (sz->seen[k].used)
				v[seen_slot(v, cap, sz->seen[k].pid, sz->seen[k].addr)] = sz->seen[k];
		free(sz->seen);
		sz->seen = v;
		sz->seen_cap = cap;
	}
	i = seen_slot(sz->seen, sz->seen_cap, pid, addr);
	if (sz->seen[i].used)
		return false;
	sz->seen[i] = (struct seen_key){ .addr = addr, .pid = pid, .used = 1 };
	sz->nseen++;
	return true;
}

static struct pid_maps *pid_maps_of(struct dl_symbolizer *sz, pid_t pid, bool create)
{
	for (size_t i = 0; i < sz->npids; i++)
		if (sz->pids[i].pid == pid)
			return &sz->pids[i];
	if (!create)
		return NULL;
	if (sz->npids == sz->pcap) {
		size_t cap = sz->pcap ? sz->pcap * 2 : 8;
		struct pid_maps *v = realloc(sz->pids, cap * sizeof(*v));

		if (!v)
			return NULL;
		sz->pids = v;
		sz->pcap = cap;
	}
	memset(&sz->pids[sz->npids], 0, sizeof(sz->pids[0]));
	sz->pids[sz->npids].pid = pid;
	return &sz->pids[sz->npids++];
}

static int note_mapping(const struct dl_mapping *m, void *arg)
{
	struct pid_maps *pm = arg;
	struct exec_map *e;

	if (m->perms[2] != 'x')
		return 0;
	if (pm->n == pm->cap) {
		size_t cap = pm->cap ? pm->cap * 2 : 32;
		struct exec_map *v = realloc(pm->v, cap * sizeof(*v));

		if (!v)
			return -1;
		pm->v = v;
		pm->cap = cap;
	}
	e = &pm->v[pm->n];
	e->path = strdup(m->path);
	if (!e->path)
		return -1;
	e->start = m->start;
	e->end = m->end;
	e->offset = m->offset;
	e->dev = (uint64_t)m->dev_major << 32 | m->dev_minor;
	e->inode = m->inode;
	pm->n++;
	return 0;
}

int dl_symbolizer_note(struct dl_symbolizer *sz, pid_t pid)
{
	struct pid_maps *pm = pid_maps_of(sz, pid, true);
	struct pid_maps fresh = { .pid = pid };
	int err;

	if (!pm)
		return -1;
	err = dl_maps_foreach(pid, note_mapping, &fresh);
	/* An exiting process shows no mappings: keep what was known (its events are still being named). */
	if (!err && (!fresh.n || !dl_proc_running(pid)))
		err = -ESRCH;
	if (err) {
		/* Keep what was known: the process may have just exited. */
		pid_maps_clear(&fresh);
		free(fresh.v);
		return err;
	}
	pid_maps_clear(pm);
	free(pm->v);
	*pm = fresh;
	return 0;
}

static struct cached_file *file_syms(struct dl_symbolizer *sz, pid_t pid, const struct exec_map *m)
{
	struct cached_file *cf;
	char path[4200];

	for (int i = 0; i < DL_SYMCACHE; i++)
		if (sz->files[i].loaded && sz->files[i].dev == m->dev && sz->files[i].inode == m->inode)
			return &sz->files[i];
	cf = &sz->files[sz->next++ % DL_SYMCACHE];
	if (cf->loaded)
		dl_elf_syms_free(&cf->syms);
	cf->loaded = 0;
	/* Through the process's root while it lives (containers), else the path as mapped. */
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, m->path);
	if (dl_elf_syms_load(path, &cf->syms) && dl_elf_syms_load(m->path, &cf->syms))
		return NULL;
	cf->dev = m->dev;
	cf->inode = m->inode;
	cf->loaded = 1;
	return cf;
}

static const struct exec_map *find_map(const struct pid_maps *pm, uint64_t addr)
{
	for (size_t i = 0; pm && i < pm->n; i++)
		if (addr >= pm->v[i].start && addr < pm->v[i].end)
			return &pm->v[i];
	return NULL;
}

void dl_symbolize(struct dl_symbolizer *sz, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	const struct exec_map *m = find_map(pid_maps_of(sz, pid, false), addr);
	const struct dl_elf_sym *sym;
	struct cached_file *cf;

	buf[0] = '\0';
	if (!m && dl_symbolizer_note(sz, pid) == 0)
		m = find_map(pid_maps_of(sz, pid, false), addr);
	if (!m)
		return;
	cf = file_syms(sz, pid, m);
	if (!cf)
		return;
	sym = dl_elf_sym_by_offset(&cf->syms, addr - m->start + m->offset);
	if (sym)
		snprintf(buf, len, "%s", sym->name);
}
