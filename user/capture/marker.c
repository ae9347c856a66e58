// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "dlbpf.skel.h"
#include "capture/demangle.h"
#include "capture/elfsym.h"
#include "log.h"
#include "capture/marker.h"
#include "capture/procfs.h"
#include "capture/tfile.h"
#include "capture/tracer.h"

struct find_ctx {
	const char *symbol;
	const char *lib;        /* only files whose name starts so (NULL: every file) */
	pid_t pid;
	char exe[4096];
	char path[4096];        /* as the process names the file */
	struct dl_tfile file;   /* the file holding the symbol, open until the probe is attached */
	uint64_t offset;
	int found;
};

/*
 * A C++ function named as the user reads it (the demangler's form):
 * "THPEngine_run_backward(_object*, _object*, _object*)", or without its
 * parameters, "THPEngine_run_backward" or "torch::autograd::Engine::execute"
 * (the first such overload). Only mangled names holding the last component
 * of the name are demangled: a library of 10^5 symbols costs a few.
 */
static const struct dl_elf_sym *sym_by_demangled(const struct dl_elf_syms *syms, const char *want)
{
	const char *paren = strchr(want, '('), *last = want, *p;
	size_t want_len = strlen(want), base_len = paren ? (size_t)(paren - want) : want_len;
	char component[256], buf[1024];
	size_t clen;

	/* The last name component: after the last "::" before the parameters. */
	for (p = want; p + 1 < want + base_len; p++)
		if (p[0] == ':' && p[1] == ':')
			last = p + 2;
	clen = (size_t)(want + base_len - last);
	if (!clen || clen >= sizeof(component) || !dl_demangle_available())
		return NULL;
	memcpy(component, last, clen);
	component[clen] = '\0';
	for (size_t i = 0; i < syms->by_offset.n; i++) {
		const struct dl_elf_sym *s = &syms->by_offset.v[i];

		if (strncmp(s->name, "_Z", 2) || !strstr(s->name, component) || !dl_demangle(s->name, buf, sizeof(buf)))
			continue;
		/* Parameters given: the whole form. None: the name before its parameters. */
		if (paren ? !strcmp(buf, want) : !strncmp(buf, want, want_len) && buf[want_len] == '(')
			return s;
	}
	return NULL;
}

/* The file at mapped_path: the mapping [start, end) of it, or (no mapping: end 0) by its path alone. */
static int try_file(struct find_ctx *c, const char *mapped_path, uint64_t start, uint64_t end)
{
	struct dl_elf_syms syms;
	const struct dl_elf_sym *s;
	struct dl_tfile f;

	if (end ? dl_tfile_open_mapped(c->pid, start, end, mapped_path, &f, NULL, 0)
		: dl_tfile_open(c->pid, mapped_path, &f, NULL, 0))
		return 0;
	if (dl_elf_syms_load_fd(f.fd, &syms)) {
		dl_tfile_close(&f);
		return 0;
	}
	s = dl_elf_sym_by_name(&syms, c->symbol);
	if (!s && strncmp(c->symbol, "_Z", 2))
		s = sym_by_demangled(&syms, c->symbol);
	if (s) {
		snprintf(c->path, sizeof(c->path), "%s", mapped_path);
		c->offset = s->offset;
		c->file = f;
		c->found = 1;
	} else {
		dl_tfile_close(&f);
	}
	dl_elf_syms_free(&syms);
	return c->found;
}

static int scan(const struct dl_mapping *m, void *arg)
{
	struct find_ctx *c = arg;

	if (m->perms[2] != 'x' || !strcmp(m->path, c->exe) ||
	    (c->lib && strncmp(dl_basename(m->path), c->lib, strlen(c->lib))))
		return 0;
	return try_file(c, m->path, m->start, m->end);
}

int dl_markers_attached(const struct dl_markers *m, pid_t pid)
{
	return dl_u64map_get(&m->by_pid, (uint64_t)pid, NULL);
}

int dl_markers_attach(struct dl_markers *m, struct dl_tracer *t, pid_t pid, const struct dl_maps *maps,
		      struct dl_pyprocs *pp)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = m->symbol ? DL_MARK_ID_SYMBOL : DL_MARK_ID_AUTOGRAD);
	struct find_ctx c = { .symbol = m->symbol ? m->symbol : DL_AUTOGRAD_SYMBOL, .lib = m->symbol ? NULL : DL_AUTOGRAD_LIB,
			      .pid = pid };
	struct bpf_link *link;
	char exe_link[64];
	ssize_t n;
	int err;

	if ((!m->symbol && !m->autograd) || dl_markers_attached(m, pid))
		return 0;
	/*
	 * Watched as a Python function: only its threads born since need
	 * watching. A process that has the code objects found elsewhere (a
	 * forked DataLoader worker) is watched from them at once, without
	 * reading the symbols of every library it maps first.
	 */
	if (dl_pywatch_watching(&m->py, pid))
		return dl_pywatch_attach(&m->py, t, pp, pid);
	if (m->symbol && m->py.nknown && (err = dl_pywatch_attach(&m->py, t, pp, pid)) > 0)
		return err;
	snprintf(exe_link, sizeof(exe_link), "/proc/%d/exe", (int)pid);
	n = readlink(exe_link, c.exe, sizeof(c.exe) - 1);
	if (n > 0) {
		c.exe[n] = '\0';
		if (!c.lib)
			try_file(&c, c.exe, 0, 0);
	}
	if (!c.found)
		dl_maps_foreach_in(maps, pid, scan, &c);
	if (!c.found && !m->symbol)
		return 0;
	if (!c.found) {
		/* No file has it: a Python function of that name, where the process runs CPython. */
		m->py.want = m->symbol;
		err = dl_pywatch_attach(&m->py, t, pp, pid);
		m->found |= m->py.found;
		return err;
	}
	/* By descriptor: the path looked up again could lead elsewhere (tfile.h). */
	link = bpf_program__attach_uprobe_opts(dl_tracer_skel(t)->progs.step_mark, pid, c.file.self_path, c.offset, &o);
	err = link ? 0 : -errno;
	dl_tfile_close(&c.file);
	if (err) {
		dl_err("pid %d: cannot attach %s %s: %s", pid, m->symbol ? "--step-on" : "the step marker", c.symbol,
		       strerror(-err));
		return err;
	}
	dl_u64map_put(&m->by_pid, (uint64_t)pid, m->links.n);
	*dl_vec_push(&m->links) = (struct dl_marker_link){ .pid = pid, .link = link };
	dl_info("pid %d: step marker on %s (%s+0x%llx)%s", pid, c.symbol, c.path, (unsigned long long)c.offset,
		m->symbol ? "" : ": autograd's entry, for steps where the job calls no CUDA");
	m->found = true;
	return 1;
}

void dl_markers_detach(struct dl_markers *m)
{
	dl_pywatch_detach(&m->py);
	for (size_t i = 0; i < m->links.n; i++)
		bpf_link__destroy(m->links.v[i].link);
	dl_vec_free(&m->links);
	dl_u64map_free(&m->by_pid);
}
