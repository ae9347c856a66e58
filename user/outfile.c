// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "outfile.h"
#include "util.h"

enum target_kind {
	T_RENAME,     /* a temporary renamed over dest (which may not exist yet) */
	T_SPECIAL,    /* a pipe or character device, written in place */
	T_STDFD,      /* the regular file that is our stdout or stderr, written through it */
};

struct target {
	enum target_kind kind;
	char *dest;
	struct stat st;          /* dest's, unless T_RENAME of a name that does not exist */
	bool exists;
	bool followed;           /* path is a link of ours, followed to dest */
	bool replaces_link;
	int std_fd;
};

static bool is_std_file(const struct stat *st, int *fd)
{
	for (int i = STDOUT_FILENO; i <= STDERR_FILENO; i++) {
		struct stat s;

		if (fstat(i, &s) == 0 && S_ISREG(s.st_mode) && s.st_dev == st->st_dev && s.st_ino == st->st_ino) {
			*fd = i;
			return true;
		}
	}
	return false;
}

static int resolve(const char *path, struct target *t)
{
	struct stat st;

	memset(t, 0, sizeof(*t));
	t->std_fd = -1;
	if (lstat(path, &st)) {
		if (errno != ENOENT)
			return -errno;
		t->dest = dl_xstrdup(path);
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		/* Someone else's link (in /tmp, say) is not followed: rename replaces the link itself. */
		if (st.st_uid != 0 && st.st_uid != geteuid()) {
			t->dest = dl_xstrdup(path);
			t->replaces_link = true;
			return 0;
		}
		if (stat(path, &st)) {
			if (errno != ENOENT)
				return -errno;
			t->dest = dl_xstrdup(path);   /* a dangling link of ours: replaced too */
			return 0;
		}
		t->followed = true;
	}
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
		return -EINVAL;   /* a block device or a socket: never what a trace is meant for */
	t->st = st;
	t->exists = true;
	if (!S_ISREG(st.st_mode)) {
		t->kind = T_SPECIAL;
		t->dest = dl_xstrdup(path);
		return 0;
	}
	if (is_std_file(&st, &t->std_fd)) {
		t->kind = T_STDFD;
		t->dest = dl_xstrdup(path);
		return 0;
	}
	if (t->followed) {
		t->dest = realpath(path, NULL);
		if (!t->dest)
			return -errno;
		return 0;
	}
	t->dest = dl_xstrdup(path);
	return 0;
}

/* dest's directory, with a trailing slash ("" for the current one). */
static char *dir_of(const char *dest)
{
	const char *slash = strrchr(dest, '/');
	size_t n = slash ? (size_t)(slash - dest) + 1 : 0;
	char *d = dl_xrealloc(NULL, n + 1);

	memcpy(d, dest, n);
	d[n] = '\0';
	return d;
}

static uint64_t random_u64(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	return (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL) ^ (uint64_t)clock();
}

/* A uid or gid of sudo's environment variable; false when unset or not a number. */
static bool sudo_id(const char *name, unsigned long *id)
{
	const char *v = getenv(name);
	char *end;

	if (!v || !isdigit((unsigned char)*v))
		return false;
	errno = 0;
	*id = strtoul(v, &end, 10);
	return !errno && !*end && *id < UINT32_MAX;
}

bool dl_sudo_owner(uid_t *uid, gid_t *gid)
{
	unsigned long u, g;

	/* Root that sudo made: sudo sets both, and they name the user who ran it. */
	if (getuid() != 0 || geteuid() != 0 || !sudo_id("SUDO_UID", &u) || !sudo_id("SUDO_GID", &g) || u == 0)
		return false;
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return true;
}

/* A new file or directory of dlbpf's, given to the user who ran sudo (their `dlbpf report` reads it). */
void dl_give_to_sudo_user(int fd)
{
	uid_t uid;
	gid_t gid;

	if (dl_sudo_owner(&uid, &gid) && fchown(fd, uid, gid))
		dl_debug("cannot give an output to uid %u: %s", (unsigned)uid, strerror(errno));
}

/* The temporary's name: ".NAME.XXXXXX", NAME cut so that the whole fits NAME_MAX. */
#define TEMP_BASE_MAX (NAME_MAX - 9)

/*
 * Whether name is one of dl_outfile's temporaries: "." + NAME + "." + 6
 * letters or digits, where NAME is head (as create_temp cuts it) or, with a
 * tail, any name that starts with head and ends with tail.
 */
