/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where the kernel has no attach cookies for uprobes, each probed
 * instruction's cookie sits in the BPF map probe_cookies under its file
 * (device, inode) and offset (bpf/common.bpf.h, dl_site_cookie). A cookie is a
 * function of the instruction, so every set of probes on a file, in every
 * process, writes the same entries: a file's entries are written by the first
 * set that holds them and removed when the last one lets go.
 */
#ifndef DLBPF_PROBE_SITES_H
#define DLBPF_PROBE_SITES_H

#include <stddef.h>
#include <stdint.h>

/* One file's entries in one map, held by the sets of probes on it. */
struct dl_probe_sites;

/*
 * Writes the n cookies under (dev, ino, off[i]) in map_fd unless there
 * already, and takes a hold on the file's entries; 0 or -errno (-E2BIG: the
 * map is full), with nothing held on failure. dev as /proc/PID/maps names the
 * device: major << 32 | minor. Safe from any thread.
 */
int dl_probe_sites_get(int map_fd, uint64_t dev, uint64_t ino, const unsigned long *off, const uint64_t *cookie,
		       size_t n, struct dl_probe_sites **out);
/* Lets go of a hold; the last one removes the file's entries. NULL is fine. */
void dl_probe_sites_put(struct dl_probe_sites *s);

#endif
