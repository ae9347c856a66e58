/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython frames of the current thread: for a call's record (cuda.bpf.c), and
 * for a wait and a CPU sample (pylines.bpf.c). Every read is of the traced
 * process's memory and may fail or be garbage; the walk is bounded (a cyclic
 * chain ends at DL_PY_WALK_MAX) and user space names a frame only from a code
 * object it has checked (user/capture/pycode.c). maps.bpf.c defines the maps
 * and the global functions once; the other sources see them extern.
 */
#ifndef DLBPF_PYFRAMES_BPF_H
#define DLBPF_PYFRAMES_BPF_H

#include "common.bpf.h"
#include "pytop.bpf.h"

/*
 * Each kind of program that walks has its per-CPU buffers to itself: a CPU
 * sample's perf event fires in an interrupt, in the middle of a probe's walk
 * on that CPU (uprobe_multi programs are not kept apart from it), and a
 * probe's program may be preempted and another thread's block walked at the
 * switch meanwhile.
 */
enum dl_py_slot {
	DL_PY_SLOT_CALL = 0,      /* the CUDA probes (cuda.bpf.c) */
	DL_PY_SLOT_SWITCH = 1,    /* a thread that blocks (pylines.bpf.c, sched_switch) */
	DL_PY_SLOT_SAMPLE = 2,    /* a CPU sample (pylines.bpf.c, perf event) */
	DL_PY_SLOTS = 3,
};

/* One frame read whole; 8 more bytes so a masked offset plus its field stays inside. */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DL_PY_SLOTS);
	__type(key, __u32);
	__type(value, char[DL_PY_FRAME_READ + 8]);
} py_frame_buf SEC(".maps");

static __always_inline __u64 py_u64(const char *buf, __u32 off)
{
	__u64 v;

	__builtin_memcpy(&v, buf + (off & (DL_PY_FRAME_READ - 1)), sizeof(v));
	return v;
}

/*
 * Fills out (n, status, frames) for the current thread of a process in
 * py_procs. A global function: the verifier checks it once, not once per path
 * of each probe that calls it (inlined, the walk's loop made the entry probe
 * pass the verifier's limit of a million instructions).
 */
#ifdef DL_DEFINE_SHARED
__noinline int py_walk(const struct dl_py_cfg *cfg, struct dl_py_stack *out, __u32 slot)
{
	char *buf = bpf_map_lookup_elem(&py_frame_buf, &slot);
	__u64 frame;

	if (!out)
		return 0;
	out->n = 0;
	out->status = DL_PY_OK;
	out->pad = 0;
	if (!buf || !cfg)
		return 0;
	frame = py_top_frame(cfg, &out->status);
	/*
	 * One counter for the loop and the slot: a shim frame of the C stack
	 * takes a slot as code 0 (readers skip it). With a second counter the
	 * verifier's states per (frame, slot) pair passed its limit.
	 */
	for (int i = 0; i < DL_PY_MAX; i++) {
		__u64 code, instr;
		__u32 off;

		if (!frame) {
			out->n = i;
			return i;
		}
		if (bpf_probe_read_user(buf, DL_PY_FRAME_READ, (void *)frame)) {
			out->status = DL_PY_FAULT;
			out->n = i;
			return i;
		}
		code = py_u64(buf, cfg->frame_code);
		frame = py_u64(buf, cfg->frame_prev);
		instr = py_u64(buf, cfg->frame_instr);
		if (cfg->flags & DL_PYCFG_LASTI)
			off = (__u32)(__s32)instr * 2;   /* f_lasti counts 2-byte code units */
		else
			off = (__u32)(instr - code - cfg->code_adaptive);
		if ((cfg->flags & DL_PYCFG_OWNER) &&
		    buf[cfg->frame_owner & (DL_PY_FRAME_READ - 1)] == DL_PY_OWNED_BY_CSTACK)
			code = 0;
		out->f[i].code = code;
		out->f[i].off = off;
		out->f[i].pad = 0;
	}
	out->n = DL_PY_MAX;
	if (frame)
		out->status = DL_PY_TRUNCATED;
	return DL_PY_MAX;
}
#else
int py_walk(const struct dl_py_cfg *cfg, struct dl_py_stack *out, __u32 slot);
#endif

/*
 * The frames of the call being recorded, walked before its record is
 * reserved so that the snapshots of code objects they name first go out
 * before it (the collector names the call's frames as it reads the call).
 * Per CPU: a probe runs to its end on one CPU.
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DL_PY_SLOTS);
	__type(key, __u32);
	__type(value, struct dl_py_stack);
} py_stack_buf SEC(".maps");

/* A snapshot is built here and copied into the ring buffer at the size it filled. */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DL_PY_SLOTS);
	__type(key, __u32);
	__type(value, struct dl_pysnap_ev);
} py_snap_buf SEC(".maps");

struct py_seen_key {
	__u64 code;
	__u32 tgid;
	__u32 epoch;
};

/*
 * Which code objects have had their snapshot sent: direct-mapped by process
 * and address, so that the check is an array load on every frame of every
 * call, not a hash lookup. One that another took the slot of is sent again
 * (the collector keeps the first of identical ones); a process's slots stay
 * after it is gone, and its pid's next process has another epoch.
 */
#define DL_PY_SEEN_SLOTS 16384
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DL_PY_SEEN_SLOTS);
	__type(key, __u32);
	__type(value, struct py_seen_key);
} py_seen SEC(".maps");

