// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* /proc parsing: maps lines, stat lines, library names, the process tree. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "capture/cgroup.h"
#include "capture/pcie.h"
#include "capture/procfs.h"
#include "records/stream.h"

static void test_maps_lines(void)
{
	struct dl_mapping m;

	CHECK(dl_maps_parse_line("7f1c2a000000-7f1c2a0a4000 r-xp 00022000 fe:01 1319527                    "
				 "/usr/local/cuda/lib64/libcudart.so.13.0.96\n", &m) == 0, "parse");
	CHECK_EQ_U64(m.start, 0x7f1c2a000000ull);
	CHECK_EQ_U64(m.end, 0x7f1c2a0a4000ull);
	CHECK_EQ_U64(m.offset, 0x22000);
	CHECK(m.dev_major == 0xfe && m.dev_minor == 1, "dev %x:%x", m.dev_major, m.dev_minor);
	CHECK_EQ_U64(m.inode, 1319527);
	CHECK(!strcmp(m.perms, "r-xp"), "perms %s", m.perms);
	CHECK(!strcmp(m.path, "/usr/local/cuda/lib64/libcudart.so.13.0.96"), "path '%s'", m.path);

	CHECK(dl_maps_parse_line("55d0c0000000-55d0c0001000 rw-p 00000000 00:00 0 \n", &m) == 0, "anon");
	CHECK(m.path[0] == '\0' && m.inode == 0, "anonymous mapping has a path '%s'", m.path);
	CHECK(dl_maps_parse_line("7f00-7f10 r--p 00000000 08:02 42 /opt/my lib/libcudart.so.12 (deleted)\n", &m) == 0,
	      "spaces");
	CHECK(!strcmp(m.path, "/opt/my lib/libcudart.so.12 (deleted)"), "path with spaces '%s'", m.path);
	CHECK(dl_maps_parse_line("garbage\n", &m) == -1, "garbage accepted");
	CHECK(dl_maps_parse_line("7f10-7f00 r--p 0 08:02 42 /x\n", &m) == -1, "end before start accepted");
}

/*
 * The hand parser against an independent reader (sscanf, as the kernel's
 * show_map_vma prints the line) on every line of this process's real maps,
 * and on lines it must refuse.
 */
static void test_maps_real_lines(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096 + 256];
	struct dl_mapping m;
	int lines = 0;

	CHECK(f != NULL, "/proc/self/maps: cannot open");
	while (f && fgets(line, sizeof(line), f)) {
		uint64_t start, end, off, ino;
		unsigned maj, min;
		char perms[5];
		int n = 0;

		lines++;
		CHECK(sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &start, &end, perms, &off,
			     &maj, &min, &ino, &n) == 7, "reader: %s", line);
		CHECK(dl_maps_parse_line(line, &m) == 0, "refused: %s", line);
		CHECK(m.start == start && m.end == end && m.offset == off && m.inode == ino && m.dev_major == maj &&
		      m.dev_minor == min && !strcmp(m.perms, perms), "fields differ: %s", line);
		line[strcspn(line, "\n")] = '\0';
		CHECK(!strcmp(m.path, line + n), "path '%s' for '%s'", m.path, line + n);
	}
	if (f)
		fclose(f);
	CHECK(lines > 5, "only %d lines in /proc/self/maps", lines);

	static const char *const bad[] = {
		"7f00-7f10 r--p 00000000 08:02\n",                       /* no inode */
		"7f00 7f10 r--p 00000000 08:02 42 /x\n",                 /* no dash */
		"7f00-7f10 r--p 00000000 0802 42 /x\n",                  /* no colon */
		"7f00-7f10 r--pp 00000000 08:02 42 /x\n",                /* perms too long */
		"17f0000000000000000-7f10 r--p 0 08:02 42 /x\n",         /* 17 hex digits */
		"7f00-7f10 r--p 0 08:02 184467440737095516160 /x\n",     /* inode past u64 */
		"-7f00-7f10 r--p 0 08:02 42 /x\n",                        /* a sign */
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(dl_maps_parse_line(bad[i], &m) == -1, "accepted '%s'", bad[i]);
}

