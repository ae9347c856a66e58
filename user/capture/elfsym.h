/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Function symbols of an ELF file, by name and by file offset. */
#ifndef DLBPF_ELFSYM_H
#define DLBPF_ELFSYM_H

#include <stddef.h>
#include <stdint.h>
#include "util.h"

struct dl_elf_sym {
	char *name;
	uint64_t offset;   /* file offset of the first instruction (what uprobes take) */
	uint64_t size;
	uint8_t bind;      /* STB_* */
};

struct dl_elf_syms {
	DL_VEC(struct dl_elf_sym) by_offset;
	int has_symtab;         /* .symtab present (not stripped) */
};

/*
 * Loads the defined function symbols of .symtab and .dynsym; returns 0 or
 * -errno (-EFBIG: more symbols than one file may cost, elfsym.c). By path
 * for files of dlbpf's own choosing; a traced process's files are opened by
 * capture/tfile.h.
 */
int dl_elf_syms_load(const char *path, struct dl_elf_syms *out);
/* Loads from an open descriptor (a traced process's file: capture/tfile.h). */
int dl_elf_syms_load_fd(int fd, struct dl_elf_syms *out);
void dl_elf_syms_free(struct dl_elf_syms *s);

/*
 * Named symbols of any type (data too), from .dynsym and .symtab of an open
 * file: each wanted one found gets its link-time value and, where its
 * section holds bytes in the file, up to len of them (a constant's value).
 */
struct dl_elf_want {
	const char *name;
	uint64_t value;     /* 0: not found */
	void *bytes;        /* NULL: value only */
	size_t len;         /* bytes wanted; set to those read (0: none in the file) */
};
int dl_elf_find_fd(int fd, struct dl_elf_want *want, int n, uint64_t *first_vaddr);

/* 1 when the file names a library starting with prefix among those it needs (DT_NEEDED), 0 if not, or -errno. */
int dl_elf_needs_fd(int fd, const char *prefix);

/* A global definition is preferred to a local or weak one of the same name. */
const struct dl_elf_sym *dl_elf_sym_by_name(const struct dl_elf_syms *s, const char *name);
/* The function containing a file offset, or NULL. */
const struct dl_elf_sym *dl_elf_sym_by_offset(const struct dl_elf_syms *s, uint64_t offset);

#endif
