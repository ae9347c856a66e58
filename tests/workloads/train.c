// SPDX-License-Identifier: MIT
/*
 * train — a training-loop emulator for dlbpf's tests and demo.
 *
 * Compiled by gcc against the toolkit's CUDA headers and linked against the
 * toolkit's libcudart.so.13 (no rpath). Run it with
 *   LD_LIBRARY_PATH=.output/gpusim          the GPU simulator (timing model)
 *   LD_LIBRARY_PATH=/usr/local/cuda/lib64   the real runtime: without a GPU
 *                                            every call fails at once; use
 *                                            --ignore-errors to keep going
 *
 * Shape of the job (like a PyTorch DataLoader + training loop):
 *   - data-loader workers are processes (fork); worker w produces batches
 *     w, w+W, w+2W, ... : it reads --read-kb from the dataset file (buffered,
 *     dropping the pages afterwards with POSIX_FADV_DONTNEED so every read
 *     reaches the disk, or O_DIRECT with --odirect) in --io-kb requests,
 *     spends --worker-cpu-us of CPU ("decode/augment") and hands the batch
 *     to the main process in a MAP_SHARED ring of 2*W slots guarded by
 *     process-shared semaphores;
 *   - the main thread, per step: train_step_begin(step) (uprobe target),
 *     wait for the batch, --host-cpu-us of CPU, H2D copy of the batch (pinned
 *     = the ring is cudaHostRegister'ed, or pageable; --h2d-chunks copies),
 *     --kernels launches (cudaLaunchKernel, 8 distinct host functions as
 *     handles, each --kernel-us on the device), then a synchronous 4-byte D2H
 *     cudaMemcpy of the loss: the host waits for the GPU there.
 *   - --truth FILE: JSON lines, one per step, with the phases as measured by
 *     the workload itself on CLOCK_MONOTONIC, and a summary line.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 32
#define MAX_SLOTS (2 * MAX_WORKERS)
#define MAX_SPINNERS 64
#define PAGE 4096ul

/* ------------------------------------------------------------ options -- */

struct opts {
	const char *scenario;
	const char *expect; /* phase expected to dominate (scenario presets) */
	int steps, workers, h2d_chunks, kernels, spinners;
	long batch_kb, read_kb, io_kb, worker_cpu_us, host_cpu_us, kernel_us;
	double launch_us; /* < 0: leave the runtime's default */
	int pinned, odirect, ignore_errors, check, quiet;
	long data_mb;
	char data[PATH_MAX];
	const char *truth;
};

static struct opts O = {
	.scenario = "custom",
	.expect = NULL,
	.steps = 50,
	.workers = 2,
	.h2d_chunks = 1,
	.kernels = 10,
	.spinners = 0,
	.batch_kb = 4096,
	.read_kb = 512,
	.io_kb = 1024,
	.worker_cpu_us = 5000,
	.host_cpu_us = 1000,
	.kernel_us = 500,
	.launch_us = -1,
	.pinned = 1,
	.data_mb = 64,
};

struct scenario {
	const char *name, *expect, *what;
	int steps, workers, h2d_chunks, kernels, spinners, pinned, odirect;
	long batch_kb, read_kb, io_kb, worker_cpu_us, host_cpu_us, kernel_us;
};

/* Presets sized for a 2-core VM: each run takes about 1.5-3 s and the named
 * phase takes >= 50% of the step time in the workload's own ground truth. */