static void test_stat_lines(void)
{
	struct dl_proc_stat st;

	CHECK(dl_stat_parse("1234 (pt_data_worker (0)) S 1200 1234 1234 0 -1 4194560 ...", &st) == 0, "parse");
	CHECK(st.pid == 1234 && st.ppid == 1200 && st.state == 'S', "pid %d ppid %d state %c", st.pid, st.ppid,
	      st.state);
	CHECK(!strcmp(st.comm, "pt_data_worker (0)"), "comm '%s'", st.comm);
	CHECK(st.flags == 4194560 && !(st.flags & DL_PF_KTHREAD), "flags %u", st.flags);
	CHECK(dl_stat_parse("12 no-parens S 1", &st) == -1, "no parens accepted");
	/* kthreadd as this kernel shows it (pid 2, where the pid namespace is the host's), and this process. */
	if (dl_proc_stat(2, &st) == 0 && !strcmp(st.comm, "kthreadd"))
		CHECK((st.flags & DL_PF_KTHREAD) && st.ppid == 0, "kthreadd: flags %#x ppid %d", st.flags, st.ppid);
	CHECK(dl_proc_stat(getpid(), &st) == 0 && !(st.flags & DL_PF_KTHREAD) && st.threads >= 1,
	      "this process: flags %#x threads %d", st.flags, st.threads);
}

static void test_cudart_names(void)
{
	CHECK(dl_is_cudart_name("/usr/local/cuda/lib64/libcudart.so.13"), "plain");
	CHECK(dl_is_cudart_name("/x/libcudart.so"), "unversioned");
	CHECK(dl_is_cudart_name("/x/libcudart.so.13.0.96"), "full version");
	CHECK(dl_is_cudart_name("/site-packages/nvidia/cu13/lib/libcudart-3e1c5a9b.so.13"), "wheel hash");
	CHECK(!dl_is_cudart_name("/x/libcudart_static.a"), "static archive");
	CHECK(!dl_is_cudart_name("/x/libcudart.sox"), "bad suffix");
	CHECK(!dl_is_cudart_name("/x/libcuda.so.1"), "driver");
	CHECK(!strcmp(dl_basename("/a/b/c"), "c") && !strcmp(dl_basename("c"), "c"), "basename");
}

static int count_self(const struct dl_mapping *m, void *arg)
{
	(void)m;
	(*(int *)arg)++;
	return 0;
}

struct seen {
	pid_t child, grandchild, child_ppid, grandchild_ppid;
};

static void on_desc(pid_t pid, pid_t ppid, void *arg)
{
	struct seen *s = arg;

	if (pid == s->child)
		s->child_ppid = ppid;
	else if (pid == s->grandchild)
		s->grandchild_ppid = ppid;
}

static void test_live_proc(void)
{
	int fds[2], n = 0, status;
	struct seen s = {};
	pid_t child;

	CHECK(dl_maps_foreach(getpid(), count_self, &n) == 0 && n > 0, "own maps: %d file mappings", n);
	CHECK(dl_maps_foreach(0x7ffffff0, count_self, &n) < 0, "maps of a missing pid");
	{
		char small[8], io[512];
		ssize_t n = dl_proc_read(getpid(), "io", io, sizeof(io));

		CHECK(n > 0 && (size_t)n == strlen(io) && strstr(io, "syscr: "), "own io read whole (%zd)", n);
		CHECK(dl_proc_read(getpid(), "io", small, sizeof(small)) == (ssize_t)sizeof(small) - 1 &&
		      strlen(small) == sizeof(small) - 1, "a read cut to the buffer, NUL-terminated");
		CHECK(dl_proc_read(0x7ffffff0, "io", io, sizeof(io)) == -ENOENT, "io of a missing pid: -ENOENT");
	}
	CHECK(dl_proc_alive(getpid()), "self not alive");
	CHECK(!dl_proc_alive(0x7ffffff0), "missing pid alive");

	/* child -> grandchild, both found as descendants with their parents. */
	if (pipe(fds))
		return;
	child = fork();
	if (child == 0) {
		pid_t g = fork();

		if (g == 0) {
			pause();
			_exit(0);
		}
		if (write(fds[1], &g, sizeof(g)) != sizeof(g))
			_exit(1);
		waitpid(g, NULL, 0);
		_exit(0);
	}
	if (read(fds[0], &s.grandchild, sizeof(s.grandchild)) != sizeof(s.grandchild))
		return;
	s.child = child;
	CHECK(dl_proc_descendants(getpid(), on_desc, &s) == 0, "descendants");
	CHECK(s.child_ppid == getpid(), "child ppid %d", s.child_ppid);
	CHECK(s.grandchild_ppid == child, "grandchild ppid %d", s.grandchild_ppid);
	kill(s.grandchild, SIGKILL);
	waitpid(child, &status, 0);
	CHECK(!dl_proc_alive(child), "reaped child still alive");
	close(fds[0]);
	close(fds[1]);
}

#define CID "4f0d1c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"
#define UID "3c9a5d6e-1b2f-4c3d-9e8f-0a1b2c3d4e5f"
#define UID_ "3c9a5d6e_1b2f_4c3d_9e8f_0a1b2c3d4e5f"

