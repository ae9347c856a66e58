// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include "capture/cgroup.h"
#include "capture/collector.h"
#include "capture/naming.h"
#include "capture/symbolize.h"
#include "capture/procfs.h"
#include "log.h"
#include "records/clock.h"
#include "records/stream.h"

/*
 * Where pid runs, written when it differs from what was last written for it:
 * read once when the process is taken and again after each exec (a runtime
 * moves its first process into the container's cgroup before it execs the
 * entry point); a fork inherits its parent's (analysis/summary.c). The read
 * comes when the record is drained: a program that moved itself since its
 * exec (exec_cgroup_ino, from BPF) keeps what was known of it.
 */
static void note_container(struct dl_collector *c, pid_t pid, uint32_t exec_cgroup_ino)
{
	struct dl_container ct;
	uint64_t h, last = 0;
	bool known = dl_u64map_get(&c->containers, (uint64_t)pid, &last);

	if (dl_proc_container(pid, exec_cgroup_ino, &ct))
		return;   /* gone already, moved since its exec, or no cgroups: nothing is known */
	h = dl_hash_bytes(&ct, sizeof(ct)) | 1;
	if (known ? h == last : !ct.id[0] && !ct.pod_uid[0] && !ct.slurm_job[0])
		return;
	dl_u64map_put(&c->containers, (uint64_t)pid, h);
	dl_emit_cgroup(c->stream, dl_now_ns(), pid, &ct);
}

/*
 * Which physical devices pid's ordinals are (CUDA_VISIBLE_DEVICES), written
 * where it is set: read when the process is taken and after each exec (the
 * environment is fixed at exec; a fork's is its parent's, analysis/summary.c).
 */
static void note_env(struct dl_collector *c, pid_t pid)
{
	char v[DL_VISIBLE_LEN];

	if (!dl_proc_getenv(pid, "CUDA_VISIBLE_DEVICES", v, sizeof(v)))
		dl_emit_env(c->stream, dl_now_ns(), pid, v);
}

void dl_collector_introduce(struct dl_collector *c, pid_t pid, pid_t ppid, const char *comm, uint32_t threads)
{
	dl_emit_procinfo_threads(c->stream, dl_now_ns(), pid, ppid, comm, dl_proc_nspid(pid), threads);
	note_container(c, pid, 0);
	note_env(c, pid);
	if (c->files)
		dl_files_snapshot(c->stream, &c->cwds, pid);
}

static void on_proc(struct dl_collector *c, const struct dl_proc_ev *e)
{
	const struct dl_hdr *h = &e->h;

	if (e->what == DL_PROC_FORK && c->files)
		dl_cwds_fork(&c->cwds, (pid_t)h->tgid, (pid_t)e->ppid);
	/* A forked loader runs its parent's interpreter; an exec or an exit ends what was known of it. */
	if (e->what == DL_PROC_FORK) {
		dl_pyprocs_fork(&c->py, (pid_t)h->tgid, (pid_t)e->ppid);
		dl_symbolizer_fork(c->symbolizer, (pid_t)h->tgid, (pid_t)e->ppid);
	}
	else if (e->what == DL_PROC_EXEC || (e->what == DL_PROC_EXIT && e->group_dead))
		dl_pyprocs_forget(&c->py, (pid_t)h->tgid);
	if (e->what == DL_PROC_EXIT && e->group_dead)
		dl_u64map_del(&c->containers, (uint64_t)h->tgid);
	if (e->what == DL_PROC_EXEC || (e->what == DL_PROC_EXIT && e->group_dead))
		dl_files_forget_mapped(&c->mapped, (pid_t)h->tgid);

	/* A process that joined by its name at exec (--comm): introduce it, attach after the drain. */
	if (e->what == DL_PROC_EXEC && !c->known(c->known_ctx, (pid_t)h->tgid)) {
		/* One thread: exec leaves only the caller, and later ones are traced from their start. */
		dl_collector_introduce(c, (pid_t)h->tgid, (pid_t)e->ppid, e->comm, 1);
		dl_info("pid %d (%.16s): started, traced by name", (int)h->tgid, e->comm);
		dl_held_note(&c->held, (pid_t)h->tgid, false);
	} else if (e->what == DL_PROC_EXEC) {
		note_container(c, (pid_t)h->tgid, h->size >= sizeof(*e) ? e->cgroup_ino : 0);
		note_env(c, (pid_t)h->tgid);
	}
	/* Held at its exec or fork (bpf/proc.bpf.c): attach to what it maps now, then continue it. */
	if ((e->what == DL_PROC_EXEC || e->what == DL_PROC_FORK) &&
	    h->size >= offsetof(struct dl_proc_ev, flags) + sizeof(e->flags) && (e->flags & DL_PROC_STOPPED))
		dl_held_note(&c->held, (pid_t)h->tgid, true);
	/* Not held: it runs already, under what its parent mapped (probes that follow the file fire in it). */
	else if (e->what == DL_PROC_FORK)
		dl_held_note_fork(&c->held, (pid_t)h->tgid, (pid_t)e->ppid);
}

