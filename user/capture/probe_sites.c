// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <bpf/bpf.h>
#include "capture/probe_sites.h"
#include "dlbpf/events.h"
#include "util.h"

struct dl_probe_sites {
	int map_fd;
	uint32_t dev;           /* the kernel's encoding, as the BPF side reads s_dev */
	uint64_t ino;
	size_t refs;
	uint64_t *off;          /* the offsets this file's holders wrote, each once */
	size_t n, cap;
	struct dl_probe_sites *next;
};

/*
 * Every file with entries. Holds are taken by the collector and let go by the
 * detacher thread (uprobes.c) too; entries are written and removed under the
 * lock, so that a file's last holder cannot remove what its next first holder
 * has just found in place.
 */
static struct {
	pthread_mutex_t mu;
	struct dl_probe_sites *files;
} sites = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The kernel's own dev_t (major << 20 | minor, as s_dev holds it) of major << 32 | minor. */
static uint32_t kernel_dev(uint64_t dev)
{
	return (uint32_t)((dev >> 32) << 20 | (dev & 0xfffff));
}

static void put_locked(struct dl_probe_sites *f)
{
	struct dl_probe_sites **p;

	if (--f->refs)
		return;
	for (p = &sites.files; *p != f; p = &(*p)->next)
		;
	*p = f->next;
	for (size_t i = 0; i < f->n; i++) {
		struct dl_probe_site key = { .ino = f->ino, .dev = f->dev, .offset = f->off[i] };

		bpf_map_delete_elem(f->map_fd, &key);
	}
	free(f->off);
	free(f);
}

int dl_probe_sites_get(int map_fd, uint64_t dev, uint64_t ino, const unsigned long *off, const uint64_t *cookie,
		       size_t n, struct dl_probe_sites **out)
{
	uint32_t kdev = kernel_dev(dev);
	struct dl_probe_sites *f;
	int err = 0;

	pthread_mutex_lock(&sites.mu);
	for (f = sites.files; f && (f->map_fd != map_fd || f->dev != kdev || f->ino != ino); f = f->next)
		;
	if (!f) {
		f = dl_xcalloc(1, sizeof(*f));
		f->map_fd = map_fd;
		f->dev = kdev;
		f->ino = ino;
		f->next = sites.files;
		sites.files = f;
	}
	f->refs++;
	for (size_t i = 0; i < n && !err; i++) {
		struct dl_probe_site key = { .ino = ino, .dev = kdev, .offset = off[i] };
		uint64_t have;
		bool known = !bpf_map_lookup_elem(map_fd, &key, &have);

		if (known && have == cookie[i])
			continue;
		if (bpf_map_update_elem(map_fd, &key, &cookie[i], BPF_ANY)) {
			err = -errno;
			break;
		}
		if (known)
			continue;   /* written before by this file's holders: already listed */
		if (f->n == f->cap) {
			f->cap = f->cap ? 2 * f->cap : 64;
			f->off = dl_xrealloc(f->off, f->cap * sizeof(*f->off));
		}
		f->off[f->n++] = off[i];
	}
	if (err)
		put_locked(f);
	else
		*out = f;
	pthread_mutex_unlock(&sites.mu);
	return err;
}

void dl_probe_sites_put(struct dl_probe_sites *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&sites.mu);
	put_locked(s);
	pthread_mutex_unlock(&sites.mu);
}
