/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A live run: everything that needs the kernel, from the checks to the last
 * drained record. The tracer, the collector (capture/collector.h) that turns
 * ring-buffer bytes into the session's records, the modes (capture/modes.h),
 * the held start of a command, the rescans for late-loaded runtimes, the
 * watchdog. dl_live_new, then dl_live_session_opts fills what the session
 * asks of a capture, then dl_live_run feeds the session.
 */
#ifndef DLBPF_LIVE_H
#define DLBPF_LIVE_H

#include <signal.h>

/* Named only: this header wires the stages and includes none of them (tests/unit/test_layout.py). */
struct dl_config;
struct dl_session;
struct dl_session_opts;
struct dl_live;

struct dl_live *dl_live_new(const struct dl_config *cfg, const volatile sig_atomic_t *stop,
			    volatile sig_atomic_t *dump);
/* The capture callbacks and the --overhead-budget's observed windows. */
void dl_live_session_opts(struct dl_live *l, struct dl_session_opts *o);
/* Traces into s until the traced processes exit, --duration, or a signal; 0 or -errno (said). */
int dl_live_run(struct dl_live *l, struct dl_session *s);
/* What dlbpf exits with for the command it started (0 without one); err: the run's. */
int dl_live_exit_status(struct dl_live *l, int err);
/* Detaches what is still attached and continues what is still held. */
void dl_live_free(struct dl_live *l);

#endif