int dl_collector_record(void *ctx, void *data, size_t len)
{
	struct dl_collector *c = ctx;
	const struct dl_hdr *h = data;
	struct dl_file_open_ev abs;
	struct dl_rec_in in;

	c->drained_bytes += len;
	/* A code object BPF read at a probe: its record goes into the stream ahead of the call that named it. */
	if (len >= sizeof(*h) && h->kind == DL_EV_PYSNAP) {
		dl_pyprocs_snapshot(&c->py, c->stream, data, len);
		return 0;
	}
	/* Resolved while the process still has the cwd it opened from; the recording keeps the result. */
	if (h->kind == DL_EV_FILE_OPEN && len >= sizeof(struct dl_file_open_ev) && dl_files_resolve(&c->cwds, data, &abs))
		data = &abs, len = sizeof(abs);
	if (dl_stream_read(c->stream, &in, data, len))
		return 0;   /* malformed: counted by the stream */
	if (c->files && in.h->kind == DL_EV_FILE_OPEN)
		dl_files_note_open(&c->mapped, (const struct dl_file_open_ev *)in.h);
	if (in.h->kind == DL_EV_PROC)
		on_proc(c, (const struct dl_proc_ev *)in.h);
	if (in.is_call) {
		const struct dl_cuda_ev *e = (const struct dl_cuda_ev *)in.h;

		if (in.call.api->cls == DL_CLS_LOADER) {
			/* dlopen returned in a traced process: rescan it after the drain (and continue it if BPF stopped it). */
			dl_held_note(&c->held, (pid_t)e->h.tgid, e->flags & DL_CUDA_STOPPED);
			return 0; /* a loader event, not a CUDA call */
		}
		struct dl_lazy_now now = { 0 };

		dl_name_call(c->symbolizer, c->stream, &in.call, &now);
		dl_pyprocs_name_call(&c->py, c->stream, &in.call, &now);
	}
	/* A read outside any read call (a page fault in a mapped file): its file goes into the stream first. */
	if (c->files && in.h->kind == DL_EV_BIO_SUBMIT) {
		const struct dl_bio_submit_ev *b = (const struct dl_bio_submit_ev *)in.h;

		if (b->ino32 && !(b->flags & (DL_BIO_WRITE | DL_BIO_IN_READ)))
			dl_files_name_mapped(c->stream, &c->mapped, b);
	}
	/* A wait's or a CPU sample's frames: named as a call's are. */
	if (in.h->kind == DL_EV_PYSTACK) {
		struct dl_lazy_now now = { 0 };

		dl_pyprocs_name_frames(&c->py, c->stream, (pid_t)in.h->tgid, &((const struct dl_pystack_ev *)in.h)->py,
				       &now);
	}
	dl_stream_put(c->stream, &in);
	return 0;
}

void dl_collector_free(struct dl_collector *c)
{
	dl_held_continue_all(&c->held);
	dl_pyprocs_free(&c->py);
	dl_cwds_free(&c->cwds);
	dl_u64map_free(&c->containers);
	dl_u64map_free(&c->mapped);
}
