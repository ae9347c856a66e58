/* SPDX-License-Identifier: MIT */
/*
 * What the simulator's tests share: the check macro and its counters, the
 * model parameters the tests pin, the simulator extras found with dlsym, the
 * kernel handles and a launch helper. test_gpusim.c holds the data, error and
 * registration tests and main(); test_gpusim_timing.c the timing tests.
 */
#ifndef TEST_GPUSIM_H
#define TEST_GPUSIM_H

#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>

#include "thread_clock.h"

/* Model parameters the tests pin (set in the environment before the first
 * CUDA call, overriding whatever the caller's environment says). */
#define PINNED_GBPS 24.0
#define PAGEABLE_GBPS 8.0
#define LATENCY_NS 10000ull
#define LAUNCH_NS 5000ull
#define NS_PER_BLOCK 1000ull
#define KBASE_NS 2000ull

extern int passed, failed;

#define CHECK(cond, ...)                                  \
	do {                                              \
		if (cond) {                               \
			passed++;                         \
			printf("ok   - ");                \
		} else {                                  \
			failed++;                         \
			printf("FAIL - ");                \
		}                                         \
		printf(__VA_ARGS__);                      \
		printf("\n");                             \
		fflush(stdout);                           \
	} while (0)

#define CK(call) CHECK((call) == cudaSuccess, "%s", #call)

typedef int (*set_cost_fn)(const void *, unsigned long long);
typedef int (*is_dev_fn)(const void *);
extern set_cost_fn set_cost;
extern is_dev_fn is_dev;

/* Distinct host functions used as kernel handles (test_gpusim.c). */
void kern_a(void);
void kern_b(void);
void kern_c(void);
void kern_zero(void);

void timing_tests(void);
void shapes_tests(void);

static inline dim3 d3(unsigned x)
{
	dim3 d = { x, 1, 1 };
	return d;
}

static inline cudaError_t launch(const void *f, unsigned blocks, cudaStream_t s)
{
	return cudaLaunchKernel(f, d3(blocks), d3(128), NULL, 0, s);
}

#endif
