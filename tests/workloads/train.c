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
 *     cudaMemcpy of the loss: the host waits for the GPU there. With --graph
 *     the kernels were captured once into a CUDA graph on a stream of their
 *     own and each step launches it there, reading the loss with
 *     cudaMemcpyAsync + cudaStreamSynchronize; with --devices N they are
 *     spread over N devices (cudaSetDevice); the others are drained with
 *     cudaDeviceSynchronize before device 0's loss copy.
 *   - --truth FILE: JSON lines, one per step, with the phases as measured by
 *     the workload itself on CLOCK_MONOTONIC, and a summary line.
 *
 * This file is main: the CUDA set-up and the step loop. The options are in
 * train_opts.c, the dataset, workers and ring in train_loader.c, the ground
 * truth in train_truth.c; train.h is what they share.
 */
#define _GNU_SOURCE
#include <cuda.h>   /* the driver's types: --driver-ctx loads libcuda.so.1 itself */
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

volatile sig_atomic_t g_stop;

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
	pin_join();
	comm_teardown();
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
/* As dlbpf names them: the host functions' symbols. */
const char *const kernel_names[8] = {
	"train_kernel_embedding", "train_kernel_conv2d", "train_kernel_gemm", "train_kernel_relu",
	"train_kernel_layernorm", "train_kernel_softmax_loss", "train_kernel_backward", "train_kernel_sgd_update",
};

/* The step marker: a tracer puts a uprobe here (--step-on train_step_begin).
 * Its first instruction is a no-op the kernel need not single-step, and it has
 * no prologue. x86-64: naked, a 5-byte nop (no endbr64): uprobes on nop5 are
 * the cheapest kind on 6.18 (measured on 6.18: ~165 ns, vs ~14 us for
 * instructions the kernel must single-step); the step number is in %edi at
 * entry (SysV psABI). arm64: gcc has no naked functions there, so it is written
 * in assembly: nop, ret (arm64's uprobes emulate a NOP: no out-of-line step);
 * the step number is in w0 (AAPCS64). */
#if defined(__x86_64__)
__attribute__((naked, noinline, used)) void train_step_begin(int step __attribute__((unused)))
{
	__asm__ volatile(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"
			 "ret");
}
#elif defined(__aarch64__)
void train_step_begin(int step);
__asm__(".text\n\t.p2align 2\n\t.globl train_step_begin\n\t.type train_step_begin, %function\n"
	"train_step_begin:\n\tnop\n\tret\n\t.size train_step_begin, . - train_step_begin\n");
#else
#error "train.c's step marker is written for x86-64 and arm64"
#endif


/* ------------------------------------------------ graphs and devices -- */

static cudaStream_t graph_stream;
static cudaGraphExec_t graph_exec;
static void *d_loss_of[MAX_DEVICES];   /* devices 1..: memory of their own, as a model's replicas hold */
static void *d_grad_of[MAX_DEVICES];   /* --peer-kb: device d's gradients; device 0's, room for every other's */
int peer_copies;
long long sim_peer_copies = -1;

/*
 * --driver-ctx: the driver API, loaded as frameworks load it (dlopen of libcuda.so.1), switches
 * devices instead of cudaSetDevice: each device's primary context is retained once, the kernels'
 * device is set with cuCtxSetCurrent, each drain pushes the device's context and pops it after,
 * and the gradients go with cuMemcpyPeer[Async], which name contexts.
 */
static struct {
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set)(CUcontext);
	CUresult (*push)(CUcontext);
	CUresult (*pop)(CUcontext *);
	CUresult (*peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
	CUresult (*peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
	CUcontext ctx[MAX_DEVICES];
} drv;
int driver_calls[DRV_NCALLS];   /* the calls that succeeded, as driver_call_names lists them */
const char *const driver_call_names[DRV_NCALLS] = { "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
						    "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuMemcpyPeer",
						    "cuMemcpyPeerAsync" };

static bool drv_count(int call, CUresult r)
{
	if (r == CUDA_SUCCESS)
		driver_calls[call]++;
	else
		fprintf(stderr, "train: %s failed: %d\n", driver_call_names[call], (int)r);
	return r == CUDA_SUCCESS;
}

static int driver_open(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		fprintf(stderr, "train: --driver-ctx: %s\n", dlerror());
		return -1;
	}
	*(void **)&drv.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&drv.set = dlsym(h, "cuCtxSetCurrent");
	*(void **)&drv.push = dlsym(h, "cuCtxPushCurrent_v2");
	*(void **)&drv.pop = dlsym(h, "cuCtxPopCurrent_v2");
	*(void **)&drv.peer = dlsym(h, "cuMemcpyPeer");
	*(void **)&drv.peer_async = dlsym(h, "cuMemcpyPeerAsync");
	if (!drv.retain || !drv.set || !drv.push || !drv.pop || !drv.peer || !drv.peer_async) {
		fprintf(stderr, "train: --driver-ctx: libcuda.so.1 lacks a context or peer-copy entry point\n");
		return -1;
	}
	for (int d = 0; d < O.devices; d++)
		drv_count(DRV_RETAIN, drv.retain(&drv.ctx[d], d));
	return 0;
}

