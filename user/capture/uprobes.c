// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "capture/uprobes.h"
#include "dlbpf/events.h"
#include "log.h"
#include "util.h"

struct dl_plink {
	size_t n;
	bool single;          /* classic uprobes, one per function */
	struct site_file *sites;   /* where cookies go by file offset: the file's entries, which it holds */
	struct dl_uprobe_mode *mode;
	struct bpf_link *v[];
};

/*
 * Where attach cookies are missing, each probed instruction's cookie sits in
 * probe_cookies under its file and offset (bpf/common.bpf.h dl_site_cookie).
 * A cookie is a function of the instruction, so every set of probes on a file
 * (in every process) writes the same entries: the file's are removed when the
 * last set that holds the file goes. Sets go from the detacher thread too.
 */
struct site_file {
	uint32_t dev;           /* the kernel's encoding */
	uint64_t ino;
	size_t refs;
	uint64_t *off;          /* the offsets written, each once */
	size_t n, cap;
	struct site_file *next;
};

static struct {
	pthread_mutex_t mu;
	struct site_file *files;
} sites = { .mu = PTHREAD_MUTEX_INITIALIZER };

static struct dl_plink *plink_new(size_t n)
{
	struct dl_plink *l = dl_xcalloc(1, sizeof(*l) + n * sizeof(l->v[0]));

	l->n = n;
	return l;
}

/* The kernel's own dev_t (major << 20 | minor, as s_dev holds it) of a device /proc/PID/maps names. */
static uint32_t kernel_dev(uint64_t dev)
{
	return (uint32_t)((dev >> 32) << 20 | (dev & 0xfffff));
}

static void sites_put(struct dl_uprobe_mode *m, struct site_file *f)
{
	struct site_file **p;

	pthread_mutex_lock(&sites.mu);
	if (--f->refs) {
		pthread_mutex_unlock(&sites.mu);
		return;
	}
	for (p = &sites.files; *p != f; p = &(*p)->next)
		;
	*p = f->next;
	pthread_mutex_unlock(&sites.mu);
	for (size_t i = 0; i < f->n; i++) {
		struct dl_probe_site key = { .ino = f->ino, .dev = f->dev, .offset = f->off[i] };

		bpf_map_delete_elem(m->cookie_map_fd, &key);
	}
	free(f->off);
	free(f);
}

/*
 * Writes s's cookies under their file offsets, before any of its probes is
 * attached (an entry that fires first finds its cookie), and takes a hold on
 * the file's entries; 0 or -errno (E2BIG: the map is full).
 */
static int sites_get(struct dl_uprobe_mode *m, const struct dl_uprobe_set *s, struct site_file **out)
{
	uint32_t dev = kernel_dev(s->dev);
	struct site_file *f;
	int err = 0;

	pthread_mutex_lock(&sites.mu);
	for (f = sites.files; f && (f->dev != dev || f->ino != s->inode); f = f->next)
		;
	if (!f) {
		f = dl_xcalloc(1, sizeof(*f));
		f->dev = dev;
		f->ino = s->inode;
		f->next = sites.files;
		sites.files = f;
	}
	f->refs++;
	for (size_t i = 0; i < s->n && !err; i++) {
		struct dl_probe_site key = { .ino = f->ino, .dev = f->dev, .offset = s->off[i] };
		uint64_t have;

		if (!bpf_map_lookup_elem(m->cookie_map_fd, &key, &have) && have == s->cookie[i])
			continue;
		if (bpf_map_update_elem(m->cookie_map_fd, &key, &s->cookie[i], BPF_ANY)) {
			err = -errno;
			break;
		}
		if (f->n == f->cap) {
			f->cap = f->cap ? 2 * f->cap : 64;
			f->off = dl_xrealloc(f->off, f->cap * sizeof(*f->off));
		}
		f->off[f->n++] = s->off[i];
	}
	pthread_mutex_unlock(&sites.mu);
	if (err) {
		sites_put(m, f);
		return err;
	}
	*out = f;
	return 0;
}

static void plink_free(struct dl_plink *l)
{
	if (l->sites)
		sites_put(l->mode, l->sites);
	free(l);
}

struct dl_plink *dl_plink_attach(struct dl_uprobe_mode *m, struct bpf_program *prog, const struct dl_uprobe_set *s)
{
	struct dl_plink *l;
	int err;

	if (!s->n) {
		errno = EINVAL;
		return NULL;
	}
	if (!m->multi && !m->cookies && !m->site_cookies) {
		errno = ENOTSUP;
		return NULL;
	}
	if (m->multi) {
		LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = s->off, .cookies = (__u64 *)s->cookie, .cnt = s->n,
			    .retprobe = s->ret);

		l = plink_new(1);
		l->v[0] = bpf_program__attach_uprobe_multi(prog, s->pid, s->path, NULL, &o);
		if (!l->v[0]) {
			err = -errno;
			goto fail;
		}
		return l;
	}
	l = plink_new(s->n);
	l->single = true;
	if (!m->cookies) {
		/* Before the probes: an entry that fires first must find its cookie. */
		l->mode = m;
		err = sites_get(m, s, &l->sites);
		if (err)
			goto fail;
	}
	for (size_t i = 0; i < s->n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = s->ret, .bpf_cookie = m->cookies ? s->cookie[i] : 0);

		l->v[i] = bpf_program__attach_uprobe_opts(prog, s->pid, s->path, s->off[i], &o);
		if (!l->v[i]) {
			err = -errno;
			goto fail;
		}
	}
	return l;
