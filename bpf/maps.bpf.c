// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Defines the maps, globals and global functions that the other sources declare extern. */
#define DL_DEFINE_SHARED
#include "common.bpf.h"
#include "pyframes.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
