// SPDX-License-Identifier: MIT
/*
 * gpusim_nccl.c — libnccl.so.2 for the GPU simulator: the NCCL API of the
 * toolkit's nccl.h, so a program linked against (or dlopening) the real
 * libnccl.so.2 runs on it through LD_LIBRARY_PATH=.output/gpusim, as it runs
 * on the simulated libcudart.so.13 beside it.
 *
 * One process stands for every rank of its communicator: a collective costs
 * the simulator's device time for the bytes the ring algorithm puts on each
 * rank's link (NCCL's "bus bandwidth" convention), and nothing is exchanged.
 * Buffers are not touched. A NULL or destroyed communicator, a datatype or op
 * NCCL does not define, and a bad stream fail as NCCL fails them.
 */
#define _GNU_SOURCE
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_API __attribute__((visibility("default")))
#define COMM_MAGIC 0x4e43434cu   /* "NCCL" */

int gpusimCollective(cudaStream_t stream, double bus_bytes);

struct ncclComm {
	uint32_t magic;
	int nranks, rank;
};

static __thread int group_depth;

static const size_t type_size[ncclNumTypes] = {
	[ncclInt8] = 1, [ncclUint8] = 1, [ncclInt32] = 4, [ncclUint32] = 4, [ncclInt64] = 8,
	[ncclUint64] = 8, [ncclFloat16] = 2, [ncclFloat32] = 4, [ncclFloat64] = 8, [ncclBfloat16] = 2,
	[ncclFloat8e4m3] = 1, [ncclFloat8e5m2] = 1,
};

static int comm_ok(const struct ncclComm *c)
{
	return c && c->magic == COMM_MAGIC;
}

/*
 * bytes: the buffer the ring moves (count x type size); factor: the share of
 * it each rank's link carries: 2(n-1)/n for an all-reduce, (n-1)/n for
 * all-gather and reduce-scatter of the whole buffer, 1 for broadcast, reduce
 * and point-to-point.
 */
static ncclResult_t enqueue(ncclComm_t comm, size_t count, ncclDataType_t type, double factor, cudaStream_t stream)
{
	if (!comm_ok(comm) || (unsigned)type >= ncclNumTypes)
		return ncclInvalidArgument;
	if (gpusimCollective(stream, factor * (double)count * (double)type_size[type]))
		return ncclUnhandledCudaError;
	return ncclSuccess;
}

static double ring(const struct ncclComm *c, double parts)
{
	return c->nranks > 1 ? parts * (c->nranks - 1) / c->nranks : 0;
}

NCCL_API ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

NCCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, "gpusim", 6);
	return ncclSuccess;
}

/* Exported functions call each other only through these: a call through the PLT would be probed twice. */
static ncclResult_t init_rank(ncclComm_t *comm, int nranks, int rank)
{
	struct ncclComm *c;

	if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	*c = (struct ncclComm){ COMM_MAGIC, nranks, rank };
	*comm = c;
	return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	(void)id;
	return init_rank(comm, nranks, rank);
}

NCCL_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	(void)devlist;
	if (!comms || ndev < 1)
		return ncclInvalidArgument;
	for (int i = 0; i < ndev; i++) {
		ncclResult_t r = init_rank(&comms[i], ndev, i);

		if (r != ncclSuccess)
			return r;
	}
	return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (!comm_ok(comm))
		return ncclInvalidArgument;
	comm->magic = 0;
	free(comm);
	return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm_ok(comm) || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm_ok(comm) || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

NCCL_API const char *ncclGetErrorString(ncclResult_t result)
{
	return result == ncclSuccess ? "no error" : "gpusim: NCCL call failed";
}

NCCL_API ncclResult_t ncclGroupStart(void)
{
	group_depth++;
	return ncclSuccess;
}

NCCL_API ncclResult_t ncclGroupEnd(void)
{
	if (group_depth == 0)
		return ncclInvalidUsage;
	group_depth--;
	return ncclSuccess;
}

NCCL_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff;
	if ((unsigned)op >= ncclNumOps)
		return ncclInvalidArgument;
	return enqueue(comm, count, datatype, comm_ok(comm) ? ring(comm, 2) : 0, stream);
}

NCCL_API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
				    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff;
	/* The gathered buffer is nranks x sendcount. */
	return enqueue(comm, sendcount, datatype, comm_ok(comm) ? ring(comm, 1) * comm->nranks : 0, stream);
}

NCCL_API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
					ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff;
	if ((unsigned)op >= ncclNumOps)
		return ncclInvalidArgument;
	return enqueue(comm, recvcount, datatype, comm_ok(comm) ? ring(comm, 1) * comm->nranks : 0, stream);
}

/* Broadcast, reduce and point-to-point: the whole buffer crosses one link. */
static ncclResult_t rooted(size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	if (comm_ok(comm) && (root < 0 || root >= comm->nranks))
		return ncclInvalidArgument;
	return enqueue(comm, count, datatype, 1, stream);
}

NCCL_API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				    int root, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff;
	return rooted(count, datatype, root, comm, stream);
}

NCCL_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
				cudaStream_t stream)
{
	(void)buff;
	return rooted(count, datatype, root, comm, stream);
}

NCCL_API ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff;
	if ((unsigned)op >= ncclNumOps)
		return ncclInvalidArgument;
	return rooted(count, datatype, root, comm, stream);
}

NCCL_API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
			       ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff;
	return rooted(count, datatype, peer, comm, stream);
}

NCCL_API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			       cudaStream_t stream)
{
	(void)recvbuff;
	return rooted(count, datatype, peer, comm, stream);
}
