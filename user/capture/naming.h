/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Names for the kernels of launch events, written into the stream as
 * DL_EV_SYM records (address -> demangled name) the first time an address is
 * seen: the host stub a launch passes, the handle CUDA 13's __cudaGetKernel
 * made for a host stub, functions registered by __cudaRegisterFunction, and
 * driver functions looked up by name (cuModuleGetFunction, cuLibraryGetKernel).
 * Call sites likewise, as DL_EV_SITE records: the function and object an
 * outermost call returns to, before the first call that names the address.
 */
#ifndef DLBPF_NAMING_H
#define DLBPF_NAMING_H

#include <stdint.h>
#include "records/clock.h"
#include "records/cuda_api.h"

struct dl_symbolizer;
struct dl_stream;

/* Names what a call (as the stream decoded it, before it reaches the sinks) launches or makes. */
void dl_name_call(struct dl_symbolizer *sz, struct dl_stream *st, const struct dl_call *c, struct dl_lazy_now *now);

#endif
