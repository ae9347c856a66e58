// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "capture/procfs.h"
#include "capture/tfile.h"
#include "log.h"
#include "util.h"

#define MAX_LINKS 40            /* symlinks followed in one resolution: the kernel's MAXSYMLINKS */
#define MAX_REST (16 * PATH_MAX) /* the path left to walk, symlink targets spliced in */

static bool no_openat2;         /* the kernel said ENOSYS: walk from then on */

static bool forced_walk;        /* the test hook DLBPF_TEST_NO_OPENAT2 */
static bool forced_paths;       /* the test hook DLBPF_TEST_NO_MAP_FILES */

void dl_tfile_force_walk(bool on)
{
	forced_walk = on;
}

void dl_tfile_force_paths(bool on)
{
	forced_paths = on;
}

struct walk {
	DL_VEC(int) dirs;   /* O_PATH directories from the root (dirs.v[0]) to where the walk is */
	char *rest;         /* the path still to walk */
	int links;
};

/* A descriptor of the directory the walk is in (the last component was "." or ".."), or -errno. */
static int here(const struct walk *w)
{
	int fd = dup(w->dirs.v[w->dirs.n - 1]);

	return fd < 0 ? -errno : fd;
}

static void walk_up_to(struct walk *w, size_t depth)
{
	while (w->dirs.n > depth)
		close(w->dirs.v[--w->dirs.n]);
}

/* The rest of the path becomes target + "/" + after. */
static int splice_link(struct walk *w, const char *target, const char *after)
{
	size_t tl = strlen(target), al = strlen(after);
	char *s;

	if (tl + 1 + al + 1 > MAX_REST)
		return -ENAMETOOLONG;
	s = dl_xrealloc(NULL, tl + 1 + al + 1);
	memcpy(s, target, tl);
	s[tl] = '/';
	memcpy(s + tl + 1, after, al + 1);
	free(w->rest);
	w->rest = s;
	return 0;
}

/*
 * Steps on one component (NUL-terminated at name) from the directory on top
 * of w. Returns true when the walk goes on (after a symlink w->rest holds
 * what is left and *pos points into it), false when it ended with *out: an
 * O_PATH descriptor of the last component, or -errno.
 */
static bool step(struct walk *w, const char *name, const char *after, bool last, const char **pos, int *out)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		/* ".." is the parent we came through; at the root, the root (as RESOLVE_IN_ROOT does). */
		if (name[1])
			walk_up_to(w, w->dirs.n > 1 ? w->dirs.n - 1 : 1);
		if (last)
			*out = here(w);
		return !last;
	}
	fd = openat(w->dirs.v[w->dirs.n - 1], name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		*out = -errno;
		if (fd >= 0)
			close(fd);
		return false;
	}
	if (S_ISLNK(st.st_mode)) {
		/* Read, not followed: the kernel would follow an absolute one from dlbpf's root, a magic one anywhere. */
		n = readlinkat(fd, "", target, sizeof(target));
		*out = n < 0 ? -errno : 0;
		close(fd);
		if (!*out && (size_t)n >= sizeof(target))
			*out = -ENAMETOOLONG;
		if (!*out && ++w->links > MAX_LINKS)
			*out = -ELOOP;
		if (*out)
			return false;
		target[n] = '\0';
		if (target[0] == '/')
			walk_up_to(w, 1);
		*out = splice_link(w, target, after);
		*pos = w->rest;
		return !*out;
	}
	if (last) {
		*out = fd;
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		close(fd);
		*out = -ENOTDIR;
		return false;
	}
	*dl_vec_push(&w->dirs) = fd;
	return true;
}

static int walk_in_root(int rootfd, const char *path)
{
	struct walk w = { .rest = dl_xstrdup(path) };
	const char *pos = w.rest;
	int r = dup(rootfd);

	if (r < 0) {
		r = -errno;
		goto out;
	}
	*dl_vec_push(&w.dirs) = r;
	if (!*path) {
		r = -ENOENT;
		goto out;
	}
	for (;;) {
		char name[NAME_MAX + 1];
		const char *after;
		size_t len;
		bool last;

		pos += strspn(pos, "/");
		if (!*pos) {
			/* Ended on a directory ("/", "a/"): the one the walk is in. */
			r = here(&w);
			break;
		}
		len = strcspn(pos, "/");
		if (len > NAME_MAX) {
			r = -ENAMETOOLONG;
			break;
		}
		memcpy(name, pos, len);
		name[len] = '\0';
		after = pos + len;
		last = !after[strspn(after, "/")];
		pos = after;
		if (!step(&w, name, after, last, &pos, &r))
			break;
	}
out:
	walk_up_to(&w, 0);
	dl_vec_free(&w.dirs);
	free(w.rest);
	return r;
}

int dl_resolve_in_root(int rootfd, const char *path, bool walk)
{
	if (!walk && !no_openat2) {
		/* Magic links (/proc/N/root inside the container) would jump out of the root: refused. */
		struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };

		/* EAGAIN: a rename or mount raced a ".." and the kernel could not vouch for the result. */
		for (int tries = 0; tries < 4; tries++) {
			long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));

			if (fd >= 0)
				return (int)fd;
			if (errno != EAGAIN)
				break;
		}
		if (errno != ENOSYS)
			return -errno;
		no_openat2 = true;
		dl_debug("no openat2 on this kernel: paths inside a process's root are resolved a component at a time");
	}
	return walk_in_root(rootfd, path);
}

