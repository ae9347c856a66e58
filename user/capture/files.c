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
#include "capture/env.h"
#include "capture/files.h"
#include "capture/kretprobes.h"
#include "capture/procfs.h"
#include "capture/sysevents.h"
#include "dlbpf/syscall_handler.h"
#include "dlbpf.skel.h"
#include "log.h"
#include "records/clock.h"

struct files_prog {
	struct bpf_program *prog;
	struct bpf_link **link;
	const char *event;
};

/* The syscall events of the tracepoint twins, in files_tp_progs' order. */
static const char *const tp_events[] = {
	"sys_enter_read", "sys_exit_read", "sys_enter_pread64", "sys_exit_pread64", "sys_enter_readv",
	"sys_exit_readv", "sys_enter_preadv", "sys_exit_preadv", "sys_enter_openat", "sys_exit_openat",
	"sys_enter_close",
};
#define TP_EVENTS (sizeof(tp_events) / sizeof(tp_events[0]))
_Static_assert(TP_EVENTS <= DL_SYSEVENTS_MAX, "raise DL_SYSEVENTS_MAX");

#define FILES_PROG(name) { skel->progs.name, &skel->links.name, NULL }

/* The tracepoint twins of bpf/files.bpf.c and their events. */
static void files_tp_progs(struct dlbpf *skel, struct files_prog out[static TP_EVENTS])
{
	const struct files_prog progs[TP_EVENTS] = {
		FILES_PROG(file_read_enter), FILES_PROG(file_read_exit), FILES_PROG(file_pread_enter),
		FILES_PROG(file_pread_exit), FILES_PROG(file_readv_enter), FILES_PROG(file_readv_exit),
		FILES_PROG(file_preadv_enter), FILES_PROG(file_preadv_exit), FILES_PROG(file_open_enter),
		FILES_PROG(file_open_exit), FILES_PROG(file_close),
	};

	memcpy(out, progs, sizeof(progs));
	for (size_t i = 0; i < TP_EVENTS; i++)
		out[i].event = tp_events[i];
}

static bool tracepoints_there(const char **missing)
{
	for (size_t i = 0; i < TP_EVENTS; i++)
		if (dl_sysevent_id(tp_events[i]) < 0) {
			*missing = tp_events[i];
			return false;
		}
	return true;
}

enum dl_files_mech dl_files_mechanism(const struct dl_features *f)
{
	const char *missing;

	if (f->fentry)
		return DL_FILES_FENTRY;
	if (f->kprobes)
		return DL_FILES_KPROBE;
	return tracepoints_there(&missing) ? DL_FILES_TRACEPOINT : DL_FILES_NONE;
}

const char *dl_files_mech_name(enum dl_files_mech m)
{
	switch (m) {
	case DL_FILES_FENTRY:
		return "fentry";
	case DL_FILES_KPROBE:
		return "kprobe";
	case DL_FILES_TRACEPOINT:
		return "tracepoint";
	default:
		return "none";
	}
}

const char *dl_files_mech_cost(enum dl_files_mech m)
{
	switch (m) {
	case DL_FILES_FENTRY:
		return "read, openat and close seen by fentry/fexit on their syscall handlers (" DL_SYSCALL_HANDLER("read")
		       ", ...): "
		       "other tasks' calls of these pay a BPF trampoline and one load, no other system call pays";
	case DL_FILES_KPROBE:
		return "read, openat and close seen by kprobes/kretprobes on their syscall handlers ("
		       DL_SYSCALL_HANDLER("read") ", ...): other tasks' calls of these pay a kprobe, a return probe and one load, no other system call pays";
	case DL_FILES_TRACEPOINT:
		return "read, openat and close seen by syscall tracepoints (this kernel allows neither fentry nor "
		       "kprobes on their handlers): every system call of every task on the machine takes the kernel's "
		       "traced syscall path while dlbpf runs, about 0.3 us more each (tools/bench table 7; "
		       "--no-files avoids it)";
	default:
		return "reads are not attributed to files: neither fentry, kprobes nor syscall tracepoints here";
	}
}

#define KRETS 5

