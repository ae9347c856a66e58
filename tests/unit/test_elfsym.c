// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ELF symbol resolution, checked against the dynamic loader: a function's
 * file offset from our tables must equal the offset its runtime address maps
 * to in /proc/self/maps.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
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

int main(int argc, char **argv)
{
	struct dl_elf_syms s;

	test_own_executable();
	test_cudart(argc > 1 ? argv[1] : "/usr/local/cuda/lib64/libcudart.so.13");
	CHECK(dl_elf_syms_load("/nonexistent/lib.so", &s) < 0, "missing file loaded");
	CHECK(dl_elf_syms_load("/proc/self/status", &s) < 0, "non-ELF loaded");
	return check_report("test_elfsym");
}
