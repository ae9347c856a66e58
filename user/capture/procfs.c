// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "capture/procfs.h"
#include "util.h"

int dl_proc_open(pid_t pid, const char *name)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

ssize_t dl_read_small_fd(int fd, char *buf, size_t size)
{
	ssize_t n = read(fd, buf, size - 1);

	if (n < 0)
		n = -errno;
	else
		buf[n] = '\0';
	close(fd);
	return n;
}

ssize_t dl_proc_read(pid_t pid, const char *name, char *buf, size_t size)
{
	int fd = dl_proc_open(pid, name);

	return fd < 0 ? fd : dl_read_small_fd(fd, buf, size);
}

FILE *dl_proc_fopen(pid_t pid, const char *name)
{
	int fd = dl_proc_open(pid, name);
	FILE *f;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

/* At most max hex digits at *p, at least one; advances *p. 0, or -1. */
static int hex_field(const char **p, uint64_t *v, int max)
{
	int n = 0;

	*v = 0;
	for (;; n++, (*p)++) {
		char c = **p;
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;

		if (d == 16)
			break;
		if (n == max)
			return -1;
		*v = *v << 4 | d;
	}
	return n ? 0 : -1;
}

static int dec_field(const char **p, uint64_t *v)
{
	int n = 0;

	for (*v = 0; **p >= '0' && **p <= '9'; n++, (*p)++) {
		if (*v > (UINT64_MAX - 9) / 10)
			return -1;
		*v = *v * 10 + (uint64_t)(**p - '0');
	}
	return n ? 0 : -1;
}

/* What sscanf's blanks skip (isspace in the C locale), so lines parse as they did with it. */
static void skip_blanks(const char **p)
{
	while (**p && strchr(" \t\n\v\f\r", **p))
		(*p)++;
}

/*
 * By hand, not sscanf: a rescan parses every line of every traced process's
 * maps, and sscanf was ~85% of the collector's CPU for an idle process of
 * 3000 mappings (callgrind).
 */
int dl_maps_parse_line(const char *line, struct dl_mapping *m)
{
	const char *p = line;
	uint64_t major, minor;
	size_t len;

	memset(m, 0, sizeof(*m));   /* whole: callers may compare mappings bytewise */
	skip_blanks(&p);
	if (hex_field(&p, &m->start, 16) || *p++ != '-')
		return -1;
	skip_blanks(&p);
	if (hex_field(&p, &m->end, 16))
		return -1;
	skip_blanks(&p);
	len = strcspn(p, " \t\n\v\f\r");
	if (len == 0 || len >= sizeof(m->perms))
		return -1;
	memcpy(m->perms, p, len);
	m->perms[len] = '\0';
	p += len;
	skip_blanks(&p);
	if (hex_field(&p, &m->offset, 16))
		return -1;
	skip_blanks(&p);
	if (hex_field(&p, &major, 8) || *p++ != ':')
		return -1;
	skip_blanks(&p);
	if (hex_field(&p, &minor, 8))
		return -1;
	skip_blanks(&p);
	if (dec_field(&p, &m->inode) || m->end < m->start)
		return -1;
	m->dev_major = (unsigned)major;
	m->dev_minor = (unsigned)minor;
	skip_blanks(&p);
	len = strcspn(p, "\n");
	if (len >= sizeof(m->path))
		return -1;
	memcpy(m->path, p, len);
	m->path[len] = '\0';
	return 0;
}

int dl_maps_foreach_file(FILE *f, int (*fn)(const struct dl_mapping *m, void *arg), void *arg)
{
	struct dl_mapping m;
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;

	while (getline(&line, &cap, f) > 0) {
		if (dl_maps_parse_line(line, &m) || m.path[0] != '/' || m.inode == 0)
			continue;
		ret = fn(&m, arg);
		if (ret)
			break;
	}
	free(line);
	return ret;
}

/* A file mapping as a snapshot keeps it: the path on the heap, not in 4 KiB. */
struct snap_mapping {
	uint64_t start, end, offset, inode;
	unsigned dev_major, dev_minor;
	char perms[5];
	char *path;
};

struct dl_maps {
	pid_t pid;
	DL_VEC(struct snap_mapping) v;
};

static int keep_mapping(const struct dl_mapping *m, void *arg)
{
	struct dl_maps *snap = arg;
	struct snap_mapping *h = dl_vec_push(&snap->v);

	*h = (struct snap_mapping){ .start = m->start, .end = m->end, .offset = m->offset, .inode = m->inode,
				    .dev_major = m->dev_major, .dev_minor = m->dev_minor,
				    .path = dl_xstrdup(m->path) };
	memcpy(h->perms, m->perms, sizeof(h->perms));
	return 0;
}

void dl_maps_free(struct dl_maps *snap)
{
	if (!snap)
		return;
	for (size_t i = 0; i < snap->v.n; i++)
		free(snap->v.v[i].path);
	dl_vec_free(&snap->v);
	free(snap);
}

struct dl_maps *dl_maps_read(pid_t pid)
{
	struct dl_maps *snap;
	FILE *f;
	int err;

	f = dl_proc_fopen(pid, "maps");
	if (!f)
		return NULL;
	snap = dl_xcalloc(1, sizeof(*snap));
	snap->pid = pid;
	err = dl_maps_foreach_file(f, keep_mapping, snap);
	fclose(f);
	if (err) {
		dl_maps_free(snap);
		errno = -err;
		return NULL;
	}
	return snap;
}

static int foreach_snap(const struct dl_maps *snap, int (*fn)(const struct dl_mapping *m, void *arg), void *arg)
{
	struct dl_mapping m;
	int ret = 0;

	for (size_t i = 0; i < snap->v.n && !ret; i++) {
		const struct snap_mapping *h = &snap->v.v[i];

		m.start = h->start;
		m.end = h->end;
		m.offset = h->offset;
		m.inode = h->inode;
		m.dev_major = h->dev_major;
		m.dev_minor = h->dev_minor;
		memcpy(m.perms, h->perms, sizeof(m.perms));
		memcpy(m.path, h->path, strlen(h->path) + 1);   /* it came from a dl_mapping: it fits */
		ret = fn(&m, arg);
	}
	return ret;
}

int dl_maps_foreach_in(const struct dl_maps *snap, pid_t pid, int (*fn)(const struct dl_mapping *m, void *arg),
		       void *arg)
{
	return snap && snap->pid == pid ? foreach_snap(snap, fn, arg) : dl_maps_foreach(pid, fn, arg);
}

int dl_maps_foreach(pid_t pid, int (*fn)(const struct dl_mapping *m, void *arg), void *arg)
{
	FILE *f;
	int ret;

	f = dl_proc_fopen(pid, "maps");
	if (!f)
		return -errno;
	ret = dl_maps_foreach_file(f, fn, arg);
	fclose(f);
	return ret;
}

int dl_stat_parse(const char *buf, struct dl_proc_stat *st)
{
	const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
	size_t len;
	int pid, ppid, threads = 0, n;

	memset(st, 0, sizeof(*st));
	if (!open || !close || close < open || sscanf(buf, "%d", &pid) != 1)
		return -1;
	len = (size_t)(close - open - 1);
	if (len >= sizeof(st->comm))
		len = sizeof(st->comm) - 1;
	memcpy(st->comm, open + 1, len);
	/* state ppid, then pgrp .. nice (15 fields, flags the 5th of them), then num_threads (the 20th field) */
	n = sscanf(close + 1, " %c %d %*d %*d %*d %*d %u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %d", &st->state, &ppid,
		   &st->flags, &threads);
	if (n < 2)
		return -1;
	st->pid = pid;
	st->ppid = ppid;
	st->threads = n == 4 && threads > 0 ? threads : 0;
	return 0;
}

int dl_proc_stat(pid_t pid, struct dl_proc_stat *st)
{
	char buf[1024];
	ssize_t n = dl_proc_read(pid, "stat", buf, sizeof(buf));

	if (n <= 0)
		return n < 0 ? (int)n : -EIO;
	return dl_stat_parse(buf, st) ? -EINVAL : 0;
}

bool dl_proc_alive(pid_t pid)
{
	struct dl_proc_stat st;

	/* A zombie has exited: it only waits for its parent to reap it. */
	return dl_proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

struct proc_node {
	pid_t pid, ppid;
};

/* Every process of the system, and where each pid is among them. */
struct proc_tree {
	DL_VEC(struct proc_node) nodes;
	struct dl_u64map index;   /* pid -> position in nodes */
};

static bool is_descendant(const struct proc_tree *t, pid_t pid, pid_t root)
{
	/* Bounded walk up the parent links: pid namespaces never loop, but be safe. */
	for (int hops = 0; hops < 4096 && pid > 1; hops++) {
		uint64_t i;

		if (!dl_u64map_get(&t->index, (uint64_t)pid, &i))
			return false;
		if (t->nodes.v[i].ppid == root)
			return true;
		pid = t->nodes.v[i].ppid;
	}
	return false;
}

static void collect_node(pid_t pid, pid_t ppid, void *arg)
{
	struct proc_tree *t = arg;

	/* A pid read twice (reused while /proc was listed): the first one stays, as a scan would find it. */
	if (!dl_u64map_get(&t->index, (uint64_t)pid, NULL))
		dl_u64map_put(&t->index, (uint64_t)pid, t->nodes.n);
	*dl_vec_push(&t->nodes) = (struct proc_node){ .pid = pid, .ppid = ppid };
}

int dl_proc_descendants(pid_t root, void (*fn)(pid_t pid, pid_t ppid, void *arg), void *arg)
{
	struct proc_tree t = { 0 };
	int err = dl_proc_foreach(collect_node, &t);

	for (size_t i = 0; !err && i < t.nodes.n; i++)
		if (t.nodes.v[i].pid != root && is_descendant(&t, t.nodes.v[i].pid, root))
			fn(t.nodes.v[i].pid, t.nodes.v[i].ppid, arg);
	dl_vec_free(&t.nodes);
	dl_u64map_free(&t.index);
	return err;
}

const char *dl_basename(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

int dl_proc_readlink(pid_t pid, const char *name, char *buf, size_t cap)
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

const char *dl_proc_path_in_root(pid_t pid, const char *path)
{
	char root[4096];
	size_t n;

	if (dl_proc_readlink(pid, "root", root, sizeof(root)) || strcmp(root, "/") == 0)
		return path;
	n = strlen(root);
	if (strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0'))
		return path[n] ? path + n : "/";
	return path;
}

bool dl_is_cudart_name(const char *path)
{
	const char *b = dl_basename(path);

	if (strncmp(b, "libcudart", 9) != 0)
		return false;
	b += 9;
	/* libcudart-<hash>.so.N from some wheels */
	if (*b == '-')
		b += strcspn(b, ".");
	return strncmp(b, ".so", 3) == 0 && (b[3] == '\0' || b[3] == '.');
}

int dl_proc_getenv(pid_t pid, const char *name, char *out, size_t len)
{
	size_t nlen = strlen(name), n = 0, cap = 0;
	char *buf = NULL;
	int found = -1;
	FILE *f = dl_proc_fopen(pid, "environ");

	if (!f || !len)
		goto out;
	/* NUL-separated NAME=value strings, of any length: read it whole. */
	for (;;) {
		size_t got;

		if (n == cap) {
			char *nb = realloc(buf, cap ? cap * 2 : 4096);

			if (!nb)
				goto out;
			buf = nb;
			cap = cap ? cap * 2 : 4096;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (!got)
			break;
	}
	for (size_t i = 0; i < n; i += strnlen(buf + i, n - i) + 1) {
		size_t l = strnlen(buf + i, n - i);

		if (l > nlen && !memcmp(buf + i, name, nlen) && buf[i + nlen] == '=') {
			size_t v = l - nlen - 1 < len - 1 ? l - nlen - 1 : len - 1;

			memcpy(out, buf + i + nlen + 1, v);
			out[v] = '\0';
			found = 0;
			break;
		}
	}
out:
	free(buf);
	if (f)
		fclose(f);
	return found;
}

int dl_proc_nspid(pid_t pid)
{
	char line[256];
	int nspid = -1;
	FILE *f = dl_proc_fopen(pid, "status");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		/* One pid per nested namespace, outermost first: the last is the innermost. */
		for (;;) {
			long v = strtol(p, &end, 10);

			if (end == p)
				break;
			nspid = (int)v;
			p = end;
		}
		break;
	}
	fclose(f);
	return nspid;
}

int dl_proc_foreach(void (*fn)(pid_t pid, pid_t ppid, void *arg), void *arg)
{
	struct dirent *de;
	DIR *d = opendir("/proc");

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct dl_proc_stat st;
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || dl_proc_stat((pid_t)pid, &st))
			continue;
		fn(st.pid, st.ppid, arg);
	}
	closedir(d);
	return 0;
}

bool dl_proc_running(pid_t pid)
{
	struct dl_proc_stat st;

	return dl_proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}