/* The return probes of the kprobe twins, attached by dl_files_attach where tracefs can size their pool. */
static void files_krets(struct dlbpf *skel, struct files_prog out[static KRETS])
{
	const struct files_prog progs[KRETS] = {
		FILES_PROG(kread_kret), FILES_PROG(kpread_kret), FILES_PROG(kreadv_kret),
		FILES_PROG(kpreadv_kret), FILES_PROG(kopen_kret),
	};

	memcpy(out, progs, sizeof(progs));
	for (size_t i = 0; i < KRETS; i++) {
		/* "?kretprobe/<function>": the function is the section's last part. */
		const char *sec = bpf_program__section_name(out[i].prog), *slash = strrchr(sec, '/');

		out[i].event = slash ? slash + 1 : sec;
	}
}

enum dl_files_mech dl_files_choose(struct dlbpf *skel, bool wanted, const struct dl_features *f)
{
	struct files_prog krets[KRETS];
	struct files_prog progs[TP_EVENTS];
	/* Every read's entry and exit, openat's exit, close. */
	struct bpf_program *fentry[] = {
		skel->progs.fread_fentry, skel->progs.fread_fexit, skel->progs.fpread_fentry,
		skel->progs.fpread_fexit, skel->progs.freadv_fentry, skel->progs.freadv_fexit,
		skel->progs.fpreadv_fentry, skel->progs.fpreadv_fexit, skel->progs.fopen_fexit,
		skel->progs.fclose_fentry,
	};
	/* The same; openat's arguments are gone at its kretprobe, so its entry saves them. */
	struct bpf_program *kprobe[] = {
		skel->progs.kread_kprobe, skel->progs.kread_kret, skel->progs.kpread_kprobe,
		skel->progs.kpread_kret, skel->progs.kreadv_kprobe, skel->progs.kreadv_kret,
		skel->progs.kpreadv_kprobe, skel->progs.kpreadv_kret, skel->progs.kopen_kprobe,
		skel->progs.kopen_kret, skel->progs.kclose_kprobe,
	};
	enum dl_files_mech m = wanted ? dl_files_mechanism(f) : DL_FILES_NONE;
	const char *missing = NULL;

	/* All or none of the tracepoints: an entry without its exit would leave a call open, a read without its open no file. */
	if (wanted && m == DL_FILES_NONE)
		tracepoints_there(&missing);
	for (size_t i = 0; i < sizeof(fentry) / sizeof(fentry[0]); i++)
		bpf_program__set_autoload(fentry[i], m == DL_FILES_FENTRY);
	for (size_t i = 0; i < sizeof(kprobe) / sizeof(kprobe[0]); i++)
		bpf_program__set_autoload(kprobe[i], m == DL_FILES_KPROBE);
	files_krets(skel, krets);
	if (m == DL_FILES_KPROBE && dl_kretprobes_possible())
		for (size_t i = 0; i < KRETS; i++)
			bpf_program__set_autoattach(krets[i].prog, false);
	else if (m == DL_FILES_KPROBE)
		dl_info("files: tracefs takes no kprobe events here, so the return probes keep the kernel's "
			"default pool (about 2 per CPU): returns of reads beyond that many tasks blocked in a "
			"read at once are missed, and not counted");
	files_tp_progs(skel, progs);
	for (size_t i = 0; i < TP_EVENTS; i++) {
		bpf_program__set_autoload(progs[i].prog, m == DL_FILES_TRACEPOINT);
		/* dl_files_attach: through perf events of dlbpf's own (capture/sysevents.h). */
		bpf_program__set_autoattach(progs[i].prog, false);
	}
	if (missing)
		dl_warn("reads are not attributed to files: tracefs has no syscalls/%s event "
			"(CONFIG_FTRACE_SYSCALLS, or tracefs not mounted), and this kernel allows neither fentry "
			"nor kprobes on the syscall handlers", missing);
	else if (m == DL_FILES_TRACEPOINT)
		dl_warn("files: %s", dl_files_mech_cost(m));
	else if (m != DL_FILES_NONE)
		dl_info("files: %s", dl_files_mech_cost(m));
	return m;
}

int dl_files_attach(struct dlbpf *skel, enum dl_files_mech m, struct dl_sysevents *events,
		    struct dl_kretprobes *krets)
{
	struct files_prog progs[TP_EVENTS];

