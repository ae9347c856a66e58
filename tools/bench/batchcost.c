// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * batchcost: what batching records per CPU (issue 13's proposal) would save the producer, and the
 * collector, against one ring-buffer reservation per record, in the same run.
 *
 *   batchcost [--rounds R] [--records N]
 *
 * drain.bpf.c writes N launch records (dlbpf's own struct dl_cuda_ev, stamped as dl_reserve
 * stamps them) three ways, in interleaved rounds: one reservation each ("one", what dlbpf does),
 * B per reservation through a per-CPU staging array ("staged", what a probe could do), and B
 * written straight into one reservation ("direct", the upper bound of the saving). Each run is
 * a BPF_PROG_TEST_RUN, timed by this thread's clock; the ring is then drained by libbpf's
 * consumer with a callback that only counts, timed the same way. Prints a Markdown table:
 * median [min-max] ns per record, and each variant's ratio to "one" of the same round.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "dlbpf/events.h"
#include "drain.skel.h"

#define VARIANTS 3
#define MAX_ROUNDS 101

static const char *const names[VARIANTS] = { "one", "staged", "direct" };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int count_sample(void *ctx, void *data, size_t size)
{
	(void)data;
	*(uint64_t *)ctx += size / sizeof(struct dl_cuda_ev);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* "median [min-max]" of v[0..n), sorted in place. */
static void spread(double *v, int n, const char *fmt, char *out, size_t cap)
{
	char a[32], b[32], c[32];

	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	snprintf(a, sizeof(a), fmt, v[n / 2]);
	snprintf(b, sizeof(b), fmt, v[0]);
	snprintf(c, sizeof(c), fmt, v[n - 1]);
	snprintf(out, cap, "%s [%s-%s]", a, b, c);
}

int main(int argc, char **argv)
{
	static double produce[VARIANTS][MAX_ROUNDS], consume[VARIANTS][MAX_ROUNDS];
	static double pratio[VARIANTS][MAX_ROUNDS], cratio[VARIANTS][MAX_ROUNDS];
	struct drain_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	struct bpf_program *progs[VARIANTS];
	int rounds = 15, records = 16384, err = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--records") && i + 1 < argc)
			records = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: batchcost [--rounds R] [--records N]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || records < 16 || records % 16) {
		fprintf(stderr, "batchcost: --rounds 1-%d, --records a multiple of 16\n", MAX_ROUNDS);
		return 2;
	}
	skel = drain_bpf__open();
	if (!skel) {
		fprintf(stderr, "batchcost: cannot open drain.bpf.o: %s\n", strerror(errno));
		return 1;
	}
	progs[0] = skel->progs.produce;
	progs[1] = skel->progs.produce_staged;
	progs[2] = skel->progs.produce_direct;
	bpf_program__set_autoload(progs[1], true);
	bpf_program__set_autoload(progs[2], true);
	bpf_program__set_autoload(skel->progs.positions, false);
	skel->rodata->launch_api = 1;
	skel->rodata->launch_site = (uint64_t)(uintptr_t)main;
	if (drain_bpf__load(skel)) {
		fprintf(stderr, "batchcost: cannot load drain.bpf.o: %s\n", strerror(errno));
		goto cleanup;
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), count_sample, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "batchcost: cannot read the ring buffer: %s\n", strerror(errno));
		goto cleanup;
	}
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < VARIANTS; k++) {
			int v = (k + r) % VARIANTS;   /* each variant first in turn */
			struct { uint32_t n; } args = { (uint32_t)records };
			LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &args, .ctx_size_in = sizeof(args));
			uint64_t got = 0, t0, t1, t2;

			ring_buffer__free(rb);
			rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), count_sample, &got, NULL);
			if (!rb)
				goto cleanup;
			t0 = now_ns();
			if (bpf_prog_test_run_opts(bpf_program__fd(progs[v]), &o)) {
				fprintf(stderr, "batchcost: %s: %s\n", names[v], strerror(errno));
				goto cleanup;
			}
			t1 = now_ns();
			while (got < o.retval && ring_buffer__consume(rb) > 0)
				;
			t2 = now_ns();
			if (o.retval != (uint32_t)records || got != o.retval) {
				fprintf(stderr, "batchcost: %s wrote %u of %d records, %llu read back\n", names[v],
					o.retval, records, (unsigned long long)got);
				goto cleanup;
			}
			produce[v][r] = (double)(t1 - t0) / records;
			consume[v][r] = (double)(t2 - t1) / records;
		}
		for (int v = 0; v < VARIANTS; v++) {
			pratio[v][r] = produce[v][r] / produce[0][r];
			cratio[v][r] = consume[v][r] / consume[0][r];
		}
	}
	printf("| variant | producer ns per record | / one (same round) | collector ns per record | / one (same round) |\n");
	printf("|---|---|---|---|---|\n");
	for (int v = 0; v < VARIANTS; v++) {
		char a[128], b[128], c[128], d[128];

		spread(produce[v], rounds, "%.1f", a, sizeof(a));
		spread(pratio[v], rounds, "%.3f", b, sizeof(b));
		spread(consume[v], rounds, "%.1f", c, sizeof(c));
		spread(cratio[v], rounds, "%.3f", d, sizeof(d));
		printf("| %s | %s | %s | %s | %s |\n", names[v], a, b, c, d);
	}
	printf("\nmedian [min-max] over %d interleaved rounds of %d launch records (struct dl_cuda_ev, %zu B); "
	       "staged and direct: 16 records per reservation\n", rounds, records, sizeof(struct dl_cuda_ev));
	err = 0;
cleanup:
	ring_buffer__free(rb);
	drain_bpf__destroy(skel);
	return err;
}