static const struct scenario scenarios[] = {
	/* name          expect        what */
	{ "gpu", "gpu_wait", "the host waits in the loss copy for 20 x 1.5 ms of kernels",
	  .steps = 80, .workers = 2, .h2d_chunks = 1, .kernels = 20, .pinned = 1, .batch_kb = 4096,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 2000, .host_cpu_us = 200, .kernel_us = 1500 },
	{ "input", "input_wait", "2 workers spend 40 ms CPU per batch; main waits for batches",
	  .steps = 100, .workers = 2, .h2d_chunks = 1, .kernels = 8, .pinned = 1, .batch_kb = 1024,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 40000, .host_cpu_us = 500, .kernel_us = 250 },
	{ "disk", "input_wait", "workers read 1 MiB per batch in 4 KiB O_DIRECT reads",
	  .steps = 160, .workers = 2, .h2d_chunks = 1, .kernels = 8, .pinned = 1, .odirect = 1,
	  .batch_kb = 1024, .read_kb = 1024, .io_kb = 4, .worker_cpu_us = 500, .host_cpu_us = 300,
	  .kernel_us = 250 },
	{ "pageable", "h2d", "64 MiB batches copied from pageable memory",
	  .steps = 200, .workers = 1, .h2d_chunks = 1, .kernels = 4, .pinned = 0, .batch_kb = 65536,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 1000, .host_cpu_us = 200, .kernel_us = 250 },
	{ "small-copies", "h2d", "each 2 MiB batch copied as 512 pageable 4 KiB copies",
	  .steps = 100, .workers = 1, .h2d_chunks = 512, .kernels = 4, .pinned = 0, .batch_kb = 2048,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 1000, .host_cpu_us = 200, .kernel_us = 250 },
	{ "launch", "launch", "4000 tiny kernels per step: launch CPU cost dominates",
	  .steps = 80, .workers = 1, .h2d_chunks = 1, .kernels = 4000, .pinned = 1, .batch_kb = 1024,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 1000, .host_cpu_us = 200, .kernel_us = 2 },
	{ "host-cpu", "host_cpu", "20 ms of CPU work on the main thread per step",
	  .steps = 100, .workers = 1, .h2d_chunks = 1, .kernels = 8, .pinned = 1, .batch_kb = 1024,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 1000, .host_cpu_us = 20000, .kernel_us = 250 },
	{ "contention", "runq", "6 CPU spinners: main is runnable but not running",
	  .steps = 100, .workers = 1, .h2d_chunks = 1, .kernels = 4, .spinners = 6, .pinned = 1,
	  .batch_kb = 1024, .read_kb = 256, .io_kb = 256, .worker_cpu_us = 500, .host_cpu_us = 4000,
	  .kernel_us = 250 },
	{ "balanced", NULL, "moderate everything: no phase should dominate",
	  .steps = 250, .workers = 2, .h2d_chunks = 1, .kernels = 10, .pinned = 1, .batch_kb = 4096,
	  .read_kb = 512, .io_kb = 512, .worker_cpu_us = 10000, .host_cpu_us = 1500, .kernel_us = 250 },
};

#define NSCEN (sizeof(scenarios) / sizeof(scenarios[0]))

static void apply_scenario(const struct scenario *s)
{
	O.scenario = s->name;
	O.expect = s->expect;
	O.steps = s->steps;
	O.workers = s->workers;
	O.h2d_chunks = s->h2d_chunks;
	O.kernels = s->kernels;
	O.spinners = s->spinners;
	O.pinned = s->pinned;
	O.odirect = s->odirect;
	O.batch_kb = s->batch_kb;
	O.read_kb = s->read_kb;
	O.io_kb = s->io_kb;
	O.worker_cpu_us = s->worker_cpu_us;
	O.host_cpu_us = s->host_cpu_us;
	O.kernel_us = s->kernel_us;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: train [options]\n"
		"  --scenario NAME    preset (later options override it):\n");
	for (size_t i = 0; i < NSCEN; i++)
		fprintf(f, "                       %-13s %s\n", scenarios[i].name, scenarios[i].what);
	fprintf(f,
		"  --steps N          training steps (%d)\n"
		"  --workers N        data-loader worker processes, 1..%d (%d)\n"
		"  --batch-kb N       batch size copied to the device, KiB (%ld)\n"
		"  --read-kb N        bytes a worker reads from disk per batch, KiB (%ld)\n"
		"  --io-kb N          size of each read request, KiB (%ld)\n"
		"  --odirect          read with O_DIRECT (default: buffered, pages dropped)\n"
		"  --worker-cpu-us N  worker CPU time per batch (%ld)\n"
		"  --host-cpu-us N    main-thread CPU time per step (%ld)\n"
		"  --pinned           H2D from pinned (cudaHostRegister'ed) memory (default)\n"
		"  --pageable         H2D from pageable memory\n"
		"  --h2d-chunks N     split the H2D copy into N copies (%d)\n"
		"  --kernels K        kernel launches per step (%d)\n"
		"  --kernel-us N      device time of each kernel, us (%ld)\n"
		"  --launch-us X      CPU cost of a launch on the simulator (GPUSIM_LAUNCH_US)\n"
		"  --spinners N       CPU-burning competitor processes (%d)\n"
		"  --data PATH        dataset file, created if missing (default $TMPDIR or /tmp)\n"
		"  --data-mb N        dataset size, MiB (%ld)\n"
		"  --truth FILE       write per-step ground truth (JSON lines)\n"
		"  --ignore-errors    keep going when CUDA calls fail (real runtime, no GPU)\n"
		"  --check            exit 3 unless the scenario's phase takes >= 50%% of step time\n"
		"  --quiet            no summary on stderr\n"
		"  --help\n",
		O.steps, MAX_WORKERS, O.workers, O.batch_kb, O.read_kb, O.io_kb, O.worker_cpu_us,
		O.host_cpu_us, O.h2d_chunks, O.kernels, O.kernel_us, O.spinners, O.data_mb);
}

