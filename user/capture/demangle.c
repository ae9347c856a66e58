// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture/demangle.h"

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static cxa_demangle_fn demangler(void)
{
	static cxa_demangle_fn fn;
	static int tried;

	if (!tried) {
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);

		tried = 1;
		if (h)
			fn = (cxa_demangle_fn)dlsym(h, "__cxa_demangle");
	}
	return fn;
}

bool dl_demangle_available(void)
{
	return demangler() != NULL;
}

bool dl_demangle(const char *name, char *buf, size_t len)
{
	cxa_demangle_fn fn;
	char *out;
	int status = -1;

	if (!len)
		return false;
	snprintf(buf, len, "%s", name);
	if (strncmp(name, "_Z", 2) != 0 || !(fn = demangler()))
		return false;
	out = fn(name, NULL, NULL, &status);
	if (status != 0 || !out) {
		free(out);
		return false;
	}
	snprintf(buf, len, "%s", out);
	free(out);
	return true;
}
