// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <string.h>
#include "records/cuda_api.h"
#include "records/pyline.h"

static const struct dl_api apis[DL_API_COUNT] = {
#define DL_API(id_, name_, cls_, layout_, pinned_, driver_) \
	[id_] = { .id = id_, .name = name_, .cls = cls_, .layout = layout_, .pinned = pinned_, .driver = driver_ },
#include "records/cuda_api.def"
#undef DL_API
};

const struct dl_api *dl_api_by_id(unsigned id)
{
	if (id == DL_API_NONE || id >= DL_API_COUNT)
		return NULL;
	return &apis[id];
}

const struct dl_api *dl_api_by_name(const char *name)
{
	for (unsigned i = 1; i < DL_API_COUNT; i++)
		if (strcmp(apis[i].name, name) == 0)
			return &apis[i];
	return NULL;
}

bool dl_api_entry_only(const struct dl_api *api)
{
	return api->cls == DL_CLS_LAUNCH || api->cls == DL_CLS_GRAPH || api->id == DL_API_DL_DEBUG_STATE;
}

bool dl_api_blocks(const struct dl_api *api)
{
	if (api->cls == DL_CLS_SYNC)
		return true;
	if (api->cls != DL_CLS_COPY)
		return false;
	switch (api->layout) {
	case DL_L_MEMCPY:
	case DL_L_MEMCPY2D:
	case DL_L_CU_COPY:
	case DL_L_CU_HTOD:
	case DL_L_CU_DTOH:
	case DL_L_CU_DTOD:
		return true;
	default:
		return false;
	}
}

unsigned dl_api_reg_args(const struct dl_api *api)
{
	if (dl_api_entry_only(api) || api->cls == DL_CLS_LOADER)
		return DL_API_ARGS_FULL;
	switch (api->layout) {
	case DL_L_NONE:
		return 0;
	case DL_L_STREAM:
	case DL_L_EVENT:
	case DL_L_PTR:
	case DL_L_CTX:
		return 1;
	case DL_L_EVENT_STREAM:
	case DL_L_STREAM_EVENT:
	case DL_L_PTR_SIZE:
		return 2;
	case DL_L_MEMSET:
	case DL_L_CU_COPY:
	case DL_L_CU_HTOD:
	case DL_L_CU_DTOH:
	case DL_L_CU_DTOD:
		return 3;
	case DL_L_MEMCPY:
	case DL_L_MEMSET_ASYNC:
	case DL_L_CU_COPY_ASYNC:
	case DL_L_CU_HTOD_ASYNC:
	case DL_L_CU_DTOH_ASYNC:
	case DL_L_CU_DTOD_ASYNC:
		return 4;
	case DL_L_MEMCPY_ASYNC:
		return 5;
	case DL_L_PEER:
	case DL_L_CU_PEER:
		return api->id == DL_API_MEMCPY_PEER || api->id == DL_API_CU_MEMCPY_PEER ||
		       api->id == DL_API_CU_MEMCPY_PEER_PTDS ? 5 : 6;
	default:
		return DL_API_ARGS_FULL;
	}
}

