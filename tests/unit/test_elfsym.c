// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ELF symbol resolution, checked against the dynamic loader: a function's
 * file offset from our tables must equal the offset its runtime address maps
 * to in /proc/self/maps.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "capture/elfsym.h"
#include "capture/procfs.h"

__attribute__((noinline, used)) int elfsym_probe_target(int x)
{
	return x * 3 + 1;
}

struct where {
	uint64_t addr, offset;
	char path[4096];
	int found;
};

static int find(const struct dl_mapping *m, void *arg)
{
	struct where *w = arg;

	if (w->addr >= m->start && w->addr < m->end) {
		w->offset = w->addr - m->start + m->offset;
		snprintf(w->path, sizeof(w->path), "%s", m->path);
		w->found = 1;
		return 1;
	}
	return 0;
}

static int runtime_offset(const void *fn, struct where *w)
{
	memset(w, 0, sizeof(*w));
	w->addr = (uint64_t)(uintptr_t)fn;
	return dl_maps_foreach(getpid(), find, w) > 0 && w->found ? 0 : -1;
}

static void test_own_executable(void)
{
	struct dl_elf_syms s;
	const struct dl_elf_sym *sym;
	struct where w;

	CHECK(runtime_offset((const void *)elfsym_probe_target, &w) == 0, "own function not mapped");
	CHECK(dl_elf_syms_load("/proc/self/exe", &s) == 0, "load own executable");
	CHECK(s.has_symtab, "test binary should have .symtab");
	sym = dl_elf_sym_by_name(&s, "elfsym_probe_target");
	CHECK(sym != NULL, "own symbol not found");
	if (sym) {
		CHECK_EQ_U64(sym->offset, w.offset);
		CHECK(dl_elf_sym_by_offset(&s, w.offset + 1) == sym, "lookup inside the function");
	}
	CHECK(dl_elf_sym_by_name(&s, "no_such_symbol_here") == NULL, "missing symbol found");
	dl_elf_syms_free(&s);
}

static void test_cudart(const char *lib)
{
	static const char *const names[] = { "cudaMemcpy", "cudaLaunchKernel", "cudaMallocHost",
					     "cudaStreamSynchronize", "__cudaLaunchKernel" };
	struct dl_elf_syms s;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	CHECK(h != NULL, "dlopen %s: %s", lib, dlerror());
	if (!h)
		return;
	CHECK(dl_elf_syms_load(lib, &s) == 0, "load %s", lib);
	CHECK(!s.has_symtab, "the toolkit's libcudart is stripped of .symtab");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct dl_elf_sym *sym = dl_elf_sym_by_name(&s, names[i]);
		void *fn = dlsym(h, names[i]);
		struct where w;

		CHECK(sym && fn, "%s: sym %p fn %p", names[i], (void *)sym, fn);
		if (!sym || !fn || runtime_offset(fn, &w))
			continue;
		CHECK(sym->offset == w.offset, "%s: offset 0x%llx, loader says 0x%llx", names[i],
		      (unsigned long long)sym->offset, (unsigned long long)w.offset);
	}
	dl_elf_syms_free(&s);
	dlclose(h);
}

/*
 * The traced side may hand over a sparse file whose symbol table is mostly zeros: no function
 * in it stops the reader, each entry must still be looked at. A table of 10^8 entries (2.4 GB,
 * a hundred times the largest deep-learning library's) is refused, not walked.
 */
static void test_huge_symtab(void)
{
	const uint64_t entries = 100000000;
	char path[] = "/tmp/dlbpf-test-elfsym-XXXXXX";
	struct dl_elf_syms s;
	Elf64_Ehdr *eh;
	Elf64_Shdr *sh = NULL;
	FILE *f = fopen("/proc/self/exe", "rb");
	char *img = malloc(64u << 20);
	size_t n = f && img ? fread(img, 1, 64u << 20, f) : 0;
	int fd = mkstemp(path), patched = 0;

	CHECK(f && img && n > sizeof(*eh) && fd >= 0, "setup");
	if (f)
		fclose(f);
	if (!img || n <= sizeof(*eh) || fd < 0)
		goto out;
	eh = (Elf64_Ehdr *)img;
	for (unsigned i = 0; eh->e_shoff + (i + 1) * sizeof(*sh) <= n && i < eh->e_shnum; i++) {
		sh = (Elf64_Shdr *)(img + eh->e_shoff) + i;
		if (sh->sh_type == SHT_SYMTAB) {
			/* Past the end of the file: the hole a sparse file reads as zeros. */
			sh->sh_offset = (n + 4095) & ~(uint64_t)4095;
			sh->sh_size = entries * sizeof(Elf64_Sym);
			patched = 1;
			break;
		}
	}
	CHECK(patched, "no .symtab in the test's own executable");
	if (!patched)
		goto out;
	CHECK(write(fd, img, n) == (ssize_t)n && ftruncate(fd, (off_t)(sh->sh_offset + sh->sh_size)) == 0,
	      "writing %s", path);
	CHECK(dl_elf_syms_load(path, &s) == -EFBIG, "a table of %llu entries was read", (unsigned long long)entries);
	dl_elf_syms_free(&s);
out:
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	free(img);
}

int main(int argc, char **argv)
{
	struct dl_elf_syms s;

	test_own_executable();
	test_huge_symtab();
	test_cudart(argc > 1 ? argv[1] : "/usr/local/cuda/lib64/libcudart.so.13");
	CHECK(dl_elf_syms_load("/nonexistent/lib.so", &s) < 0, "missing file loaded");
	CHECK(dl_elf_syms_load("/proc/self/status", &s) < 0, "non-ELF loaded");
	return check_report("test_elfsym");
}
