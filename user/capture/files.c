// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/libbpf.h>
#include "capture/files.h"
#include "capture/sysevents.h"
#include "dlbpf.skel.h"
#include "log.h"
#include "records/clock.h"

struct files_prog {
	struct bpf_program *prog;
	struct bpf_link **link;
	const char *event;
};

#define FILES_PROG(name, ev) { skel->progs.name, &skel->links.name, ev }

/* Every program of bpf/files.bpf.c and its event; returns how many. */
static size_t files_progs(struct dlbpf *skel, struct files_prog out[static DL_SYSEVENTS_MAX])
{
	const struct files_prog progs[] = {
		FILES_PROG(file_read_enter, "sys_enter_read"),
		FILES_PROG(file_read_exit, "sys_exit_read"),
		FILES_PROG(file_pread_enter, "sys_enter_pread64"),
		FILES_PROG(file_pread_exit, "sys_exit_pread64"),
		FILES_PROG(file_readv_enter, "sys_enter_readv"),
		FILES_PROG(file_readv_exit, "sys_exit_readv"),
		FILES_PROG(file_preadv_enter, "sys_enter_preadv"),
		FILES_PROG(file_preadv_exit, "sys_exit_preadv"),
		FILES_PROG(file_open_enter, "sys_enter_openat"),
		FILES_PROG(file_open_exit, "sys_exit_openat"),
		FILES_PROG(file_close, "sys_enter_close"),
	};
	const size_t n = sizeof(progs) / sizeof(progs[0]);

	_Static_assert(sizeof(progs) / sizeof(progs[0]) <= DL_SYSEVENTS_MAX, "raise DL_SYSEVENTS_MAX");
	memcpy(out, progs, sizeof(progs));
	return n;
}

bool dl_files_choose(struct dlbpf *skel, bool wanted)
{
	struct files_prog progs[DL_SYSEVENTS_MAX];
	const size_t n = files_progs(skel, progs);
	const char *missing = NULL;

	/* All or none: an entry without its exit would leave a call open, a read without its open no file. */
	for (size_t i = 0; i < n && !missing && wanted; i++)
		if (dl_sysevent_id(progs[i].event) < 0)
			missing = progs[i].event;
	for (size_t i = 0; i < n; i++) {
		bpf_program__set_autoload(progs[i].prog, wanted && !missing);
		/* dl_files_attach: through perf events of dlbpf's own (capture/sysevents.h). */
		bpf_program__set_autoattach(progs[i].prog, false);
	}
	if (!wanted)
		return false;
	if (missing)
		dl_warn("reads are not attributed to files: tracefs has no syscalls/%s event "
			"(CONFIG_FTRACE_SYSCALLS, or tracefs not mounted)", missing);
	return !missing;
}