uint64_t dl_api_cookie(const struct dl_api *api)
{
	unsigned nargs = dl_api_reg_args(api);

	uint64_t c = api->id;

	if (api->driver)
		c |= DL_COOKIE_DRIVER;
	if (api->cls == DL_CLS_LOADER)
		c |= DL_COOKIE_LOADER;
	switch (api->layout) {
	case DL_L_LAUNCH:
		c |= DL_COOKIE_LAUNCH;
		/* fallthrough */
	case DL_L_MEMCPY2D:
	case DL_L_MEMCPY2D_ASYNC:
	case DL_L_NCCL_COLL:
	case DL_L_NCCL_REDUCE:
		c |= DL_COOKIE_STACK;
		break;
	case DL_L_CU_LAUNCH:
		c |= DL_COOKIE_STACK3;
		break;
	case DL_L_LAUNCH_EXC:
	case DL_L_CU_LAUNCH_EX:
		c |= DL_COOKIE_DEREF_CFG;
		break;
	case DL_L_OUT_SIZE:
	case DL_L_GET_KERNEL:
	case DL_L_GET_FUNC:
	case DL_L_NCCL_INIT_RANK:
	case DL_L_NCCL_INIT_ALL:
	case DL_L_NCCL_VERSION:
	case DL_L_CTX_OUT_DEV:
	case DL_L_CTX_OUT:
		c |= DL_COOKIE_OUTPTR;
		break;
	case DL_L_STREAM_OUT1:
		c |= DL_COOKIE_OUTPTR | DL_COOKIE_OUT_ARG1;
		break;
	default:
		break;
	}
	/* Stack arguments and out stay in a dl_cuda_ev (their layouts read more than registers). */
	if (nargs <= 2)
		c |= DL_COOKIE_ARGS2;
	else if (nargs <= 5)
		c |= DL_COOKIE_ARGS5;
	/*
	 * --summary mode: what BPF aggregates instead of recording. Runtime copies
	 * carry where their bytes and kind are (those of kind cudaMemcpyDefault stay
	 * records: their direction needs the allocations); driver copies (direction
	 * from the API or the addresses), allocations (pinned ranges), naming and
	 * loader calls stay records.
	 */
	switch (api->layout) {
	case DL_L_MEMCPY:
	case DL_L_MEMCPY_ASYNC:
		c |= DL_COOKIE_BYTES_1D | DL_COOKIE_AGG;
		break;
	case DL_L_MEMCPY2D:
	case DL_L_MEMCPY2D_ASYNC:
		c |= DL_COOKIE_BYTES_2D | DL_COOKIE_AGG;
		break;
	default:
		if (api->cls == DL_CLS_MEMSET || api->cls == DL_CLS_LAUNCH || api->cls == DL_CLS_SYNC ||
		    api->cls == DL_CLS_EVENT || api->cls == DL_CLS_GRAPH || api->cls == DL_CLS_QUERY)
			c |= DL_COOKIE_AGG;
		break;
	}
	return c;
}

static enum dl_dir dir_of(uint64_t kind)
{
	return kind < DL_DIR_COUNT ? (enum dl_dir)kind : DL_DIR_DEFAULT;
}

/* dim3 is passed by value as two registers: {x, y} packed in the first, z in the low half of the second. */
static void dim3_of(uint64_t xy, uint64_t z, uint32_t out[3])
{
	out[0] = (uint32_t)xy;
	out[1] = (uint32_t)(xy >> 32);
	out[2] = (uint32_t)z;
}

