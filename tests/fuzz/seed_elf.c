// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A small shared object, the fuzz_elfsym seed: what the reader meets in a CUDA
 * runtime (global, local, weak and aliased functions, an ifunc, data symbols
 * to skip), in a few kilobytes instead of libcudart's 700.
 */
int seed_global(int x)
{
	return x + 1;
}

__attribute__((noinline, used)) static int seed_local(int x)
{
	return x * 2;
}

__attribute__((weak)) int seed_weak(int x)
{
	return seed_local(x) - 1;
}

int seed_alias(int x) __attribute__((alias("seed_global")));

static int (*resolve_seed(void))(int)
{
	return seed_global;
}

int seed_ifunc(int x) __attribute__((ifunc("resolve_seed")));

int seed_data = 42;
