/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A minimal test harness: CHECK records a failure and goes on; the run ends with "N passed, N failed". */
#ifndef DLBPF_CHECK_H
#define DLBPF_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			check_passed++;                                        \
		} else {                                                       \
			check_failed++;                                        \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
		}                                                              \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                     \
	CHECK((unsigned long long)(a) == (unsigned long long)(b), "%llu != %llu", \
	      (unsigned long long)(a), (unsigned long long)(b))

static inline int check_report(const char *suite)
{
	printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
	return check_failed ? 1 : 0;
}

#endif