static bool is_temp_of(const char *name, const char *head, const char *tail)
{
	size_t len = strlen(name), mid, hl = strlen(head), tl = tail ? strlen(tail) : 0;

	if (len < 9 || name[0] != '.' || name[len - 7] != '.')
		return false;
	for (const char *p = name + len - 6; *p; p++)
		if (!isalnum((unsigned char)*p))
			return false;
	mid = len - 8;   /* NAME: between the leading '.' and ".XXXXXX" */
	if (!tail) {
		hl = strnlen(head, TEMP_BASE_MAX);
		return mid == hl && !strncmp(name + 1, head, hl);
	}
	return mid >= hl + tl && !strncmp(name + 1, head, hl) && !strncmp(name + 1 + mid - tl, tail, tl);
}

/*
 * Temporaries in dir (empty, or ending in '/') that a run killed before its
 * end (SIGKILL, a crash, a power cut) left. The run writing one holds a lock
 * on it (flock) until it ends, however it ends: one whose lock can be taken
 * has no writer, and is removed, and said; one still locked is another live
 * run's, and is left. Only files dlbpf would have made: regular, 0600, its
 * user's (or sudo's).
 */
static void remove_leftovers_in(const char *dir, const char *head, const char *tail)
{
	DIR *d = opendir(*dir ? dir : ".");
	struct dirent *e;
	uid_t sudo_uid = 0;
	gid_t sudo_gid;

	if (!d)
		return;
	if (!dl_sudo_owner(&sudo_uid, &sudo_gid))
		sudo_uid = geteuid();
	while ((e = readdir(d))) {
		struct stat st;
		int fd;

		if (!is_temp_of(e->d_name, head, tail))
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 &&
		    (st.st_uid == geteuid() || st.st_uid == sudo_uid) && !flock(fd, LOCK_EX | LOCK_NB) &&
		    !unlinkat(dirfd(d), e->d_name, 0))
			dl_warn("removed %s%s (%" PRIu64 " bytes): the unfinished output of a dlbpf run killed before it "
				"ended", dir, e->d_name, (uint64_t)st.st_size);
		close(fd);
	}
	closedir(d);
}

/* The temporaries of dest a killed run left (remove_leftovers_in). */
static void remove_leftovers(const char *dest)
{
	char *dir = dir_of(dest);

	remove_leftovers_in(dir, dest + strlen(dir), NULL);
	free(dir);
}

void dl_outfile_remove_leftovers(const char *dir, const char *head, const char *tail)
{
	size_t n = strlen(dir);
	char *d = dl_xrealloc(NULL, n + 2);

	snprintf(d, n + 2, "%s%s", dir, n && dir[n - 1] != '/' ? "/" : "");
	remove_leftovers_in(d, head, tail);
	free(d);
}

/* ".NAME.XXXXXX" beside dest: hidden, and on the same file system, so that rename is atomic. */
static int create_temp(const char *dest, char **tmp)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char *dir = dir_of(dest);
	const char *base = dest + strlen(dir);
	size_t cap = strlen(dest) + 16;
	char *name = dl_xrealloc(NULL, cap);
	int fd = -1, err = -EEXIST;

	for (int tries = 0; tries < 100 && fd < 0 && err == -EEXIST; tries++) {
		uint64_t r = random_u64();
		char suffix[7];

		for (int i = 0; i < 6; i++, r /= 62)
			suffix[i] = alnum[r % 62];
		suffix[6] = '\0';
		/* NAME_MAX holds the name: a long one is cut in the temporary's. */
		snprintf(name, cap, "%s.%.*s.%s", dir, TEMP_BASE_MAX, base, suffix);
		fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			err = -errno;
	}
	free(dir);
	if (fd < 0) {
		free(name);
		return err;
	}
	/* Held until this run ends, however it ends: the next run tells a leftover by it (remove_leftovers). */
	if (flock(fd, LOCK_EX | LOCK_NB))
		dl_debug("cannot lock %s: %s (a later run cannot tell it from a leftover)", name, strerror(errno));
	dl_give_to_sudo_user(fd);
	*tmp = name;
	return fd;
}

