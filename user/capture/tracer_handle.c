// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The tracer's handle (capture/tracer.h): made, freed and read here; its fields are tracer_int.h's. */
#include <stdlib.h>
#include "capture/tracer.h"
#include "capture/tracer_int.h"
#include "util.h"

struct dl_tracer *dl_tracer_new(void)
{
	return dl_xcalloc(1, sizeof(struct dl_tracer));
}

void dl_tracer_free(struct dl_tracer *t)
{
	if (!t)
		return;
	if (t->skel)
		dl_tracer_destroy(t);
	free(t);
}

bool dl_tracer_loaded(const struct dl_tracer *t)
{
	return t && t->skel;
}

struct dlbpf *dl_tracer_skel(const struct dl_tracer *t)
{
	return t->skel;
}

const struct dl_features *dl_tracer_features(const struct dl_tracer *t)
{
	return &t->feat;
}

void dl_tracer_set_stacks(struct dl_tracer *t, bool on)
{
	t->stacks = on;
}

bool dl_tracer_files(const struct dl_tracer *t)
{
	return t->files;
}

uint64_t dl_tracer_last_detach_ns(const struct dl_tracer *t)
{
	return t->last_detach_ns;
}

int dl_tracer_files_mech(const struct dl_tracer *t)
{
	return t->files_mech;
}
