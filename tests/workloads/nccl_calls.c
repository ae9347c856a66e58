// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Makes a known set of NCCL calls against the toolkit's real libnccl and prints
 * what it made as JSON: each call's name, arguments and the result NCCL gave,
 * the truth the decoding tests compare dlbpf against. Without a GPU a
 * collective on a NULL communicator fails at once; the call (and the probe on
 * it) still happens.
 *
 *   nccl_calls [--wait] [--repeat N]
 *     --wait      read one line from stdin before the calls (for --pid tests)
 *     --repeat N  make the whole set N times (default 1)
 */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handshake.h"

struct made {
	const char *name;
	unsigned calls, errors;
};

static struct made made[16];
static int nmade;

static void note(const char *name, ncclResult_t r)
{
	int i;

	for (i = 0; i < nmade && strcmp(made[i].name, name); i++)
		;
	if (i == nmade)
		made[nmade++].name = name;
	made[i].calls++;
	made[i].errors += r != ncclSuccess;
}

int main(int argc, char **argv)
{
	static float buf[4096];
	cudaStream_t s1 = (cudaStream_t)(uintptr_t)0x5151, s2 = (cudaStream_t)(uintptr_t)0x5252;
	/* Never dereferenced on a failing call: NCCL checks the communicator first. */
	ncclComm_t comm = NULL, made_comm = NULL;
	int wait = 0, repeat = 1, version = 0, devs[1] = { 0 };
	ncclUniqueId id;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--wait] [--repeat N]\n", argv[0]);
			return 2;
		}
	}
	if (repeat < 1) {
		fprintf(stderr, "nccl_calls: --repeat wants a count of at least 1\n");
		return 2;
	}
	if (wait && ready_then_wait())
		return 1;
	memset(&id, 0, sizeof(id));
	for (int r = 0; r < repeat; r++) {
		note("ncclGetVersion", ncclGetVersion(&version));
		note("ncclGroupStart", ncclGroupStart());
		for (int i = 0; i < 5; i++)
			note("ncclAllReduce", ncclAllReduce(buf, buf + 1024, 1000, ncclFloat32, ncclMax, comm, s1));
		note("ncclGroupEnd", ncclGroupEnd());
		for (int i = 0; i < 3; i++)
			note("ncclAllGather", ncclAllGather(buf, buf + 2048, 256, ncclFloat16, comm, s2));
		for (int i = 0; i < 2; i++)
			note("ncclReduceScatter", ncclReduceScatter(buf, buf + 8, 128, ncclInt64, ncclMin, comm, s1));
		note("ncclBroadcast", ncclBroadcast(buf, buf + 16, 64, ncclInt8, 3, comm, s2));
		note("ncclReduce", ncclReduce(buf, buf + 32, 512, ncclBfloat16, ncclProd, 2, comm, s1));
		note("ncclReduce", ncclReduce(buf, buf + 32, 512, ncclBfloat16, ncclProd, 2, comm, s1));
		for (int i = 0; i < 4; i++) {
			note("ncclSend", ncclSend(buf, 100, ncclUint8, 5, comm, s2));
			note("ncclRecv", ncclRecv(buf + 64, 200, ncclFloat64, 6, comm, s2));
		}
		note("ncclCommInitRank", ncclCommInitRank(&made_comm, 4, id, 1));
		note("ncclCommInitAll", ncclCommInitAll(&made_comm, 1, devs));
	}

	printf("{\"version\":%d,\"repeat\":%d,\"streams\":[%llu,%llu],\"calls\":{", version, repeat,
	       (unsigned long long)(uintptr_t)s1, (unsigned long long)(uintptr_t)s2);
	for (int i = 0; i < nmade; i++)
		printf("%s\"%s\":{\"count\":%u,\"errors\":%u}", i ? "," : "", made[i].name, made[i].calls, made[i].errors);
	/* The collectives' arguments as made above, for the trace's slices. */
	printf("},\"args\":{"
	       "\"ncclAllReduce\":{\"count\":1000,\"datatype\":\"float32\",\"bytes\":4000,\"op\":\"max\",\"stream\":%llu},"
	       "\"ncclAllGather\":{\"count\":256,\"datatype\":\"float16\",\"bytes\":512,\"stream\":%llu},"
	       "\"ncclReduceScatter\":{\"count\":128,\"datatype\":\"int64\",\"bytes\":1024,\"op\":\"min\",\"stream\":%llu},"
	       "\"ncclBroadcast\":{\"count\":64,\"datatype\":\"int8\",\"bytes\":64,\"root\":3,\"stream\":%llu},"
	       "\"ncclReduce\":{\"count\":512,\"datatype\":\"bfloat16\",\"bytes\":1024,\"op\":\"prod\",\"root\":2,"
	       "\"stream\":%llu},"
	       "\"ncclSend\":{\"count\":100,\"datatype\":\"uint8\",\"bytes\":100,\"peer\":5,\"stream\":%llu},"
	       "\"ncclRecv\":{\"count\":200,\"datatype\":\"float64\",\"bytes\":1600,\"peer\":6,\"stream\":%llu}}}\n",
	       (unsigned long long)(uintptr_t)s1, (unsigned long long)(uintptr_t)s2, (unsigned long long)(uintptr_t)s1,
	       (unsigned long long)(uintptr_t)s2, (unsigned long long)(uintptr_t)s1, (unsigned long long)(uintptr_t)s2,
	       (unsigned long long)(uintptr_t)s2);
	return 0;
}
