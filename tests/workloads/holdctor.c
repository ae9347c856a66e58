// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libholdctor.so: a library whose constructor runs, as every linked library's
 * does, before the executable's entry point, i.e. while `dlbpf -- CMD` still
 * holds the command under ptrace. With HOLDCTOR set in the environment it
 * prints "ctor PID" and waits for a line on stdin: a hold as long as a test
 * needs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void hold_here(void)
{
	char line[16];

	if (!getenv("HOLDCTOR"))
		return;
	printf("ctor %d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		_exit(3);
}

int holdctor_linked(void)
{
	return 1;
}
