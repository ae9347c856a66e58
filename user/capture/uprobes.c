// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "capture/probe_sites.h"
#include "capture/uprobes.h"
#include "records/clock.h"
#include "dlbpf/events.h"
#include "log.h"
#include "util.h"

struct dl_plink {
	size_t n;
	bool single;          /* classic uprobes, one per function */
	struct dl_probe_sites *sites;   /* where cookies go by file offset: the file's entries, held */
	struct bpf_link *v[];
};

/* When a probe was last attached (atomic): the detacher waits for a quiet moment (below). */
static uint64_t last_attach_ns;

static struct dl_plink *plink_new(size_t n)
{
	struct dl_plink *l = dl_xcalloc(1, sizeof(*l) + n * sizeof(l->v[0]));

	l->n = n;
	return l;
}

static void plink_free(struct dl_plink *l)
{
	dl_probe_sites_put(l->sites);
	free(l);
}

struct dl_plink *dl_plink_attach(struct dl_uprobe_mode *m, struct bpf_program *prog, const struct dl_uprobe_set *s)
{
	/* libbpf's every process is -1 (0 is dlbpf itself). */
	pid_t pid = s->pid ? s->pid : -1;
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
	__atomic_store_n(&last_attach_ns, dl_now_ns(), __ATOMIC_RELAXED);
	if (m->multi) {
		LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = s->off, .cookies = (__u64 *)s->cookie, .cnt = s->n,
			    .retprobe = s->ret);

		l = plink_new(1);
		l->v[0] = bpf_program__attach_uprobe_multi(prog, pid, s->path, NULL, &o);
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
		err = dl_probe_sites_get(m->cookie_map_fd, s->dev, s->inode, s->off, s->cookie, s->n, &l->sites);
		if (err)
			goto fail;
	}
	for (size_t i = 0; i < s->n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = s->ret, .bpf_cookie = m->cookies ? s->cookie[i] : 0);

		l->v[i] = bpf_program__attach_uprobe_opts(prog, pid, s->path, s->off[i], &o);
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
 * The probes of processes that exited are detached by one thread of their
 * own, so that neither the collector's drain nor a process held for its
 * attach waits for them: a uprobe_multi link takes 22-76 ms on kernel 6.18
 * (a grace period), a library's classic uprobes seconds. Whatever is queued
 * when the thread wakes goes as one batch: the multi links from threads of
 * their own (their grace periods overlap, dl_links_destroy_parallel), the
 * classic uprobes one after the other in the order given (entry links first).
 *
 * A batch waits until no probe was attached for DETACH_QUIET_NS: an attach
 * and a detach both take the kernel's uprobe locks (and each blocks every fork
 * of the machine while it writes breakpoints), so a detach in the midst of a
 * storm of forks made each held child's attach wait (6.18, 200 children 20 at
 * a time: children held up to 700 ms with the two interleaved). Probes of a
 * gone process fire for no one, but each one is still a consumer that every
 * hit of its function walks past: no more than DETACH_DEFER_MAX probe sets
 * wait, and dl_plinks_flush takes them at once.
 */
#define DETACH_QUIET_NS 100000000ull
#define DETACH_DEFER_MAX 1024

static struct {
	pthread_mutex_t mu;
	pthread_cond_t work, idle;
	pthread_t th;
	bool running, stop, busy, hurry;
	DL_VEC(struct dl_plink *) q;
} detacher = { .mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER };

/* Detaches one batch, its multi links at once and then its classic uprobes in turn. */
static void destroy_batch(struct dl_plink **v, size_t n)
{
	DL_VEC(struct bpf_link *) multi = { 0 };
	uint64_t t0 = dl_now_ns();

	for (size_t i = 0; i < n; i++) {
		if (v[i]->single)
			continue;
		*dl_vec_push(&multi) = v[i]->v[0];
		plink_free(v[i]);
		v[i] = NULL;
	}
	size_t nmulti = multi.n;

	dl_links_destroy_parallel(multi.v, multi.n);
	dl_vec_free(&multi);
	for (size_t i = 0; i < n; i++)
		if (v[i])
			dl_plink_destroy(v[i]);
	dl_debug("detacher: %zu probe sets of gone processes (%zu uprobe_multi links) detached in %.1f ms", n, nmulti,
		 (double)(dl_now_ns() - t0) / 1e6);
}

/*
 * With the lock held: waits while probes are being attached (and neither a flush nor a full queue
 * says go); true once the queue should go, false when woken to look again.
 */
static bool quiet_wait(void)
{
	uint64_t since = dl_now_ns() - __atomic_load_n(&last_attach_ns, __ATOMIC_RELAXED);
	struct timespec until;
	uint64_t ns;

	if (detacher.stop || detacher.hurry || detacher.q.n >= DETACH_DEFER_MAX || since >= DETACH_QUIET_NS)
		return true;
	clock_gettime(CLOCK_REALTIME, &until);   /* the condition variable's clock */
	ns = (uint64_t)until.tv_nsec + (DETACH_QUIET_NS - since);
	until.tv_sec += (time_t)(ns / 1000000000u);
	until.tv_nsec = (long)(ns % 1000000000u);
	pthread_cond_timedwait(&detacher.work, &detacher.mu, &until);
	return false;
}

static void *detacher_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&detacher.mu);
	for (;;) {
		struct dl_plink **batch;
		size_t n;

		while (!detacher.q.n && !detacher.stop)
			pthread_cond_wait(&detacher.work, &detacher.mu);
		if (!detacher.q.n)
			break;
		if (!quiet_wait())
			continue;
		batch = detacher.q.v;
		n = detacher.q.n;
		detacher.q.v = NULL;
		detacher.q.n = detacher.q.cap = 0;
		detacher.busy = true;
		pthread_mutex_unlock(&detacher.mu);
		destroy_batch(batch, n);
		free(batch);
		pthread_mutex_lock(&detacher.mu);
		detacher.busy = false;
		if (!detacher.q.n)
			pthread_cond_broadcast(&detacher.idle);
	}
	pthread_mutex_unlock(&detacher.mu);
	return NULL;
}

void dl_plink_destroy_later(struct dl_plink *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&detacher.mu);
	if (!detacher.running)
		detacher.running = pthread_create(&detacher.th, NULL, detacher_main, NULL) == 0;
	if (!detacher.running) {
		/* No thread to give it to: here, now. */
		pthread_mutex_unlock(&detacher.mu);
		dl_plink_destroy(l);
		return;
	}
	*dl_vec_push(&detacher.q) = l;
	pthread_cond_signal(&detacher.work);
	pthread_mutex_unlock(&detacher.mu);
}

void dl_plinks_flush(void)
{
	pthread_mutex_lock(&detacher.mu);
	detacher.hurry = true;
	pthread_cond_signal(&detacher.work);
	while (detacher.running && (detacher.q.n || detacher.busy))
		pthread_cond_wait(&detacher.idle, &detacher.mu);
	if (!detacher.running) {
		detacher.hurry = false;
		pthread_mutex_unlock(&detacher.mu);
		return;
	}
	detacher.stop = true;
	pthread_cond_signal(&detacher.work);
	pthread_mutex_unlock(&detacher.mu);
	pthread_join(detacher.th, NULL);
	pthread_mutex_lock(&detacher.mu);
	detacher.running = detacher.stop = detacher.hurry = false;
	dl_vec_free(&detacher.q);
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
