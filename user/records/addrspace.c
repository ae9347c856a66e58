// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "records/addrspace.h"
#include "records/pyline.h"

static void addrspace_free(struct dl_addrspace *s)
{
	for (size_t i = 0; i < s->names.n; i++)
		free(s->names.v[i]);
	dl_vec_free(&s->names);
	dl_u64map_free(&s->name_of);
	for (size_t i = 0; i < s->sites.n; i++)
		free(s->sites.v[i]);
	dl_vec_free(&s->sites);
	dl_u64map_free(&s->site_of);
	for (size_t i = 0; i < s->pycodes.n; i++)
		free(s->pycodes.v[i]);
	dl_vec_free(&s->pycodes);
	dl_u64map_free(&s->pycode_of);
	dl_vec_free(&s->pinned);
	dl_vec_free(&s->device);
}

void dl_addrspaces_free(struct dl_addrspaces *a)
{
	for (size_t i = 0; i < a->v.n; i++)
		addrspace_free(&a->v.v[i]);
	dl_vec_free(&a->v);
	dl_u64map_free(&a->by_pid);
}

const struct dl_addrspace *dl_addrspace_find(const struct dl_addrspaces *a, uint32_t pid)
{
	uint64_t i;

	return dl_u64map_get(&a->by_pid, pid, &i) ? &a->v.v[i] : NULL;
}

static struct dl_addrspace *addrspace_of(struct dl_addrspaces *a, uint32_t pid)
{
	struct dl_addrspace *s = (struct dl_addrspace *)dl_addrspace_find(a, pid);

	if (s)
		return s;
	dl_u64map_put(&a->by_pid, pid, a->v.n);
	s = dl_vec_push(&a->v);
	s->pid = pid;
	return s;
}

static const char *name_in(const struct dl_addrspace *s, uint64_t addr)
{
	uint64_t i;

	return s && dl_u64map_get(&s->name_of, addr, &i) ? s->names.v[i] : NULL;
}

const char *dl_addrspace_name(const struct dl_addrspaces *a, uint32_t pid, uint64_t addr)
{
	return name_in(dl_addrspace_find(a, pid), addr);
}

/* Index of the last range starting at or before addr, or n. */
static size_t range_floor(const struct dl_ranges *r, uint64_t addr)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : r->n;
}

bool dl_ranges_contains(const struct dl_ranges *r, uint64_t addr)
{
	size_t i = range_floor(r, addr);

	return i < r->n && addr < r->v[i].end;
}

static void range_add(struct dl_ranges *r, uint64_t start, uint64_t size)
{
	size_t i = range_floor(r, start), at = i < r->n ? i + 1 : 0;

	if (!size)
		return;
	if (i < r->n && r->v[i].start == start) {
		r->v[i].end = start + size;
		return;
	}
	dl_vec_reserve(r, r->n + 1);
	memmove(&r->v[at + 1], &r->v[at], (r->n - at) * sizeof(*r->v));
	r->v[at] = (struct dl_range){ start, start + size };
	r->n++;
}

static void range_remove(struct dl_ranges *r, uint64_t start)
{
	size_t i = range_floor(r, start);

	if (i < r->n && r->v[i].start == start)
		dl_vec_remove(r, i);
}

/*
 * Names the Python frames from the innermost on, up to the first whose code
 * object no record names: a caller is never shown above a gap it may not
 * belong to. Returns how many were named.
 */
static uint32_t name_py(const struct dl_addrspace *s, const struct dl_py_stack *py, const char **file,
			const char **func, int32_t *line)
{
	for (uint32_t k = 0; k < py->n && k < DL_PY_MAX; k++) {
		const struct dl_pycode_ev *e;
		uint64_t i;

		line[k] = -1;
		if (!s || !dl_u64map_get(&s->pycode_of, py->f[k].code, &i))
			return k;
		e = s->pycodes.v[i];
		file[k] = dl_pycode_file(e);
		func[k] = dl_pycode_func(e);
		line[k] = dl_pyline(e->format, dl_pycode_table(e), e->table_len, e->firstlineno, py->f[k].off);
	}
	return py->n < DL_PY_MAX ? py->n : DL_PY_MAX;
}

void dl_addrspaces_name_py(const struct dl_addrspaces *a, uint32_t pid, const struct dl_py_stack *py,
			   struct dl_pynamed *out)
{
	memset(out, 0, sizeof(*out));
	out->n = name_py(dl_addrspace_find(a, pid), py, out->file, out->func, out->line);
}

