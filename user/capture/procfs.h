/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Reading /proc: mappings, process identity, the process tree. */
#ifndef DLBPF_PROCFS_H
#define DLBPF_PROCFS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct dl_mapping {
	uint64_t start, end, offset;
	uint64_t inode;
	unsigned dev_major, dev_minor;
	char perms[5];
	char path[4096];    /* empty for anonymous mappings */
};

/*
 * Opens /proc/PID/<name> for reading (name: "maps", "auxv", "mem" ...): never
 * a symlink, never a terminal, never waiting; -errno on failure. A FILE for
 * line reading from dl_proc_fopen, NULL with errno set.
 */
int dl_proc_open(pid_t pid, const char *name);
FILE *dl_proc_fopen(pid_t pid, const char *name);
/* A small /proc/PID/<name> (stat, io ...) in one read into buf, NUL-terminated: its length, or -errno. */
ssize_t dl_proc_read(pid_t pid, const char *name, char *buf, size_t size);
/* One read of a small file (procfs, sysfs, tracefs) from fd into buf, NUL-terminated; closes fd. Its length, or -errno. */
ssize_t dl_read_small_fd(int fd, char *buf, size_t size);

/* readlink of /proc/PID/<name> (root, cwd, fd/N), NUL-terminated; -1 if it cannot be read or does not fit. */
int dl_proc_readlink(pid_t pid, const char *name, char *buf, size_t cap);
/*
 * A path /proc shows of pid (its maps, its fd and cwd links) as pid itself
 * names it: /proc writes paths from the reader's root, so a process in a
 * chroot (or a container's root within dlbpf's view) has its root's prefix
 * taken off. A root outside dlbpf's view (another mount namespace) is shown
 * from that namespace's root already: the path is returned as it is. Points
 * into path.
 */
const char *dl_proc_path_in_root(pid_t pid, const char *path);

/* Parses one line of /proc/PID/maps; returns 0, or -1 for a malformed line. */
int dl_maps_parse_line(const char *line, struct dl_mapping *m);

/*
 * Calls fn for each file mapping of pid (anonymous and pseudo mappings
 * skipped). Stops early when fn returns non-zero and returns that value;
 * -errno when the maps cannot be read.
 */
int dl_maps_foreach(pid_t pid, int (*fn)(const struct dl_mapping *m, void *arg), void *arg);
int dl_maps_foreach_file(FILE *f, int (*fn)(const struct dl_mapping *m, void *arg), void *arg);

/*
 * One read of a process's file mappings, walked as often as needed: a rescan
 * reads them once and hands the snapshot to each of its users (the
 * symbolizer, the Python scan, the --step-on markers, the runtime scan), so
 * they see one consistent view, and a process of 3000 mappings costs the
 * collector one parse per rescan, not one per user.
 */
struct dl_maps;

/* NULL with errno set when the maps cannot be read. */
struct dl_maps *dl_maps_read(pid_t pid);
/*
 * dl_maps_foreach over a snapshot of pid's maps, or over /proc/PID/maps read
 * now when snap is NULL or of another process.
 */
int dl_maps_foreach_in(const struct dl_maps *snap, pid_t pid, int (*fn)(const struct dl_mapping *m, void *arg),
		       void *arg);
void dl_maps_free(struct dl_maps *snap);

struct dl_proc_stat {
	pid_t pid, ppid;
	char state;
	char comm[64];
	int threads;           /* num_threads; 0 if the line stops short of it */
	unsigned flags;        /* the kernel's PF_* flags of the task */
};

/* A kernel thread (kthreadd, kworker/...): no program, no mappings, nothing of it a tracer of jobs can see. */
#define DL_PF_KTHREAD 0x00200000u

/* Parses the contents of /proc/PID/stat (comm may hold spaces and parentheses). */
int dl_stat_parse(const char *buf, struct dl_proc_stat *st);
int dl_proc_stat(pid_t pid, struct dl_proc_stat *st);
bool dl_proc_alive(pid_t pid);
/* Alive and not exiting (not a zombie). */
bool dl_proc_running(pid_t pid);

/* Calls fn for every process of the system. */
int dl_proc_foreach(void (*fn)(pid_t pid, pid_t ppid, void *arg), void *arg);
/* pid as the process sees it in its own (innermost) pid namespace, or -1. */
int dl_proc_nspid(pid_t pid);
/*
 * The value of the environment variable name as pid's environment (/proc/PID/environ:
 * what it was given at exec) holds it, cut to len - 1 bytes: 0, -1 when not set or unreadable.
 */
int dl_proc_getenv(pid_t pid, const char *name, char *out, size_t len);

/* Calls fn for every process whose ancestry includes root (root excluded). */
int dl_proc_descendants(pid_t root, void (*fn)(pid_t pid, pid_t ppid, void *arg), void *arg);

/* basename of a path, without allocating. */
const char *dl_basename(const char *path);
/* True for libcudart.so, libcudart.so.13, libcudart.so.13.0.96, libcudart-<hash>.so.13 ... */
bool dl_is_cudart_name(const char *path);

#endif
