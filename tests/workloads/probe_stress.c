// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Calls one function N times and checks every result against the same
 * arithmetic done inline: with a uprobe on the function (dlbpf --step-on
 * probe_stress_target), a probe that resumed the thread at the wrong PC or
 * lost a register shows as a mismatch or a crash. The function calls another,
 * so it has a frame: built with frame pointers it starts with
 * stp x29, x30, [sp, #-N]! on arm64 (an instruction arm64 uprobes single-step
 * out of line) and push %rbp on x86-64. Prints its own truth as JSON:
 * {"calls", "mismatches", "first_insn"}: first_insn is the
 * function's first 4 bytes as the process sees them, the uprobe's breakpoint
 * while one is installed (arm64: brk #0x5).
 *   probe_stress N
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

__attribute__((noinline)) static uint64_t mix_call(uint64_t x)
{
	__asm__ volatile("" : "+r"(x));
	return mix(x);
}

__attribute__((noinline, used)) uint64_t probe_stress_target(uint64_t x, uint64_t y)
{
	return (mix_call(x) ^ (y * GOLDEN)) + x;
}

int main(int argc, char **argv)
{
	uint64_t (*volatile target)(uint64_t, uint64_t) = probe_stress_target;
	unsigned long long n, mismatches = 0;
	uint32_t first;

	if (argc != 2 || (n = strtoull(argv[1], NULL, 10)) == 0) {
		fprintf(stderr, "usage: %s CALLS\n", argv[0]);
		return 2;
	}
	memcpy(&first, (const void *)probe_stress_target, sizeof(first));
	for (unsigned long long i = 0; i < n; i++) {
		uint64_t y = i * 7 + 3;

		if (target(i, y) != ((mix(i) ^ (y * GOLDEN)) + i))
			mismatches++;
	}
	printf("{\"calls\": %llu, \"mismatches\": %llu, \"first_insn\": %" PRIu32 "}\n", n, mismatches, first);
	return mismatches ? 1 : 0;
}
