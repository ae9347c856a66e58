// SPDX-License-Identifier: MIT
/*
 * train_loader.c — the input side of the emulated job, as a PyTorch
 * DataLoader does it: a dataset file on disk, worker processes (fork) that
 * read and "decode" batches, and a MAP_SHARED ring of 2 slots per worker
 * (prefetch_factor 2) guarded by process-shared semaphores. Also the
 * CPU-burning spinners of the contention scenario, and the shutdown of all
 * these children.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>

#include "train.h"

static volatile uint64_t cpu_sink;

/* Burn us microseconds of this thread's CPU time since since_cpu_ns (not wall
 * time: under contention the same work takes longer, as real computation
 * would). The CPU clock is read once; the spin itself makes no system call
 * (thread_clock.h). */
void burn_cpu_us(long us, uint64_t since_cpu_ns)
{
	uint64_t end = since_cpu_ns + (uint64_t)us * 1000u, now = thread_cpu_ns();

	if (now < end)
		spin_oncpu_ns(end - now);
}

/* -------------------------------------------------------------- ring -- */

struct ring *ring;
char *slots;
size_t slots_len;
static pid_t workers[MAX_WORKERS], spinners[MAX_SPINNERS];
static int nworkers, nspinners;
static pthread_t worker_threads[MAX_WORKERS];
static int nworker_threads;

int ring_create(size_t slot_bytes)
{
	ring = mmap(NULL, sizeof(*ring), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED) {
		perror("train: mmap");
		return -1;
	}
	ring->nslots = 2 * O.workers;
	ring->slot_bytes = slot_bytes;
	slots_len = (size_t)ring->nslots * slot_bytes;
	slots = mmap(NULL, slots_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED) {
		perror("train: mmap slots");
		return -1;
	}
	for (int s = 0; s < ring->nslots; s++) {
		sem_init(&ring->filled[s], 1, 0);
		sem_init(&ring->empty[s], 1, 1);
	}
	return 0;
}

int sem_wait_intr(sem_t *s, int honour_stop)
{
	while (sem_wait(s) == -1) {
		if (errno != EINTR)
			return -1;
		if (honour_stop && g_stop)
			return -1;
	}
	return 0;
}

/* ----------------------------------------------------------- workers -- */

/* Worker w produces batches w, w+W, w+2W, ...: --read-kb from the dataset in
 * --io-kb requests at a scattered offset, then --worker-cpu-us of CPU. */

/* Where batch b's bytes lie: scattered over the dataset, page aligned for O_DIRECT. */
static uint64_t batch_offset(int b, size_t rbytes)
{
	off_t fsize = (off_t)O.data_mb << 20;
	uint64_t span = (uint64_t)fsize > rbytes ? (uint64_t)fsize - rbytes : 0;
	uint64_t off = span ? ((uint64_t)b * rbytes * 7919u) % span : 0;

	return off & ~(uint64_t)(PAGE - 1);
}

/* --read-kb at off in --io-kb requests into dst; the bytes read. */
static uint64_t read_batch(int w, int fd, char *dst, size_t rbytes, uint64_t off)
{
	size_t io = (size_t)O.io_kb * 1024;
	uint64_t got = 0;

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
	return got;
}

/* A fetch from remote storage: blocked, off the CPU. */
static void remote_fetch(void)
{
	struct timespec ts = { O.worker_wait_us / 1000000, (O.worker_wait_us % 1000000) * 1000 };

	if (O.worker_wait_us)
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
}

/*
 * --fetch-thread: a loader's reading thread. It takes each of the worker's
 * free slots, reads (and fetches) the batch into it and hands it to the
 * decoding thread: a third hand-off upstream of the pin thread's.
 */
struct fetcher {
	int w, fd;
	size_t rbytes;
	sem_t fetched;
	pthread_t thread;
	volatile int32_t tid;
	uint64_t read_ns[MAX_SLOTS], got[MAX_SLOTS], fetched_ns[MAX_SLOTS];
};

static void *fetch_main(void *arg)
{
	struct fetcher *f = arg;

	f->tid = (int32_t)gettid();
	prctl(PR_SET_NAME, "train-fetch", 0, 0, 0);
	for (int b = f->w; b < O.steps; b += O.workers) {
		int s = b % ring->nslots;
		uint64_t t0;

		if (sem_wait_intr(&ring->empty[s], 0) || ring->stop)
			break;
		t0 = now_ns();
		f->got[s] = read_batch(f->w, f->fd, slots + (size_t)s * ring->slot_bytes, f->rbytes,
				       batch_offset(b, f->rbytes));
		f->read_ns[s] = now_ns() - t0;
		remote_fetch();
		f->fetched_ns[s] = now_ns();
		sem_post(&f->fetched);
	}
	sem_post(&f->fetched);   /* a decoding thread still waiting sees the end (or the stop) */
	return NULL;
}

