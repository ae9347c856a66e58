/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef DLBPF_CLI_H
#define DLBPF_CLI_H

#include <stdbool.h>
#include <sys/types.h>

#define DL_MAX_PIDS 64

struct dl_config {
	pid_t pids[DL_MAX_PIDS];
	int npids;
	char **cmd;            /* -- CMD ARGS... (NULL-terminated), or NULL */
	double duration_s;     /* 0: until the traced processes exit or a signal */
	const char *json_path;
	const char *trace_path;  /* -o FILE: timeline trace, or NULL */
	int trace_format;        /* enum dl_trace_format; -1: by trace_path's extension */
	int verbose;
	unsigned ringbuf_mb;
	unsigned drain_ms;
	bool quiet;            /* no live status line */
};

/* Parses argv; on bad usage prints why and exits with status 2. */
void dl_cli_parse(int argc, char **argv, struct dl_config *cfg);

#endif
