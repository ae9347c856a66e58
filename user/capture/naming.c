// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "records/cuda_api.h"
#include "capture/demangle.h"
#include "capture/naming.h"
#include "capture/procfs.h"
#include "records/stream.h"
#include "capture/symbolize.h"

static void emit(struct dl_stream *st, uint64_t now, pid_t pid, uint64_t addr, const char *raw)
{
	char name[DL_SYM_NAME_MAX];

	dl_demangle(raw, name, sizeof(name));
	dl_emit_sym(st, now, pid, addr, name);
}

/* Names addr after the function holding code address code (a host stub). */
static void name_by_code(struct dl_symbolizer *sz, struct dl_stream *st, uint64_t now, pid_t pid,
			 uint64_t addr, uint64_t code)
{
	char raw[DL_SYM_NAME_MAX];

	if (!addr || !code || !dl_symbolizer_first(sz, pid, addr))
		return;
	dl_symbolize(sz, pid, code, raw, sizeof(raw));
	if (raw[0])
		emit(st, now, pid, addr, raw);
}

/*
 * A name string in the process, read while it lives. Best effort: the event is
 * drained some milliseconds after the call, and a string freed since is lost.
 */
static void name_by_string(struct dl_symbolizer *sz, struct dl_stream *st, uint64_t now, pid_t pid,
			   uint64_t addr, uint64_t str)
{
	char raw[DL_SYM_NAME_MAX];
	ssize_t n;
	int fd;

	if (!addr || !str)
		return;
	fd = dl_proc_open(pid, "mem");
	if (fd < 0)
		return;
	n = pread(fd, raw, sizeof(raw) - 1, (off_t)str);
	close(fd);
	if (n <= 0)
		return;
	raw[n] = '\0';
	if (!raw[0] || !dl_symbolizer_first(sz, pid, addr))
		return;
	emit(st, now, pid, addr, raw);
}

void dl_name_call(struct dl_symbolizer *sz, struct dl_stream *st, const struct dl_call *c, uint64_t now)
{
	pid_t pid = (pid_t)c->tgid;

	if (c->api->cls == DL_CLS_LAUNCH) {
		/* cudaLaunchKernel with a host stub: the stub's symbol. A handle is named at its creation. */
		name_by_code(sz, st, now, pid, c->func, c->func);
		return;
	}
	if (c->api->cls != DL_CLS_NAMING || c->args_fault)
		return;
	switch (c->api->layout) {
	case DL_L_GET_KERNEL:
	case DL_L_REGISTER_FUNC:
		/* handle (or the stub itself, registered) -> the host stub's name */
		name_by_code(sz, st, now, pid, c->func, c->host);
		break;
	case DL_L_GET_FUNC:
		if (c->ret == 0)
			name_by_string(sz, st, now, pid, c->func, c->name_ptr);
		break;
	default:
		break;
	}
}
