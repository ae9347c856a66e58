// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * drainprod: feeds a running dlbpf's ring buffer with launch records from a
 * BPF program (drain.bpf.c) run by BPF_PROG_TEST_RUN, so what is measured is
 * the collector's drain, not the uprobe trap of a traced thread.
 *
 *   drainprod [--threads T] [--rate R] [--records N] [--bursts N1,N2,...] [--backlog N]
 *
 * It prints "ready" and waits for a line "go DLBPF_PID" on stdin: dlbpf is
 * started in between with --pid of this process, so the records it drains
 * are of a traced process (tgid = this one) and go through every sink.
 * It then takes dlbpf's "rb", "drops" and "consumer_asleep" maps and
 * dlbpf's own wake-up threshold (its .rodata), and writes:
 *  - without --bursts: N records at R records/s in all (0: as fast as the
 *    threads go), then waits until dlbpf has read everything; one JSON line;
 *  - with --bursts: each burst as fast as one thread goes, after the ring
 *    buffer is empty; one JSON line per burst with the drops dlbpf counted.
 * The collector's CPU over each phase is its draining thread's
 * sum_exec_runtime (/proc/PID/task/PID/schedstat, ns) and, for comparison,
 * utime+stime from /proc/PID/stat (clock ticks).
 */
#include <errno.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "dlbpf/events.h"
#include "records/cuda_api.h"
#include "drain.skel.h"

#define BATCH 512   /* records per test run: one syscall per ~50 us at 10 M/s */

/* The host stub every record names as its kernel, resolved by dlbpf's symbolizer like a real one. */
__attribute__((noinline)) void drainprod_kernel(void)
{
	__asm__ volatile("");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "drainprod: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static uint64_t parse_u64(const char *opt, const char *arg)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-')
		die(opt, EINVAL);
	return v;
}

/*
 * Calls fn with each BPF map dlbpf (pid) holds open (found by its fdinfo, so
 * another dlbpf on the machine is never touched), until fn returns non-zero;
 * fn keeps the fd it was given by returning 1, else it is closed.
 */
static int each_map_of(pid_t pid, int (*fn)(int fd, const struct bpf_map_info *info, void *ctx), void *ctx)
{
	char path[320], line[256];
	struct dirent *d;
	DIR *dir;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while (!ret && (d = readdir(dir))) {
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);
		unsigned id = 0;
		int fd;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", pid, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			sscanf(line, "map_id: %u", &id);
		fclose(f);
		fd = id ? bpf_map_get_fd_by_id(id) : -1;
		if (fd < 0)
			continue;
		ret = bpf_map_get_info_by_fd(fd, &info, &len) ? 0 : fn(fd, &info, ctx);
		if (ret != 1)
			close(fd);
	}
	closedir(dir);
	return ret;
}

struct map_query {
	const char *name;
	unsigned type;
	int fd;
};

static int match_map(int fd, const struct bpf_map_info *info, void *ctx)
{
	struct map_query *q = ctx;

	if (info->type != q->type || strcmp(info->name, q->name))
		return 0;
	q->fd = fd;
	return 1;
}

static int dlbpf_map(pid_t pid, const char *name, unsigned type)
{
	struct map_query q = { name, type, -ENOENT };

	each_map_of(pid, match_map, &q);
	return q.fd;
}

struct global_query {
	const char *name;
	uint64_t value;
};

