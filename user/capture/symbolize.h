/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Names for code addresses of live processes, through their mappings and ELF symbols. */
#ifndef DLBPF_SYMBOLIZE_H
#define DLBPF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dl_symbolizer;

struct dl_symbolizer *dl_symbolizer_new(void);
void dl_symbolizer_free(struct dl_symbolizer *sz);
/* True the first time (pid, addr) is asked about: the caller names it once. */
bool dl_symbolizer_first(struct dl_symbolizer *sz, pid_t pid, uint64_t addr);
/* Remembers pid's executable mappings, to name its addresses after it exits. */
int dl_symbolizer_note(struct dl_symbolizer *sz, pid_t pid);
/* Writes the function name holding addr in pid (empty string if unknown). */
void dl_symbolize(struct dl_symbolizer *sz, pid_t pid, uint64_t addr, char *buf, size_t len);

#endif