static void sync_dir(const char *dest)
{
	char *dir = dir_of(dest);
	int fd = open(*dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	/* Best effort: the rename is on disk with the directory; the file's data already is. */
	if (fd >= 0) {
		if (fsync(fd)) {
			/* nothing better to do: the file is complete and in place */
		}
		close(fd);
	}
	free(dir);
}

static int open_in_place(const char *path, const struct target *t)
{
	struct stat st;
	int fd;

	if (t->kind == T_STDFD) {
		/* The same open file, offset shared: the output follows what was printed there. */
		fd = fcntl(t->std_fd, F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? -errno : fd;
	}
	/*
	 * O_NONBLOCK: a FIFO nobody reads fails (ENXIO) instead of waiting forever.
	 * Our own link was followed on purpose; anything else must not be a link now.
	 */
	fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK | (t->followed ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return -errno;
	/* Swapped for another file since it was looked at: not written. */
	if (fstat(fd, &st) || st.st_dev != t->st.st_dev || st.st_ino != t->st.st_ino ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

int dl_outfile_open(struct dl_outfile *o, const char *path)
{
	struct target t;
	int fd, err;

	memset(o, 0, sizeof(*o));
	err = resolve(path, &t);
	if (err) {
		free(t.dest);
		return err;
	}
	if (t.kind == T_RENAME) {
		remove_leftovers(t.dest);
		fd = create_temp(t.dest, &o->tmp);
	} else {
		fd = open_in_place(path, &t);
		o->in_place = true;
	}
	if (fd < 0) {
		free(t.dest);
		return fd;
	}
	o->f = fdopen(fd, "w");
	if (!o->f) {
		err = -errno;
		close(fd);
		if (o->tmp)
			unlink(o->tmp);
		free(o->tmp);
		free(t.dest);
		memset(o, 0, sizeof(*o));
		return err;
	}
	o->dest = t.dest;
	o->replaces_link = t.replaces_link;
	return 0;
}

int dl_outfile_publish(struct dl_outfile *o)
{
	if (!o->f || !o->tmp)
		return 0;
	if (fflush(o->f) || rename(o->tmp, o->dest))
		return -errno;
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

static void release(struct dl_outfile *o)
{
	free(o->tmp);
	free(o->dest);
	memset(o, 0, sizeof(*o));
}

int dl_outfile_commit(struct dl_outfile *o)
{
	int err = 0;

	if (!o->f)
		return 0;
	if (fflush(o->f))
		err = -errno;
	/* A pipe or a terminal cannot be synced (EINVAL); a read-only mount has nothing to sync. */
	if (!err && fsync(fileno(o->f)) && errno != EINVAL && errno != EROFS)
		err = -errno;
	if (fclose(o->f) && !err)
		err = -errno;
	o->f = NULL;
	if (o->tmp && !err && rename(o->tmp, o->dest))
		err = -errno;
	if (o->tmp && err)
		unlink(o->tmp);
	if (!err && !o->in_place)
		sync_dir(o->dest);
	release(o);
	return err;
}

void dl_outfile_abort(struct dl_outfile *o)
{
	if (o->f)
		fclose(o->f);
	if (o->tmp)
		unlink(o->tmp);
	release(o);
}

static void id_of_stat(struct dl_fileref *id, const struct stat *st)
{
	id->exists = true;
	id->chardev = S_ISCHR(st->st_mode);
	id->dev = st->st_dev;
	id->ino = st->st_ino;
}

int dl_output_id(const char *path, struct dl_fileref *id)
{
	struct target t;
	int err = resolve(path, &t);

	memset(id, 0, sizeof(*id));
	if (!err && t.exists) {
		id_of_stat(id, &t.st);
	} else if (!err) {
		/* Not there yet (or a link that is replaced): its directory and name say where it will be. */
		char *dir = dir_of(t.dest);
		struct stat st;

		if (stat(*dir ? dir : ".", &st) == 0) {
			id->dev = st.st_dev;
			id->ino = st.st_ino;
			snprintf(id->name, sizeof(id->name), "%s", t.dest + strlen(dir));
		} else {
			err = -errno;
		}
		free(dir);
	}
	free(t.dest);
	return err;
}

int dl_input_id(const char *path, struct dl_fileref *id)
{
	struct stat st;

	memset(id, 0, sizeof(*id));
	if (stat(path, &st))
		return -errno;
	id_of_stat(id, &st);
	return 0;
}

bool dl_fileref_clash(const struct dl_fileref *a, const struct dl_fileref *b)
{
	if (a->exists != b->exists || a->dev != b->dev || a->ino != b->ino)
		return false;
	return a->exists ? !(a->chardev && b->chardev) : !strcmp(a->name, b->name);
}