/* c parsed from text; each expected field, "" for not known. */
static void check_cgroup(const char *text, const char *runtime, const char *id, const char *pod, const char *job)
{
	struct dl_container c;
	bool any = dl_cgroup_parse(text, strlen(text), &c);

	CHECK(any == (id[0] || pod[0] || job[0]), "%s: found %d", text, any);
	CHECK(!strcmp(c.runtime, runtime), "%s: runtime '%s', want '%s'", text, c.runtime, runtime);
	CHECK(!strcmp(c.id, id), "%s: id '%s', want '%s'", text, c.id, id);
	CHECK(!strcmp(c.pod_uid, pod), "%s: pod '%s', want '%s'", text, c.pod_uid, pod);
	CHECK(!strcmp(c.slurm_job, job), "%s: job '%s', want '%s'", text, c.slurm_job, job);
}

/* The shapes kubelet (both drivers), docker, cri-o, podman and slurmd write. */
static void test_cgroup_paths(void)
{
	char big[20000];

	/* cgroup v2, systemd driver: burstable, best-effort and guaranteed (no QoS slice) pods */
	check_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/cri-containerd-"
		     CID ".scope\n", "containerd", CID, UID, "");
	check_cgroup("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/crio-" CID
		     ".scope\n", "crio", CID, UID, "");
	check_cgroup("0::/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" CID ".scope\n", "docker", CID, UID, "");
	/* cri-o's monitor sits beside the container: a pod, no container */
	check_cgroup("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-conmon-" CID ".scope\n", "", "", UID, "");
	/* the pod's own slice (the pause process with the sandbox) */
	check_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice\n", "", "", UID,
		     "");
	/* cgroup v1, cgroupfs driver: one line per hierarchy, the same path in each */
	check_cgroup("12:pids:/kubepods/burstable/pod" UID "/" CID "\n11:memory:/kubepods/burstable/pod" UID "/" CID
		     "\n1:name=systemd:/kubepods/burstable/pod" UID "/" CID "\n0::/\n", "", CID, UID, "");
	check_cgroup("3:cpu,cpuacct:/kubepods/pod" UID "/" CID "\n", "", CID, UID, "");
	/* docker alone: cgroupfs (v1) and systemd (v2) drivers; podman */
	check_cgroup("13:cpuset:/docker/" CID "\n", "docker", CID, "", "");
	check_cgroup("0::/system.slice/docker-" CID ".scope\n", "docker", CID, "", "");
	check_cgroup("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" CID ".scope/container\n",
		     "podman", CID, "", "");
	/* Slurm: v1 (/slurm/uid/job/step), v2 (slurmstepd.scope), a job slice */
	check_cgroup("5:memory:/slurm/uid_1000/job_4242/step_0/task_0\n4:freezer:/slurm/uid_1000/job_4242/step_0\n",
		     "", "", "", "4242");
	check_cgroup("0::/system.slice/slurmstepd.scope/job_987654/step_batch/user/task_0\n", "", "", "", "987654");
	check_cgroup("0::/slurm.slice/job_77.slice\n", "", "", "", "77");
	/* nothing: a desktop session, the root, a job_ outside Slurm, an empty file */
	check_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n", "", "", "", "");
	check_cgroup("0::/\n", "", "", "", "");
	check_cgroup("0::/build/job_12\n", "", "", "", "");
	check_cgroup("", "", "", "", "");
	/* hostile or odd: not hex, too long, upper case, a short docker id (12 digits is taken) */
	check_cgroup("0::/system.slice/docker-" CID "\xff.scope\n", "", "", "", "");
	check_cgroup("0::/system.slice/docker-" CID CID ".scope\n", "", "", "", "");
	check_cgroup("0::/system.slice/docker-4F0D1C2B3A4E.scope\n", "", "", "", "");
	check_cgroup("0::/system.slice/docker-4f0d1c2b3a4e.scope\n", "docker", "4f0d1c2b3a4e", "", "");
	check_cgroup("0::/kubepods.slice/kubepods-pod" UID_ "_ff.slice\n", "", "", "", "");
	/* a path with a ':' in it is the rest of the line */
	check_cgroup("0::/odd:name/docker-" CID ".scope\n", "docker", CID, "", "");
	/* a very long path: the container at its end is still found, without a NUL */
	size_t n = (size_t)snprintf(big, sizeof(big), "0::");
	while (n < sizeof(big) - 200)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "/deep");
	n += (size_t)snprintf(big + n, sizeof(big) - n, "/crio-" CID ".scope");
	struct dl_container c;
	CHECK(dl_cgroup_parse(big, n, &c) && !strcmp(c.id, CID) && !strcmp(c.runtime, "crio"), "long path: '%s'", c.id);
	/* this process: readable, and whatever it finds passes the stream's check */
	CHECK(dl_proc_container(getpid(), 0, &c) == 0, "own cgroup");
	CHECK(dl_container_ok(&c), "own cgroup fields");
	/* An exec's cgroup that is this process's now reads; another (it moved since) is -ESTALE. */
	char line[4096], dir[4300];
	struct stat st;
	FILE *f = fopen("/proc/self/cgroup", "r");
	bool v2 = false;

	/* the unified hierarchy alone, or beside v1 ones (a hybrid host) */
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			for (int i = 0; i < 2 && !v2; i++) {
				const char *root = i ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";

				snprintf(dir, sizeof(dir), "%s/cgroup.controllers", root);
				v2 = stat(dir, &st) == 0 && snprintf(dir, sizeof(dir), "%s%s", root, line + 3) > 0 &&
				     stat(dir, &st) == 0;
			}
		}
	if (f)
		fclose(f);
	if (v2) {
		CHECK(dl_proc_container(getpid(), (uint32_t)st.st_ino, &c) == 0, "own cgroup at its inode");
		CHECK(dl_proc_container(getpid(), (uint32_t)st.st_ino + 1, &c) == -ESTALE, "moved since the exec");
	}
}