enum {
	OPT_STEPS = 256, OPT_WORKERS, OPT_BATCH, OPT_READ, OPT_IO, OPT_WCPU, OPT_HCPU, OPT_PINNED,
	OPT_PAGEABLE, OPT_CHUNKS, OPT_KERNELS, OPT_KUS, OPT_LUS, OPT_ODIRECT, OPT_DATA, OPT_DATAMB,
	OPT_TRUTH, OPT_IGN, OPT_SPIN, OPT_SCEN, OPT_CHECK, OPT_QUIET, OPT_HELP,
};

static const struct option longopts[] = {
	{ "steps", required_argument, NULL, OPT_STEPS },
	{ "workers", required_argument, NULL, OPT_WORKERS },
	{ "batch-kb", required_argument, NULL, OPT_BATCH },
	{ "read-kb", required_argument, NULL, OPT_READ },
	{ "io-kb", required_argument, NULL, OPT_IO },
	{ "worker-cpu-us", required_argument, NULL, OPT_WCPU },
	{ "host-cpu-us", required_argument, NULL, OPT_HCPU },
	{ "pinned", no_argument, NULL, OPT_PINNED },
	{ "pageable", no_argument, NULL, OPT_PAGEABLE },
	{ "h2d-chunks", required_argument, NULL, OPT_CHUNKS },
	{ "kernels", required_argument, NULL, OPT_KERNELS },
	{ "kernel-us", required_argument, NULL, OPT_KUS },
	{ "launch-us", required_argument, NULL, OPT_LUS },
	{ "odirect", no_argument, NULL, OPT_ODIRECT },
	{ "data", required_argument, NULL, OPT_DATA },
	{ "data-mb", required_argument, NULL, OPT_DATAMB },
	{ "truth", required_argument, NULL, OPT_TRUTH },
	{ "ignore-errors", no_argument, NULL, OPT_IGN },
	{ "spinners", required_argument, NULL, OPT_SPIN },
	{ "scenario", required_argument, NULL, OPT_SCEN },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static long num(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "train: --%s: expected an integer in [%ld, %ld], got '%s'\n", opt, lo,
			hi, s);
		exit(2);
	}
	return v;
}

static void parse(int argc, char **argv)
{
	int c, idx;
	char *end;

	/* pass 1: the preset, so the other options override it wherever they are */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		if (c == OPT_HELP) {
			usage(stdout);
			exit(0);
		}
		if (c == OPT_SCEN) {
			size_t i;
			for (i = 0; i < NSCEN; i++)
				if (!strcmp(optarg, scenarios[i].name))
					break;
			if (i == NSCEN) {
				fprintf(stderr, "train: unknown scenario '%s'\n", optarg);
				usage(stderr);
				exit(2);
			}
			apply_scenario(&scenarios[i]);
		}
	}
	optind = 1;
	opterr = 1;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		const char *n = longopts[idx].name;
		switch (c) {
		case OPT_STEPS: O.steps = (int)num(n, optarg, 1, 10000000); break;
		case OPT_WORKERS: O.workers = (int)num(n, optarg, 1, MAX_WORKERS); break;
		case OPT_BATCH: O.batch_kb = num(n, optarg, 4, 4 << 20); break;
		case OPT_READ: O.read_kb = num(n, optarg, 0, 4 << 20); break;
		case OPT_IO: O.io_kb = num(n, optarg, 4, 1 << 20); break;
		case OPT_WCPU: O.worker_cpu_us = num(n, optarg, 0, 100000000); break;
		case OPT_HCPU: O.host_cpu_us = num(n, optarg, 0, 100000000); break;
		case OPT_PINNED: O.pinned = 1; break;
		case OPT_PAGEABLE: O.pinned = 0; break;
		case OPT_CHUNKS: O.h2d_chunks = (int)num(n, optarg, 1, 1 << 20); break;
		case OPT_KERNELS: O.kernels = (int)num(n, optarg, 0, 10000000); break;
		case OPT_KUS: O.kernel_us = num(n, optarg, 0, 100000000); break;
		case OPT_LUS:
			O.launch_us = strtod(optarg, &end);
			if (*end || end == optarg || O.launch_us < 0) {
				fprintf(stderr, "train: --launch-us: bad value '%s'\n", optarg);
				exit(2);
			}
			break;
		case OPT_ODIRECT: O.odirect = 1; break;
		case OPT_DATA: snprintf(O.data, sizeof(O.data), "%s", optarg); break;
		case OPT_DATAMB: O.data_mb = num(n, optarg, 1, 1 << 20); break;
		case OPT_TRUTH: O.truth = optarg; break;
		case OPT_IGN: O.ignore_errors = 1; break;
		case OPT_SPIN: O.spinners = (int)num(n, optarg, 0, MAX_SPINNERS); break;
		case OPT_SCEN: break;
		case OPT_CHECK: O.check = 1; break;
		case OPT_QUIET: O.quiet = 1; break;
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "train: unexpected argument '%s'\n", argv[optind]);
		exit(2);
	}
	if (!O.data[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(O.data, sizeof(O.data), "%s/dlbpf-train-%ldmb.bin",
			 tmp && *tmp ? tmp : "/tmp", O.data_mb);
	}
	if (O.read_kb > O.batch_kb)
		O.read_kb = O.batch_kb;
	if (O.read_kb > O.data_mb * 1024)
		O.read_kb = O.data_mb * 1024;
	if (O.h2d_chunks > O.batch_kb * 1024)
		O.h2d_chunks = (int)(O.batch_kb * 1024);
}