/* The calling thread's device: cudaSetDevice, or the device's primary context made current. */
static void set_device(int d)
{
	if (O.driver_ctx)
		drv_count(DRV_SET, drv.set(drv.ctx[d]));
	else
		CUDA("cudaSetDevice", cudaSetDevice(d));
}

/* Each device but 0 sends its gradients to device 0 (--peer-kb), as a data-parallel loop on one host may. */
static void peer_step(void)
{
	size_t bytes = (size_t)O.peer_kb * 1024;

	for (int d = 1; bytes && d < O.devices; d++) {
		void *dst = (char *)d_grad_of[0] + (size_t)(d - 1) * bytes;
		cudaError_t e;

		if (O.driver_ctx) {
			CUdeviceptr to = (CUdeviceptr)(uintptr_t)dst, from = (CUdeviceptr)(uintptr_t)d_grad_of[d];

			if (O.peer_async ? drv_count(DRV_PEER_ASYNC, drv.peer_async(to, drv.ctx[0], from, drv.ctx[d], bytes, NULL))
					 : drv_count(DRV_PEER, drv.peer(to, drv.ctx[0], from, drv.ctx[d], bytes)))
				peer_copies++;
			continue;
		}
		e = O.peer_async ? cudaMemcpyPeerAsync(dst, 0, d_grad_of[d], d, bytes, 0)
				 : cudaMemcpyPeer(dst, 0, d_grad_of[d], d, bytes);
		if (e == cudaSuccess)
			peer_copies++;
		else
			cuda_fail(O.peer_async ? "cudaMemcpyPeerAsync" : "cudaMemcpyPeer", e);
	}
}

/* cudaSetDeviceFlags on every device, as --waits names it (the runtime keeps them per device). */
static void set_waits(void)
{
	static const struct {
		const char *name;
		unsigned flag;
	} modes[] = { { "auto", cudaDeviceScheduleAuto }, { "spin", cudaDeviceScheduleSpin },
		      { "yield", cudaDeviceScheduleYield }, { "blocking", cudaDeviceScheduleBlockingSync } };

	for (size_t i = 0; O.waits && i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (strcmp(O.waits, modes[i].name))
			continue;
		for (int d = O.devices - 1; d >= 0; d--) {
			CUDA("cudaSetDevice", cudaSetDevice(d));
			CUDA("cudaSetDeviceFlags", cudaSetDeviceFlags(modes[i].flag));
		}
	}
}

