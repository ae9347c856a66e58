/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Names for code addresses of live processes, through their mappings and ELF symbols. */
#ifndef DLBPF_SYMBOLIZE_H
#define DLBPF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dl_maps;   /* capture/procfs.h: a snapshot of a process's mappings */

struct dl_symbolizer;

struct dl_symbolizer *dl_symbolizer_new(void);
void dl_symbolizer_free(struct dl_symbolizer *sz);
/*
 * Keys of call sites in dl_symbolizer_first: a return address is named apart
 * from a kernel's host stub at the same address (user addresses stay below 2^47).
 */
#define DL_SYMBOLIZE_SITE_KEY (1ull << 63)

/* Where a code address is: its file and, when a symbol holds it, the symbol. */
struct dl_code_loc {
	char obj[256];        /* the mapped path; "" when no mapping holds the address */
	uint64_t file_off;    /* offset of the address in obj */
	char sym[1024];       /* raw (mangled) symbol name; "" when none holds it */
	uint64_t sym_off;     /* bytes from the symbol's start */
	bool final;           /* a symbol holds it, or obj's symbols were read and none does */
	bool reused;          /* no mapping held it, and the maps were read too lately to read again */
};

/* True the first time (pid, addr) is asked about: the caller names it once. */
bool dl_symbolizer_first(struct dl_symbolizer *sz, pid_t pid, uint64_t addr);
/*
 * dl_symbolize_loc of addr for the name keyed (pid, key), unless that name is
 * settled. An answer that cannot change settles it; one that may (no mapping
 * noted yet, a file that could not be read for a moment) leaves it open for
 * the key's next record, a few times at most, so that a stripped or vanished
 * file is not read on every record. Returns the looks before this one
 * (0: the first), or -1 when settled (loc untouched).
 */
int dl_symbolize_once(struct dl_symbolizer *sz, pid_t pid, uint64_t key, uint64_t addr, struct dl_code_loc *loc);
/* Remembers pid's executable mappings, to name its addresses after it exits. */
int dl_symbolizer_note(struct dl_symbolizer *sz, pid_t pid, const struct dl_maps *maps);
/*
 * child was forked by parent: it maps what its parent mapped, known before the child's maps are read
 * (a child that is not held may call, and exit, first).
 */
void dl_symbolizer_fork(struct dl_symbolizer *sz, pid_t child, pid_t parent);
/* Writes the function name holding addr in pid (empty string if unknown). */
void dl_symbolize(struct dl_symbolizer *sz, pid_t pid, uint64_t addr, char *buf, size_t len);
/* Fills loc for addr in pid (what is unknown is left empty). */
void dl_symbolize_loc(struct dl_symbolizer *sz, pid_t pid, uint64_t addr, struct dl_code_loc *loc);

#endif
