/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef DLBPF_LOG_H
#define DLBPF_LOG_H

#include <stdarg.h>

enum dl_log_level { DL_LOG_ERROR = 0, DL_LOG_WARN = 1, DL_LOG_INFO = 2, DL_LOG_DEBUG = 3 };

/* Messages at or below this level are printed (default DL_LOG_WARN; -v info, -vv debug). */
extern int dl_log_level;

void dl_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * A library's own message (libbpf's print callback), already ending in a
 * newline and sometimes many lines long: escaped like dl_log's, its newlines
 * and tabs kept.
 */
int dl_vlog_lines(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#define dl_err(...) dl_log(DL_LOG_ERROR, __VA_ARGS__)
#define dl_warn(...) dl_log(DL_LOG_WARN, __VA_ARGS__)
#define dl_info(...) dl_log(DL_LOG_INFO, __VA_ARGS__)
#define dl_debug(...) dl_log(DL_LOG_DEBUG, __VA_ARGS__)

#endif
