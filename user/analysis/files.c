// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "analysis/files.h"

void dl_files_free(struct dl_proc_files *pf)
{
	for (size_t i = 0; i < pf->files.n; i++)
		free(pf->files.v[i].path);
	dl_vec_free(&pf->files);
	dl_u64map_free(&pf->by_path);
	dl_u64map_free(&pf->fds);
	dl_u64map_free(&pf->by_ino);
	dl_u64map_free(&pf->reader_tids);
	dl_u64map_free(&pf->thread_ns);
	memset(pf, 0, sizeof(*pf));
}

/* The index + 1 of path's stat, added if new; 0 when the table is full. */
static uint64_t intern(struct dl_proc_files *pf, const char *path, bool truncated)
{
	uint64_t key = dl_hash_bytes(path, strlen(path)), i;
	struct dl_file_stat *f;

	/* Open addressing on the hash: two paths with one hash step on to the next key. */
	for (;; key++) {
		if (!dl_u64map_get(&pf->by_path, key, &i))
			break;
		if (strcmp(pf->files.v[i].path, path) == 0)
			return i + 1;
	}
	if (pf->files.n >= DL_FILES_TRACKED)
		return 0;
	f = dl_vec_push(&pf->files);
	memset(f, 0, sizeof(*f));
	f->path = dl_xstrdup(path);
	f->truncated = truncated;
	dl_u64map_put(&pf->by_path, key, pf->files.n - 1);
	return pf->files.n;
}

static uint64_t fd_key(int32_t fd)
{
	return (uint32_t)fd;
}

void dl_files_open(struct dl_proc_files *pf, const struct dl_file_open_ev *e)
{
	uint64_t at;

	if (e->fd < 0 && !(e->flags & DL_FILE_MAPPED))
		return;
	/* A path the kernel could not read names no file: the fd's reads are unknown ones. */
	if (e->flags & DL_FILE_PATH_FAULT) {
		dl_u64map_del(&pf->fds, fd_key(e->fd));
		return;
	}
	at = intern(pf, e->path, e->flags & DL_FILE_TRUNCATED);
	/* Its inode names it to the page faults of a mapping of it, which come with no fd. */
	if (at && e->ino32)
		dl_u64map_put(&pf->by_ino, e->ino32, at);
	if (e->flags & DL_FILE_MAPPED)
		return;
	if (!at && pf->more.files < UINT64_MAX)
		pf->more.files++;
	/* An fd number closed and opened again names the new file from here on. */
	dl_u64map_put(&pf->fds, fd_key(e->fd), at);
}

void dl_files_close(struct dl_proc_files *pf, const struct dl_file_close_ev *e)
{
	dl_u64map_del(&pf->fds, fd_key(e->fd));
}

static void tally(struct dl_read_tally *t, const struct dl_file_read_ev *e)
{
	t->reads++;
	t->read_bytes += (uint64_t)e->ret;
	t->read_ns += e->dur_ns;
	t->disk_bytes += e->disk_bytes;
}

void dl_files_read(struct dl_proc_files *pf, const struct dl_file_read_ev *e)
{
	struct dl_file_stat *f;
	uint64_t at;

	if (e->ret < 0) {
		pf->read_errors++;
		return;
	}
	if (!dl_u64map_get(&pf->fds, fd_key(e->fd), &at)) {
		tally(&pf->unknown, e);
		return;
	}
	if (!at) {
		tally(&pf->more, e);
		return;
	}
	dl_u64map_put(&pf->reader_tids, e->h.tid, 0);
	f = &pf->files.v[at - 1];
	f->reads++;
	f->read_bytes += (uint64_t)e->ret;
	f->read_ns += e->dur_ns;
	f->disk_bytes += e->disk_bytes;
	if (e->ret > 0 && (uint64_t)e->ret < DL_SMALL_READ_BYTES) {
		f->small_reads++;
		f->small_ns += e->dur_ns;
		f->small_bytes += (uint64_t)e->ret;
	}
	if (!e->ret)
		f->eof_reads++;
}

