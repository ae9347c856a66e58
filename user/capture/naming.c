// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "records/cuda_api.h"
#include "capture/demangle.h"
#include "capture/naming.h"
#include "capture/procfs.h"
#include "records/stream.h"
#include "capture/symbolize.h"

static void emit(struct dl_stream *st, struct dl_lazy_now *now, pid_t pid, uint64_t addr, const char *raw)
{
	char name[DL_SYM_NAME_MAX];

	dl_demangle(raw, name, sizeof(name));
	dl_emit_sym(st, dl_lazy_now(now), pid, addr, name);
}

/* Names addr after the function holding code address code (a host stub). */
static void name_by_code(struct dl_symbolizer *sz, struct dl_stream *st, struct dl_lazy_now *now, pid_t pid,
			 uint64_t addr, uint64_t code)
{
	struct dl_code_loc loc;

	if (addr && code && dl_symbolize_once(sz, pid, addr, code, &loc) >= 0 && loc.sym[0])
		emit(st, now, pid, addr, loc.sym);
}

/*
 * A name string in the process, read while it lives. Best effort: the event is
 * drained some milliseconds after the call, and a string freed since is lost.
 */
static void name_by_string(struct dl_symbolizer *sz, struct dl_stream *st, struct dl_lazy_now *now, pid_t pid,
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

/*
 * Where the call returns to, the first time the address is seen: replay has
 * no process to read symbols from, so the recording carries it. A look that
 * could not read the code's file names it by address and is tried again at a
 * later record; a better name found then is a record of its own, and the
 * calls from then on are a site of that name.
 */
static void name_site(struct dl_symbolizer *sz, struct dl_stream *st, struct dl_lazy_now *now, pid_t pid, uint64_t site)
{
	char name[DL_SYM_NAME_MAX], func[DL_SYM_NAME_MAX];
	struct dl_code_loc loc;
	int looks;

	if (!site || (looks = dl_symbolize_once(sz, pid, site | DL_SYMBOLIZE_SITE_KEY, site, &loc)) < 0)
		return;
	/* A later look that found no more than the first says nothing new. */
	if (looks > 0 && !loc.final)
		return;
	if (loc.sym[0]) {
		dl_demangle(loc.sym, name, sizeof(name));
		snprintf(func, sizeof(func), "%.*s+0x%" PRIx64, (int)sizeof(name) - 24, name, loc.sym_off);
	} else if (loc.obj[0]) {
		snprintf(func, sizeof(func), "0x%" PRIx64, loc.file_off);
	} else {
		snprintf(func, sizeof(func), "0x%" PRIx64, site);
	}
	dl_emit_site(st, dl_lazy_now(now), pid, site, func, loc.obj);
}

void dl_name_call(struct dl_symbolizer *sz, struct dl_stream *st, const struct dl_call *c, struct dl_lazy_now *now)
{
	pid_t pid = (pid_t)c->tgid;

	/* Nested calls (the runtime calling the driver) return into the runtime: not a site of the program. */
	if (c->depth == 0) {
		name_site(sz, st, now, pid, c->site);
		for (uint32_t k = 1; k < c->nstack; k++) {
			uint64_t addr;

			memcpy(&addr, &c->stack[k], sizeof(addr));   /* the record may sit at any offset */
			name_site(sz, st, now, pid, addr);
		}
	}

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
