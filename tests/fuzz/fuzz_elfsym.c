// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The ELF symbol reader (capture/elfsym.c) on arbitrary bytes. The files it
 * reads come from the traced side (a CUDA runtime in the job's container, the
 * binary a --step-on symbol is looked up in), so any bytes may be there; the
 * size caps of the reader apply (a file past them is refused, not a crash).
 *
 * Besides "no crash, no hang, no sanitizer report", the lookups must agree
 * with the table they are built on: sorted by offset, each symbol found by
 * its offset and by its name, a global preferred to its aliases.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture/elfsym.h"
#include "harness.h"

/* Lookups by name are linear: checking each of a big table would be quadratic. */
#define CHECKED 64

static struct memfile input;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fail_init();
	memfile_open(&input, "fuzz-elf");
	return 0;
}

static void check_lookups(const struct dl_elf_syms *s)
{
	for (size_t i = 0; i < s->by_offset.n; i++) {
		const struct dl_elf_sym *a = &s->by_offset.v[i];

		if (!a->name || !a->name[0])
			FAIL("symbol %zu has no name", i);
		if (i && a->offset < s->by_offset.v[i - 1].offset)
			FAIL("symbols %zu and %zu out of order", i - 1, i);
	}
	for (size_t i = 0; i < s->by_offset.n && i < CHECKED; i++) {
		const struct dl_elf_sym *a = &s->by_offset.v[i], *at = dl_elf_sym_by_offset(s, a->offset),
			*named = dl_elf_sym_by_name(s, a->name);

		/* Several symbols may cover the offset; the one found starts there and sorts first. */
		if (!at || at->offset != a->offset || at > a)
			FAIL("%s at offset %#llx: lookup by offset found %s", a->name, (unsigned long long)a->offset,
			     at ? at->name : "nothing");
		if (!named || strcmp(named->name, a->name) || (a->bind == STB_GLOBAL && named->bind != STB_GLOBAL))
			FAIL("%s: lookup by name found %s", a->name, named ? named->name : "nothing");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dl_elf_syms s;

	int fd;

	memfile_put(&input, data, size);
	/* A descriptor of its own, as capture/tfile hands over a traced process's file once opened. */
	fd = open(input.path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		FAIL("cannot open %s", input.path);
	if (dl_elf_syms_load_fd(fd, &s) == 0)
		check_lookups(&s);
	close(fd);
	dl_elf_syms_free(&s);
	return 0;
}