/* A u64 global of a .rodata map, found by name in the map's BTF; 2 when read. */
static int read_global(int fd, const struct bpf_map_info *info, void *ctx)
{
	struct global_query *q = ctx;
	struct btf *btf;
	const struct btf_type *sec;
	int ret = 0;

	if (info->type != BPF_MAP_TYPE_ARRAY || !info->btf_id || !strstr(info->name, ".rodata"))
		return 0;
	btf = btf__load_from_kernel_by_id(info->btf_id);
	sec = btf ? btf__type_by_id(btf, info->btf_value_type_id) : NULL;
	if (sec && btf_is_datasec(sec)) {
		const struct btf_var_secinfo *v = btf_var_secinfos(sec);

		for (int i = 0; i < btf_vlen(sec) && !ret; i++, v++) {
			const char *vn = btf__name_by_offset(btf, btf__type_by_id(btf, v->type)->name_off);
			char *val;
			__u32 zero = 0;

			if (strcmp(vn, q->name) || v->size != sizeof(q->value))
				continue;
			val = calloc(1, info->value_size);
			if (val && !bpf_map_lookup_elem(fd, &zero, val)) {
				memcpy(&q->value, val + v->offset, sizeof(q->value));
				ret = 2;
			}
			free(val);
		}
	}
	btf__free(btf);
	return ret;
}

/* The collector's CPU: its draining (main) thread's run time in ns, and utime+stime in ns of ticks. */
struct cpu_sample {
	uint64_t run_ns, tick_ns;
};

static void collector_cpu(pid_t pid, struct cpu_sample *s)
{
	char path[64], buf[1024];
	unsigned long long ut = 0, st = 0;
	FILE *f;

	s->run_ns = s->tick_ns = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, pid);
	f = fopen(path, "r");
	if (f) {
		unsigned long long v;

		if (fscanf(f, "%llu", &v) == 1)
			s->run_ns = v;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		char *p;

		buf[n] = '\0';
		p = strrchr(buf, ')');
		/* after the comm: state is field 3, utime 14, stime 15 */
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
			s->tick_ns = (ut + st) * (1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
		fclose(f);
	}
}

static struct drain_bpf *skel;
static int drops_fd;

static uint64_t cuda_drops(void)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = calloc((size_t)ncpu, sizeof(*v)), sum = 0;
	__u32 key = DL_DROP_CUDA;

	if (v && !bpf_map_lookup_elem(drops_fd, &key, v))
		for (int i = 0; i < ncpu; i++)
			sum += v[i];
	free(v);
	return sum;
}

/* Writes up to n records in one test run; returns how many were reserved. */
static uint32_t produce(uint32_t n)
{
	struct produce_args { __u32 n; } a = { n };
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));
	int err = bpf_prog_test_run_opts(bpf_program__fd(skel->progs.produce), &o);

	if (err)
		die("BPF_PROG_TEST_RUN", err);
	return o.retval;
}

static void read_positions(void)
{
	LIBBPF_OPTS(bpf_test_run_opts, o);

	if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.positions), &o))
		die("BPF_PROG_TEST_RUN", errno);
}

/* Returns when dlbpf has read everything written so far (it drains on its timer: within its interval). */
static void wait_drained(void)
{
	uint64_t end;

	read_positions();
	end = skel->bss->prod_pos;
	while (skel->bss->cons_pos < end) {
		usleep(200);
		read_positions();
	}
}

struct worker {
	pthread_t th;
	uint64_t records, rate, t0;   /* rate: this thread's records/s, 0 unpaced */
	uint64_t written;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t done = 0;

	while (done < w->records) {
		uint32_t n = w->records - done < BATCH ? (uint32_t)(w->records - done) : BATCH;

		if (w->rate) {
			/* Paced on the average: a late batch is followed at once by the next. */
			uint64_t due = w->t0 + (uint64_t)((double)done * 1e9 / (double)w->rate);
			struct timespec ts = { (time_t)(due / 1000000000ull), (long)(due % 1000000000ull) };

			if (due > now_ns())
				clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
		w->written += produce(n);
		done += n;
	}
	return NULL;
}

static void run_rate(pid_t dl, int threads, uint64_t rate, uint64_t records)
{
	struct worker w[2] = {};
	struct cpu_sample c0, c1;
	uint64_t d0 = cuda_drops(), t0, t_prod, t_end, written = 0;

	collector_cpu(dl, &c0);
	t0 = now_ns();
	for (int i = 0; i < threads; i++) {
		w[i].records = records / (uint64_t)threads + (i == 0 ? records % (uint64_t)threads : 0);
		w[i].rate = rate / (uint64_t)threads;
		w[i].t0 = t0;
		if (pthread_create(&w[i].th, NULL, work, &w[i]))
			die("pthread_create", errno);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].th, NULL);
		written += w[i].written;
	}
	t_prod = now_ns();
	wait_drained();
	t_end = now_ns();
	collector_cpu(dl, &c1);
	printf("{\"threads\": %d, \"rate\": %" PRIu64 ", \"records\": %" PRIu64 ", \"written\": %" PRIu64
	       ", \"drops\": %" PRIu64 ", \"produce_ns\": %" PRIu64 ", \"drain_ns\": %" PRIu64
	       ", \"collector_run_ns\": %" PRIu64 ", \"collector_tick_ns\": %" PRIu64 "}\n",
	       threads, rate, records, written, cuda_drops() - d0, t_prod - t0, t_end - t0, c1.run_ns - c0.run_ns,
	       c1.tick_ns - c0.tick_ns);
	fflush(stdout);
}

