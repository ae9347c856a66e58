// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "capture/discover.h"
#include "capture/procfs.h"

bool dl_is_cuda_driver_name(const char *path)
{
	const char *b = dl_basename(path);

	return strncmp(b, "libcuda.so", 10) == 0 && (b[10] == '\0' || b[10] == '.');
}

bool dl_is_nccl_name(const char *path)
{
	const char *b = dl_basename(path);

	return strncmp(b, "libnccl.so", 10) == 0 && (b[10] == '\0' || b[10] == '.');
}

bool dl_is_libc_name(const char *path)
{
	const char *b = dl_basename(path);

	return strncmp(b, "libc.so.", 8) == 0 || strncmp(b, "libc-2.", 7) == 0;
}

enum dl_lib_kind dl_lib_kind_by_name(const char *path)
{
	const char *b = dl_basename(path);

	if (dl_is_cudart_name(path))
		return DL_LIB_RUNTIME;
	if (dl_is_cuda_driver_name(path))
		return DL_LIB_DRIVER;
	if (dl_is_nccl_name(path))
		return DL_LIB_NCCL;
	if (dl_is_libc_name(path))
		return DL_LIB_LOADER;
	/* The dynamic linker: ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ld64.so.2, ld-2.31.so. */
	if (strncmp(b, "ld-linux", 8) == 0 || strncmp(b, "ld64.so.", 8) == 0 || strncmp(b, "ld-2.", 5) == 0)
		return DL_LIB_LOADER;
	return DL_LIB_NONE;
}

/*
 * The runtime's own entry points; one defined (not imported) is enough. nvcc
 * links libcudart_static.a by default, which leaves them as local (`t`)
 * symbols of the executable, found in its .symtab.
 */
enum dl_lib_kind dl_lib_kind_by_syms(const struct dl_elf_syms *s)
{
	static const char *const markers[] = { "__cudaRegisterFatBinary", "cudaLaunchKernel", "cudaMalloc" };

	/* NCCL first: a library with NCCL in it holds the runtime too (libnccl links cudart statically). */
	if (dl_elf_sym_by_name(s, "ncclCommInitRank") || dl_elf_sym_by_name(s, "ncclAllReduce"))
		return DL_LIB_NCCL;
	for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++)
		if (dl_elf_sym_by_name(s, markers[i]))
			return DL_LIB_RUNTIME;
	return DL_LIB_NONE;
}

bool dl_trampoline_target_x86_64(const uint8_t *c, size_t n, uint64_t off, uint64_t *target)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	static const uint8_t frame[5] = { 0x55, 0x48, 0x89, 0xe5, 0x5d }; /* push rbp; mov rsp,rbp; pop rbp */
	size_t i = 0;

	if (n >= 4 && !memcmp(c, endbr64, 4))
		i += 4;
	if (n >= i + 5 && !memcmp(c + i, frame, 5))
		i += 5;
	if (n >= i + 5 && c[i] == 0xe9) {
		int32_t rel;

		memcpy(&rel, c + i + 1, sizeof(rel));
		*target = off + i + 5 + (int64_t)rel;
		return true;
	}
	if (n >= i + 2 && c[i] == 0xeb) {
		*target = off + i + 2 + (int8_t)c[i + 1];
		return true;
	}
	return false;
}

bool dl_trampoline_target_aarch64(const uint8_t *c, size_t n, uint64_t off, uint64_t *target)
{
	size_t i = 0;
	uint32_t insn;

	if (n >= 4) {
		memcpy(&insn, c, sizeof(insn));
		/* bti c, bti jc: the landing pad of a function built with branch protection */
		if (insn == 0xd503245f || insn == 0xd50324df)
			i += 4;
	}
	if (n < i + 4)
		return false;
	memcpy(&insn, c + i, sizeof(insn));
	/* b imm26: a word offset from the branch itself */
	if ((insn & 0xfc000000u) != 0x14000000u)
		return false;
	*target = off + i + (uint64_t)((int64_t)((int32_t)(insn << 6) >> 6) * 4);
	return true;
}

enum dl_a64_probe_step dl_a64_probe_step(uint32_t insn)
{
	/* The encodings as arch/arm64/include/asm/insn.h names them (mask, value). */
	if ((insn & 0x7c000000u) == 0x14000000u ||   /* b, bl */
	    (insn & 0xff000010u) == 0x54000000u ||   /* b.cond */
	    (insn & 0x7e000000u) == 0x34000000u ||   /* cbz, cbnz */
	    (insn & 0x7e000000u) == 0x36000000u ||   /* tbz, tbnz */
	    (insn & 0x1f000000u) == 0x10000000u ||   /* adr, adrp */
	    (insn & 0xff9ffc1fu) == 0xd61f0000u)     /* br, blr, ret (opc 0, 1, 2) */
		return DL_A64_SIMULATED;
	if (insn == 0xd503201fu)
		return DL_A64_NOP;
	/* Loads of a PC-relative literal (ldr, ldrsw, prfm, SIMD ldr) and exclusives: refused. */
	if ((insn & 0x3b000000u) == 0x18000000u || (insn & 0x3f000000u) == 0x08000000u)
		return DL_A64_REJECTED;
	/* Branches, exception generation and system instructions (op0 101): only hints are stepped. */
	if ((insn & 0x1c000000u) == 0x14000000u) {
		uint32_t hint = insn & 0xfffff01fu;

		/* hint #imm: paciaz, paciasp, pacibz, pacibsp (the function entries of pac-ret builds), bti */
		if (hint == 0xd503201fu) {
			uint32_t imm = (insn >> 5) & 0x7f;

			if (imm == 0x18 || imm == 0x19 || imm == 0x1a || imm == 0x1b || (imm & ~0x6u) == 0x20)
				return DL_A64_STEPPED;
			return DL_A64_REJECTED;
		}
		/* clrex, dsb, dmb, isb */
		if ((insn & 0xfffff01fu) == 0xd503301fu)
			return DL_A64_STEPPED;
		return DL_A64_REJECTED;
	}
	return DL_A64_STEPPED;
}

bool dl_trampoline_target(const uint8_t *c, size_t n, uint64_t off, uint64_t *target)
{
#if defined(__aarch64__)
	return dl_trampoline_target_aarch64(c, n, off, target);
#else
	return dl_trampoline_target_x86_64(c, n, off, target);
#endif
}
