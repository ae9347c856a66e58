// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * For the arm64 smoke: whether the pthread key offset dlbpf finds
 * (user/capture/glibctsd.c, both ways: measured in its own thread and from
 * the libc file's libthread_db descriptors) is the one pyframes.bpf.h can use:
 * the value of key k read at the thread pointer + offset + 16 k + 8, for keys
 * this program set itself. Prints {"off_self", "off_file", "tp_minus_self",
 * "keys", "bad"}; exit 0 only if every key read back and both offsets agree.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "capture/glibctsd.h"

#define KEYS 3

int main(void)
{
	uint32_t off = dl_glibc_keys_off_self(), off_file = dl_glibc_keys_off_of(getpid(), NULL);
	const char *tp = __builtin_thread_pointer();
	pthread_key_t k[KEYS];
	int bad = 0;

	for (int i = 0; i < KEYS; i++) {
		const void *want = (const void *)(uintptr_t)(0x5eed0 + i);
		const void *got;

		if (pthread_key_create(&k[i], NULL) || pthread_setspecific(k[i], want))
			return 2;
		/* As pyframes.bpf.h reads it: tp + (s32)specific_off + key * 16 + 8. */
		memcpy(&got, tp + (int32_t)off + k[i] * 16 + 8, sizeof(got));
		bad += got != want;
	}
	printf("{\"off_self\": %d, \"off_file\": %d, \"tp_minus_self\": %ld, \"keys\": %d, \"bad\": %d}\n",
	       (int32_t)off, (int32_t)off_file, (long)(tp - (const char *)pthread_self()), KEYS, bad);
	return bad || !off || off != off_file;
}