/* n records as fast as this thread goes; returns how many were reserved. */
static uint64_t produce_burst(uint64_t n)
{
	uint64_t done = 0, written = 0;

	while (done < n) {
		uint32_t k = n - done < BATCH ? (uint32_t)(n - done) : BATCH;

		written += produce(k);
		done += k;
	}
	return written;
}

/* The process's state letter from /proc/PID/stat ('T' once a SIGSTOP took). */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/*
 * The collector's own pace: n records written while it is stopped, then
 * timed from its first read to its last. The producer's speed is out of the
 * figure (one thread writes ~2-3 M records/s here while the collector reads
 * the same cache lines from the other CPU).
 */
static void run_backlog(pid_t dl, uint64_t n)
{
	uint64_t d0, written, t0, t1, t_first = 0, t_end, start_pos, end_pos;
	struct cpu_sample c0, c1;

	wait_drained();
	if (kill(dl, SIGSTOP))
		die("stopping dlbpf", errno);
	while (proc_state(dl) != 'T')
		usleep(100);
	d0 = cuda_drops();
	t0 = now_ns();
	written = produce_burst(n);
	t1 = now_ns();
	read_positions();
	start_pos = skel->bss->cons_pos;
	end_pos = skel->bss->prod_pos;
	collector_cpu(dl, &c0);
	if (kill(dl, SIGCONT))
		die("continuing dlbpf", errno);
	/* Polled every 50 us, sleeping in between: the collector may share a CPU with this thread. */
	do {
		usleep(50);
		read_positions();
		if (!t_first && skel->bss->cons_pos != start_pos)
			t_first = now_ns();
	} while (skel->bss->cons_pos < end_pos);
	t_end = now_ns();
	collector_cpu(dl, &c1);
	printf("{\"backlog\": %" PRIu64 ", \"written\": %" PRIu64 ", \"drops\": %" PRIu64 ", \"produce_ns\": %" PRIu64
	       ", \"drain_ns\": %" PRIu64 ", \"collector_run_ns\": %" PRIu64 ", \"collector_tick_ns\": %" PRIu64 "}\n",
	       n, written, cuda_drops() - d0, t1 - t0, t_end - t_first, c1.run_ns - c0.run_ns, c1.tick_ns - c0.tick_ns);
	fflush(stdout);
}

static void run_bursts(const char *list)
{
	char *copy = strdup(list), *save = NULL;

	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t n = parse_u64("--bursts", tok), written, d0, t0, t1;

		wait_drained();
		d0 = cuda_drops();
		t0 = now_ns();
		written = produce_burst(n);
		t1 = now_ns();
		wait_drained();
		printf("{\"burst\": %" PRIu64 ", \"written\": %" PRIu64 ", \"drops\": %" PRIu64
		       ", \"produce_ns\": %" PRIu64 "}\n", n, written, cuda_drops() - d0, t1 - t0);
		fflush(stdout);
	}
	free(copy);
}