/* -------------------------------------------------------------- clock -- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t cpu_sink;

/* Burn us microseconds of this thread's CPU time (not wall time: under
 * contention the same work takes longer, as real computation would). */
static void burn_cpu_us(long us, uint64_t since_cpu_ns)
{
	uint64_t end = since_cpu_ns + (uint64_t)us * 1000u, x = cpu_sink;

	while (thread_cpu_ns() < end)
		for (int i = 0; i < 200; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	cpu_sink = x;
}

/* schedstat of the calling thread: on-CPU ns, run-queue wait ns. */
static void schedstat(uint64_t *oncpu, uint64_t *runq)
{
	static char path[64];
	unsigned long long a = 0, b = 0;
	FILE *f;

	if (!path[0])
		snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat",
			 (long)syscall(SYS_gettid));
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%llu %llu", &a, &b) != 2)
			a = b = 0;
		fclose(f);
	}
	*oncpu = a;
	*runq = b;
}

/* ---------------------------------------------------- shared batch ring -- */

struct slot_hdr {
	uint64_t batch;
	uint64_t io_bytes;       /* bytes read from the dataset for this batch */
	uint64_t worker_cpu_ns;  /* worker CPU time spent on this batch */
	uint64_t read_ns;        /* wall time of the reads */
	int32_t worker;
	int32_t pad;
};

struct ring {
	volatile int stop;
	int nslots;
	size_t slot_bytes;
	sem_t filled[MAX_SLOTS];
	sem_t empty[MAX_SLOTS];
	struct slot_hdr hdr[MAX_SLOTS];
};

static struct ring *ring;
static char *slots;       /* nslots * slot_bytes, MAP_SHARED, page aligned */
static size_t slots_len;
static pid_t workers[MAX_WORKERS], spinners[MAX_SPINNERS];
static int nworkers, nspinners;
static volatile sig_atomic_t g_stop;

static int sem_wait_intr(sem_t *s, int honour_stop)
{
	while (sem_wait(s) == -1) {
		if (errno != EINTR)
			return -1;
		if (honour_stop && g_stop)
			return -1;
	}
	return 0;
}

