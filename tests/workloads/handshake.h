/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the workloads that a test attaches to share: the "ready" handshake
 * (the tracer attaches between the line and the answer, so that it sees the
 * work from its start) and the report of an argument they do not take.
 */
#ifndef WORKLOADS_HANDSHAKE_H
#define WORKLOADS_HANDSHAKE_H

#include <stdio.h>

/* Prints "ready", then waits for a line on stdin; -1 when stdin ends first. */
static inline int ready_then_wait(void)
{
	char line[16];

	printf("ready\n");
	fflush(stdout);
	return fgets(line, sizeof(line), stdin) ? 0 : -1;
}

/* Reports arg as not an argument of prog; the exit status of a usage error. */
static inline int unknown_argument(const char *prog, const char *arg)
{
	fprintf(stderr, "%s: unknown argument '%s'\n", prog, arg);
	return 2;
}

#endif
