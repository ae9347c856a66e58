/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which mapped files dlbpf probes, and how: CUDA runtimes (libcudart by name,
 * or any executable or library that contains the runtime, as nvcc's default
 * static cudart does), the driver (libcuda), NCCL, and the C library's loader.
 */
#ifndef DLBPF_DISCOVER_H
#define DLBPF_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "capture/elfsym.h"

enum dl_lib_kind {
	DL_LIB_NONE = 0,
	DL_LIB_RUNTIME = 1,   /* libcudart.so*, or a file holding the runtime's functions */
	DL_LIB_DRIVER = 2,    /* libcuda.so* */
	DL_LIB_LOADER = 3,    /* the C library: dlopen */
	DL_LIB_NCCL = 4,      /* libnccl.so*, or a file holding NCCL's functions (it carries a static cudart too) */
};

/* Kind by file name alone; DL_LIB_NONE means "look at its symbols" (dl_lib_kind_by_syms). */
enum dl_lib_kind dl_lib_kind_by_name(const char *path);
/* True for libcuda.so, libcuda.so.1, libcuda.so.580.65.06 (not libcudart, libcudnn ...). */
bool dl_is_cuda_driver_name(const char *path);
/* True for libnccl.so, libnccl.so.2, libnccl.so.2.28.9. */
bool dl_is_nccl_name(const char *path);
/* The C library (libc.so.6, libc-2.31.so): where dlopen lives. */
bool dl_is_libc_name(const char *path);
/* DL_LIB_NCCL when the symbols define NCCL's, DL_LIB_RUNTIME the runtime's own functions (static cudart). */
enum dl_lib_kind dl_lib_kind_by_syms(const struct dl_elf_syms *s);

/*
 * If the code at file offset off is a trampoline, stores the file offset it
 * jumps to and returns true. __cudaLaunchKernel is one: probing it and its
 * target would count each launch twice. dl_trampoline_target reads the code
 * as dlbpf's own architecture's (the traced process's).
 * x86-64: optionally endbr64, optionally push %rbp; mov %rsp,%rbp; pop %rbp,
 * then jmp rel32/rel8. aarch64: optionally bti c (or jc), then b imm26.
 */
bool dl_trampoline_target(const uint8_t *code, size_t n, uint64_t off, uint64_t *target);
bool dl_trampoline_target_x86_64(const uint8_t *code, size_t n, uint64_t off, uint64_t *target);
bool dl_trampoline_target_aarch64(const uint8_t *code, size_t n, uint64_t off, uint64_t *target);

/*
 * How an arm64 kernel runs the instruction a uprobe replaces
 * (arch/arm64/kernel/probes/decode-insn.c, arm_probe_decode_insn):
 * SIMULATED in the breakpoint handler (branches, b.cond, cbz/tbz, adr/adrp,
 * ret); NOP, simulated since "arm64: insn: Simulate nop instruction for better
 * uprobe performance" (2024), stepped out of line before; STEPPED out of line
 * (copied to the XOL slot, hardware single-step: the path of the GB300
 * wrong-PC resumes, see doc/manual.md); REJECTED (the attach fails: literal
 * loads, exclusives, exceptions, MSR/MRS, unlisted hints).
 */
enum dl_a64_probe_step {
	DL_A64_SIMULATED,
	DL_A64_NOP,
	DL_A64_STEPPED,
	DL_A64_REJECTED,
};
enum dl_a64_probe_step dl_a64_probe_step(uint32_t insn);

#endif