static void worker_main(int w, pid_t parent)
{
	int fd, flags = O_RDONLY | (O.odirect ? O_DIRECT : 0);
	size_t rbytes = (size_t)O.read_kb * 1024, io = (size_t)O.io_kb * 1024;
	off_t fsize = (off_t)O.data_mb << 20;
	uint64_t span;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	prctl(PR_SET_NAME, "train-loader", 0, 0, 0);
	fd = open(O.data, flags);
	if (fd < 0) {
		fprintf(stderr, "train: worker %d: open %s: %s\n", w, O.data, strerror(errno));
		_exit(1);
	}
	rbytes &= ~(PAGE - 1); /* O_DIRECT wants aligned sizes and offsets */
	span = (uint64_t)fsize > rbytes ? (uint64_t)fsize - rbytes : 0;
	for (int b = w; b < O.steps; b += O.workers) {
		int s = b % ring->nslots;
		char *dst = slots + (size_t)s * ring->slot_bytes;
		uint64_t c0, t0, t1, got = 0, off;

		if (sem_wait_intr(&ring->empty[s], 0) || ring->stop)
			break;
		c0 = thread_cpu_ns();
		t0 = now_ns();
		off = span ? ((uint64_t)b * rbytes * 7919u) % span : 0; /* scattered */
		off &= ~(uint64_t)(PAGE - 1);
		while (got < rbytes) {
			size_t n = rbytes - got < io ? rbytes - got : io;
			ssize_t r = pread(fd, dst + got, n, (off_t)(off + got));
			if (r <= 0) {
				if (r < 0 && errno == EINTR)
					continue;
				if (r < 0)
					fprintf(stderr, "train: worker %d: read: %s\n", w, strerror(errno));
				break;
			}
			got += (uint64_t)r;
		}
		if (!O.odirect)
			posix_fadvise(fd, (off_t)off, (off_t)rbytes, POSIX_FADV_DONTNEED);
		t1 = now_ns();
		/* "decode": look at the bytes, then the configured CPU time */
		uint64_t sum = 0;
		for (uint64_t i = 0; i < got; i += 64)
			sum += (unsigned char)dst[i];
		cpu_sink += sum;
		burn_cpu_us(O.worker_cpu_us, c0);
		ring->hdr[s] = (struct slot_hdr){
			.batch = (uint64_t)b,
			.io_bytes = got,
			.worker_cpu_ns = thread_cpu_ns() - c0,
			.read_ns = t1 - t0,
			.worker = w,
		};
		sem_post(&ring->filled[s]);
	}
	close(fd);
	_exit(0);
}

static void spinner_main(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	signal(SIGTERM, SIG_DFL);
	prctl(PR_SET_NAME, "train-spinner", 0, 0, 0);
	for (;;)
		cpu_sink = cpu_sink * 6364136223846793005ull + 1;
}

static void stop_children(void)
{
	uint64_t deadline;
	int left;

	for (int i = 0; i < nspinners; i++)
		if (spinners[i] > 0)
			kill(spinners[i], SIGKILL);
	if (ring) {
		ring->stop = 1;
		for (int s = 0; s < ring->nslots; s++)
			sem_post(&ring->empty[s]);
	}
	/* workers leave on their own at the next slot; wait up to 2 s */
	deadline = now_ns() + 2000000000ull;
	do {
		left = 0;
		for (int i = 0; i < nworkers; i++) {
			if (workers[i] <= 0)
				continue;
			if (waitpid(workers[i], NULL, WNOHANG) == workers[i])
				workers[i] = 0;
			else
				left++;
		}
		if (left)
			usleep(2000);
	} while (left && now_ns() < deadline);
	for (int i = 0; i < nworkers; i++)
		if (workers[i] > 0) {
			kill(workers[i], SIGKILL);
			waitpid(workers[i], NULL, 0);
			workers[i] = 0;
		}
	for (int i = 0; i < nspinners; i++)
		if (spinners[i] > 0) {
			waitpid(spinners[i], NULL, 0);
			spinners[i] = 0;
		}
}

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* -------------------------------------------------------------- CUDA -- */

static int cuda_errors;

static void cuda_fail(const char *call, cudaError_t e)
{
	static const char *seen[32];
	static int nseen;

	if (!O.ignore_errors) {
		fprintf(stderr, "train: %s failed: %s (%d): %s\n", call, cudaGetErrorName(e), (int)e,
			cudaGetErrorString(e));
		fprintf(stderr, "train: (no GPU? run with LD_LIBRARY_PATH=.output/gpusim, or pass --ignore-errors)\n");
		stop_children();
		exit(1);
	}
	cuda_errors++;
	for (int i = 0; i < nseen; i++)
		if (seen[i] == call)
			return;
	if (nseen < 32)
		seen[nseen++] = call;
	if (!O.quiet)
		fprintf(stderr, "train: %s failed: %s (%d), continuing (--ignore-errors)\n", call,
			cudaGetErrorName(e), (int)e);
}

#define CUDA(name, expr)                                   \
	do {                                               \
		cudaError_t e_ = (expr);                   \
		if (e_ != cudaSuccess)                     \
			cuda_fail(name, e_);               \
	} while (0)

/* Kernel handles: distinct host functions with distinct bodies (so identical
 * code folding cannot merge them) and visible names in .symtab. */
