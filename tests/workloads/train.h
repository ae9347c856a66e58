/* SPDX-License-Identifier: MIT */
/*
 * train.h — what the parts of the training-loop emulator share; private to
 * tests/workloads/train*.c (see train.c for what the program does):
 *   train_opts.c    options and scenario presets
 *   train_loader.c  dataset file, data-loader workers, the shared batch ring
 *   train_truth.c   per-step ground truth and the run's summary
 *   train_device.c  the device's own timeline (the simulator's truth)
 *   train_comm.c    the gradient all-reduce (NCCL, loaded late)
 *   train.c         main: CUDA set-up and the step loop
 */
#ifndef DLBPF_TRAIN_H
#define DLBPF_TRAIN_H

#include <limits.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "thread_clock.h"

#define MAX_WORKERS 32
#define MAX_SLOTS (2 * MAX_WORKERS)
#define MAX_SPINNERS 64
#define PAGE 4096ul

/* ------------------------------------------------- options (train_opts.c) -- */

#define MAX_STREAMS 8
#define MAX_DEVICES 8

struct opts {
	const char *scenario;
	const char *expect; /* phase expected to dominate (scenario presets) */
	int steps, workers, h2d_chunks, kernels, spinners;
	long batch_kb, read_kb, io_kb, worker_cpu_us, host_cpu_us, kernel_us;
	long kernel_us_spread; /* kernel function f (0..7) runs kernel_us + f * this, us */
	int kernels_vary;      /* step s launches 1 + (7 s mod kernels) kernels, not kernels */
	double launch_us; /* < 0: leave the runtime's default */
	int pinned, odirect, ignore_errors, check, quiet;
	int slow_step;    /* the step whose host work takes slow_ms more (-1: none) */
	long slow_ms;
	int sync_h2d;      /* H2D with cudaMemcpy (synchronous), not cudaMemcpyAsync */
	int streams;       /* kernels spread over this many created streams (0: the legacy stream) */
	int sync_every;    /* the loss copy every this many steps (0: once, after the last step) */
	int slow_worker;   /* worker 0 decodes this many times as long as the others (0, 1: as long) */
	int setup_params;  /* a model's set-up before the loop: each an allocation, a copy and a check */
	long allreduce_kb; /* float32 gradients all-reduced per step (0: no NCCL) */
	long worker_wait_us;   /* a worker's blocked fetch per batch (remote storage), off the CPU */
	int pin_thread;        /* batches go through a pin-memory thread of the main process */
	int thread_workers;    /* the loaders are threads of the main process, not processes */
	int fetch_thread;      /* each loader reads (and fetches) in a thread of its own and decodes in another */
	int ranks;         /* the communicator's size */
	int graph;         /* the kernels captured once into a CUDA graph, launched each step on a stream */
	int devices;       /* the kernels spread over this many devices, each its own loss copy (1: one) */
	long peer_kb;      /* with devices > 1: each step each device d > 0 copies this much to device 0 (0: none) */
	int peer_async;    /* ... with cudaMemcpyPeerAsync on the current device's legacy stream, not cudaMemcpyPeer */
	int peer_late;     /* ... after the other devices' drains, right before the loss copy (not after the kernels) */
	int graph_fork;    /* --graph: the capture forks into a second stream for every other kernel */
	int driver_ctx;    /* devices switched and peer copies made through the driver's contexts (libcuda.so.1) */
	const char *waits; /* cudaSetDeviceFlags on each device: auto, spin, yield, blocking (NULL: not called) */
	long data_mb;
	char data[PATH_MAX];
	const char *truth;
};

/* The options, read-only once parse_options() returns; the workers see the
 * parent's copy through fork. */
extern struct opts O;

/* The 8 kernel functions' names (train.c). */
extern const char *const kernel_names[8];
/* The device time the simulator is told for kernel function f (0..7), us. */
long kernel_cost_us(int f);
/* The kernels step s launches. */
int kernels_of_step(int step);

/* Sets O from argv (--scenario first, so later options override it); exits 0
 * on --help, 2 on a bad option. */
void parse_options(int argc, char **argv);

/* ---------------------------------- loader and ring (train_loader.c) -- */

/* What a worker tells the main process about the batch in a slot. */
struct slot_hdr {
	uint64_t batch;
	uint64_t io_bytes;       /* bytes read from the dataset for this batch */
	uint64_t worker_cpu_ns;  /* worker CPU time spent on this batch */
	uint64_t read_ns;        /* wall time of the reads */
	int32_t worker;
	int32_t pad;
	/* The hand-off, for the lineage tests: who posted the batch, when, and the worker's own CPU
	 * time (CLOCK_THREAD_CPUTIME_ID) since its previous post (since it started for its first). */
	uint64_t posted_ns;
	uint64_t cpu_since_post_ns;
	int32_t worker_pid, worker_tid;
	int32_t first_post;
	int32_t fetch_tid;       /* --fetch-thread: the worker's thread that read the batch (0: none) */
	uint64_t read_off;       /* where in the dataset the batch's bytes were read */
	uint64_t fetched_ns;     /* --fetch-thread: when it handed the bytes to the decoding thread */
	uint64_t decode_wait_ns; /* --fetch-thread: how long the decoding thread waited for them */
};

/* Batch b lives in slot b % nslots; filled/empty hand a slot back and forth
 * between its worker and the main process. */
