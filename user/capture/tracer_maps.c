// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What user space reads of the loaded programs: the maps it drains or fills
 * (ring buffer, held processes, Python processes, aggregates), the drop
 * counters, the kernel's recursion misses per program and the block requests
 * still open at the end.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "dlbpf.skel.h"
#include "dlbpf/io.h"
#include "capture/tracer.h"
#include "capture/tracer_int.h"
#include "log.h"
#include "util.h"

int dl_tracer_ringbuf_fd(const struct dl_tracer *t)
{
	return bpf_map__fd(t->skel->maps.rb);
}

/*
 * Maps the flag BPF reads before it forces a wake-up. Where it cannot be
 * mapped it is set once to "asleep": every quarter-full buffer wakes the
 * consumer, as before the flag existed, rather than none.
 */
int dl_tracer_map_consumer_flag(struct dl_tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.consumer_asleep);
	uint32_t zero = 0, one = 1;
	void *p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p != MAP_FAILED) {
		t->consumer_asleep = p;
		return 0;
	}
	dl_debug("cannot map consumer_asleep (%s): every wake-up is sent", strerror(errno));
	if (bpf_map_update_elem(fd, &zero, &one, BPF_ANY)) {
		int err = -errno;

		dl_err("cannot set consumer_asleep: %s", strerror(-err));
		return err;
	}
	return 0;
}

void dl_tracer_unmap_consumer_flag(struct dl_tracer *t)
{
	if (t->consumer_asleep)
		munmap(t->consumer_asleep, (size_t)sysconf(_SC_PAGESIZE));
	t->consumer_asleep = NULL;
}

uint64_t dl_tracer_wakeup_bytes(const struct dl_tracer *t)
{
	return t->skel->rodata->wakeup_bytes;
}

void dl_tracer_consumer_sleeps(struct dl_tracer *t, bool asleep)
{
	/* Sequentially consistent: the wait that follows must not come before the store. */
	if (t->consumer_asleep)
		__atomic_store_n(t->consumer_asleep, asleep, __ATOMIC_SEQ_CST);
}

int dl_tracer_read_drops(const struct dl_tracer *t, uint64_t out[DL_DROP_MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v;

	memset(out, 0, DL_DROP_MAX * sizeof(*out));
	if (ncpu <= 0)
		return ncpu;
	v = dl_xcalloc((size_t)ncpu, sizeof(*v));
	for (uint32_t k = 0; k < DL_DROP_MAX; k++) {
		if (bpf_map__lookup_elem(t->skel->maps.drops, &k, sizeof(k), v, (size_t)ncpu * sizeof(*v), 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			out[k] += v[c];
	}
	out[DL_DROP_TRACED] += t->traced_full;
	free(v);
	return 0;
}

uint64_t dl_tracer_missed_switch_ins(const struct dl_tracer *t)
{
	return t->skel && t->skel->bss ? t->skel->bss->missed_switch_ins : 0;
}

uint64_t dl_tracer_recursion_misses(const struct dl_tracer *t,
				    void (*fn)(const char *prog, uint64_t misses, void *ctx), void *ctx)
{
	const struct bpf_object_skeleton *sk = t->skel ? t->skel->skeleton : NULL;
	uint64_t total = 0;

	for (int i = 0; sk && i < sk->prog_cnt; i++) {
		struct bpf_program *prog = *sk->progs[i].prog;
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(prog);

		uint64_t misses;

		memset(&info, 0, sizeof(info));
		if (fd < 0 || bpf_prog_get_info_by_fd(fd, &info, &len))
			continue;
		/* A return probe's runs its pool had no instance for are skipped runs too. */
		misses = info.recursion_misses + dl_kretprobes_missed_by(&t->krets, prog);
		if (!misses)
			continue;
		total += misses;
		if (fn)
			fn(bpf_program__name(prog), misses, ctx);
	}
	return total;
}

void dl_tracer_unfinished_requests(const struct dl_tracer *t, void (*fn)(const struct dl_rq_start *rq, void *ctx),
				   void *ctx)
{
	int fd = bpf_map__fd(t->skel->maps.requests);
	uint64_t key, next;
	struct dl_rq_start v;
	bool first = true;

	/* At most the map's size: a map that changed under the walk cannot make it loop. */
	for (int n = 0; n < DL_MAX_REQUESTS && !bpf_map_get_next_key(fd, first ? NULL : &key, &next); n++) {
		first = false;
		key = next;
		if (!bpf_map_lookup_elem(fd, &key, &v))
			fn(&v, ctx);
	}
}

int dl_tracer_held_fd(const struct dl_tracer *t)
{
	return bpf_map__fd(t->skel->maps.held);
}

int dl_tracer_py_fd(const struct dl_tracer *t)
{
	return bpf_map__fd(t->skel->maps.py_procs);
}

volatile uint32_t *dl_tracer_py_known(struct dl_tracer *t)
{
	return &t->skel->bss->py_known;
}

int dl_tracer_agg_fd(const struct dl_tracer *t)
{
	return bpf_map__fd(t->skel->maps.agg);
}