int dl_call_decode(const struct dl_cuda_ev *ev, struct dl_call *c)
{
	const struct dl_api *api = dl_api_by_id(ev->api);
	const uint64_t *a = ev->arg;
	uint32_t skip;

	memset(c, 0, sizeof(*c));
	if (!api)
		return -1;
	c->api = api;
	c->ts = ev->h.ts;
	c->dur_ns = ev->dur_ns;
	c->ret = ev->ret;
	c->tgid = ev->h.tgid;
	c->tid = ev->h.tid;
	c->depth = ev->depth;
	c->entry_only = ev->flags & DL_CUDA_ENTRY_ONLY;
	c->args_fault = ev->flags & (DL_CUDA_ARGS_FAULT | DL_CUDA_OUT_FAULT);
	/* Records from before call sites end at site: they have none (DL_SITE_NONE). */
	if (ev->h.size >= offsetof(struct dl_cuda_ev, site) + sizeof(ev->site)) {
		c->site = ev->site;
		c->site_fault = ev->flags & DL_CUDA_SITE_FAULT;
	}
	/* The stream checked h.size against the buffer; a tail past DL_STACK_MAX frames is not one of ours. */
	c->has_py = dl_py_stack_of(ev, &c->py, &skip);
	if (ev->h.size > sizeof(*ev) + skip * sizeof(uint64_t)) {
		uint32_t n = (ev->h.size - sizeof(*ev)) / sizeof(uint64_t) - skip;

		c->stack = ev->stack + skip;
		c->nstack = n < DL_STACK_MAX ? n : DL_STACK_MAX;
	}

	switch (api->layout) {
	case DL_L_MEMCPY_ASYNC:
		c->stream = a[4];
		c->async = true;
		/* fallthrough */
	case DL_L_MEMCPY:
		c->dst = a[0];
		c->src = a[1];
		c->bytes = a[2];
		c->dir = dir_of(a[3]);
		break;
	case DL_L_MEMCPY2D_ASYNC:
		c->stream = a[7];
		c->async = true;
		/* fallthrough */
	case DL_L_MEMCPY2D:
		c->dst = a[0];
		c->src = a[2];
		c->bytes = a[4] * a[5];
		c->dir = dir_of(a[6]);
		break;
	case DL_L_MEMSET_ASYNC:
		c->stream = a[3];
		c->async = true;
		/* fallthrough */
	case DL_L_MEMSET:
		c->dst = a[0];
		c->bytes = a[2];
		c->dir = DL_DIR_D2D;
		break;
	case DL_L_LAUNCH:
		c->func = a[0];
		dim3_of(a[1], a[2], c->grid);
		dim3_of(a[3], a[4], c->block);
		c->shmem = a[6];
		c->stream = a[7];
		c->async = true;
		break;
	case DL_L_STREAM:
		c->stream = a[0];
		break;
	case DL_L_EVENT:
		c->event = a[0];
		break;
	case DL_L_EVENT_STREAM:
		c->event = a[0];
		c->stream = a[1];
		break;
	case DL_L_STREAM_EVENT:
		c->stream = a[0];
		c->event = a[1];
		break;
	case DL_L_OUT_SIZE:
		c->ptr = ev->out;
		/* cudaStreamCreate has no flags argument: its stream is a blocking one. */
		c->size = api->id == DL_API_STREAM_CREATE ? 0 : a[1];
		break;
	case DL_L_STREAM_OUT1:
		c->stream = a[0];
		c->ptr = ev->out;
		break;
	case DL_L_PTR:
		c->ptr = a[0];
		break;
	case DL_L_PEER:
	case DL_L_CU_PEER:
		/* Device to device on two devices: bytes of kind D2D, the devices (or contexts) in ptr and size. */
		c->dst = a[0];
		c->ptr = api->layout == DL_L_PEER ? (uint64_t)(uint32_t)a[1] : a[1];
		c->src = a[2];
		c->size = api->layout == DL_L_PEER ? (uint64_t)(uint32_t)a[3] : a[3];
		c->bytes = a[4];
		c->dir = DL_DIR_D2D;
		if (dl_api_reg_args(api) == 6) {
			c->stream = a[5];
			c->async = true;
		}
		break;
	case DL_L_CTX_OUT_DEV:
		/* CUdevice is an int: cuCtxCreate[_v2](pctx, flags, dev), _v3(pctx, params, n, flags, dev), _v4(pctx, params, flags, dev) */
		c->ptr = ev->out;
		c->size = (uint32_t)a[api->id == DL_API_CU_PRIMARY_CTX_RETAIN ? 1
				      : api->id == DL_API_CU_CTX_CREATE_V3  ? 4
				      : api->id == DL_API_CU_CTX_CREATE_V4  ? 3
									     : 2];
		break;
	case DL_L_CTX:
		c->ptr = a[0];
		break;
	case DL_L_CTX_OUT:
		c->ptr = ev->out;
		break;
	case DL_L_PTR_SIZE:
		c->ptr = a[0];
		c->size = a[1];
		break;
	case DL_L_LAUNCH_EXC:
		/* cudaLaunchConfig_t: dim3 gridDim, dim3 blockDim, size_t dynamicSmemBytes, cudaStream_t stream */
	case DL_L_CU_LAUNCH_EX:
		/* CUlaunchConfig: unsigned grid x,y,z, block x,y,z, sharedMemBytes; CUstream hStream (same offsets) */
		c->func = a[1];
		dim3_of(a[3], a[4], c->grid);
		c->block[0] = (uint32_t)(a[4] >> 32);
		c->block[1] = (uint32_t)a[5];
		c->block[2] = (uint32_t)(a[5] >> 32);
		c->shmem = api->layout == DL_L_CU_LAUNCH_EX ? (uint32_t)a[6] : a[6];
		c->stream = a[7];
		c->async = true;
		break;
	case DL_L_CU_LAUNCH:
		c->func = a[0];
		c->grid[0] = (uint32_t)a[1];
		c->grid[1] = (uint32_t)a[2];
		c->grid[2] = (uint32_t)a[3];
		c->block[0] = (uint32_t)a[4];
		c->block[1] = (uint32_t)a[5];
		c->block[2] = (uint32_t)a[6];
		c->shmem = (uint32_t)a[7];
		c->stream = ev->out;
		c->async = true;
		break;
	case DL_L_GRAPH:
		c->func = a[0];
		c->stream = a[1];
		c->async = true;
		break;
	case DL_L_GET_KERNEL:
		c->func = ev->out;
		c->host = a[1];
		break;
	case DL_L_REGISTER_FUNC:
		c->host = a[1];
		c->func = a[1];
		c->name_ptr = a[3];
		break;
	case DL_L_GET_FUNC:
		c->func = ev->out;
		c->name_ptr = a[2];
		break;
	case DL_L_CU_COPY_ASYNC:
	case DL_L_CU_HTOD_ASYNC:
	case DL_L_CU_DTOH_ASYNC:
	case DL_L_CU_DTOD_ASYNC:
		c->stream = a[3];
		c->async = true;
		/* fallthrough */
	case DL_L_CU_COPY:
	case DL_L_CU_HTOD:
	case DL_L_CU_DTOH:
	case DL_L_CU_DTOD:
		c->dst = a[0];
		c->src = a[1];
		c->bytes = a[2];
		switch (api->layout) {
		case DL_L_CU_HTOD:
		case DL_L_CU_HTOD_ASYNC:
			c->dir = DL_DIR_H2D;
			break;
		case DL_L_CU_DTOH:
		case DL_L_CU_DTOH_ASYNC:
			c->dir = DL_DIR_D2H;
			break;
		case DL_L_CU_DTOD:
		case DL_L_CU_DTOD_ASYNC:
			c->dir = DL_DIR_D2D;
			break;
		default:
			c->dir = DL_DIR_DEFAULT;
			break;
		}
		break;
	case DL_L_NCCL_COLL:
	case DL_L_NCCL_GATHER:
	case DL_L_NCCL_REDUCE:
		c->src = a[0];
		c->dst = a[1];
		c->count = a[2];
		c->dtype = (uint32_t)a[3];
		c->peer = -1;
		if (api->layout == DL_L_NCCL_GATHER) {
			c->comm = a[4];
			c->stream = a[5];
		} else if (api->layout == DL_L_NCCL_REDUCE) {
			c->op = (uint32_t)a[4];
			c->peer = (int32_t)a[5];
			c->comm = a[6];
			c->stream = a[7];
		} else {
			/* ncclBroadcast's fifth argument is the root; the reductions' is the op. */
			if (api->id == DL_API_NCCL_BROADCAST)
				c->peer = (int32_t)a[4];
			else
				c->op = (uint32_t)a[4];
			c->comm = a[5];
			c->stream = a[6];
		}
		c->bytes = c->count * dl_nccl_type_size(c->dtype);
		c->async = true;
		break;
	case DL_L_NCCL_P2P:
		c->src = c->dst = a[0];
		c->count = a[1];
		c->dtype = (uint32_t)a[2];
		c->peer = (int32_t)a[3];
		c->comm = a[4];
		c->stream = a[5];
		c->bytes = c->count * dl_nccl_type_size(c->dtype);
		c->async = true;
		break;
	case DL_L_NCCL_INIT_RANK:
		c->comm = ev->out;
		c->nranks = (uint32_t)a[1];
		c->rank = (uint32_t)a[2];
		break;
	case DL_L_NCCL_INIT_ALL:
		c->comm = ev->out;
		c->nranks = (uint32_t)a[1];
		break;
	case DL_L_NCCL_VERSION:
		/* An int: the u64 read at return holds what follows it above. */
		c->size = (uint32_t)ev->out;
		break;
	case DL_L_NONE:
		break;
	}
	return 0;
}

