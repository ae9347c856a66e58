/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The files source on the collector's side: the mechanism its programs run on
 * (the cheapest this kernel allows), the fds a process held before tracing
 * began (/proc/PID/fd), and relative openat paths made absolute as the
 * process sees them.
 */
#ifndef DLBPF_CAPTURE_FILES_H
#define DLBPF_CAPTURE_FILES_H

#include <stdbool.h>
#include <sys/types.h>
#include "records/stream.h"
#include "util.h"
#include "dlbpf/events.h"

struct dlbpf;
struct dl_sysevents;
struct dl_kretprobes;
struct dl_features;

/*
 * What the files programs (bpf/files.bpf.c) run on, cheapest first. The same
 * system calls are seen by each, so the figures are the same. Only the
 * tracepoints tax tasks dlbpf does not trace: any program on a syscall event
 * sends every system call of every task through the kernel's traced path.
 */
enum dl_files_mech {
	DL_FILES_NONE,              /* not wanted (--no-files), or nothing to attach to */
	DL_FILES_FENTRY,            /* fentry/fexit on the syscall handlers */
	DL_FILES_KPROBE,            /* kprobes/kretprobes on the same */
	DL_FILES_TRACEPOINT,        /* the syscall tracepoints */
};

/* The cheapest mechanism this kernel allows (dl_env_probe found, tracefs has); DL_FILES_NONE if none. */
enum dl_files_mech dl_files_mechanism(const struct dl_features *f);
/* "fentry", "kprobe", "tracepoint" or "none": `dlbpf features`, -v. */
const char *dl_files_mech_name(enum dl_files_mech m);
/* What the mechanism costs tasks dlbpf does not trace, in a sentence. */
const char *dl_files_mech_cost(enum dl_files_mech m);
/*
 * Loads the files programs of the cheapest mechanism when wanted, and says at
 * start what it costs the node where that is the tracepoints; returns it.
 */
enum dl_files_mech dl_files_choose(struct dlbpf *skel, bool wanted, const struct dl_features *f);
/*
 * Attaches what the skeleton does not: the tracepoint programs (each event also
 * held in events) or the kretprobes (tracefs events with a node-sized pool, in
 * krets), each link in its skeleton slot (destroyed with the others); -errno.
 */
int dl_files_attach(struct dlbpf *skel, enum dl_files_mech m, struct dl_sysevents *events,
		    struct dl_kretprobes *krets);
/*
 * The cwd each traced process was last seen with, for relative paths of a
 * process gone by the time its records are read (a short-lived worker): a
 * forked child starts with its parent's.
 */
struct dl_cwd {
	char *path;                   /* as the process sees it */
	uint64_t ino;
	uint32_t dev;                 /* kernel dev_t, as the records carry it */
};

struct dl_cwds {
	struct dl_u64map of;          /* pid -> index in dirs */
	DL_VEC(struct dl_cwd) dirs;
};

void dl_cwds_free(struct dl_cwds *c);
/* A process forked: it has its parent's cwd until it is seen with its own. */
void dl_cwds_fork(struct dl_cwds *c, pid_t child, pid_t parent);
/*
 * A read of a traced process's outside any read call (a page fault in a mapped
 * file, readahead it asked for with madvise) names its file by the inode's
 * low bits. An open record of the process named it (dl_files_note_open), or
 * the first such read of the inode looks for it among the process's mappings
 * now and writes a DL_EV_FILE_OPEN (DL_FILE_MAPPED) with its path ahead of e
 * (a file mapped before tracing began). seen: (pid << 32 | ino32) -> 1 named,
 * 2 not among its mappings. True if named (now or before).
 */
bool dl_files_name_mapped(struct dl_stream *s, struct dl_u64map *seen, const struct dl_bio_submit_ev *e);
/* An open record passed: its inode is named for its process. */
void dl_files_note_open(struct dl_u64map *seen, const struct dl_file_open_ev *e);
/* A process's image changed (exec) or ended: what dl_files_name_mapped knew of its mappings goes. */
void dl_files_forget_mapped(struct dl_u64map *seen, pid_t pid);
/*
 * Writes a DL_EV_FILE_OPEN (DL_FILE_PREEXISTING) for each fd of pid that
 * names a path, and notes its cwd; returns how many.
 */
int dl_files_snapshot(struct dl_stream *s, struct dl_cwds *c, pid_t pid);
/*
 * A relative path of an open record joined to the cwd (or the dirfd's
 * directory) the process has now, as the process sees it, or to the cwd it
 * was last seen with if it is gone; the record is copied into out. False
 * when the record needs no change or cannot be resolved: it stays as it came.
 * Not seen: a chdir, or a dirfd closed, between the open and now.
 */
bool dl_files_resolve(struct dl_cwds *c, const struct dl_file_open_ev *e, struct dl_file_open_ev *out);

#endif