/* Batches w, w+W, ...; returns 0 when done or stopped, 1 when the dataset cannot be opened. */
static int worker_loop(int w)
{
	int fd, flags = O_RDONLY | (O.odirect ? O_DIRECT : 0);
	size_t rbytes = (size_t)O.read_kb * 1024;
	struct fetcher *f = NULL;

	prctl(PR_SET_NAME, "train-loader", 0, 0, 0);
	fd = open(O.data, flags);
	if (fd < 0) {
		fprintf(stderr, "train: worker %d: open %s: %s\n", w, O.data, strerror(errno));
		return 1;
	}
	rbytes &= ~(PAGE - 1); /* O_DIRECT wants aligned sizes and offsets */
	if (O.fetch_thread) {
		f = calloc(1, sizeof(*f));
		if (!f)
			return 1;
		*f = (struct fetcher){ .w = w, .fd = fd, .rbytes = rbytes };
		sem_init(&f->fetched, 0, 0);
		if (pthread_create(&f->thread, NULL, fetch_main, f)) {
			fprintf(stderr, "train: worker %d: cannot start its fetch thread\n", w);
			return 1;
		}
	}
	uint64_t cpu_post = thread_cpu_ns();
	int first = 1;
	for (int b = w; b < O.steps; b += O.workers) {
		int s = b % ring->nslots;
		char *dst = slots + (size_t)s * ring->slot_bytes;
		uint64_t c0, t0, read_ns, got, off = batch_offset(b, rbytes), decode_wait = 0;

		if (f) {
			t0 = now_ns();
			if (sem_wait_intr(&f->fetched, 0) || ring->stop)
				break;
			decode_wait = now_ns() - t0;
			got = f->got[s];
			read_ns = f->read_ns[s];
			c0 = thread_cpu_ns();
		} else {
			if (sem_wait_intr(&ring->empty[s], 0) || ring->stop)
				break;
			c0 = thread_cpu_ns();
			t0 = now_ns();
			got = read_batch(w, fd, dst, rbytes, off);
			read_ns = now_ns() - t0;
		}
		/* "decode": look at the bytes, then the configured CPU time */
		uint64_t sum = 0;
		for (uint64_t i = 0; i < got; i += 64)
			sum += (unsigned char)dst[i];
		cpu_sink += sum;
		burn_cpu_us(w == 0 && O.slow_worker > 1 ? O.worker_cpu_us * O.slow_worker : O.worker_cpu_us, c0);
		if (!f)
			remote_fetch();
		uint64_t c1 = thread_cpu_ns();
		ring->hdr[s] = (struct slot_hdr){
			.batch = (uint64_t)b,
			.io_bytes = got,
			.worker_cpu_ns = c1 - c0,
			.read_ns = read_ns,
			.worker = w,
			.cpu_since_post_ns = c1 - cpu_post,
			.worker_pid = (int32_t)getpid(),
			.worker_tid = (int32_t)gettid(),
			.first_post = first,
			.fetch_tid = f ? f->tid : 0,
			.read_off = off,
			.fetched_ns = f ? f->fetched_ns[s] : 0,
			.decode_wait_ns = decode_wait,
		};
		ring->hdr[s].posted_ns = now_ns();
		cpu_post = c1;
		first = 0;
		sem_post(&ring->filled[s]);
	}
	if (f) {
		/* It ends after its last batch, or at the free slots stop_children posts. */
		pthread_join(f->thread, NULL);
		sem_destroy(&f->fetched);
		free(f);
	}
	close(fd);
	return 0;
}

static void worker_main(int w, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	_exit(worker_loop(w));
}

/* --thread-workers: the same loop in a thread of the main process (a thread pool of loaders). */
static void *worker_thread(void *arg)
{
	worker_loop((int)(intptr_t)arg);
	return NULL;
}

/* A competitor for the CPUs: runnable all the time, never blocking. */
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

/* Forked after the CUDA set-up, so the children never touch the runtime. */
int start_workers(pid_t parent)
{
	for (int w = 0; O.thread_workers && w < O.workers; w++) {
		if (pthread_create(&worker_threads[w], NULL, worker_thread, (void *)(intptr_t)w)) {
			fprintf(stderr, "train: cannot start worker thread %d\n", w);
			stop_children();
			return -1;
		}
		nworker_threads++;
	}
	for (int w = 0; !O.thread_workers && w < O.workers; w++) {
		pid_t p = fork();
		if (p < 0) {
			perror("train: fork");
			stop_children();
			return -1;
		}
		if (p == 0)
			worker_main(w, parent);
		workers[nworkers++] = p;
	}
	return 0;
}

int start_spinners(pid_t parent)
{
	for (int i = 0; i < O.spinners; i++) {
		pid_t p = fork();
		if (p < 0)
			break;
		if (p == 0)
			spinner_main(parent);
		spinners[nspinners++] = p;
	}
	return nspinners;
}

void stop_children(void)
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
	for (int i = 0; i < nworker_threads; i++)
		pthread_join(worker_threads[i], NULL);
	nworker_threads = 0;
}

/* ----------------------------------------------------------- dataset -- */

void ensure_dataset(void)
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