struct ring {
	volatile int stop;
	int nslots;
	size_t slot_bytes;
	sem_t filled[MAX_SLOTS];
	sem_t empty[MAX_SLOTS];
	struct slot_hdr hdr[MAX_SLOTS];
};

extern struct ring *ring;
extern char *slots;       /* nslots * slot_bytes, MAP_SHARED, page aligned */
extern size_t slots_len;

/* Set by SIGTERM/SIGINT in the main process (train.c); the step loop and its
 * blocking waits stop on it. */
extern volatile sig_atomic_t g_stop;

/* Burn us microseconds of this thread's CPU time counted from since_cpu_ns:
 * the workers' "decode" and the main thread's host CPU phase. */
void burn_cpu_us(long us, uint64_t since_cpu_ns);

/* Creates the dataset file O.data if it is missing or short, then drops it
 * from the page cache; exits 1 on failure. */
void ensure_dataset(void);

/* Maps the ring and 2 * O.workers slots of slot_bytes; -1 (reported) on
 * failure. */
int ring_create(size_t slot_bytes);

/* sem_wait that retries on EINTR, or gives up there once g_stop is set when
 * honour_stop; -1 when it gave up. */
int sem_wait_intr(sem_t *s, int honour_stop);

/* Forks the O.workers data-loader workers; -1 (reported, children stopped)
 * when a fork fails. */
int start_workers(pid_t parent);

/* Forks up to O.spinners CPU-burning competitors; returns how many started. */
int start_spinners(pid_t parent);

/* Kills the spinners, lets the workers leave (SIGKILL after 2 s), reaps all. */
void stop_children(void);

/* ------------------------------------ ground truth (train_truth.c) -- */

enum { PH_INPUT, PH_HOST, PH_H2D, PH_LAUNCH, PH_GPU, PH_OTHER, NPH };
extern const char *const phase_names[NPH];

/* One step as the workload measured it on CLOCK_MONOTONIC. */
struct step_record {
	int step;
	uint64_t start_ns, end_ns;
	uint64_t h2d_start_ns;      /* the clock read right before the batch's first copy */
	uint64_t begin_ns;          /* the clock read right after the step marker (train_step_begin) returned */
	uint64_t loss_copy_ns;      /* ... right before the loss copy (0: none this step) */
	uint64_t sync_ns;           /* ... right before the step's first synchronize call (0: none) */
	uint64_t ph[NPH];
	uint64_t oncpu_ns, runq_ns; /* schedstat deltas of the main thread */
	struct slot_hdr hdr;        /* the batch's worker report */
	size_t h2d_bytes, h2d_chunk;
	uint64_t pin_wait_ns;       /* --pin-thread: how long it waited for this batch from the worker */
};

/* Sums over the steps done, and each step's duration for the median. */
struct run_totals {
	uint64_t *step_ns; /* O.steps entries */
	int done;
	uint64_t ph[NPH], runq, oncpu, step;
};

struct run_summary {
	int steps;
	uint64_t median_ns;
	double share[NPH], runq_share, oncpu_share;
	const char *dominant;
	double expect_share; /* share of O.expect, -1 without one */
};

int totals_init(struct run_totals *t, int steps);
void totals_add(struct run_totals *t, const struct step_record *r);
void totals_free(struct run_totals *t);
void summarize(struct run_totals *t, struct run_summary *s);

void truth_write_step(FILE *f, const struct step_record *r);
void truth_write_summary(FILE *f, const struct run_summary *s, uint64_t duration_ns, int nspinners,
			 int cuda_errors, int simulator);
/* The peer copies the loop made (calls that succeeded), and the simulator's own count (-1: not the simulator). */
extern int peer_copies;
extern long long sim_peer_copies;
/* --driver-ctx: the driver calls the loop made that succeeded, by name. */
enum { DRV_RETAIN, DRV_SET, DRV_PUSH, DRV_POP, DRV_PEER, DRV_PEER_ASYNC, DRV_NCALLS };
extern int driver_calls[DRV_NCALLS];
extern const char *const driver_call_names[DRV_NCALLS];
void print_summary(const struct run_summary *s, uint64_t duration_ns, int cuda_errors);

/* ------------------------- the device's own timeline (train_device.c) -- */

/* Starts the simulator's timeline (nothing on the real runtime). */
void device_truth_start(void);
/* Writes what the device ran since the last call as one truth line (with each device's, when several). */
void device_truth_write(FILE *f);

/* ------------------------------------ the pin thread (train_pin.c) -- */

/* Starts the pin-memory thread when --pin-thread asks; -1 (reported) on failure. */
int pin_start(void);
/* The main thread takes batch slot s: from the pin thread, or from the ring. -1 when stopped. */
int batch_take(int s);
/* How long the pin thread waited for the batch now in slot s (0 without one). */
uint64_t pin_waited(int s);
/* Stops and joins the pin thread (after stop_children). */
void pin_join(void);
extern pid_t pin_tid;

/* ---------------------------- the gradient all-reduce (train_comm.c) -- */

/* Loads libnccl.so.2 and makes the communicator when --allreduce-kb asks; -1 (reported) on failure. */
int comm_setup(void);
/* All-reduces the gradients on the legacy stream; -1 when NCCL said no. */
int comm_step(void);
/* Writes the step's collectives against the wait [wait_start, wait_end) as one truth line. */
void comm_truth_write(FILE *f, uint64_t wait_start, uint64_t wait_end);
void comm_teardown(void);

#endif
