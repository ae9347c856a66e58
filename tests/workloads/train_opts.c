// SPDX-License-Identifier: MIT
/*
 * train_opts.c — the emulator's options: defaults, the scenario presets that
 * shape one bottleneck each, --help, and parsing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* Defaults, shown by --help; a --scenario preset replaces most of them. */
struct opts O = {
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
	.slow_step = -1,
	.slow_ms = 100,
	.sync_every = 1,
	.ranks = 8,
	.devices = 1,
};

struct scenario {
	const char *name, *expect, *what;
	int steps, workers, h2d_chunks, kernels, spinners, pinned, odirect, sync_h2d, streams, graph, devices;
	long batch_kb, read_kb, io_kb, worker_cpu_us, host_cpu_us, kernel_us, allreduce_kb, peer_kb;
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
	{ "sync-copies", "h2d", "each 2 MiB batch copied as 512 synchronous pinned 4 KiB copies",
	  .steps = 60, .workers = 1, .h2d_chunks = 512, .kernels = 4, .pinned = 1, .sync_h2d = 1,
	  .batch_kb = 2048, .read_kb = 256, .io_kb = 256, .worker_cpu_us = 1000, .host_cpu_us = 200,
	  .kernel_us = 250 },
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
	{ "two-streams", "gpu_wait", "20 x 1.5 ms kernels on 2 streams that overlap; the loss copy waits",
	  .steps = 80, .workers = 2, .h2d_chunks = 1, .kernels = 20, .pinned = 1, .streams = 2,
	  .batch_kb = 4096, .read_kb = 256, .io_kb = 256, .worker_cpu_us = 2000, .host_cpu_us = 200,
	  .kernel_us = 1500 },
	{ "comm", "gpu_wait", "a 32 MiB gradient all-reduce over 8 ranks per step; the loss copy waits for it",
	  .steps = 300, .workers = 2, .h2d_chunks = 1, .kernels = 8, .pinned = 1, .batch_kb = 1024,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 1000, .host_cpu_us = 200, .kernel_us = 100,
	  .allreduce_kb = 32768 },
	{ "graph", "gpu_wait", "20 x 1.5 ms kernels replayed as one CUDA graph; the loss copy waits",
	  .steps = 80, .workers = 2, .h2d_chunks = 1, .kernels = 20, .pinned = 1, .graph = 1, .batch_kb = 4096,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 2000, .host_cpu_us = 200, .kernel_us = 1500 },
	{ "two-gpus", "gpu_wait", "20 x 1.5 ms kernels split over 2 devices; the host drains both",
	  .steps = 80, .workers = 2, .h2d_chunks = 1, .kernels = 20, .pinned = 1, .devices = 2, .batch_kb = 4096,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 2000, .host_cpu_us = 200, .kernel_us = 1500 },
	{ "two-gpus-peer", "gpu_wait", "two-gpus, and device 1 copies 4 MiB of gradients to device 0 (cudaMemcpyPeer)",
	  .steps = 80, .workers = 2, .h2d_chunks = 1, .kernels = 20, .pinned = 1, .devices = 2, .batch_kb = 4096,
	  .read_kb = 256, .io_kb = 256, .worker_cpu_us = 2000, .host_cpu_us = 200, .kernel_us = 1500,
	  .peer_kb = 4096 },
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
	O.sync_h2d = s->sync_h2d;
	O.streams = s->streams;
	O.batch_kb = s->batch_kb;
	O.read_kb = s->read_kb;
	O.io_kb = s->io_kb;
	O.worker_cpu_us = s->worker_cpu_us;
	O.host_cpu_us = s->host_cpu_us;
	O.kernel_us = s->kernel_us;
	O.allreduce_kb = s->allreduce_kb;
	O.graph = s->graph;
	O.devices = s->devices ? s->devices : 1;
	O.peer_kb = s->peer_kb;
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
		"  --worker-wait-us N a worker's blocked fetch per batch (remote storage), us (0)\n"
		"  --slow-worker F    worker 0 burns F times --worker-cpu-us per batch (1)\n"
		"  --pin-thread       batches go through a pin-memory thread of the main process\n"
		"  --thread-workers   the loaders are threads of the main process, not processes\n"
		"  --fetch-thread     each loader reads and fetches in a thread of its own, which\n"
		"                     hands the bytes to its decoding thread\n"
		"  --host-cpu-us N    main-thread CPU time per step (%ld)\n"
		"  --pinned           H2D from pinned (cudaHostRegister'ed) memory (default)\n"
		"  --pageable         H2D from pageable memory\n"
		"  --h2d-chunks N     split the H2D copy into N copies (%d)\n"
		"  --sync-h2d         H2D with cudaMemcpy (synchronous), not cudaMemcpyAsync\n"
		"  --streams N        kernels round-robin on N created streams, joined to the\n"
		"                     legacy stream by events before the loss copy (0: legacy)\n"
		"  --sync-every N     the loss copy (the sync) every N steps, like a loop that logs\n"
		"                     its loss or accumulates gradients (1); 0: once, after the loop\n"
		"  --setup-params N   before the loop, set up N parameters the way a framework moves a\n"
		"                     model to the GPU: a 4-byte check read back (a sync), an\n"
		"                     allocation and a 64 KiB copy each (0)\n"
		"  --allreduce-kb N   all-reduce N KiB of float32 gradients per step with NCCL\n"
		"                     (libnccl.so.2, loaded late) before the loss copy (0: none)\n"
		"  --ranks N          ranks of the NCCL communicator (8)\n"
		"  --kernels K        kernel launches per step (%d)\n"
		"  --kernel-us N      device time of each kernel, us (%ld)\n"
		"  --kernel-us-spread N  kernel function f (0..7) takes --kernel-us + f * N us (0)\n"
		"  --kernels-vary     step s launches 1 + (7 s mod K) kernels, so the mix of\n"
		"                     kernel functions differs from step to step\n"
		"  --launch-us X      CPU cost of a launch on the simulator (GPUSIM_LAUNCH_US)\n"
		"  --graph            capture the step's kernels once (cudaStreamBeginCapture on a\n"
		"                     stream of their own) and launch the graph each step; the loss\n"
		"                     is read with cudaMemcpyAsync and cudaStreamSynchronize\n"
		"  --graph-fork       --graph, the capture forked into a second stream (an event\n"
		"                     recorded in it, waited on there) for every other kernel\n"
		"  --devices N        spread the kernels over N devices (GPUSIM_DEVICES); the others\n"
		"                     are drained with cudaDeviceSynchronize before the loss copy (1)\n"
		"  --peer-kb N        with --devices: each step, after the kernels, each device but 0\n"
		"                     copies N KiB to device 0 with cudaMemcpyPeer (0: none)\n"
		"  --peer-async       ... with cudaMemcpyPeerAsync on the current device's legacy stream\n"
		"  --peer-late        ... after the other devices' drains, right before the loss copy\n"
		"  --driver-ctx       switch devices with the driver's contexts (libcuda.so.1 loaded\n"
		"                     with dlopen; cuCtxSetCurrent, cuCtxPush/PopCurrent around the\n"
		"                     drains) and copy with cuMemcpyPeer[Async]\n"
		"  --waits MODE       cudaSetDeviceFlags on each device first: auto, spin, yield\n"
		"                     or blocking (default: the runtime's, not called)\n"
		"  --spinners N       CPU-burning competitor processes (%d)\n"
		"  --slow-step N      step N's host work takes --slow-ms more (a stall to catch)\n"
		"  --slow-ms M        the extra host CPU time of --slow-step, ms (100)\n"
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
	OPT_TRUTH, OPT_IGN, OPT_SPIN, OPT_SCEN, OPT_CHECK, OPT_QUIET, OPT_HELP, OPT_SLOW_STEP, OPT_SLOW_MS,
	OPT_SYNC_H2D, OPT_STREAMS, OPT_SYNC_EVERY, OPT_SETUP, OPT_SLOW, OPT_ALLREDUCE, OPT_RANKS, OPT_WWAIT, OPT_PIN, OPT_TWORKERS, OPT_FETCH, OPT_KUS_SPREAD,
	OPT_KVARY, OPT_GRAPH, OPT_DEVICES, OPT_WAITS, OPT_PEER_KB, OPT_PEER_ASYNC, OPT_DRIVER_CTX, OPT_GRAPH_FORK, OPT_PEER_LATE,
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
	{ "sync-h2d", no_argument, NULL, OPT_SYNC_H2D },
	{ "streams", required_argument, NULL, OPT_STREAMS },
	{ "sync-every", required_argument, NULL, OPT_SYNC_EVERY },
	{ "setup-params", required_argument, NULL, OPT_SETUP },
	{ "slow-worker", required_argument, NULL, OPT_SLOW },
	{ "allreduce-kb", required_argument, NULL, OPT_ALLREDUCE },
	{ "ranks", required_argument, NULL, OPT_RANKS },
	{ "worker-wait-us", required_argument, NULL, OPT_WWAIT },
	{ "pin-thread", no_argument, NULL, OPT_PIN },
	{ "thread-workers", no_argument, NULL, OPT_TWORKERS },
	{ "fetch-thread", no_argument, NULL, OPT_FETCH },
	{ "kernels", required_argument, NULL, OPT_KERNELS },
	{ "kernel-us", required_argument, NULL, OPT_KUS },
	{ "kernel-us-spread", required_argument, NULL, OPT_KUS_SPREAD },
	{ "kernels-vary", no_argument, NULL, OPT_KVARY },
	{ "graph", no_argument, NULL, OPT_GRAPH },
	{ "devices", required_argument, NULL, OPT_DEVICES },
	{ "peer-kb", required_argument, NULL, OPT_PEER_KB },
	{ "peer-async", no_argument, NULL, OPT_PEER_ASYNC },
	{ "driver-ctx", no_argument, NULL, OPT_DRIVER_CTX },
	{ "graph-fork", no_argument, NULL, OPT_GRAPH_FORK },
	{ "peer-late", no_argument, NULL, OPT_PEER_LATE },
	{ "waits", required_argument, NULL, OPT_WAITS },
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
	{ "slow-step", required_argument, NULL, OPT_SLOW_STEP },
	{ "slow-ms", required_argument, NULL, OPT_SLOW_MS },
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

long kernel_cost_us(int f)
{
	return O.kernel_us + f * O.kernel_us_spread;
}

int kernels_of_step(int step)
{
	/* 7 is prime to 8: over 8 steps every count 1..8 of an 8-kernel step comes once. */
	return O.kernels_vary && O.kernels ? 1 + (int)((7ll * step) % O.kernels) : O.kernels;
}

void parse_options(int argc, char **argv)
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
		case OPT_SYNC_H2D: O.sync_h2d = 1; break;
		case OPT_STREAMS: O.streams = (int)num(n, optarg, 0, MAX_STREAMS); break;
		case OPT_SYNC_EVERY: O.sync_every = (int)num(n, optarg, 0, 10000000); break;
		case OPT_SETUP: O.setup_params = (int)num(n, optarg, 0, 100000); break;
		case OPT_SLOW: O.slow_worker = (int)num(n, optarg, 1, 1000); break;
		case OPT_ALLREDUCE: O.allreduce_kb = num(n, optarg, 0, 16 << 20); break;
		case OPT_RANKS: O.ranks = (int)num(n, optarg, 1, 65536); break;
		case OPT_WWAIT: O.worker_wait_us = num(n, optarg, 0, 100000000); break;
		case OPT_PIN: O.pin_thread = 1; break;
		case OPT_TWORKERS: O.thread_workers = 1; break;
		case OPT_FETCH: O.fetch_thread = 1; break;
		case OPT_KERNELS: O.kernels = (int)num(n, optarg, 0, 10000000); break;
		case OPT_KUS: O.kernel_us = num(n, optarg, 0, 100000000); break;
		case OPT_KUS_SPREAD: O.kernel_us_spread = num(n, optarg, 0, 10000000); break;
		case OPT_KVARY: O.kernels_vary = 1; break;
		case OPT_GRAPH: O.graph = 1; break;
		case OPT_DEVICES: O.devices = (int)num(n, optarg, 1, MAX_DEVICES); break;
		case OPT_PEER_KB: O.peer_kb = num(n, optarg, 0, 1 << 20); break;
		case OPT_PEER_ASYNC: O.peer_async = 1; break;
		case OPT_DRIVER_CTX: O.driver_ctx = 1; break;
		case OPT_GRAPH_FORK: O.graph = O.graph_fork = 1; break;
		case OPT_PEER_LATE: O.peer_late = 1; break;
		case OPT_WAITS:
			if (strcmp(optarg, "auto") && strcmp(optarg, "spin") && strcmp(optarg, "yield") &&
			    strcmp(optarg, "blocking")) {
				fprintf(stderr, "train: --waits: expected auto, spin, yield or blocking, got '%s'\n", optarg);
				exit(2);
			}
			O.waits = optarg;
			break;
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
		case OPT_SLOW_STEP: O.slow_step = (int)num(n, optarg, 0, 10000000); break;
		case OPT_SLOW_MS: O.slow_ms = num(n, optarg, 1, 3600000); break;
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