const struct dl_file_stat *dl_files_submit(struct dl_proc_files *pf, const struct dl_bio_submit_ev *e)
{
	struct dl_file_stat *f;
	uint64_t at;

	if (!e->ino32 || (e->flags & (DL_BIO_WRITE | DL_BIO_IN_READ)) || !dl_u64map_get(&pf->by_ino, e->ino32, &at) || !at)
		return NULL;
	f = &pf->files.v[at - 1];
	f->fault_bytes += e->bytes;
	dl_u64map_put(&pf->reader_tids, e->h.tid, 0);
	return f;
}

/* A page on x86-64 and on arm64's usual 4 KiB kernels: a file smaller is read in one small call whatever the loader does. */
#define SMALL_FILE_BYTES 4096u

bool dl_file_small_by_nature(const struct dl_file_stat *f)
{
	static const char *const pseudo[] = { "/proc/", "/sys/" };

	for (size_t i = 0; i < sizeof(pseudo) / sizeof(pseudo[0]); i++)
		if (!strncmp(f->path, pseudo[i], strlen(pseudo[i])))
			return true;
	return f->eof_reads && f->read_bytes < f->eof_reads * SMALL_FILE_BYTES;
}

void dl_files_fork(struct dl_proc_files *child, const struct dl_proc_files *parent)
{
	for (size_t i = 0; i < parent->fds.cap; i++) {
		const struct dl_u64map_slot *s = &parent->fds.slots[i];
		const struct dl_file_stat *f;

		if (!s->used)
			continue;
		f = s->val ? &parent->files.v[s->val - 1] : NULL;
		dl_u64map_put(&child->fds, s->key, f ? intern(child, f->path, f->truncated) : 0);
	}
	/* Its mappings too. */
	for (size_t i = 0; i < parent->by_ino.cap; i++) {
		const struct dl_u64map_slot *s = &parent->by_ino.slots[i];
		const struct dl_file_stat *f;
		uint64_t at;

		if (!s->used || !s->val)
			continue;
		f = &parent->files.v[s->val - 1];
		at = intern(child, f->path, f->truncated);
		if (at)
			dl_u64map_put(&child->by_ino, s->key, at);
	}
}

static int by_bytes(const void *a, const void *b)
{
	const struct dl_file_stat *x = *(const struct dl_file_stat *const *)a;
	const struct dl_file_stat *y = *(const struct dl_file_stat *const *)b;

	uint64_t xb = x->read_bytes + x->fault_bytes, yb = y->read_bytes + y->fault_bytes;

	if (xb != yb)
		return xb < yb ? 1 : -1;
	return strcmp(x->path, y->path);
}

const struct dl_file_stat **dl_files_top(const struct dl_proc_files *pf, size_t max, size_t *n)
{
	const struct dl_file_stat **v = dl_xcalloc(pf->files.n, sizeof(*v));
	size_t k = 0;

	for (size_t i = 0; i < pf->files.n; i++)
		if (pf->files.v[i].reads || pf->files.v[i].fault_bytes)
			v[k++] = &pf->files.v[i];
	qsort(v, k, sizeof(*v), by_bytes);
	*n = k < max ? k : max;
	return v;
}

void dl_files_note_sched(struct dl_proc_files *pf, uint32_t tid, uint64_t dur_ns)
{
	uint64_t ns = 0;

	dl_u64map_get(&pf->thread_ns, tid, &ns);
	dl_u64map_put(&pf->thread_ns, tid, ns + dur_ns);
}

uint64_t dl_files_threads_ns(const struct dl_proc_files *pf, const struct dl_u64map *tids)
{
	uint64_t total = 0, ns;

	for (size_t i = 0; i < tids->cap; i++)
		if (tids->slots[i].used && dl_u64map_get(&pf->thread_ns, tids->slots[i].key, &ns))
			total += ns;
	return total;
}

uint64_t dl_files_reader_ns(const struct dl_proc_files *pf)
{
	return dl_files_threads_ns(pf, &pf->reader_tids);
}
