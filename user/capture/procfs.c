// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

int dl_maps_parse_line(const char *line, struct dl_mapping *m)
{
	int n = 0;

	memset(m, 0, sizeof(*m));
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
		   &m->start, &m->end, m->perms, &m->offset, &m->dev_major, &m->dev_minor,
		   &m->inode, &n) != 7)
		return -1;
	if (m->end < m->start)
		return -1;
	line += n;
	size_t len = strcspn(line, "\n");
	if (len >= sizeof(m->path))
		return -1;
	memcpy(m->path, line, len);
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

int dl_maps_foreach(pid_t pid, int (*fn)(const struct dl_mapping *m, void *arg), void *arg)
{
	FILE *f = dl_proc_fopen(pid, "maps");
	int ret;

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
	/* state ppid, then pgrp .. nice (15 fields), then num_threads (the 20th field) */
	n = sscanf(close + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %d", &st->state, &ppid,
		   &threads);
	if (n < 2)
		return -1;
	st->pid = pid;
	st->ppid = ppid;
	st->threads = n == 3 && threads > 0 ? threads : 0;
	return 0;
}

int dl_proc_stat(pid_t pid, struct dl_proc_stat *st)
{
	char buf[1024];
	ssize_t n;
	int fd = dl_proc_open(pid, "stat");

	if (fd < 0)
		return fd;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
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