int main(int argc, char **argv)
{
	uint64_t rate = 0, records = 1000000, backlog = 0;
	struct global_query wakeup_q = { "wakeup_bytes", 0 };
	const char *bursts = NULL;
	int threads = 1, rb_fd, asleep_fd, err;
	char line[64];
	pid_t dl;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			threads = (int)parse_u64(argv[i], argv[i + 1]);
		else if (!strcmp(argv[i], "--rate"))
			rate = parse_u64(argv[i], argv[i + 1]);
		else if (!strcmp(argv[i], "--records"))
			records = parse_u64(argv[i], argv[i + 1]);
		else if (!strcmp(argv[i], "--bursts"))
			bursts = argv[i + 1];
		else if (!strcmp(argv[i], "--backlog"))
			backlog = parse_u64(argv[i], argv[i + 1]);
		else
			die(argv[i], EINVAL);
	}
	if (threads < 1 || threads > 2 || argc % 2 == 0)
		die("usage: drainprod [--threads 1|2] [--rate R] [--records N] [--bursts N1,N2,...] [--backlog N]", EINVAL);
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) || sscanf(line, "go %d", &dl) != 1)
		die("expected 'go DLBPF_PID' on stdin", EINVAL);

	rb_fd = dlbpf_map(dl, "rb", BPF_MAP_TYPE_RINGBUF);
	if (rb_fd < 0)
		die("dlbpf's ring buffer (map rb)", rb_fd);
	drops_fd = dlbpf_map(dl, "drops", BPF_MAP_TYPE_PERCPU_ARRAY);
	if (drops_fd < 0)
		die("dlbpf's drop counters (map drops)", drops_fd);
	asleep_fd = dlbpf_map(dl, "consumer_asleep", BPF_MAP_TYPE_ARRAY);
	if (asleep_fd < 0)
		die("dlbpf's consumer sleep flag (map consumer_asleep)", asleep_fd);
	/* The wake-up threshold dlbpf set for its own programs, so ours wake it alike. */
	if (each_map_of(dl, read_global, &wakeup_q) != 2)
		die("dlbpf's wakeup_bytes (.rodata)", ENOENT);

	skel = drain_bpf__open();
	if (!skel)
		die("opening drain.bpf.o", errno);
	skel->rodata->launch_api = DL_API_LAUNCH_KERNEL;
	/* cudaLaunchKernel(func, grid {128,1,1}, block {256,1,1}, args, shmem 0, stream 0) */
	skel->rodata->launch_arg[0] = (uint64_t)(uintptr_t)drainprod_kernel;
	skel->rodata->launch_arg[1] = 128 | (1ull << 32);
	skel->rodata->launch_arg[2] = 1;
	skel->rodata->launch_arg[3] = 256 | (1ull << 32);
	skel->rodata->launch_arg[4] = 1;
	skel->rodata->launch_arg[5] = (uint64_t)(uintptr_t)&line;
	skel->rodata->launch_site = (uint64_t)(uintptr_t)drainprod_kernel + 4;
	skel->rodata->wakeup_bytes = wakeup_q.value;
	/* The ring buffer, the drop counters and the consumer's sleep flag are dlbpf's; submits is per producer. */
	struct bpf_map *m;
	bpf_object__for_each_map(m, skel->obj)
		if (m != skel->maps.rb && m != skel->maps.drops && m != skel->maps.consumer_asleep &&
		    m != skel->maps.submits && !bpf_map__is_internal(m))
			bpf_map__set_autocreate(m, false);
	if ((err = bpf_map__reuse_fd(skel->maps.rb, rb_fd)) || (err = bpf_map__reuse_fd(skel->maps.drops, drops_fd)) ||
	    (err = bpf_map__reuse_fd(skel->maps.consumer_asleep, asleep_fd)))
		die("sharing dlbpf's maps", err);
	err = drain_bpf__load(skel);
	if (err)
		die("loading drain.bpf.o", err);

	if (backlog)
		run_backlog(dl, backlog);
	else if (bursts)
		run_bursts(bursts);
	else
		run_rate(dl, threads, rate, records);
	drain_bpf__destroy(skel);
	return 0;
}