fail:
	dl_plink_destroy(l);
	errno = -err;
	return NULL;
}

size_t dl_plink_count(const struct dl_plink *l)
{
	return l ? l->n : 0;
}

void dl_plink_take(struct dl_plink *l, struct bpf_link **out)
{
	if (!l)
		return;
	memcpy(out, l->v, l->n * sizeof(l->v[0]));
	plink_free(l);
}

void dl_plink_destroy(struct dl_plink *l)
{
	if (!l)
		return;
	/*
	 * Classic uprobes one after the other, from this thread: the kernel
	 * detaches them one at a time whatever the threads (4.0-4.3 s for 41
	 * functions' entry and return probes on 6.18 with 128 threads or one), and
	 * 128 threads exiting at once after it soft-locked both CPUs of a 5.10 and
	 * a 6.1 guest (in do_exit, under QEMU).
	 */
	for (size_t i = 0; i < l->n; i++)
		bpf_link__destroy(l->v[i]);
	plink_free(l);
}

bool dl_plink_single(const struct dl_plink *l)
{
	return l && l->single;
}

/*
 * Classic uprobes of processes that exited or libraries unmapped are detached
 * by one thread of their own, in the order given (entry links first): a
 * library's take seconds, which the collector's drain must not wait for.
 */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t work, idle;
	pthread_t th;
	bool running, stop;
	struct dl_plink **q;
	size_t head, n, cap;
} detacher = { .mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER };

static void *detacher_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&detacher.mu);
	for (;;) {
		struct dl_plink *l;

		while (detacher.head == detacher.n && !detacher.stop)
			pthread_cond_wait(&detacher.work, &detacher.mu);
		if (detacher.head == detacher.n)
			break;
		l = detacher.q[detacher.head];
		pthread_mutex_unlock(&detacher.mu);
		dl_plink_destroy(l);
		pthread_mutex_lock(&detacher.mu);
		if (++detacher.head == detacher.n) {
			detacher.head = detacher.n = 0;
			pthread_cond_broadcast(&detacher.idle);
		}
	}
	pthread_mutex_unlock(&detacher.mu);
	return NULL;
}

void dl_plink_destroy_later(struct dl_plink *l)
{
	if (!l)
		return;
	if (!l->single) {
		dl_plink_destroy(l);   /* one link */
		return;
	}
	pthread_mutex_lock(&detacher.mu);
	if (!detacher.running)
		detacher.running = pthread_create(&detacher.th, NULL, detacher_main, NULL) == 0;
	if (!detacher.running) {
		/* No thread to give it to: here, now. */
		pthread_mutex_unlock(&detacher.mu);
		dl_plink_destroy(l);
		return;
	}
	if (detacher.n == detacher.cap) {
		detacher.cap = detacher.cap ? 2 * detacher.cap : 16;
		detacher.q = dl_xrealloc(detacher.q, detacher.cap * sizeof(*detacher.q));
	}
	detacher.q[detacher.n++] = l;
	pthread_cond_signal(&detacher.work);
	pthread_mutex_unlock(&detacher.mu);
}

void dl_plinks_flush(void)
{
	pthread_mutex_lock(&detacher.mu);
	while (detacher.running && detacher.n)
		pthread_cond_wait(&detacher.idle, &detacher.mu);
	if (!detacher.running) {
		pthread_mutex_unlock(&detacher.mu);
		return;
	}
	detacher.stop = true;
	pthread_cond_signal(&detacher.work);
	pthread_mutex_unlock(&detacher.mu);
	pthread_join(detacher.th, NULL);
	pthread_mutex_lock(&detacher.mu);
	detacher.running = detacher.stop = false;
	free(detacher.q);
	detacher.q = NULL;
	detacher.cap = 0;
	pthread_mutex_unlock(&detacher.mu);
}

static void *destroy_link(void *l)
{
	bpf_link__destroy(l);
	return NULL;
}

/*
 * Most of a link's detach is waiting for a grace period (a uprobe_multi link
 * takes 22-76 ms on kernel 6.18; one after the other, 3 multi links and 10
 * tracepoints took ~230 ms). Destroyed from threads of their own, the waits
 * overlap. Not for classic uprobes (dl_plink_destroy).
 */
#define DESTROY_BATCH 32

void dl_links_destroy_parallel(struct bpf_link **links, size_t n)
{
	pthread_t th[DESTROY_BATCH];
	size_t i = 0;

	if (n == 1) {
		bpf_link__destroy(links[0]);
		return;
	}
	while (i < n) {
		size_t batch = n - i < DESTROY_BATCH ? n - i : DESTROY_BATCH;
		bool ok[DESTROY_BATCH];

		for (size_t k = 0; k < batch; k++) {
			ok[k] = links[i + k] && pthread_create(&th[k], NULL, destroy_link, links[i + k]) == 0;
			if (!ok[k])
				bpf_link__destroy(links[i + k]);
		}
		for (size_t k = 0; k < batch; k++)
			if (ok[k])
				pthread_join(th[k], NULL);
		i += batch;
	}
}