static volatile int kernel_sink;
#define KERNEL(n, v) \
	__attribute__((noinline, used)) void n(void) { kernel_sink = v; }
KERNEL(train_kernel_embedding, 1)
KERNEL(train_kernel_conv2d, 2)
KERNEL(train_kernel_gemm, 3)
KERNEL(train_kernel_relu, 4)
KERNEL(train_kernel_layernorm, 5)
KERNEL(train_kernel_softmax_loss, 6)
KERNEL(train_kernel_backward, 7)
KERNEL(train_kernel_sgd_update, 8)
static void (*const kernel_fns[8])(void) = {
	train_kernel_embedding, train_kernel_conv2d, train_kernel_gemm, train_kernel_relu,
	train_kernel_layernorm, train_kernel_softmax_loss, train_kernel_backward, train_kernel_sgd_update,
};

/* The step marker: a tracer puts a uprobe here (--step-on train_step_begin).
 * Naked, so its first instruction is a 5-byte nop (no endbr64, no prologue):
 * uprobes on nop5 are the cheapest kind on 6.18 (FIELD-NOTES: ~165 ns, vs
 * ~14 us for instructions the kernel must single-step). The step number is
 * in %edi at entry (x86-64 SysV). */
__attribute__((naked, noinline, used)) void train_step_begin(int step __attribute__((unused)))
{
	__asm__ volatile(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"
			 "ret");
}

/* ----------------------------------------------------------- dataset -- */

static void ensure_dataset(void)
{
	struct stat st;
	off_t want = (off_t)O.data_mb << 20;
	int fd;

	if (stat(O.data, &st) != 0 || st.st_size < want) {
		char tmp[PATH_MAX + 32];
		char *buf = malloc(1 << 20);
		uint64_t x = 88172645463325252ull;

		if (!buf)
			exit(1);
		snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", O.data, (long)getpid());
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			fprintf(stderr, "train: create %s: %s\n", tmp, strerror(errno));
			exit(1);
		}
		for (long m = 0; m < O.data_mb; m++) {
			for (size_t i = 0; i < (1 << 20); i += 8) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				memcpy(buf + i, &x, 8);
			}
			if (write(fd, buf, 1 << 20) != 1 << 20) {
				fprintf(stderr, "train: write %s: %s\n", tmp, strerror(errno));
				unlink(tmp);
				exit(1);
			}
		}
		free(buf);
		fdatasync(fd); /* dirty pages cannot be dropped */
		close(fd);
		if (rename(tmp, O.data)) {
			fprintf(stderr, "train: rename %s: %s\n", O.data, strerror(errno));
			unlink(tmp);
			exit(1);
		}
	}
	/* drop the file from the page cache so the loaders' reads reach the disk */
	fd = open(O.data, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "train: open %s: %s\n", O.data, strerror(errno));
		exit(1);
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

/* -------------------------------------------------------------- main -- */