/* ncclDataType_t's values, in order (nccl.h). */
static const struct {
	const char *name;
	uint8_t size;
} nccl_types[] = {
	{ "int8", 1 }, { "uint8", 1 }, { "int32", 4 }, { "uint32", 4 }, { "int64", 8 }, { "uint64", 8 },
	{ "float16", 2 }, { "float32", 4 }, { "float64", 8 }, { "bfloat16", 2 }, { "float8e4m3", 1 },
	{ "float8e5m2", 1 },
};

unsigned dl_nccl_type_size(uint64_t dtype)
{
	return dtype < sizeof(nccl_types) / sizeof(nccl_types[0]) ? nccl_types[dtype].size : 0;
}

const char *dl_nccl_type_name(uint64_t dtype)
{
	return dtype < sizeof(nccl_types) / sizeof(nccl_types[0]) ? nccl_types[dtype].name : NULL;
}

const char *dl_nccl_op_name(uint64_t op)
{
	/* ncclRedOp_t; values from ncclNumOps on are ops made by ncclRedOpCreatePreMulSum. */
	static const char *const names[] = { "sum", "prod", "max", "min", "avg" };

	return op < sizeof(names) / sizeof(names[0]) ? names[op] : NULL;
}

const char *dl_dir_name(enum dl_dir dir)
{
	static const char *const names[DL_DIR_COUNT] = { "h2h", "h2d", "d2h", "d2d", "default" };

	return dir < DL_DIR_COUNT ? names[dir] : "?";
}
