/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * C++ demangling without linking libstdc++: its __cxa_demangle is looked up at
 * run time (dlopen "libstdc++.so.6"); without it names stay mangled.
 */
#ifndef DLBPF_DEMANGLE_H
#define DLBPF_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

/* True when a demangler was found (first call loads it). */
bool dl_demangle_available(void);
/*
 * Writes the demangled form of name into buf; a name that is not mangled, or
 * cannot be demangled, is copied as it is. Returns true when it was demangled.
 */
bool dl_demangle(const char *name, char *buf, size_t len);

#endif
