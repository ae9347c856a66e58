// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// A training-step loop for a real GPU, with its own truth: every kernel and
// copy is bracketed by CUDA events, so the device's busy time per step and
// each kernel name's mean duration come from the device itself; the host's
// step starts and blocking waits come from CLOCK_MONOTONIC, the clock dlbpf's
// records carry. Kernels spin on %globaltimer for a set time, so their
// durations do not depend on the chip's clocks.
//
// Modes:
//   gpu     batch H2D, a varying number of layers forward and backward, an
//           optimizer kernel, then a 4-byte D2H of the loss (the sync)
//   copies  many small synchronous pinned H2D copies to an idle device, one
//           tiny kernel, the loss D2H
//   streams two streams whose kernels overlap, joined by an event, then a
//           cudaStreamSynchronize
// Prints one JSON object (the truth) on stdout at the end.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
#include <unistd.h>
#include <cuda_runtime.h>

#define CK(x)                                                                           \
	do {                                                                            \
		cudaError_t e_ = (x);                                                   \
		if (e_ != cudaSuccess) {                                                \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,       \
				cudaGetErrorString(e_));                                \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

static __device__ __forceinline__ unsigned long long gtimer(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

static __device__ void spin(long long ns, float *sink)
{
	unsigned long long t0 = gtimer();
	float acc = 0;
	while ((long long)(gtimer() - t0) < ns)
		acc += 1.0f;
	if (threadIdx.x == 0 && blockIdx.x == 0 && sink)
		sink[0] = acc;
}

__global__ void layer_forward(long long ns, float *sink) { spin(ns, sink); }
__global__ void layer_backward(long long ns, float *sink) { spin(ns, sink); }
__global__ void optimizer_step(long long ns, float *sink) { spin(ns, sink); }
__global__ void side_stream_work(long long ns, float *sink) { spin(ns, sink); }

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cpu_spin(long long ns)
{
	long long t0 = now_ns();
	while (now_ns() - t0 < ns)
		;
}

struct item {
	int step, kind; /* kind: 0 copy, 1 forward, 2 backward, 3 optimizer, 4 side */
	cudaEvent_t a, b;
};

static std::vector<item> items;

static void bracket_begin(int step, int kind, cudaStream_t s)
{
	item it;
	it.step = step;
	it.kind = kind;
	CK(cudaEventCreate(&it.a));
	CK(cudaEventCreate(&it.b));
	CK(cudaEventRecord(it.a, s));
	items.push_back(it);
}

static void bracket_end(cudaStream_t s) { CK(cudaEventRecord(items.back().b, s)); }

int main(int argc, char **argv)
{
	const char *mode = "gpu";
	int steps = 100, copies = 200;
	long long fwd_ns = 300000, bwd_ns = 500000, opt_ns = 200000, cpu_ns = 1000000;
	size_t batch = 8 << 20;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mode"))
			mode = argv[i + 1];
		else if (!strcmp(argv[i], "--steps"))
			steps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--copies"))
			copies = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--fwd-us"))
			fwd_ns = atoll(argv[i + 1]) * 1000;
		else if (!strcmp(argv[i], "--bwd-us"))
			bwd_ns = atoll(argv[i + 1]) * 1000;
		else if (!strcmp(argv[i], "--cpu-us"))
			cpu_ns = atoll(argv[i + 1]) * 1000;
		else if (!strcmp(argv[i], "--batch-mb"))
			batch = (size_t)atoll(argv[i + 1]) << 20;
		else {
			fprintf(stderr, "unknown option %s\n", argv[i]);
			return 2;
		}
	}

	float *d_in, *d_loss, *h_in, *h_loss;
	CK(cudaMalloc(&d_in, batch));
	CK(cudaMalloc(&d_loss, 4096));
	CK(cudaMallocHost(&h_in, batch));
	CK(cudaMallocHost(&h_loss, 4096));
	memset(h_in, 1, batch);
	cudaStream_t side;
	cudaEvent_t joined;
	CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
	/* Warm-up: module load and first-launch costs before the traced steps. */
	layer_forward<<<1, 32>>>(1000, d_loss);
	layer_backward<<<1, 32>>>(1000, d_loss);
	optimizer_step<<<1, 32>>>(1000, d_loss);
	side_stream_work<<<1, 32, 0, side>>>(1000, d_loss);
	CK(cudaDeviceSynchronize());

	std::vector<long long> t_start(steps), t_end(steps), sync_ns(steps);
	std::vector<int> layers(steps);
	for (int s = 0; s < steps; s++) {
		t_start[s] = now_ns();
		if (!strcmp(mode, "copies")) {
			/* Not bracketed: two event records a copy would be most of the calls. */
			for (int c = 0; c < copies; c++)
				CK(cudaMemcpy(d_in, h_in, 4096, cudaMemcpyHostToDevice));
			bracket_begin(s, 3, 0);
			optimizer_step<<<1, 32>>>(20000, d_loss);
			bracket_end(0);
		} else {
			bracket_begin(s, 0, 0);
			CK(cudaMemcpyAsync(d_in, h_in, batch, cudaMemcpyHostToDevice, 0));
			bracket_end(0);
			/* 2..7 layers: the mix varies from step to step. */
			layers[s] = 2 + (s * 7 + s / 5) % 6;
			for (int l = 0; l < layers[s]; l++) {
				bracket_begin(s, 1, 0);
				layer_forward<<<4, 64>>>(fwd_ns, d_loss);
				bracket_end(0);
			}
			if (!strcmp(mode, "streams")) {
				/* side work overlaps the backward pass; joined before the optimizer */
				bracket_begin(s, 4, side);
				side_stream_work<<<4, 64, 0, side>>>(bwd_ns * layers[s] / 2, d_loss);
				bracket_end(side);
				CK(cudaEventRecord(joined, side));
			}
			for (int l = 0; l < layers[s]; l++) {
				bracket_begin(s, 2, 0);
				layer_backward<<<4, 64>>>(bwd_ns, d_loss);
				bracket_end(0);
			}
			if (!strcmp(mode, "streams"))
				CK(cudaStreamWaitEvent(0, joined, 0));
			bracket_begin(s, 3, 0);
			optimizer_step<<<4, 64>>>(opt_ns, d_loss);
			bracket_end(0);
		}
		long long w0 = now_ns();
		if (!strcmp(mode, "streams")) {
			CK(cudaMemcpyAsync(h_loss, d_loss, 4, cudaMemcpyDeviceToHost, 0));
			CK(cudaStreamSynchronize(0));
		} else {
			CK(cudaMemcpy(h_loss, d_loss, 4, cudaMemcpyDeviceToHost));
		}
		sync_ns[s] = now_ns() - w0;
		cpu_spin(cpu_ns);
		t_end[s] = now_ns();
	}
	CK(cudaDeviceSynchronize());

	/* Device busy per step: the union of the step's bracketed intervals. */
	std::vector<double> busy(steps, 0), kind_ms(5, 0);
	std::vector<int> kind_n(5, 0);
	cudaEvent_t origin = items[0].a;
	struct iv { double a, b; };
	std::vector<std::vector<iv>> per(steps);
	for (auto &it : items) {
		float a, b;
		CK(cudaEventElapsedTime(&a, origin, it.a));
		CK(cudaEventElapsedTime(&b, origin, it.b));
		per[it.step].push_back({ a, b });
		kind_ms[it.kind] += b - a;
		kind_n[it.kind]++;
	}
	for (int s = 0; s < steps; s++) {
		auto &v = per[s];
		std::sort(v.begin(), v.end(), [](const iv &x, const iv &y) { return x.a < y.a; });
		double lo = -1, hi = -1;
		for (auto &x : v) {
			if (x.a > hi) {
				if (hi > lo)
					busy[s] += hi - lo;
				lo = x.a;
				hi = x.b;
			} else if (x.b > hi) {
				hi = x.b;
			}
		}
		if (hi > lo)
			busy[s] += hi - lo;
	}
	static const char *kind_name[] = { "copy", "layer_forward", "layer_backward", "optimizer_step",
					   "side_stream_work" };
	printf("{\"mode\": \"%s\", \"pid\": %d, \"busy_complete\": %s, \"steps\": [", mode, (int)getpid(),
	       strcmp(mode, "copies") ? "true" : "false");
	for (int s = 0; s < steps; s++)
		printf("%s{\"start_ns\": %lld, \"end_ns\": %lld, \"sync_ns\": %lld, \"busy_ns\": %.0f, \"layers\": %d}",
		       s ? ", " : "", t_start[s], t_end[s], sync_ns[s], busy[s] * 1e6, layers[s]);
	printf("], \"kinds\": {");
	for (int k = 0; k < 5; k++)
		printf("%s\"%s\": {\"count\": %d, \"mean_ns\": %.0f}", k ? ", " : "", kind_name[k], kind_n[k],
		       kind_n[k] ? kind_ms[k] * 1e6 / kind_n[k] : 0.0);
	printf("}, \"warmup_launches_each\": 1}\n");
	return 0;
}
