// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "capture/kretprobes.h"
#include "capture/sysevents.h"
#include "log.h"

/*
 * The most instances the kernel gives a return probe (KRETPROBE_MAXACTIVE_MAX in
 * kernel/trace/trace_kprobe.c, 4096 since it took "r<N>:" in 4.12). Each is a few dozen bytes
 * of kernel memory: about 256 KiB per probe, five probes for the files source.
 */
#define KRET_MAXACTIVE 4096

static int tracefs_file(int root, const char *name, int flags)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dl_tracefs_roots[root], name);
	return open(path, flags | O_CLOEXEC);
}

static int find_root(void)
{
	for (int i = 0; i < DL_TRACEFS_ROOTS; i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/kprobe_events", dl_tracefs_roots[i]);
		if (access(path, W_OK) == 0)
			return i;
	}
	return -1;
}

bool dl_kretprobes_possible(void)
{
	return find_root() >= 0;
}

/* One line to kprobe_events, which takes a definition or a removal per write. */
static int write_events(int root, const char *line)
{
	int fd = tracefs_file(root, "kprobe_events", O_WRONLY | O_APPEND), err = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, line, strlen(line)) < 0)
		err = -errno;
	close(fd);
	return err;
}

/*
 * Events "dlbpf/r<pid>_<n>" left by a dlbpf that died before removing them (a kill -9): the
 * probes stay armed for every task until someone removes them, so the next dlbpf does.
 */
static void remove_stale(int root)
{
	FILE *f;
	char line[512];
	int fd = tracefs_file(root, "kprobe_events", O_RDONLY);

	if (fd < 0 || !(f = fdopen(fd, "r"))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *ev = strstr(line, ":dlbpf/r"), cmd[96], proc[32];
		char *end;
		long pid;

		if (!ev)
			continue;
		ev += strlen(":dlbpf/");
		pid = strtol(ev + 1, &end, 10);
		if (end == ev + 1 || *end != '_' || pid <= 0)
			continue;
		snprintf(proc, sizeof(proc), "/proc/%ld", pid);
		if (access(proc, F_OK) == 0)
			continue;
		end = strpbrk(ev, " \n");
		if (end)
			*end = '\0';
		snprintf(cmd, sizeof(cmd), "-:dlbpf/%.64s", ev);
		if (write_events(root, cmd) == 0)
			dl_info("removed the return probe dlbpf/%s a dlbpf that is gone left behind", ev);
	}
	fclose(f);
}

static int event_id(int root, const char *event)
{
	char name[128];
	int fd;

	snprintf(name, sizeof(name), "events/dlbpf/%s/id", event);
	fd = tracefs_file(root, name, O_RDONLY);
	return fd < 0 ? -errno : dl_tracefs_id_read(fd);
}

struct bpf_link *dl_kretprobe_attach(struct dl_kretprobes *k, struct bpf_program *prog, const char *func)
{
	char def[160], *event;
	struct bpf_link *link;
	int id, pfd, err;

	if (k->n >= DL_KRETPROBES_MAX || k->removed) {
		errno = E2BIG;
		return NULL;
	}
	if (k->n == 0) {
		k->root = find_root();
		if (k->root < 0) {
			errno = ENOENT;
			return NULL;
		}
		remove_stale(k->root);
	}
	event = k->v[k->n].event;
	snprintf(event, sizeof(k->v[k->n].event), "r%d_%zu", (int)getpid(), k->n);
	snprintf(def, sizeof(def), "r%d:dlbpf/%s %s", KRET_MAXACTIVE, event, func);
	err = write_events(k->root, def);
	if (err) {
		dl_debug("kprobe_events refused \"%s\": %s", def, strerror(-err));
		errno = -err;
		return NULL;
	}
	id = event_id(k->root, event);
	if (id < 0) {
		err = id;
		goto cleanup;
	}
	pfd = dl_perf_tp_open(id);
	if (pfd < 0) {
		err = pfd;
		goto cleanup;
	}
	link = bpf_program__attach_perf_event(prog, pfd);
	if (!link) {
		err = -errno;
		close(pfd);   /* the link owns it once made; libbpf leaves it to the caller when it fails */
		goto cleanup;
	}
	k->v[k->n].prog = prog;
	k->v[k->n].missed = 0;
	k->n++;
	return link;

cleanup:
	snprintf(def, sizeof(def), "-:dlbpf/%s", event);
	write_events(k->root, def);
	errno = -err;
	return NULL;
}

uint64_t dl_kretprobes_read_missed(struct dl_kretprobes *k)
{
	char line[512];
	uint64_t total = 0;
	FILE *f;
	int fd;

	if (k->removed) {
		for (size_t i = 0; i < k->n; i++)
			total += k->v[i].missed;
		return total;
	}
	if (!k->n)
		return 0;
	fd = tracefs_file(k->root, "kprobe_profile", O_RDONLY);
	if (fd < 0 || !(f = fdopen(fd, "r"))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	/* "  <event> <hits> <missed>": a return probe's misses are its entry's and its pool's. */
	while (fgets(line, sizeof(line), f)) {
		char name[96];
		unsigned long long hits, missed;

		if (sscanf(line, " %95s %llu %llu", name, &hits, &missed) != 3)
			continue;
		for (size_t i = 0; i < k->n; i++)
			if (strcmp(name, k->v[i].event) == 0)
				k->v[i].missed = missed;
	}
	fclose(f);
	for (size_t i = 0; i < k->n; i++)
		total += k->v[i].missed;
	return total;
}

void dl_kretprobes_remove(struct dl_kretprobes *k)
{
	/* Once: the tracer's free detaches again after the session's own detach (tracer.c). */
	if (k->removed)
		return;
	for (size_t i = 0; i < k->n; i++) {
		char cmd[96];
		int err;

		snprintf(cmd, sizeof(cmd), "-:dlbpf/%s", k->v[i].event);
		err = write_events(k->root, cmd);
		if (err)
			dl_warn("cannot remove the return probe dlbpf/%s from tracefs (%s): the next dlbpf removes it",
				k->v[i].event, strerror(-err));
	}
	k->removed = true;
}

uint64_t dl_kretprobes_missed_by(const struct dl_kretprobes *k, const struct bpf_program *prog)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->v[i].prog == prog)
			return k->v[i].missed;
	return 0;
}
