/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where glibc keeps a thread's values of the first pthread keys: the offset
 * of struct pthread's first key block from the thread pointer (x86-64's fs
 * base; arm64's TPIDR_EL0), a 32-bit two's complement: glibc's x86-64 keeps
 * struct pthread at the thread pointer (TLS variant II), its aarch64 just
 * below it (variant I: THREAD_SELF is the thread pointer minus one struct
 * pthread, sysdeps/aarch64/nptl/tls.h), so arm64's offset is negative. BPF reads a Python thread's state there (its interpreter keeps it under a
 * pthread key). The offset moves between glibc builds, so each traced
 * process's is read from its own libc: the descriptors glibc exports for
 * libthread_db (_thread_db_*), as a debugger would, so a container's glibc
 * counts, not dlbpf's.
 */
#ifndef DLBPF_GLIBCTSD_H
#define DLBPF_GLIBCTSD_H

#include <stdint.h>
#include <sys/types.h>

/* Measured in dlbpf's own thread (a key set and found); 0 when it could not be. */
uint32_t dl_glibc_keys_off_self(void);
/*
 * From a glibc file (libc.so.6; libpthread.so.0 before glibc 2.34): 0, or
 * -ENOENT when it has no descriptors, -ENOTSUP when they describe a layout
 * BPF does not read (key values not 8 bytes at +8 of 16-byte entries, or a
 * first block of other than DL_PY_KEYS_1ST keys).
 */
int dl_glibc_keys_off_fd(int fd, uint32_t *off);
struct dl_maps;
/* pid's: from the glibc it maps (through its root; maps: a snapshot of them, or NULL); 0 when none says. */
uint32_t dl_glibc_keys_off_of(pid_t pid, const struct dl_maps *maps);

#endif
