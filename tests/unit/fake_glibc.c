// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What a glibc exports for libthread_db about its pthread keys, with the layout a build chooses (test_glibctsd). */
#include <stdint.h>

#ifdef DESCRIPTORS
const uint32_t _thread_db_pthread_specific[3] = { 32 * 64, 1, SPECIFIC };
const uint32_t _thread_db_pthread_key_data_data[3] = { 64, 1, DATA };
const uint32_t _thread_db_pthread_key_data_level2_data[3] = { 2 * 64, 32, 0 };
const uint32_t _thread_db_sizeof_pthread_key_data = ENTRY;
const uint32_t _thread_db_sizeof_pthread_key_data_level2 = 32 * ENTRY;
#endif
int fake_glibc_marker = 1;