/* The step's kernels, captured once on a non-blocking stream (as PyTorch's pool streams are) and instantiated. */
static void graph_capture(void *d_batch)
{
	cudaGraph_t graph = NULL;

	cudaStream_t side = NULL;
	cudaEvent_t fork = NULL, join = NULL;

	CUDA("cudaStreamCreateWithPriority", cudaStreamCreateWithPriority(&graph_stream, cudaStreamNonBlocking, 0));
	if (O.graph_fork) {
		CUDA("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
		CUDA("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
		CUDA("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	}
	CUDA("cudaStreamBeginCapture", cudaStreamBeginCapture(graph_stream, cudaStreamCaptureModeGlobal));
	/* --graph-fork: the capture forks into a side stream (its wait on an event recorded in the capture) */
	if (O.graph_fork) {
		CUDA("cudaEventRecord", cudaEventRecord(fork, graph_stream));
		CUDA("cudaStreamWaitEvent", cudaStreamWaitEvent(side, fork, 0));
	}
	for (int k = 0; k < O.kernels; k++) {
		dim3 grid = { 64, 1, 1 }, block = { 256, 1, 1 };
		void *args[1] = { &d_batch };
		cudaStream_t st = O.graph_fork && k % 2 ? side : graph_stream;

		CUDA("cudaLaunchKernel",
		     cudaLaunchKernel((const void *)(uintptr_t)kernel_fns[k % 8], grid, block, args, 0, st));
	}
	/* ... and joins back before its end: the graph holds both streams' kernels */
	if (O.graph_fork) {
		CUDA("cudaEventRecord", cudaEventRecord(join, side));
		CUDA("cudaStreamWaitEvent", cudaStreamWaitEvent(graph_stream, join, 0));
	}
	CUDA("cudaStreamEndCapture", cudaStreamEndCapture(graph_stream, &graph));
	if (O.graph_fork) {
		CUDA("cudaEventDestroy", cudaEventDestroy(fork));
		CUDA("cudaEventDestroy", cudaEventDestroy(join));
		CUDA("cudaStreamDestroy", cudaStreamDestroy(side));
	}
	CUDA("cudaGraphInstantiate", cudaGraphInstantiate(&graph_exec, graph, 0));
	if (graph)
		CUDA("cudaGraphDestroy", cudaGraphDestroy(graph));
}

/* -------------------------------------------------------------- main -- */

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
	struct run_totals tot;
	struct run_summary sum;
	int registered = 0, nspinners, synced = 1;
	cudaStream_t streams[MAX_STREAMS];
	cudaEvent_t joins[MAX_STREAMS];

	parse_options(argc, argv);
	batch_bytes = ((size_t)O.batch_kb * 1024 + PAGE - 1) & ~(PAGE - 1);
	if (O.truth) {
		truth = fopen(O.truth, "w");
		if (!truth) {
			fprintf(stderr, "train: %s: %s\n", O.truth, strerror(errno));
			return 2;
		}
	}
	if (totals_init(&tot, O.steps))
		return 1;
	if (O.launch_us >= 0) { /* read by the simulator at its first call */
		char v[32];
		snprintf(v, sizeof(v), "%g", O.launch_us);
		setenv("GPUSIM_LAUNCH_US", v, 1);
	}
	if (O.devices > 1) { /* the simulator's devices, unless the environment says otherwise */
		char v[16];
		snprintf(v, sizeof(v), "%d", O.devices);
		setenv("GPUSIM_DEVICES", v, 0);
	}
	if (O.streams > 1) { /* kernels of the streams run at once, unless the environment says otherwise */
		char v[16];
		snprintf(v, sizeof(v), "%d", O.streams);
		setenv("GPUSIM_COMPUTE_ENGINES", v, 0);
	}
	ensure_dataset();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: blocking waits see EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (ring_create(batch_bytes))
		return 1;

	/* CUDA set-up, before the fork so children never touch the runtime */
	set_waits();
	for (int d = O.devices - 1; d > 0; d--) {
		CUDA("cudaSetDevice", cudaSetDevice(d));
		CUDA("cudaMalloc", cudaMalloc(&d_loss_of[d], 256));
		if (O.peer_kb)
			CUDA("cudaMalloc", cudaMalloc(&d_grad_of[d], (size_t)O.peer_kb * 1024));
	}
	CUDA("cudaSetDevice", cudaSetDevice(0));
	if (O.peer_kb && O.devices > 1)
		CUDA("cudaMalloc", cudaMalloc(&d_grad_of[0], (size_t)O.peer_kb * 1024 * (size_t)(O.devices - 1)));
	if (O.driver_ctx && driver_open())
		return 1;
	CUDA("cudaMalloc", cudaMalloc(&d_batch, batch_bytes));
	CUDA("cudaMalloc", cudaMalloc(&d_loss, 256));
	d_loss_of[0] = d_loss;
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
			set_cost((const void *)(uintptr_t)kernel_fns[k], (unsigned long long)kernel_cost_us(k) * 1000u);

	if (O.graph)
		graph_capture(d_batch);
	for (int i = 0; i < O.streams; i++) {
		CUDA("cudaStreamCreate", cudaStreamCreate(&streams[i]));
		CUDA("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&joins[i], cudaEventDisableTiming));
	}
	if (comm_setup())
		return 1;
	for (int i = 0; i < O.setup_params; i++) {
		static char param[64 << 10];
		int check = 0;
		void *d_param;

		CUDA("cudaMemcpy", cudaMemcpy(&check, d_loss, sizeof(check), cudaMemcpyDeviceToHost));
		CUDA("cudaMalloc", cudaMalloc(&d_param, sizeof(param)));
		CUDA("cudaMemcpy", cudaMemcpy(d_param, param, sizeof(param), cudaMemcpyHostToDevice));
	}
	device_truth_start();

	if (start_workers(self) || pin_start())
		return 1;
	nspinners = start_spinners(self);
	/*
	 * The gradients' first copy after the workers' fork writes pages the fork made copy-on-write
	 * (the simulator's device memory is the process's own): tens of ms for 4 MiB here. Done
	 * before the loop, as a job's warm-up step would, with the batch's memory, which the
	 * simulator writes when a peer copy moves the batch copies deferred before it (else in the
	 * first step's peer copy, tens of ms of host time in a step a tracer's steps do not hold).
	 */
	if (O.peer_kb && O.devices > 1) {
		CUDA("cudaMemset", cudaMemset(d_batch, 0, batch_bytes));
		peer_step();
	}

	uint64_t t_prev = now_ns(), t_first = t_prev;
	for (int step = 0; step < O.steps && !g_stop; step++) {
		struct step_record r = { .step = step, .start_ns = t_prev, .h2d_bytes = batch_bytes };
		uint64_t *ph = r.ph, t, oc0, rq0, oc1, rq1, peer_ns = 0, late_ns = 0;
		int s = step % ring->nslots;
		size_t chunk, off;

		train_step_begin(step);
		r.begin_ns = now_ns();
		thread_schedstat(&oc0, &rq0);

		/* 1. take a batch */
		t = now_ns();
		if (batch_take(s))
			break;
		ph[PH_INPUT] = now_ns() - t;

		/* 2. host CPU work (framework, augmentation on the main thread) */
		t = now_ns();
		burn_cpu_us(O.host_cpu_us + (step == O.slow_step ? O.slow_ms * 1000 : 0), thread_cpu_ns());
		ph[PH_HOST] = now_ns() - t;

		/* 3. H2D: pinned (registered ring) or pageable, in chunks */
		t = r.h2d_start_ns = now_ns();
		chunk = (batch_bytes + (size_t)O.h2d_chunks - 1) / (size_t)O.h2d_chunks;
		for (off = 0; off < batch_bytes; off += chunk) {
			size_t n = batch_bytes - off < chunk ? batch_bytes - off : chunk;
			const char *src = slots + (size_t)s * batch_bytes + off;
			void *dst = (void *)((uintptr_t)d_batch + off);
			if (O.sync_h2d)
				CUDA("cudaMemcpy", cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
			else
				CUDA("cudaMemcpyAsync", cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, graph_stream));
		}
		ph[PH_H2D] = now_ns() - t;

		/* 4. kernels: launched one by one (device k mod N), or the graph that holds them */
		t = now_ns();
		if (O.graph)
			CUDA("cudaGraphLaunch", cudaGraphLaunch(graph_exec, graph_stream));
		for (int k = 0; !O.graph && k < kernels_of_step(step); k++) {
			dim3 grid = { 64, 1, 1 }, block = { 256, 1, 1 };
			void *args[1] = { &d_batch };
			cudaStream_t st = O.streams ? streams[k % O.streams] : 0;
			if (O.devices > 1)
				set_device(k % O.devices);
			CUDA("cudaLaunchKernel",
			     cudaLaunchKernel((const void *)(uintptr_t)kernel_fns[k % 8], grid, block, args, 0, st));
		}
		/*
		 * The gradients to device 0 (the current device is the last kernel's: the copy names both).
		 * The call does not wait for the device: its time is the host's (a tracer's "other CUDA"
		 * time, not a launch's), so it goes to the host phase.
		 */
		peer_ns = now_ns();
		if (!O.peer_late)
			peer_step();
		peer_ns = now_ns() - peer_ns;
		/* Side streams join the legacy stream the way frameworks do it: an event each. */
		for (int i = 0; i < O.streams; i++) {
			CUDA("cudaEventRecord", cudaEventRecord(joins[i], streams[i]));
			CUDA("cudaStreamWaitEvent", cudaStreamWaitEvent(0, joins[i], 0));
		}
		/* the gradients' all-reduce (data parallel), after the backward kernels */
		if (comm_step() && !O.ignore_errors) {
			fprintf(stderr, "train: ncclAllReduce failed\n");
			break;
		}
		ph[PH_LAUNCH] = now_ns() - t - peer_ns;
		ph[PH_HOST] += peer_ns;

		/* 5. loss.item(): a synchronous 4-byte D2H copy waits for the GPU; a loop that logs its
		 * loss every N steps syncs only then, and its device runs behind meanwhile. */
		t = now_ns();
		synced = O.sync_every && (step + 1) % O.sync_every == 0;
		if (synced && O.graph) {
			r.loss_copy_ns = now_ns();
			CUDA("cudaMemcpyAsync",
			     cudaMemcpyAsync(&loss, d_loss, sizeof(loss), cudaMemcpyDeviceToHost, graph_stream));
			r.sync_ns = now_ns();
			CUDA("cudaStreamSynchronize", cudaStreamSynchronize(graph_stream));
		} else if (synced) {
			/* The other devices drained (cudaDeviceSynchronize drains the current one), then device 0's loss. */
			for (int d = O.devices - 1; d > 0; d--) {
				CUcontext popped;

				if (O.driver_ctx)
					drv_count(DRV_PUSH, drv.push(drv.ctx[d]));
				else
					CUDA("cudaSetDevice", cudaSetDevice(d));
				r.sync_ns = r.sync_ns ? r.sync_ns : now_ns();
				CUDA("cudaDeviceSynchronize", cudaDeviceSynchronize());
				if (O.driver_ctx)
					drv_count(DRV_POP, drv.pop(&popped));
			}
			if (O.devices > 1)
				set_device(0);
			/* --peer-late: the gradients go to device 0 only now, after the other devices' drains */
			if (O.peer_late) {
				late_ns = now_ns();
				peer_step();
				late_ns = now_ns() - late_ns;
			}
			r.loss_copy_ns = now_ns();
			CUDA("cudaMemcpy", cudaMemcpy(&loss, d_loss, sizeof(loss), cudaMemcpyDeviceToHost));
		}
		/* The late copies' calls wait for nothing: host time, as the early ones' */
		ph[PH_GPU] = now_ns() - t - late_ns;
		ph[PH_HOST] += late_ns;
		uint64_t wait_start = t, wait_end = t + ph[PH_GPU];

		r.hdr = ring->hdr[s];
		r.pin_wait_ns = pin_waited(s);
		sem_post(&ring->empty[s]);
		thread_schedstat(&oc1, &rq1);
		t = now_ns();
		uint64_t dur = t - r.start_ns, busy = 0;
		for (int i = 0; i < PH_OTHER; i++)
			busy += ph[i];
		ph[PH_OTHER] = dur > busy ? dur - busy : 0;
		r.end_ns = t;
		r.oncpu_ns = oc1 - oc0;
		r.runq_ns = rq1 - rq0;
		r.h2d_chunk = chunk;
		totals_add(&tot, &r);
		if (truth) {
			truth_write_step(truth, &r);
			device_truth_write(truth);
			comm_truth_write(truth, wait_start, wait_end);
		}
		t_prev = t;
	}
	uint64_t t_last = t_prev;

	/* The queued work done before the end, as a job whose loop did not sync last does it. */
	for (int d = O.devices - 1; !synced && d >= 0; d--) {
		if (O.devices > 1)
			CUDA("cudaSetDevice", cudaSetDevice(d));
		CUDA("cudaDeviceSynchronize", cudaDeviceSynchronize());
	}
	if (O.graph) {
		CUDA("cudaGraphExecDestroy", cudaGraphExecDestroy(graph_exec));
		CUDA("cudaStreamDestroy", cudaStreamDestroy(graph_stream));
	}
	for (int d = O.devices - 1; d > 0; d--) {
		CUDA("cudaSetDevice", cudaSetDevice(d));
		CUDA("cudaFree", cudaFree(d_loss_of[d]));
		if (d_grad_of[d])
			CUDA("cudaFree", cudaFree(d_grad_of[d]));
	}
	if (O.devices > 1)
		CUDA("cudaSetDevice", cudaSetDevice(0));
	stop_children();
	for (int i = 0; i < O.streams; i++) {
		CUDA("cudaEventDestroy", cudaEventDestroy(joins[i]));
		CUDA("cudaStreamDestroy", cudaStreamDestroy(streams[i]));
	}
	if (registered)
		CUDA("cudaHostUnregister", cudaHostUnregister(slots));
	CUDA("cudaFree", cudaFree(d_batch));
	CUDA("cudaFree", cudaFree(d_loss));
	if (d_grad_of[0])
		CUDA("cudaFree", cudaFree(d_grad_of[0]));

	summarize(&tot, &sum);
	{
		typedef unsigned long long (*count_fn)(void);
		count_fn sim_count = (count_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimPeerCopies");

		if (sim_count)
			sim_peer_copies = (long long)sim_count();
	}
	if (truth) {
		truth_write_summary(truth, &sum, t_last - t_first, nspinners, cuda_errors, set_cost != NULL);
		fclose(truth);
	}
	if (!O.quiet)
		print_summary(&sum, t_last - t_first, cuda_errors);
	totals_free(&tot);
	if (g_stop)
		return 143; /* interrupted (128 + SIGTERM), after a clean shutdown */
	if (O.check && O.expect && sum.expect_share < 0.5) {
		fprintf(stderr, "train: check failed: %s takes %.0f%% of step time (< 50%%)\n", O.expect,
			100 * sum.expect_share);
		return 3;
	}
	return 0;
}
