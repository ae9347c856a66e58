/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What tracer.c shares with tracer_hot.c (the hot probes' switch) and tracer_maps.c, and no one else. */
#ifndef DLBPF_TRACER_INT_H
#define DLBPF_TRACER_INT_H

#include "capture/tracer.h"

/* Attaches the links of a's slots that sets names (NULL: not that slot); returns 0 or -errno. */
int dl_tracer_attach_links(struct dl_tracer *t, struct dl_cuda_attach *a, const struct dl_probe_set *sets[DL_LINK_MAX]);

/* The consumer's sleep flag (tracer_maps.c): mapped after load, unmapped before the skeleton goes. */
int dl_tracer_map_consumer_flag(struct dl_tracer *t);
void dl_tracer_unmap_consumer_flag(struct dl_tracer *t);

#endif
