/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUDA runtime APIs dlbpf probes: how each is probed (the cookie the BPF
 * side sees) and how its raw argument slots decode (the same slots on x86-64
 * and arm64: bpf/arch.bpf.h).
 */
#ifndef DLBPF_CUDA_API_H
#define DLBPF_CUDA_API_H

#include <stdbool.h>
#include <stdint.h>
#include "dlbpf/copy.h"
#include "dlbpf/events.h"

enum dl_api_class {
	DL_CLS_COPY,      /* cudaMemcpy family */
	DL_CLS_MEMSET,
	DL_CLS_LAUNCH,
	DL_CLS_SYNC,      /* blocking synchronization */
	DL_CLS_EVENT,     /* cudaEventRecord, cudaStreamWaitEvent */
	DL_CLS_ALLOC,     /* device or pinned host allocation / registration */
	DL_CLS_FREE,
	DL_CLS_GRAPH,     /* cudaGraphLaunch, cuGraphLaunch: entry-only, like launches */
	DL_CLS_NAMING,    /* kernel handles and registrations: names for launches, not work */
	DL_CLS_LOADER,    /* dlopen: makes the collector rescan the process's mappings */
	DL_CLS_QUERY,     /* cudaStreamQuery, cudaEventQuery: non-blocking; success proves the work done */
	DL_CLS_COMM,      /* NCCL collectives and point-to-point: device work on their stream */
	DL_CLS_COMM_SETUP,   /* NCCL groups, communicator set-up, version: host calls, no device work */
	DL_CLS_DEVICE,    /* cudaSetDevice (the thread's current device), virtual-memory mapping: no device work */
	DL_CLS_STREAM_CREATE,   /* a created stream's handle (out), flags and device: no device work */
	DL_CLS_CAPTURE,   /* stream capture begins or ends (its graph: out) */
	DL_CLS_GRAPH_BUILD,   /* instantiation (exec out, graph), kernel nodes (node out, graph) */
};

/* Where an API's arguments are; decoding is table-driven by this. */
enum dl_api_layout {
	DL_L_MEMCPY,          /* dst, src, count, kind */
	DL_L_MEMCPY_ASYNC,    /* dst, src, count, kind, stream */
	DL_L_MEMCPY2D,        /* dst, dpitch, src, spitch, width, height, [kind] */
	DL_L_MEMCPY2D_ASYNC,  /* ... [kind], [stream] */
	DL_L_MEMSET,          /* ptr, value, count */
	DL_L_MEMSET_ASYNC,    /* ptr, value, count, stream */
	DL_L_LAUNCH,          /* func, grid{xy,z}, block{xy,z}, args, [shmem], [stream] */
	DL_L_STREAM,          /* stream */
	DL_L_NONE,
	DL_L_EVENT,           /* event */
	DL_L_EVENT_STREAM,    /* event, stream */
	DL_L_STREAM_EVENT,    /* stream, event */
	DL_L_OUT_SIZE,        /* void **out, size [, flags] */
	DL_L_PTR,             /* ptr */
	DL_L_PTR_SIZE,        /* ptr, size, flags */
	DL_L_LAUNCH_EXC,      /* const cudaLaunchConfig_t *cfg, func, args: *cfg copied into arg[3..7] */
	DL_L_GRAPH,           /* graphExec, stream */
	DL_L_GET_KERNEL,      /* handle *out, hostFun: out read at return */
	DL_L_REGISTER_FUNC,   /* fatbin handle, hostFun, deviceFun, deviceName, ... */
	DL_L_CU_LAUNCH,       /* f, gx, gy, gz, bx, by, [bz], [shmem], [stream] (the third stack slot in out) */
	DL_L_CU_LAUNCH_EX,    /* const CUlaunchConfig *cfg, f, params, extra: *cfg copied into arg[3..7] */
	DL_L_CU_COPY,         /* dst, src, bytes: direction from the addresses (unified addressing) */
	DL_L_CU_COPY_ASYNC,   /* ... stream */
	DL_L_CU_HTOD,         /* dst, src, bytes */
	DL_L_CU_HTOD_ASYNC,   /* ... stream */
	DL_L_CU_DTOH,
	DL_L_CU_DTOH_ASYNC,
	DL_L_CU_DTOD,
	DL_L_CU_DTOD_ASYNC,
	DL_L_GET_FUNC,        /* handle *out, module/library, const char *name: out read at return */
	DL_L_NCCL_COLL,       /* send, recv, count, datatype, op or root, comm, [stream] */
	DL_L_NCCL_GATHER,     /* send, recv, count, datatype, comm, stream */
	DL_L_NCCL_REDUCE,     /* send, recv, count, datatype, op, root, [comm], [stream] */
	DL_L_NCCL_P2P,        /* buf, count, datatype, peer or root, comm, stream */
	DL_L_NCCL_INIT_RANK,  /* ncclComm_t *out, nranks, rank (the 128-byte id by value is on the stack) */
	DL_L_NCCL_INIT_ALL,   /* ncclComm_t *out, ndev, const int *devlist */
	DL_L_NCCL_VERSION,    /* int *out */
	DL_L_STREAM_OUT1,     /* stream, handle *out: out read at return (cudaStreamEndCapture's graph) */
	DL_L_PEER,            /* dst, int dstDevice, src, int srcDevice, count, [stream] */
	DL_L_CU_PEER,         /* dst, CUcontext dstContext, src, CUcontext srcContext, count, [stream] */
	DL_L_CTX_OUT_DEV,     /* CUcontext *out, ..., CUdevice dev: out read at return, dev in the slot the API names */
	DL_L_CTX,             /* CUcontext ctx */
	DL_L_CTX_OUT,         /* CUcontext *out: out read at return */
};