int dl_files_attach(struct dlbpf *skel, struct dl_sysevents *events)
{
	struct files_prog progs[DL_SYSEVENTS_MAX];
	const size_t n = files_progs(skel, progs);

	for (size_t i = 0; i < n; i++) {
		*progs[i].link = dl_sysevent_attach(events, progs[i].prog, progs[i].event);
		if (!*progs[i].link) {
			int err = -errno;

			dl_err("cannot attach %s to syscalls/%s: %s", bpf_program__name(progs[i].prog),
			       progs[i].event, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* readlink of /proc/PID/<name>, NUL-terminated; -1 if it cannot be read or does not fit. */
static int proc_link(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[96];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	n = readlink(path, buf, cap - 1);
	if (n < 0 || (size_t)n >= cap - 1)
		return -1;
	buf[n] = '\0';
	return 0;
}

/*
 * /proc links name paths from dlbpf's root. A process with another root
 * (chroot, a container's mount namespace under it) sees them without that
 * prefix. A root outside dlbpf's own view is not handled: the link stays.
 */
static const char *as_seen_by(pid_t pid, const char *path)
{
	char root[DL_PATH_LEN];
	size_t n;

	if (proc_link(pid, "root", root, sizeof(root)) || strcmp(root, "/") == 0)
		return path;
	n = strlen(root);
	if (strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0'))
		return path[n] ? path + n : "/";
	return path;
}

static void fill_open(struct dl_file_open_ev *e, pid_t pid, int fd, const char *path, uint32_t flags)
{
	size_t n = strlen(path);

	memset(e, 0, sizeof(*e));
	e->h.size = sizeof(*e);
	e->h.kind = DL_EV_FILE_OPEN;
	e->h.ts = dl_now_ns();
	e->h.tgid = e->h.tid = (uint32_t)pid;
	e->fd = fd;
	e->dirfd = AT_FDCWD;
	e->flags = flags;
	if (n >= sizeof(e->path)) {
		n = sizeof(e->path) - 1;
		e->flags |= DL_FILE_TRUNCATED;
	}
	memcpy(e->path, path, n);
}

void dl_cwds_free(struct dl_cwds *c)
{
	for (size_t i = 0; i < c->dirs.n; i++)
		free(c->dirs.v[i].path);
	dl_vec_free(&c->dirs);
	dl_u64map_free(&c->of);
}

/* stat's st_dev (glibc's encoding) as the kernel's dev_t in records. */
static uint32_t kernel_dev(dev_t d)
{
	return major(d) << 20 | minor(d);
}

/* pid's cwd now, as it sees it, with its inode; -1 if it cannot be read (gone). */
static int cwd_now(pid_t pid, struct dl_cwd *out, char *buf, size_t cap)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/cwd", (int)pid);
	if (proc_link(pid, "cwd", buf, cap) || buf[0] != '/' || stat(path, &st))
		return -1;
	out->path = (char *)as_seen_by(pid, buf);
	out->ino = st.st_ino;
	out->dev = kernel_dev(st.st_dev);
	return 0;
}

/* d may be another pid's entry (a fork's parent): copied first, as the push may move the table under it. */
static void cwd_set(struct dl_cwds *c, pid_t pid, const struct dl_cwd *d)
{
	struct dl_cwd v = *d, *slot;
	uint64_t i;

	v.path = dl_xstrdup(d->path);
	if (dl_u64map_get(&c->of, (uint32_t)pid, &i)) {
		slot = &c->dirs.v[i];
		free(slot->path);
	} else {
		slot = dl_vec_push(&c->dirs);
		dl_u64map_put(&c->of, (uint32_t)pid, c->dirs.n - 1);
	}
	*slot = v;
}

static const struct dl_cwd *cwd_get(const struct dl_cwds *c, pid_t pid)
{
	uint64_t i;

	return dl_u64map_get(&c->of, (uint32_t)pid, &i) ? &c->dirs.v[i] : NULL;
}

void dl_cwds_fork(struct dl_cwds *c, pid_t child, pid_t parent)
{
	char buf[4096];
	struct dl_cwd now;
	const struct dl_cwd *d = cwd_get(c, parent);

	/* The parent's now, if it can be read: the child has not run yet, or has just begun. */
	if (cwd_now(parent, &now, buf, sizeof(buf)) == 0)
		d = &now;
	if (d)
		cwd_set(c, child, d);
}

int dl_files_snapshot(struct dl_stream *s, struct dl_cwds *c, pid_t pid)
{
	char dir[64], name[32], target[4096];
	struct dl_file_open_ev e;
	struct dirent *d;
	int count = 0;
	DIR *dp;

	struct dl_cwd now;

	if (cwd_now(pid, &now, target, sizeof(target)) == 0)
		cwd_set(c, pid, &now);
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	dp = opendir(dir);
	if (!dp) {
		dl_debug("pid %d: cannot list its fds: %s", (int)pid, strerror(errno));
		return 0;
	}
	while ((d = readdir(dp))) {
		char *end;
		long fd = strtol(d->d_name, &end, 10);

		if (*end || end == d->d_name || fd < 0)
			continue;
		snprintf(name, sizeof(name), "fd/%ld", fd);
		/* Pipes, sockets and anonymous inodes ("pipe:[…]") are not files a loader reads data from. */
		if (proc_link(pid, name, target, sizeof(target)) || target[0] != '/')
			continue;
		fill_open(&e, pid, (int)fd, as_seen_by(pid, target), DL_FILE_PREEXISTING);
		dl_stream_emit(s, &e, sizeof(e));
		count++;
	}
	closedir(dp);
	return count;
}

/* The directory a relative path of e is relative to, as the process sees it; NULL if not known for sure. */
static const char *base_of(struct dl_cwds *c, const struct dl_file_open_ev *e, char *buf, size_t cap)
{
	pid_t pid = (pid_t)e->h.tgid;
	const struct dl_cwd *known;
	struct dl_cwd now;
	char name[32];

	if (e->dirfd != AT_FDCWD) {
		/* The dirfd's directory now: not checked against the one it named at the open. */
		snprintf(name, sizeof(name), "fd/%d", e->dirfd);
		return proc_link(pid, name, buf, cap) == 0 && buf[0] == '/' ? as_seen_by(pid, buf) : NULL;
	}
	if (cwd_now(pid, &now, buf, cap) == 0) {
		cwd_set(c, pid, &now);
		known = cwd_get(c, pid);
	} else {
		/* Gone: the cwd it was last seen with (or its parent's at the fork). */
		known = cwd_get(c, pid);
	}
	/* A chdir between the open and now (or an old recording's record without the inode): not joined. */
	if (!known || !e->cwd_ino || known->ino != e->cwd_ino || known->dev != e->cwd_dev)
		return NULL;
	return known->path;
}

bool dl_files_resolve(struct dl_cwds *c, const struct dl_file_open_ev *e, struct dl_file_open_ev *out)
{
	char buf[4096], joined[4096 + DL_PATH_LEN + 1];
	const char *dir;

	if (e->path[0] == '/' || e->path[0] == '\0' || (e->flags & DL_FILE_PATH_FAULT))
		return false;
	dir = base_of(c, e, buf, sizeof(buf));
	if (!dir)
		return false;
	snprintf(joined, sizeof(joined), "%s/%s", strcmp(dir, "/") ? dir : "", e->path);
	fill_open(out, (pid_t)e->h.tgid, e->fd, joined, (e->flags & ~DL_FILE_TRUNCATED) | DL_FILE_RESOLVED);
	out->h = e->h;
	out->dirfd = e->dirfd;
	out->open_flags = e->open_flags;
	out->cwd_ino = e->cwd_ino;
	out->cwd_dev = e->cwd_dev;
	if (e->flags & DL_FILE_TRUNCATED)
		out->flags |= DL_FILE_TRUNCATED;
	return true;
}
