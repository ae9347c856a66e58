// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "capture/elfsym.h"
#include "capture/glibctsd.h"
#include "capture/procfs.h"
#include "capture/tfile.h"
#include "dlbpf/pyframes.h"
#include "log.h"

/*
 * struct pthread from the thread pointer (glibctsd.h): 0 on x86-64, minus
 * its size on aarch64. Measured in dlbpf's own thread; on aarch64 another
 * glibc build's struct pthread may differ in size, and libthread_db's
 * descriptors do not export it: the process's keys are then found through
 * dlbpf's size, and a glibc that disagrees reads as no Python thread.
 */
static int64_t pthread_from_tp(void)
{
	return (const char *)pthread_self() - (const char *)__builtin_thread_pointer();
}

uint32_t dl_glibc_keys_off_self(void)
{
	const void *mark = (const void *)(uintptr_t)0x5eed5eed5eed5eedull;
	const char *self = (const char *)pthread_self();
	const int64_t self_from_tp = pthread_from_tp();
	pthread_key_t key;
	uint32_t off = 0;

	if (pthread_key_create(&key, NULL))
		return 0;
	if (key < DL_PY_KEYS_1ST && !pthread_setspecific(key, mark)) {
		for (uint32_t i = 8; i < 4096; i += 8) {
			const void *v;

			memcpy(&v, self + i, sizeof(v));
			if (v == mark && i >= 8 + 16 * key) {
				off = (uint32_t)(self_from_tp + (int64_t)(i - 8 - 16 * key));
				break;
			}
		}
	}
	pthread_key_delete(key);
	return off;
}

/* libthread_db's descriptor of a field: its size in bits, the elements of an array, its offset. */
struct db_field {
	uint32_t bits, count, offset;
};

int dl_glibc_keys_off_fd(int fd, uint32_t *off)
{
	struct db_field specific, data, block_data;
	uint32_t entry_size, block_size;
	struct dl_elf_want want[] = {
		{ .name = "_thread_db_pthread_specific", .bytes = &specific, .len = sizeof(specific) },
		{ .name = "_thread_db_pthread_key_data_data", .bytes = &data, .len = sizeof(data) },
		{ .name = "_thread_db_pthread_key_data_level2_data", .bytes = &block_data, .len = sizeof(block_data) },
		{ .name = "_thread_db_sizeof_pthread_key_data", .bytes = &entry_size, .len = sizeof(entry_size) },
		{ .name = "_thread_db_sizeof_pthread_key_data_level2", .bytes = &block_size, .len = sizeof(block_size) },
	};
	uint64_t first_vaddr;

	const int n = (int)(sizeof(want) / sizeof(want[0]));

	if (dl_elf_find_fd(fd, want, n, &first_vaddr))
		return -ENOENT;
	for (int k = 0; k < n; k++)
		if (!want[k].value || want[k].len != (k < 3 ? sizeof(struct db_field) : sizeof(uint32_t)))
			return -ENOENT;
	/* What pyframes.bpf.h reads: the value of key k at + 16 k + 8 in a first block of 32. */
	if (entry_size != 16 || data.offset != 8 || data.bits != 64 || block_data.count != DL_PY_KEYS_1ST ||
	    block_size != DL_PY_KEYS_1ST * entry_size)
		return -ENOTSUP;
	/*
	 * The first block is struct pthread's specific_1stblock, declared right
	 * before the specific[] array the descriptor gives (so in every nptl glibc):
	 * dl_glibc_keys_off_self checks it on dlbpf's own.
	 */
	if (specific.offset < block_size || specific.offset - block_size > 64 * 1024)
		return -ENOTSUP;
	*off = (uint32_t)(pthread_from_tp() + (int64_t)(specific.offset - block_size));
	return 0;
}

struct glibc_find {
	char path[4096];
	uint64_t start, end;
	int found;
};

/* libc.so.6, libc-2.31.so, libpthread.so.0 (where the descriptors were before glibc 2.34) */
static int find_glibc(const struct dl_mapping *m, void *arg)
{
	struct glibc_find *g = arg;
	const char *base = dl_basename(m->path);

	if (m->offset != 0 || (strncmp(base, "libc.so", 7) && strncmp(base, "libc-", 5) &&
			       strncmp(base, "libpthread", 10)))
		return 0;
	/* libpthread wins: before 2.34 it held the descriptors, and libc had none. */
	if (g->found && strncmp(base, "libpthread", 10))
		return 0;
	snprintf(g->path, sizeof(g->path), "%s", m->path);
	g->start = m->start;
	g->end = m->end;
	g->found = 1;
	return 0;
}

uint32_t dl_glibc_keys_off_of(pid_t pid, const struct dl_maps *maps)
{
	struct glibc_find g = { .found = 0 };
	struct dl_tfile f;
	uint32_t off = 0;
	int err;

	if (dl_maps_foreach_in(maps, pid, find_glibc, &g) < 0 || !g.found)
		return 0;
	if (dl_tfile_open_mapped(pid, g.start, g.end, g.path, &f, NULL, 0))
		return 0;
	err = dl_glibc_keys_off_fd(f.fd, &off);
	dl_tfile_close(&f);
	if (err)
		dl_debug("pid %d: %s: %s", (int)pid, g.path,
			 err == -ENOTSUP ? "pthread keys laid out as BPF does not read" : "no libthread_db descriptors");
	return err ? 0 : off;
}
