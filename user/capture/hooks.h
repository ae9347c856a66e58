/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test hooks: environment variables that let the integration tests reach
 * paths this machine would never take by itself. Not an interface; each one
 * in use is announced with a warning, so it cannot go unnoticed.
 *
 *   DLBPF_FORCE_TWINS=old,…      the programs for kernels without
 *                                block_io_start (6.5) and without the newer
 *                                arguments of sched_switch (prev_state) and
 *                                sched_process_exit (group_dead): the block
 *                                twins, the task's state, signal->live. The
 *                                argument layouts this kernel's tracepoints
 *                                have (block_getrq's, ...) cannot be faked.
 *                                Also without-FEATURE, for each BPF feature of
 *                                dl_features (without-uprobe_multi, …): the
 *                                twins and fallbacks of a kernel without it;
 *                                without-fentry and without-kprobes move the
 *                                files source to its next mechanism.
 *   DLBPF_TEST_MAP_ENTRIES=M=N,… BPF map M gets N entries (e.g. traced=4), so
 *                                that a full map is cheap to reach
 *   DLBPF_TEST_LINK_PAUSE_MS=N   sleep N ms (1 to 1000) after each CUDA link
 *                                attached, as a collector descheduled between
 *                                two links on a busy machine would: the calls
 *                                a running job makes meanwhile meet one link
 *                                of an API without the other
 *   DLBPF_TEST_ENTRY_LINK_FIRST=1 each entry link before its return link:
 *                                the order tracer.h forbids, so that the
 *                                in-flight stacks' recovery from a return
 *                                that never comes can be tested
 *   DLBPF_TEST_URETPROBE_HAZARD=1 the seccomp trial taken to say that return
 *                                probes kill processes under a filter (a kernel
 *                                without the uretprobe pass-through): such
 *                                processes get entry probes only
 *   DLBPF_TEST_NO_CLOSER=1       the syscall events closed by dlbpf itself
 *                                at detach, one grace period each, as when
 *                                it cannot fork their closer
 *   DLBPF_TEST_NO_OPENAT2=1      every path in a traced process's root is
 *                                resolved by the walk, as on a kernel without
 *                                openat2 (capture/tfile.h)
 *   DLBPF_TEST_NO_MAP_FILES=1    mapped files opened by their paths, as
 *                                without CAP_SYS_ADMIN (which
 *                                /proc/PID/map_files needs): the path
 *                                route's defences can be tested as root
 *   DLBPF_TEST_PROCESS_PROBES=1  the CUDA probes attached per process (a
 *                                child held at its fork until attached to),
 *                                as where the seccomp trial forbids probes
 *                                that follow the library file
 *
 * A bad value is an error: a test that asked for a hook must not silently run
 * without it.
 */
#ifndef DLBPF_HOOKS_H
#define DLBPF_HOOKS_H

#include "capture/env.h"

struct bpf_object;

/* DLBPF_FORCE_TWINS: overrides what the feature probes found; 0 or -EINVAL. */
int dl_hooks_features(struct dl_features *f);
/* DLBPF_TEST_MAP_ENTRIES: resizes maps of obj before it is loaded; 0 or -EINVAL. */
int dl_hooks_map_entries(struct bpf_object *obj);
/* DLBPF_TEST_LINK_PAUSE_MS: *ms (0 when unset); 0 or -EINVAL. */
int dl_hooks_link_pause(unsigned *ms);
/* DLBPF_TEST_ENTRY_LINK_FIRST: *on; 0 or -EINVAL. */
int dl_hooks_entry_link_first(bool *on);
/* DLBPF_TEST_URETPROBE_HAZARD: *on; 0 or -EINVAL. */
int dl_hooks_uretprobe_hazard(bool *on);
/* DLBPF_TEST_NO_CLOSER: *on; 0 or -EINVAL. */
int dl_hooks_no_closer(bool *on);
/* DLBPF_TEST_NO_OPENAT2: *on; 0 or -EINVAL. */
int dl_hooks_no_openat2(bool *on);
/* DLBPF_TEST_NO_MAP_FILES: *on; 0 or -EINVAL. */
int dl_hooks_no_map_files(bool *on);
/* DLBPF_TEST_PROCESS_PROBES: *on; 0 or -EINVAL. */
int dl_hooks_process_probes(bool *on);
/* DLBPF_TEST_NO_PY_LINES=1: the Python lines of waits and CPU samples are left out (tools/bench, table 14). */
int dl_hooks_no_py_lines(bool *on);

#endif
