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
#include <stdint.h>
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
/* Mapped files by their paths, as without CAP_SYS_ADMIN: the test hook DLBPF_TEST_NO_MAP_FILES (capture/hooks.h). */
void dl_tfile_force_paths(bool on);

struct dl_tfile {
	int fd;              /* O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC; a regular file */
	struct stat st;
	/* "/proc/self/fd/N": a path by which the kernel (uprobes) finds this very file, with no lookup to redo */
	char self_path[32];
};

/*
 * Opens path (absolute, as pid's maps show it: from dlbpf's root, which
 * dl_proc_path_in_root takes off) inside pid's root. Returns 0,
 * or -errno with why filled in (to follow "cannot read PATH: " in a message:
 * "a FIFO, not a regular file", "No such file or directory"); why may be NULL.
 */
int dl_tfile_open(pid_t pid, const char *path, struct dl_tfile *f, char *why, size_t whylen);
/*
 * The file pid maps at [start, end) (its maps' line names it path): through
 * /proc/PID/map_files, the mapped inode itself, so that a file deleted or
 * replaced since it was mapped, or mapped from a mount dlbpf cannot reach by
 * any path, is still the one read and probed; by path (dl_tfile_open) where
 * that link cannot be read (it needs CAP_SYS_ADMIN) or the mapping is gone.
 * Only a regular file of a sane size is opened either way.
 */
int dl_tfile_open_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path, struct dl_tfile *f, char *why,
			 size_t whylen);
/*
 * An O_PATH descriptor of the file pid maps at [start, end), through
 * /proc/PID/map_files: held, it names the file once pid is gone. -errno.
 */
int dl_tfile_hold_mapped(pid_t pid, uint64_t start, uint64_t end);
/* Opens the file a held descriptor names, checked as dl_tfile_open does; the descriptor stays the caller's. */
int dl_tfile_open_held(int held, struct dl_tfile *f, char *why, size_t whylen);
/* Whether a maps path carries the kernel's " (deleted)" mark. */
bool dl_tfile_path_deleted(const char *path);
/* The same inside the directory rootfd (dlbpf's own root for a process that shares it; tests). */
int dl_tfile_open_in(int rootfd, const char *path, struct dl_tfile *f, char *why, size_t whylen);
void dl_tfile_close(struct dl_tfile *f);
/*
 * True when the paths pid's maps show name its files in dlbpf's own view:
 * the same mount namespace (a chroot inside it included, as /proc writes
 * paths from the reader's root). A path it mapped may then be opened in
 * dlbpf's root once it is gone.
 */
bool dl_tfile_paths_ours(pid_t pid);
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
