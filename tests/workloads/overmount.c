// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A process that maps a CUDA runtime, then, in a mount namespace of its own,
 * puts something else at the path its maps show: what a hostile or broken
 * container can do to a tracer that opens /proc/PID/root<path>. Any user can
 * run it: without root it first enters a user namespace of its own (as
 * `unshare -Urm` does).
 *
 *   overmount MODE LIB SCRATCH [HOSTPATH]
 *     fifo      a FIFO bind-mounted over LIB (an open() for reading blocks)
 *     chardev   /dev/zero bind-mounted over LIB
 *     sparse    a copy of LIB grown to 1 TiB (sparse) bind-mounted over LIB
 *     hostlink  LIB copied into a new root (a tmpfs on SCRATCH) and loaded
 *               from there; after pivot_root the library's directory is
 *               covered and its name made an absolute symlink to HOSTPATH,
 *               a path only the host has
 *     innerlink the same, but the symlink leads to the loaded file itself,
 *               by an absolute path inside the new root (/keep, a bind mount
 *               of the library's directory made before it was covered)
 *
 * SCRATCH is an existing directory, covered by a tmpfs inside the namespace
 * (the host never sees what is made there). Prints "ready" once the path is
 * replaced. A line "call" on stdin makes it call cudaStreamSynchronize CALLS
 * times through the loaded library and print {"cudaStreamSynchronize": CALLS};
 * it exits 0 at the end of stdin.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CALLS 5

static void die(const char *what)
{
	fprintf(stderr, "overmount: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(path);
	close(fd);
}

/* Root in a mount namespace of its own; a user without root gets a user namespace too. */
static void own_mount_namespace(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];

	if (uid == 0) {
		if (unshare(CLONE_NEWNS))
			die("unshare(CLONE_NEWNS)");
	} else {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS))
			die("unshare(CLONE_NEWUSER|CLONE_NEWNS)");
		write_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		write_file("/proc/self/uid_map", map);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		write_file("/proc/self/gid_map", map);
	}
	/* Nothing done here may reach the host's mounts. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		die("mount --make-rprivate /");
}

static void copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		die(from);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0)
		die(to);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			die(to);
	if (n < 0)
		die(from);
	close(in);
	close(out);
}

static void bind_over(const char *what, const char *path)
{
	if (mount(what, path, NULL, MS_BIND, NULL))
		die("mount --bind");
}

static void *load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "overmount: dlopen %s: %s\n", lib, dlerror());
		exit(1);
	}
	return h;
}

/*
 * A root of its own on SCRATCH, the library loaded from it, then its name an
 * absolute symlink: to target (the host's), or with no target to the loaded
 * file through /keep.
 */
static void *new_root_link(const char *lib, const char *scratch, const char *target)
{
	char path[PATH_MAX];
	void *h;

	snprintf(path, sizeof(path), "%s/lib", scratch);
	if (mkdir(path, 0755))
		die(path);
	snprintf(path, sizeof(path), "%s/old", scratch);
	if (mkdir(path, 0755))
		die(path);
	snprintf(path, sizeof(path), "%s/keep", scratch);
	if (mkdir(path, 0755))
		die(path);
	snprintf(path, sizeof(path), "%s/lib/libcudart.so.13", scratch);
	copy_file(lib, path);
	h = load(path);
	if (chdir(scratch) || syscall(SYS_pivot_root, ".", "old") || chdir("/"))
		die("pivot_root");
	if (umount2("/old", MNT_DETACH))
		die("umount /old");
	if (!target && mount("/lib", "/keep", NULL, MS_BIND, NULL))
		die("mount --bind /lib /keep");
	/* The mapped file stays where it is (its path in the maps is unchanged); its name now leads elsewhere. */
	if (mount("none", "/lib", "tmpfs", 0, NULL))
		die("mount tmpfs /lib");
	if (symlink(target ? target : "/keep/libcudart.so.13", "/lib/libcudart.so.13"))
		die("symlink");
	return h;
}

static void calls(void *h)
{
	int (*sync)(void *) = (int (*)(void *))dlsym(h, "cudaStreamSynchronize");

	if (!sync) {
		fprintf(stderr, "overmount: no cudaStreamSynchronize\n");
		exit(1);
	}
	/* Without a GPU each call fails at once; the call is made all the same. */
	for (int i = 0; i < CALLS; i++)
		sync(NULL);
	printf("{\"cudaStreamSynchronize\": %d}\n", CALLS);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char real[PATH_MAX], path[PATH_MAX], line[16];
	const char *mode, *scratch;
	void *h;

	if (argc < 4 || (!strcmp(argv[1], "hostlink") && argc < 5)) {
		fprintf(stderr, "usage: overmount fifo|chardev|sparse|hostlink|innerlink LIB SCRATCH [HOSTPATH]\n");
		return 2;
	}
	mode = argv[1];
	scratch = argv[3];
	/* The maps name the file by its real path: that is the one to cover. */
	if (!realpath(argv[2], real))
		die(argv[2]);
	own_mount_namespace();
	if (mount("none", scratch, "tmpfs", 0, NULL))
		die("mount tmpfs on SCRATCH");
	if (!strcmp(mode, "hostlink")) {
		h = new_root_link(real, scratch, argv[4]);
	} else if (!strcmp(mode, "innerlink")) {
		h = new_root_link(real, scratch, NULL);
	} else {
		h = load(real);
		if (!strcmp(mode, "fifo")) {
			snprintf(path, sizeof(path), "%s/fifo", scratch);
			if (mkfifo(path, 0644))
				die("mkfifo");
			bind_over(path, real);
		} else if (!strcmp(mode, "chardev")) {
			bind_over("/dev/zero", real);
		} else if (!strcmp(mode, "sparse")) {
			snprintf(path, sizeof(path), "%s/huge.so", scratch);
			copy_file(real, path);
			if (truncate(path, 1ll << 40))
				die("truncate to 1 TiB");
			bind_over(path, real);
		} else {
			fprintf(stderr, "overmount: unknown mode %s\n", mode);
			return 2;
		}
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		if (!strncmp(line, "call", 4))
			calls(h);
	dlclose(h);
	return 0;
}
