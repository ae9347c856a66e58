/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the records have said so far about each traced process's address
 * space: its device allocations and pinned host ranges (from allocation and
 * free calls that succeeded) and the names of code addresses (DL_EV_SYM). The
 * stream keeps it and resolves every CUDA call against it, so that the summary,
 * the steps and the timeline classify a copy the same way, whatever order they
 * were added in.
 */
#ifndef DLBPF_ADDRSPACE_H
#define DLBPF_ADDRSPACE_H

#include <stdbool.h>
#include <stdint.h>
#include "records/cuda_api.h"
#include "dlbpf/events.h"
#include "util.h"

struct dl_range {
	uint64_t start, end;
};

/* Sorted by start; a DL_VEC by its members, so the dl_vec_* macros apply. */
struct dl_ranges {
	struct dl_range *v;
	size_t n, cap;
};

struct dl_addrspace {
	uint32_t pid;
	struct dl_ranges pinned, device;
	DL_VEC(char *) names;
	struct dl_u64map name_of;     /* code address -> index in names */
	DL_VEC(char *) sites;         /* a site record's text: function "\0" object "\0" */
	struct dl_u64map site_of;     /* return address -> index in sites */
	DL_VEC(struct dl_pycode_ev *) pycodes;   /* code records, copied */
	struct dl_u64map pycode_of;   /* code object address -> index in pycodes */
};

struct dl_addrspaces {
	DL_VEC(struct dl_addrspace) v;
	struct dl_u64map by_pid;      /* pid -> index in v */
};

void dl_addrspaces_free(struct dl_addrspaces *a);
/* NULL while the records have said nothing about pid's memory or code. */
const struct dl_addrspace *dl_addrspace_find(const struct dl_addrspaces *a, uint32_t pid);
/* The name of a code address in pid (the first symbol record for it), or NULL. */
const char *dl_addrspace_name(const struct dl_addrspaces *a, uint32_t pid, uint64_t addr);
bool dl_ranges_contains(const struct dl_ranges *r, uint64_t addr);

/*
 * Fills the resolved fields of a decoded call: the direction of a copy left
 * to the runtime (an address inside a known device allocation is on the
 * device, any other on the host, as the runtime's unified addressing has it),
 * a copy's host side and whether it is pageable, a launch's kernel name, the
 * call site's function and object.
 */
void dl_addrspaces_resolve(const struct dl_addrspaces *a, struct dl_call *c);

/* Python frames named, innermost first: each one's file, function and line (NULL, -1 when not known). */
struct dl_pynamed {
	const char *file[DL_PY_MAX], *func[DL_PY_MAX];
	int32_t line[DL_PY_MAX];
	uint32_t n;   /* frames named from the innermost on, up to the first one not named */
};

/* Names pid's frames py from the code records seen so far (a caller is never shown above a gap). */
void dl_addrspaces_name_py(const struct dl_addrspaces *a, uint32_t pid, const struct dl_py_stack *py,
			   struct dl_pynamed *out);
/*
 * What a call does to the address space: an outermost allocation or free that
 * succeeded (a failed one, as every one without a GPU, must not mark memory
 * pinned); nested calls are part of the outer one.
 */
void dl_addrspaces_note_call(struct dl_addrspaces *a, const struct dl_call *c);
void dl_addrspaces_note_sym(struct dl_addrspaces *a, const struct dl_sym_ev *e);
/* A Python code record (checked by the stream: dl_pycode_ok). */
void dl_addrspaces_note_pycode(struct dl_addrspaces *a, const struct dl_pycode_ev *e);
/* A site record (checked by the stream: both strings end inside it). */
void dl_addrspaces_note_site(struct dl_addrspaces *a, const struct dl_site_ev *e);

#endif
