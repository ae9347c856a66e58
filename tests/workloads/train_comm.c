// SPDX-License-Identifier: MIT
/*
 * train_comm.c — the gradient all-reduce of data-parallel training. With
 * --allreduce-kb, libnccl.so.2 is loaded late (dlopen, as frameworks load it
 * with their CUDA library), one communicator of --ranks ranks is made, and
 * each step all-reduces that many KiB of float32 gradients on the legacy
 * stream before the loss copy, which then waits for it.
 *
 * Truth, on the simulator: after each step, the collectives the device ran
 * (gpusimCommTimeline) against the loss copy's wait, as one line
 *   {"comm":{"collectives":N,"bytes":B,"exposed_ns":E,"ahead_ns":A}}
 * exposed: the wait's overlap with collectives on the device; ahead: the part
 * of the wait before the first of them started (the compute queued ahead).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "train.h"

typedef ncclResult_t (*init_rank_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*unique_id_fn)(ncclUniqueId *);
typedef ncclResult_t (*all_reduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
				      cudaStream_t);
typedef ncclResult_t (*destroy_fn)(ncclComm_t);
typedef unsigned long long (*timeline_fn)(unsigned long long, unsigned long long *, unsigned long long);

static void *lib;
static ncclComm_t comm;
static all_reduce_fn all_reduce;
static destroy_fn destroy;
static timeline_fn comm_timeline;
static unsigned long long next_item;
static void *grads;

int comm_setup(void)
{
	init_rank_fn init_rank;
	unique_id_fn unique_id;
	ncclUniqueId id;

	if (!O.allreduce_kb)
		return 0;
	lib = dlopen("libnccl.so.2", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "train: --allreduce-kb needs libnccl.so.2: %s\n", dlerror());
		return -1;
	}
	init_rank = (init_rank_fn)(uintptr_t)dlsym(lib, "ncclCommInitRank");
	unique_id = (unique_id_fn)(uintptr_t)dlsym(lib, "ncclGetUniqueId");
	all_reduce = (all_reduce_fn)(uintptr_t)dlsym(lib, "ncclAllReduce");
	destroy = (destroy_fn)(uintptr_t)dlsym(lib, "ncclCommDestroy");
	if (!init_rank || !unique_id || !all_reduce || !destroy) {
		fprintf(stderr, "train: libnccl.so.2 lacks the NCCL API\n");
		return -1;
	}
	if (cudaMalloc(&grads, (size_t)O.allreduce_kb << 10) != cudaSuccess || unique_id(&id) != ncclSuccess ||
	    init_rank(&comm, O.ranks, id, 0) != ncclSuccess) {
		fprintf(stderr, "train: cannot make a communicator of %d ranks\n", O.ranks);
		if (!O.ignore_errors)
			return -1;
		comm = NULL;
	}
	comm_timeline = (timeline_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimCommTimeline");
	if (comm_timeline)
		comm_timeline(0, NULL, 0);   /* recording starts now */
	return 0;
}

int comm_step(void)
{
	if (!all_reduce)
		return 0;
	return all_reduce(grads, grads, ((size_t)O.allreduce_kb << 10) / sizeof(float), ncclFloat32, ncclSum, comm,
			  0) == ncclSuccess ? 0 : -1;
}

void comm_truth_write(FILE *f, uint64_t wait_start, uint64_t wait_end)
{
	unsigned long long se[2 * 64], got, n = 0;
	uint64_t exposed = 0, first = wait_end;

	if (!comm_timeline || !f)
		return;
	while ((got = comm_timeline(next_item, se, 64)) > 0) {
		for (unsigned long long i = 0; i < got; i++) {
			uint64_t s = se[2 * i] > wait_start ? se[2 * i] : wait_start;
			uint64_t e = se[2 * i + 1] < wait_end ? se[2 * i + 1] : wait_end;

			if (e > s)
				exposed += e - s;
			if (se[2 * i] < first)
				first = se[2 * i];
		}
		next_item += got;
		n += got;
	}
	fprintf(f, "{\"comm\":{\"collectives\":%llu,\"bytes\":%llu,\"exposed_ns\":%llu,\"ahead_ns\":%llu}}\n", n,
		n * ((unsigned long long)O.allreduce_kb << 10), (unsigned long long)exposed,
		(unsigned long long)(first > wait_start ? first - wait_start : 0));
}

void comm_teardown(void)
{
	if (comm)
		destroy(comm);
	if (grads)
		cudaFree(grads);
	/* lib stays loaded: unloading NCCL at exit is what frameworks avoid too. */
}