enum { PH_INPUT, PH_HOST, PH_H2D, PH_LAUNCH, PH_GPU, PH_OTHER, NPH };
static const char *const phase_names[NPH] = { "input_wait", "host_cpu", "h2d", "launch", "gpu_wait", "other" };

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	typedef int (*set_cost_fn)(const void *, unsigned long long);
	set_cost_fn set_cost;
	struct sigaction sa;
	pid_t self = getpid();
	FILE *truth = NULL;
	void *d_batch = NULL, *d_loss = NULL;
	float loss = 0;
	size_t batch_bytes;
	uint64_t *step_ns, tot[NPH] = { 0 }, tot_runq = 0, tot_oncpu = 0, tot_step = 0;
	int done = 0, registered = 0;

	parse(argc, argv);
	batch_bytes = ((size_t)O.batch_kb * 1024 + PAGE - 1) & ~(PAGE - 1);
	if (O.truth) {
		truth = fopen(O.truth, "w");
		if (!truth) {
			fprintf(stderr, "train: %s: %s\n", O.truth, strerror(errno));
			return 2;
		}
	}
	step_ns = calloc((size_t)O.steps, sizeof(*step_ns));
	if (!step_ns)
		return 1;
	if (O.launch_us >= 0) { /* read by the simulator at its first call */
		char v[32];
		snprintf(v, sizeof(v), "%g", O.launch_us);
		setenv("GPUSIM_LAUNCH_US", v, 1);
	}
	ensure_dataset();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: blocking waits see EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	/* shared ring: 2 slots per worker (PyTorch's prefetch_factor 2) */
	ring = mmap(NULL, sizeof(*ring), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED) {
		perror("train: mmap");
		return 1;
	}
	ring->nslots = 2 * O.workers;
	ring->slot_bytes = batch_bytes;
	slots_len = (size_t)ring->nslots * batch_bytes;
	slots = mmap(NULL, slots_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED) {
		perror("train: mmap slots");
		return 1;
	}
	for (int s = 0; s < ring->nslots; s++) {
		sem_init(&ring->filled[s], 1, 0);
		sem_init(&ring->empty[s], 1, 1);
	}

	/* CUDA set-up, before the fork so children never touch the runtime */
	CUDA("cudaSetDevice", cudaSetDevice(0));
	CUDA("cudaMalloc", cudaMalloc(&d_batch, batch_bytes));
	CUDA("cudaMalloc", cudaMalloc(&d_loss, 256));
	if (O.pinned) {
		cudaError_t e = cudaHostRegister(slots, slots_len, cudaHostRegisterDefault);
		if (e == cudaSuccess)
			registered = 1;
		else
			cuda_fail("cudaHostRegister", e);
	}
	set_cost = (set_cost_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimSetKernelCost");
	if (set_cost)
		for (int k = 0; k < 8; k++)
			set_cost((const void *)(uintptr_t)kernel_fns[k], (unsigned long long)O.kernel_us * 1000u);

	for (int w = 0; w < O.workers; w++) {
		pid_t p = fork();
		if (p < 0) {
			perror("train: fork");
			stop_children();
			return 1;
		}
		if (p == 0)
			worker_main(w, self);
		workers[nworkers++] = p;
	}
	for (int i = 0; i < O.spinners; i++) {
		pid_t p = fork();
		if (p < 0)
			break;
		if (p == 0)
			spinner_main(self);
		spinners[nspinners++] = p;
	}

	uint64_t t_prev = now_ns(), t_first = t_prev;
	for (int step = 0; step < O.steps && !g_stop; step++) {
		uint64_t ph[NPH] = { 0 }, t_start = t_prev, t, oc0, rq0, oc1, rq1;
		int s = step % ring->nslots;
		size_t chunk, off;

		train_step_begin(step);
		schedstat(&oc0, &rq0);

		/* 1. take a batch */
		t = now_ns();
		if (sem_wait_intr(&ring->filled[s], 1))
			break;
		ph[PH_INPUT] = now_ns() - t;

		/* 2. host CPU work (framework, augmentation on the main thread) */
		t = now_ns();
		burn_cpu_us(O.host_cpu_us, thread_cpu_ns());
		ph[PH_HOST] = now_ns() - t;

		/* 3. H2D: pinned (registered ring) or pageable, in chunks */
		t = now_ns();
		chunk = (batch_bytes + (size_t)O.h2d_chunks - 1) / (size_t)O.h2d_chunks;
		for (off = 0; off < batch_bytes; off += chunk) {
			size_t n = batch_bytes - off < chunk ? batch_bytes - off : chunk;
			const char *src = slots + (size_t)s * batch_bytes + off;
			void *dst = (void *)((uintptr_t)d_batch + off);
			CUDA("cudaMemcpyAsync", cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, 0));
		}
		ph[PH_H2D] = now_ns() - t;

		/* 4. kernels */
		t = now_ns();
		for (int k = 0; k < O.kernels; k++) {
			dim3 grid = { 64, 1, 1 }, block = { 256, 1, 1 };
			void *args[1] = { &d_batch };
			CUDA("cudaLaunchKernel",
			     cudaLaunchKernel((const void *)(uintptr_t)kernel_fns[k % 8], grid, block, args, 0, 0));
		}
		ph[PH_LAUNCH] = now_ns() - t;

		/* 5. loss.item(): a synchronous 4-byte D2H copy waits for the GPU */
		t = now_ns();
		CUDA("cudaMemcpy", cudaMemcpy(&loss, d_loss, sizeof(loss), cudaMemcpyDeviceToHost));
		ph[PH_GPU] = now_ns() - t;

		struct slot_hdr hdr = ring->hdr[s];
		sem_post(&ring->empty[s]);
		schedstat(&oc1, &rq1);
		t = now_ns();
		uint64_t dur = t - t_start, sum = 0;
		for (int i = 0; i < PH_OTHER; i++)
			sum += ph[i];
		ph[PH_OTHER] = dur > sum ? dur - sum : 0;
		for (int i = 0; i < NPH; i++)
			tot[i] += ph[i];
		tot_runq += rq1 - rq0;
		tot_oncpu += oc1 - oc0;
		tot_step += dur;
		step_ns[done++] = dur;
		if (truth) {
			fprintf(truth, "{\"step\":%d,\"start_ns\":%llu,\"end_ns\":%llu,\"phases_ns\":{", step,
				(unsigned long long)t_start, (unsigned long long)t);
			for (int i = 0; i < NPH; i++)
				fprintf(truth, "%s\"%s\":%llu", i ? "," : "", phase_names[i],
					(unsigned long long)ph[i]);
			fprintf(truth,
				"},\"io_read_bytes\":%llu,\"h2d_bytes\":%zu,\"h2d_copies\":%d,\"kernels\":%d,"
				"\"worker\":%d,\"worker_cpu_ns\":%llu,\"worker_read_ns\":%llu,"
				"\"sched\":{\"oncpu_ns\":%llu,\"runq_ns\":%llu}}\n",
				(unsigned long long)hdr.io_bytes, batch_bytes,
				(int)((batch_bytes + chunk - 1) / chunk), O.kernels, hdr.worker,
				(unsigned long long)hdr.worker_cpu_ns, (unsigned long long)hdr.read_ns,
				(unsigned long long)(oc1 - oc0), (unsigned long long)(rq1 - rq0));
		}
		t_prev = t;
	}
	uint64_t t_last = t_prev;

	stop_children();
	if (registered)
		CUDA("cudaHostUnregister", cudaHostUnregister(slots));
	CUDA("cudaFree", cudaFree(d_batch));
	CUDA("cudaFree", cudaFree(d_loss));

	qsort(step_ns, (size_t)done, sizeof(*step_ns), cmp_u64);
	uint64_t median = done ? step_ns[done / 2] : 0;
	double share[NPH], runq_share = tot_step ? (double)tot_runq / (double)tot_step : 0;
	const char *dominant = "none";
	double best = 0;
	for (int i = 0; i < NPH; i++) {
		share[i] = tot_step ? (double)tot[i] / (double)tot_step : 0;
		if (share[i] > best) {
			best = share[i];
			dominant = phase_names[i];
		}
	}
	double expect_share = -1;
	if (O.expect) {
		if (!strcmp(O.expect, "runq"))
			expect_share = runq_share;
		for (int i = 0; i < NPH; i++)
			if (!strcmp(O.expect, phase_names[i]))
				expect_share = share[i];
	}
	if (truth) {
		fprintf(truth, "{\"summary\":true,\"steps\":%d,\"median_step_ns\":%llu,\"scenario\":\"%s\","
			"\"duration_ns\":%llu,\"phase_share\":{",
			done, (unsigned long long)median, O.scenario, (unsigned long long)(t_last - t_first));
		for (int i = 0; i < NPH; i++)
			fprintf(truth, "%s\"%s\":%.4f", i ? "," : "", phase_names[i], share[i]);
		fprintf(truth, "},\"runq_share\":%.4f,\"oncpu_share\":%.4f,\"dominant\":\"%s\",", runq_share,
			tot_step ? (double)tot_oncpu / (double)tot_step : 0, dominant);
		if (O.expect)
			fprintf(truth, "\"expected\":\"%s\",\"expected_share\":%.4f,", O.expect, expect_share);
		fprintf(truth, "\"workers\":%d,\"spinners\":%d,\"pinned\":%s,\"cuda_errors\":%d,\"simulator\":%s}\n",
			O.workers, nspinners, O.pinned ? "true" : "false", cuda_errors, set_cost ? "true" : "false");
		fclose(truth);
	}
	if (!O.quiet) {
		fprintf(stderr, "train: scenario %s: %d steps, median %.2f ms, total %.2f s;", O.scenario, done,
			median / 1e6, (t_last - t_first) / 1e9);
		for (int i = 0; i < NPH; i++)
			fprintf(stderr, " %s %.0f%%", phase_names[i], 100 * share[i]);
		fprintf(stderr, "; runq %.0f%%", 100 * runq_share);
		if (cuda_errors)
			fprintf(stderr, "; %d CUDA errors ignored", cuda_errors);
		fprintf(stderr, "\n");
	}
	free(step_ns);
	if (g_stop)
		return 143; /* interrupted (128 + SIGTERM), after a clean shutdown */
	if (O.check && O.expect && expect_share < 0.5) {
		fprintf(stderr, "train: check failed: %s takes %.0f%% of step time (< 50%%)\n", O.expect,
			100 * expect_share);
		return 3;
	}
	return 0;
}
