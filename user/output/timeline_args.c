// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A CUDA or NCCL call's slice arguments, as both timeline formats show them. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "analysis/callsites.h"
#include "output/timeline_args.h"

/* Named as the report names it (analysis/callsites.h), from what the stream resolved. */
static const char *site_label(const struct dl_call *c, char *buf, size_t len)
{
	char addr[32];

	/* A Python site: its line and the caller's, as the report's "at ..." */
	if (c->has_py && c->npy_named) {
		size_t n;

		dl_py_frame_label(c->py_file[0], c->py_func[0], c->py_line[0], buf, len);
		n = strlen(buf);
		if (c->npy_named > 1 && n + 4 < len) {
			memcpy(buf + n, " <- ", 5);
			dl_py_frame_label(c->py_file[1], c->py_func[1], c->py_line[1], buf + n + 4, len - n - 4);
		}
		return buf;
	}

	if (!c->site_fault && !c->site_func) {
		snprintf(addr, sizeof(addr), "0x%" PRIx64, c->site);
		dl_site_label(addr, NULL, buf, len);
	} else {
		dl_site_label(c->site_fault ? NULL : c->site_func, c->site_obj, buf, len);
	}
	return buf;
}

/* --stacks: every frame, innermost first, joined by " <- " (repeated stacks: interned by the writer). */
static const char *stack_label(const struct dl_call *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (uint32_t k = 0; k < c->nstack && n + 8 < len; k++) {
		char frame[256], addr[32];
		uint64_t a;

		memcpy(&a, &c->stack[k], sizeof(a));   /* the record may sit at any offset */
		snprintf(addr, sizeof(addr), "0x%" PRIx64, a);
		dl_site_label(c->stack_func[k] ? c->stack_func[k] : addr, c->stack_obj[k], frame, sizeof(frame));
		n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? " <- " : "", frame);
	}
	return buf;
}

/* A collective's arguments as nccl.h names them; a value NCCL does not define is shown as a number. */
static void nccl_args(const struct dl_call *c, struct dl_targ *a, int *n)
{
	const char *type = dl_nccl_type_name(c->dtype), *op = dl_nccl_op_name(c->op);
	bool reduces = c->api->layout == DL_L_NCCL_REDUCE ||
		       (c->api->layout == DL_L_NCCL_COLL && c->api->id != DL_API_NCCL_BROADCAST);

	dl_targ_add(a, n, "count", DL_TA_U64)->u = c->count;
	if (type) {
		dl_targ_add(a, n, "datatype", DL_TA_STR)->s = type;
		dl_targ_add(a, n, "bytes", DL_TA_U64)->u = c->bytes;
	} else {
		dl_targ_add(a, n, "datatype", DL_TA_U64)->u = c->dtype;
	}
	if (reduces) {
		if (op)
			dl_targ_add(a, n, "op", DL_TA_STR)->s = op;
		else
			dl_targ_add(a, n, "op", DL_TA_U64)->u = c->op;
	}
	if (c->peer >= 0)
		dl_targ_add(a, n, c->api->id == DL_API_NCCL_SEND || c->api->id == DL_API_NCCL_RECV ? "peer" : "root",
		    DL_TA_I64)->i = c->peer;
	dl_targ_add(a, n, "comm", DL_TA_U64)->u = c->comm;
}

int dl_call_slice_args(const struct dl_call *c, struct dl_targ a[DL_TMAX_ARGS], struct dl_call_arg_text *x)
{
	int count = 0, *n = &count;

	if (c->api->cls == DL_CLS_COPY || c->api->cls == DL_CLS_MEMSET) {
		dl_targ_add(a, n, "bytes", DL_TA_U64)->u = c->bytes;
		dl_targ_add(a, n, "direction", DL_TA_STR)->s = dl_dir_name(c->dir);
		if (c->dir == DL_DIR_H2D || c->dir == DL_DIR_D2H)
			dl_targ_add(a, n, "host memory", DL_TA_STR)->s = c->pageable ? "pageable" : "pinned";
	}
	if (c->api->cls == DL_CLS_LAUNCH) {
		if (c->kernel)
			dl_targ_add(a, n, "kernel", DL_TA_STR)->s = c->kernel;
		else
			dl_targ_add(a, n, "kernel address", DL_TA_U64)->u = c->func;
		snprintf(x->grid, sizeof(x->grid), "%ux%ux%u", c->grid[0], c->grid[1], c->grid[2]);
		snprintf(x->block, sizeof(x->block), "%ux%ux%u", c->block[0], c->block[1], c->block[2]);
		dl_targ_add(a, n, "grid", DL_TA_STR)->s = x->grid;
		dl_targ_add(a, n, "block", DL_TA_STR)->s = x->block;
		if (c->shmem)
			dl_targ_add(a, n, "shared mem", DL_TA_U64)->u = c->shmem;
	}
	if (c->api->cls == DL_CLS_COMM)
		nccl_args(c, a, n);
	if (c->api->layout == DL_L_NCCL_INIT_RANK || c->api->layout == DL_L_NCCL_INIT_ALL) {
		dl_targ_add(a, n, c->api->layout == DL_L_NCCL_INIT_ALL ? "ndev" : "nranks", DL_TA_U64)->u = c->nranks;
		if (c->api->layout == DL_L_NCCL_INIT_RANK)
			dl_targ_add(a, n, "rank", DL_TA_U64)->u = c->rank;
		if (!c->ret && !c->args_fault)
			dl_targ_add(a, n, "comm", DL_TA_U64)->u = c->comm;
	}
	if (c->api->layout == DL_L_NCCL_VERSION && !c->ret && !c->args_fault)
		dl_targ_add(a, n, "version", DL_TA_U64)->u = c->size;
	/* Absent stream: the default stream; absent ret: cudaSuccess (or entry-only: not known). */
	if (c->stream)
		dl_targ_add(a, n, "stream", DL_TA_U64)->u = c->stream;
	if (c->api->cls == DL_CLS_ALLOC || c->api->cls == DL_CLS_FREE) {
		if (c->ptr)
			dl_targ_add(a, n, "ptr", DL_TA_U64)->u = c->ptr;
		if (c->size)
			dl_targ_add(a, n, "size", DL_TA_U64)->u = c->size;
	}
	if (!c->entry_only && c->ret)
		dl_targ_add(a, n, "ret", DL_TA_I64)->i = c->ret;
	if (c->depth == 0 && (c->site || c->site_fault))
		dl_targ_add(a, n, "call site", DL_TA_STR)->s = site_label(c, x->site, sizeof(x->site));
	if (c->depth == 0 && c->nstack > 1 && !c->site_fault)
		dl_targ_add(a, n, "stack", DL_TA_STR)->s = stack_label(c, x->stack, sizeof(x->stack));
	return count;
}
