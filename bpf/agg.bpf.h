/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --summary mode: CUDA calls are counted in a per-CPU hash (include/dlbpf/agg.h)
 * instead of one ring-buffer record each. Chosen before load by a const
 * volatile flag, so the verifier drops the unused path and the per-event mode
 * pays nothing for it. A per-CPU launch aggregate costs ~420 ns a call, a record
 * ~510 ns (tools/bench/README.md, table 10's run time per call).
 */
#ifndef DLBPF_AGG_BPF_H
#define DLBPF_AGG_BPF_H

#include "common.bpf.h"
#include "dlbpf/agg.h"
#include "dlbpf/copy.h"

const volatile bool agg_mode;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, DL_AGG_MAX_KEYS);
	__type(key, struct dl_agg_key);
	__type(value, struct dl_agg_val);
} agg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dl_agg_val);
} agg_zero SEC(".maps");

static __always_inline __u32 dl_log2_bucket(__u64 v)
{
	__u32 r = 0;

	if (!v)
		return 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	r += 1;
	return r < DL_AGG_HIST ? r : DL_AGG_HIST - 1;
}

/* True when the call was aggregated and must not also become a record. */
static __always_inline bool dl_agg_add(__u32 tgid, __u64 cookie, const __u64 *arg, __u32 depth,
				       __u64 dur, bool entry_only, __s64 ret)
{
	struct dl_agg_key k = {};
	struct dl_agg_val *v;
	__u64 bytes = 0, kind = 0;
	__u32 zero = 0, b;

	if (!agg_mode || !(cookie & DL_COOKIE_AGG))
		return false;
	k.tgid = tgid;
	k.api = cookie & DL_COOKIE_API_MASK;
	k.flags = (depth ? DL_AGG_NESTED : 0) | (entry_only ? DL_AGG_ENTRY_ONLY : 0);
	if (cookie & DL_COOKIE_BYTES_1D) {
		bytes = arg[2];
		kind = arg[3];
	} else if (cookie & DL_COOKIE_BYTES_2D) {
		bytes = arg[4] * arg[5];
		kind = arg[6];
	}
	if (cookie & (DL_COOKIE_BYTES_1D | DL_COOKIE_BYTES_2D)) {
		/* Left to the runtime, the direction follows from allocations only user space has seen. */
		if (kind >= DL_DIR_DEFAULT)
			return false;
		k.dir = kind;
	}
	if (entry_only)
		k.func = arg[0];
	v = bpf_map_lookup_elem(&agg, &k);
	if (!v) {
		struct dl_agg_val *z = bpf_map_lookup_elem(&agg_zero, &zero);

		if (!z)
			return true;
		bpf_map_update_elem(&agg, &k, z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&agg, &k);
		if (!v) {
			dl_count_drop(DL_DROP_AGG);
			return true;
		}
	}
	v->count++;
	v->total_ns += dur;
	v->errors += !entry_only && ret != 0;
	v->bytes += bytes;
	v->small += bytes < DL_SMALL_COPY_BYTES;  /* used for copies only */
	b = dl_log2_bucket(dur);
	if (b >= DL_AGG_HIST)
		b = DL_AGG_HIST - 1;
	v->hist[b]++;
	return true;
}

#endif
