/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The target's calling convention: every fact the uprobes rely on about where
 * a function finds its arguments and return address at its first instruction,
 * and how the stack pointer at its return relates to the one at its entry.
 * The rest of bpf/ goes through these; nothing else may assume an ABI.
 *
 * x86-64: System V Application Binary Interface, AMD64 Architecture Processor
 *   Supplement (psABI 1.0), 3.2.2 "The Stack Frame" and 3.2.3 "Parameter
 *   Passing": `call` pushes the return address, so at entry (%rsp) holds it
 *   and the arguments passed in memory start at 8(%rsp); the first six
 *   INTEGER-class arguments are in rdi, rsi, rdx, rcx, r8, r9; `ret` pops the
 *   return address, so sp at the return is the entry's plus 8.
 * arm64: Procedure Call Standard for the Arm 64-bit Architecture (AAPCS64),
 *   "Parameter Passing" (NGRN < 8: x0-x7; then the stack, NSAA = sp at entry)
 *   and "General-purpose Registers" (x30, the link register, holds the return
 *   address `bl` wrote; nothing is pushed): sp at the return equals the
 *   entry's, and the return address is in x30 at entry only.
 * Both: a callee never writes above its entry sp (the caller's frame), which
 * is what keeps the word at [sp] as it was while the call runs (frame tag).
 *
 * A composite of at most 16 bytes (CUDA's dim3) takes two argument registers
 * under both conventions, so an API's argument slots number alike on both
 * (user/records/cuda_api.h): slots 1-6 are PT_REGS_PARM1-6 on both, slots 7
 * and 8 are the stack on x86-64 and x6/x7 on arm64.
 */
#ifndef DLBPF_ARCH_BPF_H
#define DLBPF_ARCH_BPF_H

#if defined(__TARGET_ARCH_x86)
/* The return address is the word at [sp] at entry, and so the frame tag too. */
#define DL_ARCH_RA_AT_SP 1
/* sp at the return probe minus sp at entry: `ret` popped the return address. */
#define DL_ARCH_RET_SP_DELTA 8
#elif defined(__TARGET_ARCH_arm64)
#define DL_ARCH_RA_AT_SP 0
#define DL_ARCH_RET_SP_DELTA 0
#else
#error "bpf/arch.bpf.h knows the x86-64 and arm64 calling conventions only (make ARCH=x86 or ARCH=arm64)"
#endif

/* A call's entry sp, from its return probe: how its frame is matched with its entry. */
static __always_inline __u64 dl_arch_entry_sp(struct pt_regs *ctx)
{
	return PT_REGS_SP(ctx) - DL_ARCH_RET_SP_DELTA;
}

/* The return address at entry (the call site); non-zero on a fault. */
static __always_inline long dl_arch_return_address(struct pt_regs *ctx, __u64 sp, __u64 *ra)
{
#if DL_ARCH_RA_AT_SP
	return bpf_probe_read_user(ra, sizeof(*ra), (void *)sp);
#else
	*ra = PT_REGS_RET(ctx);
	return 0;
#endif
}

/*
 * Argument slots 7 to 6 + n (n of 2 or 3, a constant) at entry into out;
 * non-zero on a fault. x86-64: all from the stack past the return address;
 * arm64: 7 and 8 in x6 and x7, 9 at [sp].
 */
static __always_inline long dl_arch_stack_args(struct pt_regs *ctx, __u64 sp, __u64 *out, const __u32 n)
{
#if DL_ARCH_RA_AT_SP
	return bpf_probe_read_user(out, n * sizeof(__u64), (void *)(sp + 8));
#else
	out[0] = PT_REGS_PARM7(ctx);
	out[1] = PT_REGS_PARM8(ctx);
	if (n > 2)
		return bpf_probe_read_user(&out[2], (n - 2) * sizeof(__u64), (void *)sp);
	return 0;
#endif
}

/*
 * At entry: the return address and argument slots 7 and 8, frame[0..2]. On
 * x86-64 they are adjacent at [sp] and one user read (~90 ns,
 * tools/bench/README.md) serves all; arm64 has them in registers. Non-zero on
 * a fault.
 */
static __always_inline long dl_arch_launch_frame(struct pt_regs *ctx, __u64 sp, __u64 *frame)
{
#if DL_ARCH_RA_AT_SP
	return bpf_probe_read_user(frame, 3 * sizeof(__u64), (void *)sp);
#else
	frame[0] = PT_REGS_RET(ctx);
	frame[1] = PT_REGS_PARM7(ctx);
	frame[2] = PT_REGS_PARM8(ctx);
	return 0;
#endif
}

/*
 * The frame tag of a call entered at sp whose return address is ra: the word
 * at [sp], which stays as it is while the call runs (see above). On x86-64 it
 * is the return address, already read; arm64 reads the caller's word there.
 */
static __always_inline long dl_arch_frame_tag(__u64 sp, __u64 ra, __u64 *tag)
{
#if DL_ARCH_RA_AT_SP
	*tag = ra;
	return 0;
#else
	return bpf_probe_read_user(tag, sizeof(*tag), (void *)sp);
#endif
}

/*
 * A call entered at sp (its registers ctx), where a call tagged at
 * (frame_sp, tag, site) was entered earlier: true when it runs inside that
 * one. It must be deeper (sp below) or its tail call (sp equal, and the same
 * return address), and the tag still there. On x86-64 an equal sp and tag
 * mean the same return address; on arm64 the caller's word at an equal sp is
 * the same for the caller's next call too, so the return address decides.
 */
static __always_inline bool dl_arch_inside(struct pt_regs *ctx, __u64 sp, __u64 frame_sp, __u64 tag, __u64 site)
{
	__u64 now = 0;

	if (!frame_sp || sp > frame_sp)
		return false;
#if !DL_ARCH_RA_AT_SP
	if (sp == frame_sp && PT_REGS_RET(ctx) != site)
		return false;
#endif
	if (bpf_probe_read_user(&now, sizeof(now), (void *)frame_sp))
		return false;
	return now == tag;
}

/* The thread pointer: x86-64's fs base, arm64's TPIDR_EL0 (glibc's TLS layouts differ: user/capture/glibctsd.c). */
static __always_inline __u64 dl_arch_thread_pointer(struct task_struct *task)
{
#if defined(__TARGET_ARCH_x86)
	return BPF_CORE_READ(task, thread.fsbase);
#else
	return BPF_CORE_READ(task, thread.uw.tp_value);
#endif
}

#endif /* DLBPF_ARCH_BPF_H */