/* True when code had no snapshot sent in this process; marks it sent. */
static __always_inline bool py_code_new(const struct dl_py_cfg *cfg, __u32 tgid, __u64 code)
{
	__u64 h = (code ^ ((__u64)tgid << 32) ^ cfg->epoch) * 0x9e3779b97f4a7c15ull;
	__u32 slot = (__u32)(h >> 50) & (DL_PY_SEEN_SLOTS - 1);
	struct py_seen_key *k = bpf_map_lookup_elem(&py_seen, &slot);

	if (!k || (k->code == code && k->tgid == tgid && k->epoch == cfg->epoch))
		return false;
	k->code = code;
	k->tgid = tgid;
	k->epoch = cfg->epoch;
	return true;
}

/*
 * A str's characters into chars (at most DL_PYSNAP_STR): a compact ASCII
 * one's follow its head, another compact one's UTF-8 copy is behind a
 * pointer (when the interpreter made one). Returns where they were read, 0
 * when not (the collector then names it "?", as from the process).
 */
static __always_inline __u64 py_snap_str(const struct dl_py_cfg *cfg, __u64 addr, __u8 *head, __u8 *chars,
					 __u16 *n)
{
	__u64 len, src;
	__u32 state;

	*n = 0;
	if (!addr || bpf_probe_read_user(head, DL_PYSNAP_STR_HEAD, (void *)addr))
		return 0;
	/* interned:2 kind:3 compact:1 ascii:1 after length and hash (pyobj.c reads it so too) */
	state = *(__u32 *)(head + 32);
	if (!(state & (1u << 5)))
		return 0;
	if (state & (1u << 6)) {
		len = *(__u64 *)(head + 16);
		src = addr + cfg->str_ascii;
	} else {
		len = *(__u64 *)(head + (cfg->str_utf8_len & 0x38));
		src = *(__u64 *)(head + (cfg->str_utf8 & 0x38));
	}
	if (len > DL_PYSNAP_STR)
		len = DL_PYSNAP_STR;
	if (!len || !src || bpf_probe_read_user(chars, len, (void *)src))
		return 0;
	*n = len;
	return src;
}

/*
 * Sends the snapshot of the code object at code (struct dl_pysnap_ev); a
 * global function, checked once. Its reads are of the traced process's memory
 * and may be garbage: the collector checks the object's type and every
 * length before it names anything from it.
 */
#ifdef DL_DEFINE_SHARED
__noinline int py_snap(const struct dl_py_cfg *cfg, __u64 code, __u32 tgid, __u32 slot)
{
	__u32 size, tlen;
	struct dl_pysnap_ev *s = bpf_map_lookup_elem(&py_snap_buf, &slot);
	__u64 table, n;

	if (!s || !cfg)
		return 0;
	if (bpf_probe_read_user(s->code_head, sizeof(s->code_head), (void *)code))
		return 0;
	s->code = code;
	s->file = *(__u64 *)(s->code_head + (cfg->co_filename & 0xf8));
	s->name = *(__u64 *)(s->code_head + (cfg->co_name & 0xf8));
	table = *(__u64 *)(s->code_head + (cfg->co_linetable & 0xf8));
	s->file_text = py_snap_str(cfg, s->file, s->file_head, s->file_chars, &s->file_len);
	s->name_text = py_snap_str(cfg, s->name, s->name_head, s->name_chars, &s->name_len);
	s->table = table;
	/* The size from a register the verifier bounds (a value loaded back from the map would not be). */
	tlen = 0;
	if (table && !bpf_probe_read_user(s->table_bytes, DL_PYSNAP_BYTES_HEAD, (void *)table)) {
		n = *(__u64 *)(s->table_bytes + 16);
		if (n > DL_PYSNAP_TABLE)
			n = DL_PYSNAP_TABLE;
		if (!bpf_probe_read_user(s->table_bytes + DL_PYSNAP_BYTES_HEAD, n, (void *)(table + DL_PYSNAP_BYTES_HEAD)))
			tlen = DL_PYSNAP_BYTES_HEAD + n;
	}
	s->table_len = tlen;
	size = __builtin_offsetof(struct dl_pysnap_ev, table_bytes) + tlen;
	s->h.size = size;
	s->h.kind = DL_EV_PYSNAP;
	s->h.cpu = bpf_get_smp_processor_id();
	s->h.ts = bpf_ktime_get_ns();
	s->h.tgid = tgid;
	s->h.tid = (__u32)bpf_get_current_pid_tgid();
	if (bpf_ringbuf_output(&rb, s, size, 0))
		dl_count_drop(DL_DROP_CUDA);
	return 0;
}

/* Snapshots the code objects of st's frames that the process has not had sent (a global function). */
__noinline int py_name_frames(const struct dl_py_cfg *cfg, const struct dl_py_stack *st, __u32 tgid, __u32 slot)
{
	if (!cfg || !st)
		return 0;
	for (int i = 0; i < DL_PY_MAX; i++) {
		__u64 code;

		if (i >= st->n)
			break;
		code = st->f[i].code;
		if (code && py_code_new(cfg, tgid, code))
			py_snap(cfg, code, tgid, slot);
	}
	return 0;
}
#else
int py_snap(const struct dl_py_cfg *cfg, __u64 code, __u32 tgid, __u32 slot);
int py_name_frames(const struct dl_py_cfg *cfg, const struct dl_py_stack *st, __u32 tgid, __u32 slot);
#endif

/* Walks the current thread's frames into slot's py_stack_buf and sends the snapshots they need; the walk, or NULL. */
static __always_inline struct dl_py_stack *py_frames(const struct dl_py_cfg *cfg, __u32 tgid, __u32 slot)
{
	struct dl_py_stack *st = bpf_map_lookup_elem(&py_stack_buf, &slot);

	if (!st)
		return NULL;
	py_walk(cfg, st, slot);
	py_name_frames(cfg, st, tgid, slot);
	return st;
}

#endif