static void test_pcie_link(void)
{
	/* Gen4 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s. */
	double gen4 = dl_pcie_link_mbps("16.0 GT/s PCIe\n", "16\n");

	CHECK(gen4 > 31507 && gen4 < 31508, "gen4 x16 %f MB/s", gen4);
	CHECK(dl_pcie_link_mbps("8.0 GT/s PCIe", "4") > 3938 && dl_pcie_link_mbps("8.0 GT/s PCIe", "4") < 3939, "gen3 x4");
	CHECK(dl_pcie_link_mbps("Unknown", "16") == 0, "unknown speed");
	CHECK(dl_pcie_link_mbps("16.0 GT/s PCIe", "0") == 0, "no lanes");
}

struct path_count {
	const char *path;
	int n;
};

/* Counts the file mappings of one path (the test's own file, mapped around the snapshot). */
static int count_path(const struct dl_mapping *m, void *arg)
{
	struct path_count *pc = arg;

	pc->n += !strcmp(m->path, pc->path);
	return 0;
}

static void test_maps_snapshot(void)
{
	char path[] = "/tmp/dlbpf-test-procfs-XXXXXX";
	int fd = mkstemp(path), live = 0, snap_n = 0;
	struct path_count in_live = { .path = path }, in_snap = { .path = path };
	struct dl_maps *snap;
	void *map;

	CHECK(fd >= 0 && ftruncate(fd, 4096) == 0, "temporary file: %m");
	snap = dl_maps_read(getpid());
	CHECK(snap != NULL, "snapshot of own maps: %m");
	map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED, "mmap: %m");
	/* Mapped after the snapshot: the live maps show it, the snapshot does not. */
	dl_maps_foreach(getpid(), count_path, &in_live);
	dl_maps_foreach_in(snap, getpid(), count_path, &in_snap);
	CHECK(in_live.n == 1, "live maps show the file mapped once (%d)", in_live.n);
	CHECK(in_snap.n == 0, "the snapshot keeps the maps as read (%d)", in_snap.n);
	/* The same walk otherwise: every file mapping read then, in the same number. */
	dl_maps_foreach_in(snap, getpid(), count_self, &snap_n);
	munmap(map, 4096);
	dl_maps_foreach(getpid(), count_self, &live);
	CHECK(snap_n == live && live > 0, "snapshot %d file mappings, live %d", snap_n, live);
	/* A snapshot of another process is not used: the walk reads the maps of the one asked for. */
	live = 0;
	CHECK(dl_maps_foreach_in(snap, 0x7ffffff0, count_self, &live) < 0 && live == 0, "another pid reads live");
	dl_maps_free(snap);
	errno = 0;
	CHECK(dl_maps_read(0x7ffffff0) == NULL && errno != 0, "snapshot of a missing pid: NULL, errno set");
	close(fd);
	unlink(path);
}

int main(void)
{
	test_cgroup_paths();
	test_pcie_link();
	test_maps_lines();
	test_maps_real_lines();
	test_stat_lines();
	test_cudart_names();
	test_live_proc();
	test_maps_snapshot();
	return check_report("test_procfs");
}
