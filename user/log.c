// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include "log.h"

int dl_log_level = DL_LOG_WARN;

void dl_log(int level, const char *fmt, ...)
{
	static const char *const prefix[] = { "error: ", "warning: ", "", "debug: " };
	va_list ap;

	if (level > dl_log_level)
		return;
	fprintf(stderr, "dlbpf: %s", prefix[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