void dl_addrspaces_resolve(const struct dl_addrspaces *a, struct dl_call *c)
{
	const struct dl_addrspace *s = dl_addrspace_find(a, c->tgid);
	uint64_t i;

	if (c->has_py)
		c->npy_named = name_py(s, &c->py, c->py_file, c->py_func, c->py_line);

	if (s && c->site && dl_u64map_get(&s->site_of, c->site, &i)) {
		c->site_func = s->sites.v[i];
		c->site_obj = c->site_func + strlen(c->site_func) + 1;
	}
	for (uint32_t k = 0; s && k < c->nstack; k++) {
		uint64_t addr;

		memcpy(&addr, &c->stack[k], sizeof(addr));
		if (dl_u64map_get(&s->site_of, addr, &i)) {
			c->stack_func[k] = s->sites.v[i];
			c->stack_obj[k] = c->stack_func[k] + strlen(c->stack_func[k]) + 1;
		}
	}
	if (c->api->cls == DL_CLS_LAUNCH) {
		c->kernel = name_in(s, c->func);   /* one lookup of the process per record */
		return;
	}
	if (c->api->cls != DL_CLS_COPY && c->api->cls != DL_CLS_MEMSET)
		return;
	if (c->dir == DL_DIR_DEFAULT) {
		bool src_dev = s && dl_ranges_contains(&s->device, c->src);
		bool dst_dev = s && dl_ranges_contains(&s->device, c->dst);

		c->dir = src_dev ? (dst_dev ? DL_DIR_D2D : DL_DIR_D2H) : (dst_dev ? DL_DIR_H2D : DL_DIR_H2H);
	}
	c->host_mem = c->dir == DL_DIR_H2D ? c->src : c->dir == DL_DIR_D2H ? c->dst : 0;
	c->pageable = c->host_mem && !(s && dl_ranges_contains(&s->pinned, c->host_mem));
}

void dl_addrspaces_note_call(struct dl_addrspaces *a, const struct dl_call *c)
{
	bool ok = !c->entry_only && c->ret == 0;
	struct dl_addrspace *s;

	if (c->depth > 0 || !ok)
		return;
	if (c->api->cls == DL_CLS_ALLOC && !c->args_fault) {
		s = addrspace_of(a, c->tgid);
		range_add(c->api->pinned ? &s->pinned : &s->device, c->ptr, c->size);
	} else if (c->api->cls == DL_CLS_FREE && (s = (struct dl_addrspace *)dl_addrspace_find(a, c->tgid))) {
		range_remove(c->api->pinned ? &s->pinned : &s->device, c->ptr);
	}
}

void dl_addrspaces_note_sym(struct dl_addrspaces *a, const struct dl_sym_ev *e)
{
	struct dl_addrspace *s = addrspace_of(a, e->h.tgid);
	uint64_t i;

	/*
	 * The collector names an address once while the code there stays
	 * mapped; a later record for it is what was loaded there since.
	 */
	if (dl_u64map_get(&s->name_of, e->addr, &i)) {
		free(s->names.v[i]);
		s->names.v[i] = dl_xstrdup(e->name);
		return;
	}
	dl_u64map_put(&s->name_of, e->addr, s->names.n);
	*dl_vec_push(&s->names) = dl_xstrdup(e->name);
}

void dl_addrspaces_note_site(struct dl_addrspaces *a, const struct dl_site_ev *e)
{
	struct dl_addrspace *s = addrspace_of(a, e->h.tgid);
	size_t len = e->h.size - offsetof(struct dl_site_ev, text);
	char *text = dl_xcalloc(1, len);
	uint64_t i;

	memcpy(text, e->text, len);
	/* A later record for the address is the code mapped there since. */
	if (dl_u64map_get(&s->site_of, e->addr, &i)) {
		free(s->sites.v[i]);
		s->sites.v[i] = text;
		return;
	}
	dl_u64map_put(&s->site_of, e->addr, s->sites.n);
	*dl_vec_push(&s->sites) = text;
}

void dl_addrspaces_note_pycode(struct dl_addrspaces *a, const struct dl_pycode_ev *e)
{
	struct dl_addrspace *s = addrspace_of(a, e->h.tgid);
	struct dl_pycode_ev *copy = dl_xcalloc(1, e->h.size);
	uint64_t i;

	memcpy(copy, e, e->h.size);
	/* A later record for the address is the code object that lives there since. */
	if (dl_u64map_get(&s->pycode_of, e->addr, &i)) {
		free(s->pycodes.v[i]);
		s->pycodes.v[i] = copy;
		return;
	}
	dl_u64map_put(&s->pycode_of, e->addr, s->pycodes.n);
	*dl_vec_push(&s->pycodes) = copy;
}
