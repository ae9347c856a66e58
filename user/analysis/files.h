/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reads attributed to files, per process: which path each fd names (from the
 * open and close records, and those the collector wrote for fds held before
 * tracing), and per path the bytes and calls of the read syscalls on it, the
 * time inside them and the block bytes they submitted (what the page cache
 * did not serve). Pure: fed records by the summary.
 */
#ifndef DLBPF_FILES_H
#define DLBPF_FILES_H

#include <stdbool.h>
#include <stdint.h>
#include "dlbpf/events.h"
#include "util.h"

/*
 * Paths kept per process. A job's data set can be millions of files: past
 * this many, the reads of further files are counted together (more), not
 * per path. The JSON lists the DL_FILES_LISTED with the most bytes.
 */
#define DL_FILES_TRACKED 4096
#define DL_FILES_LISTED 64
/* A read returning fewer bytes is small: finding small-reads (DESIGN.md: "most read calls under 64 KiB"). */
#define DL_SMALL_READ_BYTES (64u << 10)

struct dl_file_stat {
	char *path;
	uint64_t read_bytes;
	uint64_t reads;          /* successful read calls, those at end of file (0 bytes) included */
	uint64_t read_ns;        /* inside those calls */
	uint64_t disk_bytes;     /* submitted to block devices from inside them */
	uint64_t small_reads, small_ns;   /* calls that returned 1 .. DL_SMALL_READ_BYTES - 1 bytes */
	uint64_t small_bytes;    /* what those calls returned */
	uint64_t eof_reads;      /* calls that returned 0 bytes: a pass through the file ended */
	/* Read from the disk into its pages outside any read call: page faults of the process's mappings of it. */
	uint64_t fault_bytes;
	bool truncated;          /* the path was cut to DL_PATH_LEN - 1 bytes */
};

struct dl_read_tally {
	uint64_t files, reads, read_bytes, read_ns, disk_bytes;
};

struct dl_proc_files {
	DL_VEC(struct dl_file_stat) files;
	struct dl_u64map by_path;     /* hash of path -> index in files */
	struct dl_u64map fds;         /* fd -> index in files + 1, or 0: past DL_FILES_TRACKED */
	/* Low 32 bits of the inode of a file the process opened or maps -> index in files + 1 (kept past close). */
	struct dl_u64map by_ino;
	struct dl_read_tally more;    /* reads of files past DL_FILES_TRACKED */
	struct dl_read_tally unknown; /* reads of fds no record named (pipes, sockets, dup'd fds) */
	uint64_t read_errors;         /* read calls that failed, on any fd */
	struct dl_u64map reader_tids; /* threads that read a file (values unused) */
	struct dl_u64map thread_ns;   /* tid -> its scheduler intervals' time (running, runnable, blocked) */
};

/*
 * Read calls on a file that a loader cannot make larger: a kernel pseudo-file
 * (/proc, /sys: a counter or a setting, read whole in one small call) or a
 * file under a page (its passes end at end of file in under a page on
 * average). The small-reads finding leaves them out.
 */
bool dl_file_small_by_nature(const struct dl_file_stat *f);
void dl_files_free(struct dl_proc_files *pf);
void dl_files_open(struct dl_proc_files *pf, const struct dl_file_open_ev *e);
void dl_files_close(struct dl_proc_files *pf, const struct dl_file_close_ev *e);
void dl_files_read(struct dl_proc_files *pf, const struct dl_file_read_ev *e);
/*
 * A block read the process submitted: one outside any read call, into a file
 * it opened or maps (by the inode), counts as that file's fault_bytes.
 * Returns the file, or NULL.
 */
const struct dl_file_stat *dl_files_submit(struct dl_proc_files *pf, const struct dl_bio_submit_ev *e);
/* A forked child starts with a copy of its parent's fd table. */
void dl_files_fork(struct dl_proc_files *child, const struct dl_proc_files *parent);
/* A closed scheduler interval of a thread of the process. */
void dl_files_note_sched(struct dl_proc_files *pf, uint32_t tid, uint64_t dur_ns);
/* The traced time of the threads that read files (the loader's time, for small-reads). */
uint64_t dl_files_reader_ns(const struct dl_proc_files *pf);
/* The traced time of a set of the process's threads (keys of tids): the receivers', for the network findings. */
uint64_t dl_files_threads_ns(const struct dl_proc_files *pf, const struct dl_u64map *tids);
/* The files read (by calls or page faults), most bytes first (ties: by path); *n of them, at most max. Caller frees. */
const struct dl_file_stat **dl_files_top(const struct dl_proc_files *pf, size_t max, size_t *n);

#endif
