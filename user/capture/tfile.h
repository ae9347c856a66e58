/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Files of the traced side: the libraries and executables a process's maps
 * name, opened as that process sees them, and only when they are what a
 * library must be. Every reader in capture/ opens them here.
 *
 * The traced side decides what lies at those paths (a container does; so does
 * any user, with `unshare -Urm`): a FIFO whose open() never returns, a device
 * whose open has effects, a sparse file of a terabyte, an absolute symlink
 * that, followed from dlbpf's root, names a file of the host. So a path is
 * resolved inside the process's root and no symlink or ".." leaves it
 * (openat2's RESOLVE_IN_ROOT, or a walk of our own where the kernel lacks
 * openat2); what it names is looked at through O_PATH, which opens nothing;
 * only a regular file of a sane size is then opened.
 */
#ifndef DLBPF_TFILE_H
#define DLBPF_TFILE_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * The largest file read: the biggest CUDA libraries are about half a GiB
 * (libcublasLt.so.13: 517 MiB), framework libraries that link CUDA kernels
 * 1-2 GiB (libtorch_cuda.so); 16 GiB leaves room for ten times that. What a
 * symbol table can make dlbpf allocate grows with the file, so a terabyte of
 * sparse file is refused rather than read.
 */
#define DL_TFILE_MAX_BYTES (16ull << 30)

/* Every resolution walks, as where openat2 is missing: the test hook DLBPF_TEST_NO_OPENAT2 (capture/hooks.h). */
void dl_tfile_force_walk(bool on);

struct dl_tfile {
	int fd;              /* O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC; a regular file */
	struct stat st;
	/* "/proc/self/fd/N": a path by which the kernel (uprobes) finds this very file, with no lookup to redo */
	char self_path[32];
};

/*
 * Opens path (absolute, as pid's maps show it) inside pid's root. Returns 0,
 * or -errno with why filled in (to follow "cannot read PATH: " in a message:
 * "a FIFO, not a regular file", "No such file or directory"); why may be NULL.
 */
int dl_tfile_open(pid_t pid, const char *path, struct dl_tfile *f, char *why, size_t whylen);
/* The same inside the directory rootfd (dlbpf's own root for a process that shares it; tests). */
int dl_tfile_open_in(int rootfd, const char *path, struct dl_tfile *f, char *why, size_t whylen);
void dl_tfile_close(struct dl_tfile *f);
/*
 * True when pid resolves paths as dlbpf does (the same mount namespace and
 * root): a path it mapped may then be opened in dlbpf's root once it is gone.
 */
bool dl_tfile_shares_root(pid_t pid);
/* An error that may go away by itself (out of descriptors or memory, a race): worth trying again later. */
bool dl_tfile_transient(int err);

/*
 * Resolves path inside the directory rootfd: an absolute path, an absolute
 * symlink and ".." at the top all stay at rootfd. Returns an O_PATH
 * descriptor of what it names (a trailing symlink followed), or -errno.
 * walk: resolve component by component even where openat2 exists.
 */
int dl_resolve_in_root(int rootfd, const char *path, bool walk);

#endif
