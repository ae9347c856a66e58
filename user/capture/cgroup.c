// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE   /* memmem */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "capture/cgroup.h"
#include "capture/procfs.h"

#define CGROUP_FILE_MAX 65536   /* a process in every v1 hierarchy of a deep tree stays well under this */

struct comp {
	const char *s;
	size_t n;
};

static bool starts(struct comp c, const char *p)
{
	size_t n = strlen(p);

	return c.n >= n && !memcmp(c.s, p, n);
}

static bool ends(struct comp c, const char *p)
{
	size_t n = strlen(p);

	return c.n >= n && !memcmp(c.s + c.n - n, p, n);
}

static struct comp cut(struct comp c, size_t head, size_t tail)
{
	if (head + tail > c.n)
		return (struct comp){ c.s, 0 };
	return (struct comp){ c.s + head, c.n - head - tail };
}

static bool all_of(struct comp c, const char *set)
{
	for (size_t i = 0; i < c.n; i++)
		if (!c.s[i] || !strchr(set, c.s[i]))
			return false;
	return true;
}

/* A container id: 12 (a short docker id) to 64 hex digits, lower case as every runtime writes them. */
static bool take_id(struct dl_container *c, struct comp id, const char *runtime)
{
	if (c->id[0] || id.n < 12 || id.n > 64 || !all_of(id, "0123456789abcdef"))
		return false;
	memcpy(c->id, id.s, id.n);
	c->id[id.n] = '\0';
	if (runtime && !c->runtime[0])
		strcpy(c->runtime, runtime);
	return true;
}

/*
 * A pod uid: a UUID (systemd writes its dashes as '_'), or a static pod's
 * 32-hex-digit hash. Stored with dashes, as the API server shows it.
 */
static bool take_pod(struct dl_container *c, struct comp uid)
{
	if (c->pod_uid[0] || uid.n < 32 || uid.n > 36 || !all_of(uid, "0123456789abcdef-_"))
		return false;
	for (size_t i = 0; i < uid.n; i++)
		c->pod_uid[i] = uid.s[i] == '_' ? '-' : uid.s[i];
	c->pod_uid[uid.n] = '\0';
	return true;
}

static bool take_job(struct dl_container *c, struct comp job)
{
	if (c->slurm_job[0] || !job.n || job.n >= sizeof(c->slurm_job) || !all_of(job, "0123456789"))
		return false;
	memcpy(c->slurm_job, job.s, job.n);
	c->slurm_job[job.n] = '\0';
	return true;
}

/* A systemd scope of a runtime: <prefix><id>.scope. */
static bool scope(struct dl_container *c, struct comp k)
{
	static const struct { const char *prefix, *runtime; } scopes[] = {
		{ "cri-containerd-", "containerd" }, { "crio-", "crio" }, { "docker-", "docker" },
		{ "libpod-", "podman" },
	};

	if (!ends(k, ".scope"))
		return false;
	for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++)
		if (starts(k, scopes[i].prefix))
			return take_id(c, cut(k, strlen(scopes[i].prefix), strlen(".scope")), scopes[i].runtime);
	return false;
}

/* kubepods-pod<uid>.slice, kubepods-<qos>-pod<uid>.slice: the uid follows the last "-pod". */
static bool pod_slice(struct dl_container *c, struct comp k)
{
	if (!starts(k, "kubepods") || !ends(k, ".slice"))
		return false;
	for (size_t i = k.n; i-- > 4;)
		if (!memcmp(k.s + i - 4, "-pod", 4))
			return take_pod(c, cut(k, i, strlen(".slice")));
	return false;
}

