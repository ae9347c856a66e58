// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A command linked with libholdctor.so (its constructor can hold it before main); prints "main" and exits 0. */
#include <stdio.h>

int holdctor_linked(void);

int main(void)
{
	printf("main %d\n", holdctor_linked());
	return 0;
}
