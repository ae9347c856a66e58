/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The container, pod and Slurm job of a process, from /proc/PID/cgroup (cgroup
 * v2's one "0::" line, or v1's line per hierarchy). Recognised, in any
 * hierarchy:
 *   - Kubernetes, systemd driver: kubepods[-<qos>]-pod<uid with '_'>.slice,
 *     then cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope;
 *   - Kubernetes, cgroupfs driver: /kubepods[/<qos>]/pod<uid>/<id>;
 *   - Docker and Podman alone: /docker/<id>, docker-<id>.scope, libpod-<id>.scope;
 *   - Slurm: a job_<N> component (/slurm/uid_N/job_N/step_N, or
 *     slurmstepd.scope/job_N/... on v2, or job_<N>.slice) below one naming slurm.
 * Only names of the expected shape are taken (an id of 12 to 64 hex digits, a
 * UUID-shaped pod uid, a numeric job): a path the traced side made up of other
 * bytes yields nothing, so nothing it controls reaches an output but those.
 * No pod names: they need the kubelet's API, which dlbpf does not call.
 */
#ifndef DLBPF_CGROUP_H
#define DLBPF_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "dlbpf/events.h"

/* One cgroup path ("/kubepods.slice/..."): fills what it names into c (fields already set stay). */
void dl_cgroup_path_parse(const char *path, size_t len, struct dl_container *c);
/* The contents of /proc/PID/cgroup (buf need not end in NUL): c cleared, then filled; true if anything was found. */
bool dl_cgroup_parse(const char *buf, size_t len, struct dl_container *c);
/*
 * Reads /proc/PID/cgroup: 0 (c cleared when nothing was found), or -errno;
 * -ESTALE where exec_cgroup_ino (the cgroup at an exec, 0: none known) is no
 * longer the process's v2 cgroup: it moved since, and what it ran in is unknown.
 */
int dl_proc_container(pid_t pid, uint32_t exec_cgroup_ino, struct dl_container *c);

#endif