static const char *kind_of(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISDIR(m))
		return "a directory";
	return "something";
}

__attribute__((format(printf, 3, 4)))
static void say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* What the O_PATH descriptor pfd names, opened for reading when it is a regular file of a sane size; closes pfd. */
static int open_checked(int pfd, struct dl_tfile *f, char *why, size_t whylen)
{
	char self[32];
	int err;

	if (fstat(pfd, &f->st)) {
		err = -errno;
		say(why, whylen, "%s", strerror(-err));
		close(pfd);
		return err;
	}
	if (!S_ISREG(f->st.st_mode)) {
		say(why, whylen, "%s, not a regular file", kind_of(f->st.st_mode));
		close(pfd);
		return -EINVAL;
	}
	if ((unsigned long long)f->st.st_size > DL_TFILE_MAX_BYTES) {
		say(why, whylen, "%.1f GiB, more than the %llu GiB dlbpf reads of one file",
		    (double)f->st.st_size / (double)(1ull << 30), DL_TFILE_MAX_BYTES >> 30);
		close(pfd);
		return -EFBIG;
	}
	/* Through our own /proc: the inode just looked at, opened with no second lookup. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	f->fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	err = f->fd < 0 ? -errno : 0;
	close(pfd);
	if (err) {
		say(why, whylen, "%s", strerror(-err));
		return err;
	}
	snprintf(f->self_path, sizeof(f->self_path), "/proc/self/fd/%d", f->fd);
	return 0;
}

static void tfile_init(struct dl_tfile *f)
{
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

int dl_tfile_open_in(int rootfd, const char *path, struct dl_tfile *f, char *why, size_t whylen)
{
	int pfd;

	tfile_init(f);
	pfd = dl_resolve_in_root(rootfd, path, forced_walk);
	if (pfd < 0) {
		say(why, whylen, "%s", strerror(-pfd));
		return pfd;
	}
	return open_checked(pfd, f, why, whylen);
}

int dl_tfile_open(pid_t pid, const char *path, struct dl_tfile *f, char *why, size_t whylen)
{
	char root[64];
	int rootfd, err;

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		err = -errno;
		tfile_init(f);
		say(why, whylen, "%s", strerror(-err));
		return err;
	}
	/* The maps show the path from dlbpf's root: a chroot's prefix is in it once already. */
	err = dl_tfile_open_in(rootfd, dl_proc_path_in_root(pid, path), f, why, whylen);
	close(rootfd);
	return err;
}

int dl_tfile_hold_mapped(pid_t pid, uint64_t start, uint64_t end)
{
	char link[96];
	int pfd;

	if (forced_paths)
		return -EPERM;
	snprintf(link, sizeof(link), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start, end);
	pfd = open(link, O_PATH | O_CLOEXEC);
	return pfd < 0 ? -errno : pfd;
}

int dl_tfile_open_held(int held, struct dl_tfile *f, char *why, size_t whylen)
{
	int pfd = fcntl(held, F_DUPFD_CLOEXEC, 3);

	tfile_init(f);
	if (pfd < 0) {
		say(why, whylen, "%s", strerror(errno));
		return -errno;
	}
	return open_checked(pfd, f, why, whylen);
}

bool dl_tfile_path_deleted(const char *path)
{
	static const char mark[] = " (deleted)";
	size_t n = strlen(path);

	return n >= sizeof(mark) - 1 && !strcmp(path + n - (sizeof(mark) - 1), mark);
}

int dl_tfile_open_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path, struct dl_tfile *f, char *why,
			 size_t whylen)
{
	int pfd;

	/* The mapped file itself: no path to resolve, whatever now lies at its name (or none). */
	pfd = dl_tfile_hold_mapped(pid, start, end);
	if (pfd >= 0) {
		tfile_init(f);
		return open_checked(pfd, f, why, whylen);
	}
	/* EPERM without CAP_SYS_ADMIN (CAP_BPF and CAP_PERFMON only); ENOENT once the mapping is gone. */
	if (!forced_paths)
		dl_debug("pid %d: cannot open its map_files link of %s: %s; looked up by its path", (int)pid, path,
			 strerror(-pfd));
	if (dl_tfile_path_deleted(path)) {
		tfile_init(f);
		say(why, whylen, "deleted since it was mapped, and its /proc/%d/map_files link cannot be read "
		    "(root can)", (int)pid);
		return -ENOENT;
	}
	return dl_tfile_open(pid, path, f, why, whylen);
}

void dl_tfile_close(struct dl_tfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	f->self_path[0] = '\0';
}

bool dl_tfile_transient(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM || err == -EAGAIN || err == -EINTR;
}

bool dl_tfile_paths_ours(pid_t pid)
{
	char path[64];
	struct stat a, b;

	/* One mount namespace: /proc names pid's files from dlbpf's root, whatever pid's own root (a chroot). */
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	if (stat(path, &a) || stat("/proc/self/ns/mnt", &b))
		return false;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}
