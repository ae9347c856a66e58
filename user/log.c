// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "log.h"
#include "strsafe.h"
#include "util.h"

int dl_log_level = DL_LOG_WARN;

/*
 * Messages name processes, paths and symbols of the traced side: the whole
 * message is formatted first and written escaped, so no argument reaches the
 * terminal raw whatever the format string does with it.
 */
__attribute__((format(printf, 3, 0)))
static void put_escaped(const char *prefix, unsigned flags, const char *fmt, va_list ap)
{
	char small[512], *msg = small;
	struct dl_sbuf e = { 0 };
	va_list again;
	int n;

	va_copy(again, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	if (n < 0) {
		n = 0;
		small[0] = '\0';
	} else if ((size_t)n >= sizeof(small)) {
		msg = dl_xrealloc(NULL, (size_t)n + 1);
		vsnprintf(msg, (size_t)n + 1, fmt, again);
	}
	va_end(again);
	dl_text_escape(&e, msg, (size_t)n, flags);
	fprintf(stderr, "%s%s", prefix, e.v);
	dl_sbuf_free(&e);
	if (msg != small)
		free(msg);
}

void dl_log(int level, const char *fmt, ...)
{
	static const char *const prefix[] = { "dlbpf: error: ", "dlbpf: warning: ", "dlbpf: ", "dlbpf: debug: " };
	va_list ap;

	if (level > dl_log_level)
		return;
	va_start(ap, fmt);
	put_escaped(prefix[level], 0, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int dl_vlog_lines(const char *fmt, va_list ap)
{
	put_escaped("", DL_TEXT_KEEP_LINES, fmt, ap);
	return 0;
}