	if (m == DL_FILES_KPROBE) {
		files_krets(skel, progs);
		for (size_t i = 0; i < KRETS; i++) {
			if (bpf_program__autoattach(progs[i].prog))
				continue;   /* libbpf attached it (no tracefs) */
			*progs[i].link = dl_kretprobe_attach(krets, progs[i].prog, progs[i].event);
			if (!*progs[i].link) {
				int err = -errno;

				dl_err("cannot attach %s as a return probe of %s through tracefs: %s",
				       bpf_program__name(progs[i].prog), progs[i].event, strerror(-err));
				return err;
			}
		}
		return 0;
	}
	if (m != DL_FILES_TRACEPOINT)
		return 0;
	files_tp_progs(skel, progs);
	for (size_t i = 0; i < TP_EVENTS; i++) {
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
	if (dl_proc_readlink(pid, "cwd", buf, cap) || buf[0] != '/' || stat(path, &st))
		return -1;
	out->path = (char *)dl_proc_path_in_root(pid, buf);
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
	char dir[64], name[96], target[4096];
	struct dl_file_open_ev e;
	struct stat st;
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
		if (dl_proc_readlink(pid, name, target, sizeof(target)) || target[0] != '/')
			continue;
		fill_open(&e, pid, (int)fd, dl_proc_path_in_root(pid, target), DL_FILE_PREEXISTING);
		snprintf(name, sizeof(name), "%s/%ld", dir, fd);
		if (!stat(name, &st))
			e.ino32 = (uint32_t)st.st_ino;
		dl_stream_emit(s, &e, sizeof(e));
		count++;
	}
	closedir(dp);
	return count;
}

struct mapped_find {
	uint32_t ino32;
	char path[sizeof(((struct dl_mapping *)0)->path)];
};

static int match_ino32(const struct dl_mapping *m, void *arg)
{
	struct mapped_find *f = arg;

	if ((uint32_t)m->inode != f->ino32)
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", m->path);
	return 1;
}

static uint64_t mapped_key(pid_t pid, uint32_t ino32)
{
	return (uint64_t)(uint32_t)pid << 32 | ino32;
}

bool dl_files_name_mapped(struct dl_stream *s, struct dl_u64map *seen, const struct dl_bio_submit_ev *e)
{
	pid_t pid = (pid_t)e->h.tgid;
	uint64_t key = mapped_key(pid, e->ino32), was;
	struct dl_file_open_ev rec;
	struct mapped_find *f;
	bool named;

	if (dl_u64map_get(seen, key, &was))
		return was == 1;
	/*
	 * Matched on the inode's low 32 bits alone: a mapping's device is the
	 * file system's (an anonymous one on btrfs, overlayfs), not the block
	 * device the request went to; two files of one process sharing those
	 * bits are not told apart.
	 */
	f = dl_xcalloc(1, sizeof(*f));
	f->ino32 = e->ino32;
	named = dl_maps_foreach(pid, match_ino32, f) == 1;
	if (named) {
		fill_open(&rec, pid, -1, dl_proc_path_in_root(pid, f->path), DL_FILE_MAPPED);
		/* At the read's own time and thread, so that whatever places the read finds its file before it. */
		rec.h.ts = e->h.ts;
		rec.h.tid = e->h.tid;
		rec.ino32 = e->ino32;
		dl_stream_emit(s, &rec, sizeof(rec));
	} else {
		dl_debug("pid %d: read inode ...%08x outside a read call, and maps no such file", (int)pid, e->ino32);
	}
	free(f);
	dl_u64map_put(seen, key, named ? 1 : 2);
	return named;
}

void dl_files_note_open(struct dl_u64map *seen, const struct dl_file_open_ev *e)
{
	if (e->ino32 && !(e->flags & DL_FILE_PATH_FAULT))
		dl_u64map_put(seen, mapped_key((pid_t)e->h.tgid, e->ino32), 1);
}

void dl_files_forget_mapped(struct dl_u64map *seen, pid_t pid)
{
	DL_VEC(uint64_t) gone = { 0 };

	for (size_t i = 0; i < seen->cap; i++)
		if (seen->slots[i].used && seen->slots[i].key >> 32 == (uint32_t)pid)
			*(uint64_t *)dl_vec_push(&gone) = seen->slots[i].key;
	for (size_t i = 0; i < gone.n; i++)
		dl_u64map_del(seen, gone.v[i]);
	dl_vec_free(&gone);
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
		return dl_proc_readlink(pid, name, buf, cap) == 0 && buf[0] == '/' ? dl_proc_path_in_root(pid, buf) : NULL;
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
	out->ino32 = e->ino32;
	if (e->flags & DL_FILE_TRUNCATED)
		out->flags |= DL_FILE_TRUNCATED;
	return true;
}
