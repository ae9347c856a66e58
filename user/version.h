/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef DLBPF_VERSION
#define DLBPF_VERSION "0.1.0"
#endif