void dl_cgroup_path_parse(const char *path, size_t len, struct dl_container *c)
{
	bool kubepods = false, slurm = false, docker = false;
	int after_pod = 0;   /* cgroupfs: components since pod<uid> */

	for (size_t i = 0; i < len;) {
		struct comp k = { path + i, 0 };

		while (i + k.n < len && path[i + k.n] != '/')
			k.n++;
		i += k.n + 1;
		if (!k.n)
			continue;
		if (after_pod && after_pod++ == 1 && take_id(c, k, NULL))
			continue;
		if (scope(c, k) || pod_slice(c, k))
			continue;
		/* cgroupfs driver: /kubepods/<qos>/pod<uid>/<id>, /docker/<id> */
		if (k.n == 8 && starts(k, "kubepods")) {
			kubepods = true;
			continue;
		}
		if (kubepods && starts(k, "pod") && take_pod(c, cut(k, 3, 0))) {
			after_pod = 1;
			continue;
		}
		if (docker) {
			take_id(c, k, "docker");
			docker = false;
			continue;
		}
		if (k.n == 6 && starts(k, "docker")) {
			docker = true;
			continue;
		}
		/* Slurm: /slurm/uid_N/job_N/step_N (v1), /system.slice/slurmstepd.scope/job_N/step_N (v2). */
		if (memmem(k.s, k.n, "slurm", 5)) {
			slurm = true;
			continue;
		}
		if (slurm && starts(k, "job_"))
			take_job(c, ends(k, ".slice") || ends(k, ".scope") ? cut(k, 4, 6) : cut(k, 4, 0));
	}
}

bool dl_cgroup_parse(const char *buf, size_t len, struct dl_container *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < len;) {
		const char *line = buf + i, *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) : len - i;
		/* hierarchy-ID:controllers:path, the path being everything after the second ':' (it may hold ':') */
		const char *c1 = memchr(line, ':', n), *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;

		i += n + 1;
		if (c2)
			dl_cgroup_path_parse(c2 + 1, n - (size_t)(c2 + 1 - line), c);
	}
	return c->id[0] || c->pod_uid[0] || c->slurm_job[0];
}

/* Where this process sees the cgroup v2 hierarchy ("" where none is mounted), read once. */
static const char *cgroup2_mount(void)
{
	static char root[PATH_MAX];
	static bool read_once;
	char line[4096];
	FILE *f;

	if (read_once)
		return root;
	read_once = true;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return root;
	/* id parent major:minor root mount-point options... - fstype source super-options */
	while (fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");
		char point[PATH_MAX];

		if (sep && !strncmp(sep + 3, "cgroup2 ", 8) &&
		    sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1) {
			snprintf(root, sizeof(root), "%s", point);
			break;
		}
	}
	fclose(f);
	return root;
}

/*
 * Whether the v2 path in buf ("0::/path") names a directory other than inode
 * ino (low 32 bits), as this process sees the hierarchy. Unknown (no v2 line,
 * no v2 mount, escapes such as "\040" in the path, gone) is "not moved".
 */
static bool cgroup2_moved(const char *buf, size_t len, uint32_t ino)
{
	const char *mount = cgroup2_mount();
	char path[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < len;) {
		const char *line = buf + i, *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) : len - i;

		i += n + 1;
		if (n < 3 || memcmp(line, "0::", 3))
			continue;
		if (!mount[0] || strlen(mount) + (n - 3) >= sizeof(path))
			return false;
		memcpy(path, mount, strlen(mount));
		memcpy(path + strlen(mount), line + 3, n - 3);
		path[strlen(mount) + n - 3] = '\0';
		return stat(path, &st) == 0 && (uint32_t)st.st_ino != ino;
	}
	return false;
}

int dl_proc_container(pid_t pid, uint32_t exec_cgroup_ino, struct dl_container *c)
{
	static char buf[CGROUP_FILE_MAX];
	size_t len = 0;
	int fd = dl_proc_open(pid, "cgroup");

	memset(c, 0, sizeof(*c));
	if (fd < 0)
		return fd;
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
		if (r == 0 || (len += (size_t)r) == sizeof(buf))
			break;
	}
	close(fd);
	if (exec_cgroup_ino && cgroup2_moved(buf, len, exec_cgroup_ino))
		return -ESTALE;
	dl_cgroup_parse(buf, len, c);
	return 0;
}