enum dl_api_id {
	DL_API_NONE = 0,
#define DL_API(id, name, cls, layout, pinned, driver) id,
#include "records/cuda_api.def"
#undef DL_API
	DL_API_COUNT,
};

struct dl_api {
	enum dl_api_id id;
	const char *name;        /* exported symbol name */
	enum dl_api_class cls;
	enum dl_api_layout layout;
	bool pinned;             /* allocates / registers / frees pinned host memory */
	bool driver;             /* a driver API (libcuda): made inside a runtime call, it is part of it */
};

/*
 * A CUDA call decoded from a struct dl_cuda_ev. Fields an API lacks are 0.
 * dl_call_decode fills what the record holds; the stream then resolves what
 * the arguments mean in the process (the resolved fields below), so that every
 * sink sees the call the same way.
 */
struct dl_call {
	const struct dl_api *api;
	uint64_t ts, dur_ns;
	int64_t ret;
	uint32_t tgid, tid, depth;
	bool entry_only, args_fault;
	/* copies and memsets */
	enum dl_dir dir;      /* decoded: as passed (DL_DIR_DEFAULT: the runtime infers it); resolved: never DEFAULT */
	uint64_t dst, src, bytes;
	bool async;
	/* launches */
	uint64_t func, shmem;
	uint32_t grid[3], block[3];
	/* streams and events */
	uint64_t stream, event;
	/* allocations: ptr is the result for out-pointer APIs, the argument otherwise; ncclGetVersion: size */
	uint64_t ptr, size;
	/* NCCL: communicator, elements and their type (bytes = count x its size), the op, the peer or root */
	uint64_t comm, count;
	uint32_t dtype, op;
	int32_t peer;         /* collectives: -1 where the API has none */
	uint32_t nranks, rank;   /* ncclCommInitRank; ncclCommInitAll: nranks */
	/* created streams (ptr: the handle, size: flags), captures (ptr: the graph), instantiations and
	 * kernel nodes (ptr: the exec or node, size: the graph); peer copies (ptr: the destination's device
	 * or context, size: the source's); contexts (ptr: the context, size: its device where the API names one) */
	/* naming calls: the handle made (func) for a host function (host) or a name string (name_ptr) */
	uint64_t host, name_ptr;
	/* the call site: the return address at entry; 0 when the record has none (site_fault: unreadable) */
	uint64_t site;
	bool site_fault;
	/* --stacks: the return addresses of the record's tail, innermost first (stack[0] == site); else 0 */
	const uint64_t *stack;
	uint32_t nstack;
	/* CPython frames (DL_CUDA_PY), innermost first; has_py with py.n == 0: a thread without Python */
	bool has_py;
	struct dl_py_stack py;
	/* resolved by the stream (records/addrspace.h) */
	uint64_t host_mem;    /* copies: the host side (H2D source, D2H destination); 0 for other directions */
	bool pageable;        /* copies: host_mem is not in a pinned range */
	const char *kernel;   /* launches: func's name from a symbol record, or NULL */
	/* site's function ("name+0xOFF") and object from a site record (DL_EV_SITE), or NULL */
	const char *site_func, *site_obj;
	/* the same for each of stack's frames */
	const char *stack_func[DL_STACK_MAX], *stack_obj[DL_STACK_MAX];
	/* each Python frame's file, function and line from its code record (DL_EV_PYCODE); NULL, -1 when none */
	const char *py_file[DL_PY_MAX], *py_func[DL_PY_MAX];
	int32_t py_line[DL_PY_MAX];
	uint32_t npy_named;   /* frames named from the innermost on, up to the first one not named */
};

const struct dl_api *dl_api_by_id(unsigned id);
const struct dl_api *dl_api_by_name(const char *name);
/* uprobe_multi cookie for an API: its id and how BPF captures its arguments. */
uint64_t dl_api_cookie(const struct dl_api *api);
/*
 * How many leading register arguments decoding api's record reads (a
 * dl_call_short_ev must hold them); DL_API_ARGS_FULL when it reads stack
 * arguments or out, or the call has no return probe: only a dl_cuda_ev holds it.
 */
#define DL_API_ARGS_FULL 99
unsigned dl_api_reg_args(const struct dl_api *api);
/* Decodes a raw record; returns -1 for an unknown API id (a newer recording). */
int dl_call_decode(const struct dl_cuda_ev *ev, struct dl_call *out);
const char *dl_dir_name(enum dl_dir dir);
/* The size of one element of an ncclDataType_t; 0 for a type NCCL does not define. */
unsigned dl_nccl_type_size(uint64_t dtype);
/* Its name (float32, bfloat16, ...), and a reduction op's (sum, max, ...); NULL for values NCCL does not define. */
const char *dl_nccl_type_name(uint64_t dtype);
const char *dl_nccl_op_name(uint64_t op);
/* Probed at entry only (launches, graph launches): no duration, no return code. */
bool dl_api_entry_only(const struct dl_api *api);
/* Blocks the caller until the device is done with it: a synchronization or a synchronous copy (--stacks). */
bool dl_api_blocks(const struct dl_api *api);

#endif
