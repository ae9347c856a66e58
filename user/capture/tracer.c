// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "records/cuda_api.h"
#include "records/clock.h"
#include "capture/discover.h"
#include "dlbpf.skel.h"
#include "dlbpf/io.h"
#include "capture/elfsym.h"
#include "capture/files.h"
#include "capture/net.h"
#include "capture/sysevents.h"
#include "capture/hooks.h"
#include "log.h"
#include "capture/procfs.h"
#include "capture/seccomp_hazard.h"
#include "capture/tfile.h"
#include "capture/tracer.h"
#include "capture/tracer_int.h"
#include "util.h"

/*
 * The twins of this kernel's features (bpf/common.bpf.h, bpf/cuda.bpf.c),
 * chosen before load: the others are not loaded, the maps a kernel cannot
 * create are not created, and the flags make the unused branches dead code.
 */
static void choose_twins(struct dl_tracer *t)
{
	struct dlbpf *skel = t->skel;
	const struct dl_features *f = &t->feat;
	bool multi = f->uprobe_multi, py = f->global_ptr_args;
	/* Task-local storage is reached from the task the BTF helper gives. */
	bool storage = f->task_storage && f->task_btf;
	struct bpf_program *by_hand[] = {
		skel->progs.cuda_entry_only, skel->progs.cuda_enter, skel->progs.cuda_return,
		skel->progs.cuda_eo_one, skel->progs.cuda_eo_onenp, skel->progs.cuda_enter_one,
		skel->progs.cuda_ret_one, skel->progs.cuda_ret_onenp, skel->progs.step_mark, skel->progs.py_call_watch,
		skel->progs.calib_entry, skel->progs.calib_return, skel->progs.calib_entry_one, skel->progs.calib_ret_one,
	};

	skel->rodata->has_task_btf = f->task_btf;
	skel->rodata->has_task_storage = storage;
	skel->rodata->has_attach_cookie = f->attach_cookie;
	skel->rodata->file_probes = t->file_probes;
	skel->rodata->dl_page_shift = (__u32)__builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE));
	/*
	 * Attached by hand: per library (dl_tracer_scan_cuda), per process (--step-on, marker.c, pywatch.c),
	 * to dlbpf (calib.c).
	 */
	for (size_t i = 0; i < sizeof(by_hand) / sizeof(by_hand[0]); i++)
		bpf_program__set_autoattach(by_hand[i], false);
	bpf_program__set_autoload(skel->progs.cuda_entry_only, multi);
	bpf_program__set_autoload(skel->progs.cuda_enter, multi);
	bpf_program__set_autoload(skel->progs.cuda_return, multi);
	bpf_program__set_autoload(skel->progs.cuda_eo_one, !multi && py);
	bpf_program__set_autoload(skel->progs.cuda_eo_onenp, !multi && !py);
	bpf_program__set_autoload(skel->progs.cuda_enter_one, !multi);
	bpf_program__set_autoload(skel->progs.cuda_ret_one, !multi && py);
	bpf_program__set_autoload(skel->progs.cuda_ret_onenp, !multi && !py);
	bpf_program__set_autoload(skel->progs.calib_entry, multi);
	bpf_program__set_autoload(skel->progs.calib_return, multi);
	bpf_program__set_autoload(skel->progs.calib_entry_one, !multi);
	bpf_program__set_autoload(skel->progs.calib_ret_one, !multi);
	/* It reads the thread's Python frame as the walker does: where that loads. */
	bpf_program__set_autoload(skel->progs.py_call_watch, py);
	bpf_program__set_autoload(skel->progs.proc_fork, !f->signal_task);
	bpf_program__set_autoload(skel->progs.proc_fork_hold, f->signal_task);
	dl_pylines_choose(&t->pylines, skel, multi || py, !t->no_py_lines);
	bpf_map__set_autocreate(skel->maps.calls, storage);
	bpf_map__set_autocreate(skel->maps.traced_marks, storage);
	bpf_map__set_autocreate(skel->maps.file_calls, storage);
	bpf_map__set_autocreate(skel->maps.calls_by_tid, !storage);
	bpf_map__set_autocreate(skel->maps.calls_zero, !storage);
	bpf_map__set_autocreate(skel->maps.file_calls_by_tid, !storage);
	t->uprobes.multi = multi;
	t->uprobes.cookies = f->attach_cookie;
	t->uprobes.site_cookies = f->vma_cache;
	dl_info("BPF programs: CUDA probes on %s %s, cookies %s, per-thread state in %s, current task %s, "
		"Python frames %s", multi ? "uprobe_multi links" : "classic uprobes",
		t->file_probes ? "that follow each library file" : "per process",
		multi || f->attach_cookie ? "attached" : f->vma_cache ? "by file offset" : "missing (CUDA not probed)", storage ? "task storage" : "hashes by thread id",
		f->task_btf ? "by BTF" : "by probe reads", multi || py ? "walked" : "not walked");
}

/*
 * Whether the CUDA probes follow each library file (uprobe_multi with pid 0,
 * classic uprobes with pid -1) and BPF keeps the calls of the traced set:
 * then a process that starts, forks or exits costs no attach and no detach,
 * and no child is held at its fork. Every process that maps a probed file
 * takes the probes' traps, traced or not (doc/manual.md, "Processes that
 * come and go"), and so its return probes too: chosen only where these
 * cannot kill a process under a seccomp filter (no uretprobe system call, or
 * the trial says it passes), since an untraced one is never put at risk.
 * Returns 0 or -errno (a bad test hook).
 */
static int choose_file_probes(struct dl_tracer *t)
{
	bool per_process;
	int err = dl_hooks_process_probes(&per_process);

	if (err || per_process || t->uret_hazard > 0)
		return err;
	if (t->feat.uretprobe_syscall && t->uret_hazard < 0) {
		int r = dl_uretprobe_seccomp_hazard();

		if (r < 0) {
			dl_debug("cannot tell whether return probes are safe under seccomp (%s): CUDA probes per process",
				 strerror(-r));
			return 0;
		}
		t->uret_hazard = r != 0;
		if (r)
			return 0;
	}
	t->file_probes = true;
	return 0;
}

/*
 * Opens the BPF object, sets it up for this kernel and loads it; *loading
 * says the failure, if any, was the load's (the verifier's).
 */
static int open_load_once(struct dl_tracer *t, unsigned ringbuf_mb, bool agg_mode, bool files, bool net,
			  bool *loading)
{
	struct dlbpf *skel;
	int err;

	*loading = false;
	skel = dlbpf__open();
	if (!skel) {
		err = -errno;
		dl_err("cannot open the BPF object: %s", strerror(errno));
		return err;
	}
	t->skel = skel;
	err = dl_hooks_map_entries(skel->obj);
	if (err)
		return err;
	bpf_map__set_max_entries(skel->maps.rb, ringbuf_mb << 20);
	/* Wake the consumer early once a quarter of the buffer is unread. */
	skel->rodata->wakeup_bytes = ((uint64_t)ringbuf_mb << 20) / 4;
	skel->rodata->agg_mode = agg_mode;
	skel->rodata->switch_has_prev_state = t->feat.switch_prev_state;
	skel->rodata->exit_has_group_dead = t->feat.exit_group_dead;
	skel->rodata->bio_merge_bio_only = t->feat.bio_merge_bio_only;
	skel->rodata->getrq_bio_only = t->feat.getrq_bio_only;
	bpf_program__set_autoload(skel->progs.io_start, t->feat.block_io_start);
	bpf_program__set_autoload(skel->progs.io_insert, !t->feat.block_io_start);
	bpf_program__set_autoload(skel->progs.io_issue, !t->feat.block_io_start);
	bpf_program__set_autoload(skel->progs.io_requeue, !t->feat.block_io_start);
	bpf_program__set_autoload(skel->progs.io_getrq, !t->feat.block_io_start);
	t->files_mech = dl_files_choose(skel, files, &t->feat);
	t->files = t->files_mech != DL_FILES_NONE;
	t->net_mech = dl_net_choose(skel, net, &t->feat, t->files_mech);
	choose_twins(t);
	*loading = true;
	return dlbpf__load(skel);
}

int dl_tracer_open_load(struct dl_tracer *t, unsigned ringbuf_mb, bool agg_mode, bool files, bool net)
{
	struct dlbpf *skel;
	bool loading;
	int err;

	memset(t, 0, sizeof(*t));
	err = dl_env_probe(&t->feat);
	if (!err)
		err = dl_hooks_features(&t->feat);
	if (!err)
		err = dl_hooks_link_pause(&t->link_pause_ms);
	if (!err)
		err = dl_hooks_entry_link_first(&t->entry_link_first);
	if (!err)
		err = dl_hooks_no_closer(&t->sysevents.no_closer);
	if (!err) {
		bool forced;

		err = dl_hooks_uretprobe_hazard(&forced);
		t->uret_hazard = forced ? 1 : -1;
	}
	if (!err)
		err = choose_file_probes(t);
	if (!err)
		err = dl_hooks_no_py_lines(&t->no_py_lines);
	if (err)
		return err;
	dl_features_log_missing(&t->feat);
	err = open_load_once(t, ringbuf_mb, agg_mode, files, net, &loading);
	/*
	 * The Python lines' programs (a walk at sched_switch and at a perf event) are the only ones
	 * chosen by no feature probe of their own but the walker's: a verifier that refuses them
	 * costs those lines, not the trace.
	 */
	if (err && loading && t->pylines.loaded) {
		dl_warn("Python lines of waits and CPU time are off: this kernel does not load their programs (%s)",
			strerror(-err));
		dlbpf__destroy(t->skel);
		t->skel = NULL;
		t->no_py_lines = true;
		err = open_load_once(t, ringbuf_mb, agg_mode, files, net, &loading);
	}
	if (err) {
		if (loading)
			dl_err("cannot load the BPF programs: %s (run with -vv for the verifier's log)", strerror(-err));
		return err;
	}
	skel = t->skel;
	t->uprobes.cookie_map_fd = bpf_map__fd(skel->maps.probe_cookies);
	return dl_tracer_map_consumer_flag(t);
}

void dl_tracer_pylines_start(void *tracer)
{
	struct dl_tracer *t = tracer;

	dl_pylines_attach(&t->pylines, t->skel);
}

const char *dl_tracer_py_no_walk(const struct dl_tracer *t)
{
	if (t->feat.uprobe_multi || t->feat.global_ptr_args)
		return NULL;
	return "this kernel cannot check BPF's Python frame walk (global functions with pointer arguments, 5.12)";
}

/*
 * Every program the skeleton can attach by itself is attached here, so a new
 * SEC needs no list to be kept; one libbpf cannot attach (a section with no
 * target) would be left silently off, so it is an error.
 */
int dl_tracer_attach_auto(struct dl_tracer *t)
{
	const struct bpf_object_skeleton *sk = t->skel->skeleton;
	int err = dlbpf__attach(t->skel);

	for (int i = 0; i < sk->prog_cnt; i++) {
		struct bpf_program *prog = *sk->progs[i].prog;

		if (!bpf_program__autoload(prog) || !bpf_program__autoattach(prog) || *sk->progs[i].link)
			continue;
		dl_err("cannot attach %s: %s", bpf_program__section_name(prog),
		       err ? strerror(-err) : "libbpf cannot attach this section by itself");
		return err ? err : -EINVAL;
	}
	if (err) {
		dl_err("cannot attach the BPF programs: %s", strerror(-err));
		return err;
	}
	/* fentry and kprobes attached with the skeleton; tracepoints and return probes through dlbpf's own events. */
	err = dl_files_attach(t->skel, t->files_mech, &t->sysevents, &t->krets);
	return err ? err : dl_net_attach(t->skel, t->net_mech, t->files_mech, &t->sysevents);
}

int dl_tracer_trace_pid(struct dl_tracer *t, pid_t pid, pid_t ppid)
{
	struct dl_traced v = { .ppid = (uint32_t)ppid };
	uint32_t key = (uint32_t)pid;
	volatile uint32_t *slot = &t->skel->bss->traced_slots[key & (DL_TRACED_SLOTS - 1)];

	_Static_assert(!(DL_TRACED_SLOTS & (DL_TRACED_SLOTS - 1)), "DL_TRACED_SLOTS: a power of two");
	_Static_assert(sizeof(t->skel->bss->traced_slots) == DL_TRACED_SLOTS * sizeof(uint32_t), "traced_slots' size");
	/* Counted before the entry exists (common.bpf.h, dl_traced_insert): a slot is never below its entries. */
	__atomic_fetch_add(slot, 1, __ATOMIC_SEQ_CST);
	if (bpf_map__update_elem(t->skel->maps.traced, &key, sizeof(key), &v, sizeof(v), BPF_ANY)) {
		int err = -errno;

		__atomic_fetch_sub(slot, 1, __ATOMIC_SEQ_CST);

		/* Full: the process goes untraced, counted with the children BPF could not add. */
		if (err == -E2BIG) {
			t->traced_full++;
			dl_warn("pid %d not traced: the set of traced processes is full", pid);
		} else {
			dl_err("cannot add pid %d to the traced set: %s", pid, strerror(-err));
		}
		return err;
	}
	/* Its running tasks have "not traced" cached in the kernel (dl_task_traced): have them ask again. */
	__atomic_fetch_add(&t->skel->bss->traced_gen, 1, __ATOMIC_SEQ_CST);
	return 0;
}

_Static_assert(DL_API_COUNT <= DL_API_SLOTS, "raise DL_API_SLOTS");

static struct dl_plink *attach_set(struct dl_tracer *t, struct bpf_program *prog, const struct dl_cuda_attach *a,
				   const char *path, const struct dl_probe_set *ps, bool ret)
{
	struct dl_uprobe_set s = {
		.pid = a->pid, .path = path, .dev = a->dev, .inode = a->inode,
		.off = ps->off, .cookie = ps->cookie, .n = ps->n, .ret = ret,
	};

	return dl_plink_attach(&t->uprobes, prog, &s);
}

/* The CUDA programs of this kernel's twins (dl_tracer_open_load chose them): entry-only, entry, return. */
static void cuda_progs(const struct dl_tracer *t, struct bpf_program **entry_only, struct bpf_program **enter,
		       struct bpf_program **ret)
{
	struct dlbpf *skel = t->skel;

	if (t->feat.uprobe_multi) {
		*entry_only = skel->progs.cuda_entry_only;
		*enter = skel->progs.cuda_enter;
		*ret = skel->progs.cuda_return;
		return;
	}
	*entry_only = t->feat.global_ptr_args ? skel->progs.cuda_eo_one : skel->progs.cuda_eo_onenp;
	*enter = skel->progs.cuda_enter_one;
	*ret = t->feat.global_ptr_args ? skel->progs.cuda_ret_one : skel->progs.cuda_ret_onenp;
}

/*
 * Attaches the links of a's sets that are not attached, in slot order
 * (tracer.h: a return link before its entry link); the launch set is
 * entry-only, the others entry+return. Returns 0 or -errno.
 */
int dl_tracer_attach_links(struct dl_tracer *t, struct dl_cuda_attach *a, const struct dl_probe_set *sets[DL_LINK_MAX])
{
	/* The test hook's order: each entry link before its return link. */
	static const int entry_first[DL_LINK_MAX] = {
		DL_LINK_LAUNCH, DL_LINK_ENTER, DL_LINK_RETURN, DL_LINK_COPY_ENTER, DL_LINK_COPY_RETURN, DL_LINK_ENTRY_OTHER,
	};
	struct bpf_program *entry_only, *enter, *ret;
	char path[32];

	cuda_progs(t, &entry_only, &enter, &ret);
	struct bpf_program *progs[DL_LINK_MAX] = {
		[DL_LINK_LAUNCH] = entry_only, [DL_LINK_ENTER] = enter, [DL_LINK_RETURN] = ret,
		[DL_LINK_COPY_ENTER] = enter, [DL_LINK_COPY_RETURN] = ret, [DL_LINK_ENTRY_OTHER] = entry_only,
	};

	/* The file a was opened as: a path the kernel looked up again could lead elsewhere (tfile.h). */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", a->fd);
	for (int k = 0; k < DL_LINK_MAX; k++) {
		int i = t->entry_link_first ? entry_first[k] : k;

		if (!sets[i] || !sets[i]->n || a->links[i])
			continue;
		a->links[i] = attach_set(t, progs[i], a, path, sets[i], i == DL_LINK_RETURN || i == DL_LINK_COPY_RETURN);
		if (!a->links[i])
			return -errno;
		if (t->link_pause_ms)
			usleep(t->link_pause_ms * 1000u);
	}
	return 0;
}

/*
 * later: the process is gone, so its probes may go in the background (they
 * fire for no one), batched with the other gone processes' (uprobes.h). A
 * library unmapped from a live process may be mapped again (an exec maps the
 * same runtime): its probes must be gone before the next scan attaches new
 * ones, or a call would be seen twice.
 */
static void attach_free(struct dl_cuda_attach *a, bool later)
{
	/* Entry links before return links (tracer.h). */
	for (int k = DL_LINK_MAX - 1; k >= 0; k--) {
		if (later)
			dl_plink_destroy_later(a->links[k]);
		else
			dl_plink_destroy(a->links[k]);
		a->links[k] = NULL;
	}
	free(a->hot_launch);
	free(a->hot_copy);
	a->hot_launch = a->hot_copy = NULL;
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
}

static uint64_t mapping_dev(const struct dl_mapping *m)
{
	return (uint64_t)m->dev_major << 32 | m->dev_minor;
}

/*
 * The indexes map a hash of the file (and pid) to a position: two files can
 * share a hash, so a hit is checked, and a miss on the check falls back to a
 * scan. Each hash maps to the first entry that has it, so every entry's hash
 * is in its index and a hash not there means no entry.
 */
static uint64_t file_key(pid_t pid, uint64_t dev, uint64_t inode)
{
	uint64_t k[3] = { (uint64_t)(uint32_t)pid, dev, inode };

	return dl_hash_bytes(k, sizeof(k));
}

static bool is_plain(const struct dl_tracer *t, uint64_t dev, uint64_t inode)
{
	uint64_t i;

	if (!dl_u64map_get(&t->plain_index, file_key(0, dev, inode), &i))
		return false;
	if (t->plain.v[i].dev == dev && t->plain.v[i].inode == inode)
		return true;
	for (i = 0; i < t->plain.n; i++)
		if (t->plain.v[i].dev == dev && t->plain.v[i].inode == inode)
			return true;
	return false;
}

static void note_plain(struct dl_tracer *t, uint64_t dev, uint64_t inode)
{
	uint64_t key = file_key(0, dev, inode);

	if (!dl_u64map_get(&t->plain_index, key, NULL))
		dl_u64map_put(&t->plain_index, key, t->plain.n);
	*dl_vec_push(&t->plain) = (struct dl_file_id){ .dev = dev, .inode = inode };
}

static bool refused_is(const struct dl_refused_file *r, pid_t pid, uint64_t dev, uint64_t inode)
{
	return r->pid == pid && r->dev == dev && r->inode == inode;
}

static bool is_refused(const struct dl_tracer *t, pid_t pid, uint64_t dev, uint64_t inode)
{
	uint64_t i;

	if (!dl_u64map_get(&t->refused_index, file_key(pid, dev, inode), &i))
		return false;
	if (refused_is(&t->refused.v[i], pid, dev, inode))
		return true;
	for (i = 0; i < t->refused.n; i++)
		if (refused_is(&t->refused.v[i], pid, dev, inode))
			return true;
	return false;
}

static const char *lib_kind_name(int kind)
{
	switch (kind) {
	case DL_LIB_LOADER:
		return "loader";
	case DL_LIB_DRIVER:
		return "CUDA driver";
	case DL_LIB_NCCL:
		return "NCCL";
	default:
		return "CUDA runtime";
	}
}

/*
 * A file of pid that could not be opened, read or probed. Said once per file
 * (what = "read", "probe"; why as dl_tfile_open gives it): rescans come four
 * times a second and a job's processes map the same libraries; a hash shared
 * by two files only costs the second one its warning. Not tried again in pid
 * unless the error may pass by itself.
 */
static void refuse(struct dl_tracer *t, pid_t pid, const struct dl_mapping *m, int kind, int err,
		   const char *what, const char *why)
{
	uint64_t dev = mapping_dev(m), key = file_key(pid, dev, m->inode);

	if (kind != DL_LIB_NONE && !dl_u64map_get(&t->warned, file_key(0, dev, m->inode), NULL)) {
		dl_u64map_put(&t->warned, file_key(0, dev, m->inode), 1);
		dl_log(strcmp(what, "probe") ? DL_LOG_WARN : DL_LOG_ERROR, "pid %d: cannot %s %s: %s; its calls are not traced",
		       pid, what, m->path, why);
	}
	if (dl_tfile_transient(err) || is_refused(t, pid, dev, m->inode))
		return;
	if (!dl_u64map_get(&t->refused_index, key, NULL))
		dl_u64map_put(&t->refused_index, key, t->refused.n);
	struct dl_refused_file *r = dl_vec_push(&t->refused);

	*r = (struct dl_refused_file){ .pid = pid, .dev = dev, .inode = m->inode, .kind = kind, .err = err };
	snprintf(r->path, sizeof(r->path), "%.*s", (int)sizeof(r->path) - 1, m->path);
}

/* pid exited: its refusals go (the pid may come back as another process). */
static void forget_refused(struct dl_tracer *t, pid_t pid)
{
	size_t w = 0;

	for (size_t i = 0; i < t->refused.n; i++)
		if (t->refused.v[i].pid != pid)
			t->refused.v[w++] = t->refused.v[i];
	if (w == t->refused.n)
		return;
	t->refused.n = w;
	dl_u64map_free(&t->refused_index);
	for (size_t i = 0; i < t->refused.n; i++) {
		const struct dl_refused_file *r = &t->refused.v[i];
		uint64_t key = file_key(r->pid, r->dev, r->inode);

		if (!dl_u64map_get(&t->refused_index, key, NULL))
			dl_u64map_put(&t->refused_index, key, i);
	}
}

static bool attach_is(const struct dl_cuda_attach *a, pid_t pid, uint64_t dev, uint64_t inode)
{
	return a->pid == pid && a->dev == dev && a->inode == inode;
}

static struct dl_cuda_attach *find_attached(struct dl_tracer *t, pid_t pid, uint64_t dev, uint64_t inode)
{
	uint64_t i;

	if (!dl_u64map_get(&t->cuda_index, file_key(pid, dev, inode), &i))
		return NULL;
	if (attach_is(&t->cuda.v[i], pid, dev, inode))
		return &t->cuda.v[i];
	for (i = 0; i < t->cuda.n; i++)
		if (attach_is(&t->cuda.v[i], pid, dev, inode))
			return &t->cuda.v[i];
	return NULL;
}

static void index_attach(struct dl_tracer *t, size_t i)
{
	const struct dl_cuda_attach *a = &t->cuda.v[i];
	uint64_t key = file_key(a->pid, a->dev, a->inode);

	if (!dl_u64map_get(&t->cuda_index, key, NULL))
		dl_u64map_put(&t->cuda_index, key, i);
}

/* Attachments were removed and the rest moved down: rebuilt on an exit or dlclose, not on every scan. */
static void reindex(struct dl_tracer *t)
{
	dl_u64map_free(&t->cuda_index);
	for (size_t i = 0; i < t->cuda.n; i++)
		index_attach(t, i);
}

struct pick {
	const struct dl_api *api;
	uint64_t off;
};

/* The functions of one library that dlbpf probes. */
struct picks {
	struct pick v[DL_API_COUNT];
	size_t n;
};

/* One library's probes by the link they go on (DL_LINK_*). */
struct link_sets {
	struct dl_probe_set launch;   /* entry-only: launches, and with no --duty every entry-only API */
	struct dl_probe_set other;    /* --duty: entry-only APIs other than launches */
	struct dl_probe_set calls;    /* entry and return */
	struct dl_probe_set copies;   /* --duty: copies, entry and return */
};

/*
 * Drops functions that only jump to another picked one (__cudaLaunchKernel ->
 * cudaLaunchKernel in libcudart.so.13 and in static cudart alike): the target's
 * probe sees the call, and both would count it twice.
 */
static void drop_trampolines(int fd, struct picks *p)
{
	size_t w = 0;

	for (size_t i = 0; i < p->n; i++) {
		uint8_t code[16];
		uint64_t target;
		bool dup = false;
		ssize_t got = pread(fd, code, sizeof(code), (off_t)p->v[i].off);

		if (got > 0 && dl_trampoline_target(code, (size_t)got, p->v[i].off, &target))
			for (size_t k = 0; k < p->n && !dup; k++)
				dup = k != i && p->v[k].off == target;
		if (dup) {
			dl_debug("%s only jumps to another probed function: probed there", p->v[i].api->name);
			continue;
		}
		p->v[w++] = p->v[i];
	}
	p->n = w;
}

#if defined(__aarch64__)
/*
 * arm64 runs the instruction under a uprobe's breakpoint either in the
 * handler (simulated) or copied to an out-of-line slot and single-stepped
 * there; the second path is the one NVIDIA GB300 hosts were seen resuming at
 * the wrong PC (doc/manual.md, "Probe safety on arm64"). Says how many of a
 * library's probed functions start with an instruction the kernel steps.
 */
static void note_stepped_entries(int fd, const char *path, uint64_t dev, uint64_t ino, const struct picks *p)
{
	/* Said once per file (a job's processes map the same libraries); past 32 files, again. */
	static struct {
		uint64_t dev, ino;
	} said[32];
	static unsigned n_said;
	unsigned stepped = 0;
	const char *first = NULL;

	for (unsigned i = 0; i < n_said && i < 32; i++)
		if (said[i].dev == dev && said[i].ino == ino)
			return;
	said[n_said++ % 32] = (typeof(said[0])){ dev, ino };

	for (size_t i = 0; i < p->n; i++) {
		uint32_t insn;

		if (pread(fd, &insn, sizeof(insn), (off_t)p->v[i].off) != (ssize_t)sizeof(insn))
			continue;
		if (dl_a64_probe_step(insn) == DL_A64_STEPPED) {
			stepped++;
			first = first ? first : p->v[i].api->name;
		}
	}
	if (stepped)
		dl_warn("%s: %u of %zu probed functions (%s first) start with an instruction arm64 uprobes "
			"single-step out of line, not simulate: see \"Probe safety on arm64\" in the manual",
			path, stepped, p->n, first);
}
#endif

/*
 * Reads the symbols of m (open as fd) and picks the functions to probe. A
 * file of kind DL_LIB_NONE that holds the runtime (static cudart) turns
 * DL_LIB_RUNTIME; one that does not, or whose symbols cannot be read, stays
 * DL_LIB_NONE and is remembered as plain. Returns 0 or -errno.
 */
static int pick_symbols(struct dl_tracer *t, int fd, pid_t pid, const struct dl_mapping *m, int *kind,
			struct picks *p)
{
	uint64_t dev = mapping_dev(m);
	struct dl_elf_syms syms;
	int err;

	p->n = 0;
	err = dl_elf_syms_load_fd(fd, &syms);
	if (err) {
		if (*kind != DL_LIB_NONE)
			refuse(t, pid, m, *kind, err, "read", strerror(-err));
		else
			note_plain(t, dev, m->inode);
		return *kind != DL_LIB_NONE ? err : 0;
	}
	if (*kind == DL_LIB_NONE) {
		*kind = dl_lib_kind_by_syms(&syms);
		if (*kind == DL_LIB_NONE) {
			note_plain(t, dev, m->inode);
			dl_elf_syms_free(&syms);
			return 0;
		}
		dl_info("pid %d: %s contains %s", pid, m->path,
			*kind == DL_LIB_NCCL ? "NCCL" : "the CUDA runtime (static cudart)");
	}
	for (unsigned id = 1; id < DL_API_COUNT; id++) {
		const struct dl_api *api = dl_api_by_id(id);
		const struct dl_elf_sym *sym;

		if ((api->cls == DL_CLS_LOADER) != (*kind == DL_LIB_LOADER))
			continue;
		sym = dl_elf_sym_by_name(&syms, api->name);
		if (sym)
			p->v[p->n++] = (struct pick){ api, sym->offset };
	}
	dl_elf_syms_free(&syms);
	drop_trampolines(fd, p);
#if defined(__aarch64__)
	note_stepped_entries(fd, m->path, dev, m->inode, p);
#endif
	return 0;
}

/*
 * Whether pid must get no return probes: it runs under a seccomp filter on a
 * kernel whose return probes would kill it (the trial, run once, when the
 * first such process is met). A trial that cannot run counts as a yes: the
 * job is never put at risk for a measurement.
 */
static bool returns_harm(struct dl_tracer *t, pid_t pid, int kind)
{
	/* Return probes that trap (no uretprobe system call) are beyond any seccomp filter. */
	if ((!t->feat.uretprobe_syscall && t->uret_hazard < 0) || dl_proc_seccomp_mode(pid) != 2)
		return false;
	if (t->uret_hazard < 0) {
		int r = dl_uretprobe_seccomp_hazard();

		if (r < 0)
			dl_warn("cannot tell whether return probes are safe under seccomp here (%s): "
				"processes under a seccomp filter get entry probes only", strerror(-r));
		t->uret_hazard = r != 0;
	}
	/* Said once per process (key: no file has inode 0), not once per library of it. */
	if (t->uret_hazard && kind != DL_LIB_LOADER && !dl_u64map_get(&t->warned, file_key(pid, 0, 0), NULL)) {
		dl_u64map_put(&t->warned, file_key(pid, 0, 0), 1);
		dl_warn("pid %d runs under a seccomp filter, and this kernel's return probes would kill it "
			"(no uretprobe pass-through): its CUDA calls are traced at entry only, with no durations "
			"(GPU wait and copy times are not measured) and no dlopen hold", pid);
	}
	return t->uret_hazard;
}

/*
 * no_returns: every API on the entry-only link (no return probe at all);
 * a dlopen, which needs its return, is left out.
 */
static void partition(const struct dl_tracer *t, const struct picks *p, struct link_sets *s, bool no_returns)
{
	s->launch.n = s->other.n = s->calls.n = s->copies.n = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct dl_api *api = p->v[i].api;

		if (no_returns && api->cls == DL_CLS_LOADER && !dl_api_entry_only(api))
			continue;
		/* With --duty, launches and copies go on links of their own. */
		struct dl_probe_set *ps = no_returns ? &s->launch : dl_api_entry_only(api)
			? (t->split_hot && api->cls != DL_CLS_LAUNCH ? &s->other : &s->launch)
			: (t->split_hot && api->cls == DL_CLS_COPY ? &s->copies : &s->calls);

		ps->off[ps->n] = p->v[i].off;
		ps->cookie[ps->n] = dl_api_cookie(api);
		if (t->stacks && dl_api_blocks(api))
			ps->cookie[ps->n] |= DL_COOKIE_STACKS;
		/* Python frames where a line explains the time (syncs, copies); launches, the hot path, with --stacks. */
		if (api->cls == DL_CLS_SYNC || api->cls == DL_CLS_COPY || (t->stacks && api->cls == DL_CLS_LAUNCH))
			ps->cookie[ps->n] |= DL_COOKIE_PY;
		ps->n++;
	}
}

/*
 * pid maps a file whose probes follow it (the attachment at owner): its entry
 * has no links of its own, and says what it maps (dl_tracer_take_fresh).
 */
static void ride(struct dl_tracer *t, size_t owner, pid_t pid, const char *path)
{
	struct dl_cuda_attach *a = dl_vec_push(&t->cuda);
	const struct dl_cuda_attach *o = &t->cuda.v[owner];   /* after the push, which may move the vector */

	*a = (struct dl_cuda_attach){ .pid = pid, .kind = o->kind, .seen = true, .fresh = true, .dev = o->dev,
				      .inode = o->inode, .fd = -1, .nsyms = o->nsyms };
	snprintf(a->path, sizeof(a->path), "%s", path);
	index_attach(t, t->cuda.n - 1);
}

/*
 * Attaches s's links in pid, or to the file for every process (file probes),
 * and records the attachment, which then owns f's descriptor; returns 1, or -errno.
 */
static int attach_sets(struct dl_tracer *t, pid_t pid, const struct dl_mapping *m, int kind,
		       const struct link_sets *s, struct dl_tfile *f)
{
	const struct dl_probe_set *sets[DL_LINK_MAX] = {
		[DL_LINK_ENTER] = &s->calls, [DL_LINK_RETURN] = &s->calls,
		[DL_LINK_ENTRY_OTHER] = &s->other,
	};
	struct dl_cuda_attach a = {
		.pid = t->file_probes ? 0 : pid, .kind = kind, .seen = true, .fresh = !t->file_probes,
		.dev = mapping_dev(m), .inode = m->inode, .fd = f->fd,
		.nsyms = (int)(s->launch.n + s->other.n + s->calls.n + s->copies.n),
	};
	int err;

	snprintf(a.path, sizeof(a.path), "%s", m->path);
	if (t->split_hot) {
		a.hot_launch = dl_xcalloc(1, sizeof(*a.hot_launch));
		a.hot_copy = dl_xcalloc(1, sizeof(*a.hot_copy));
		*a.hot_launch = s->launch;
		*a.hot_copy = s->copies;
	}
	if (!t->split_hot || t->hot_on[DL_HOT_LAUNCH])
		sets[DL_LINK_LAUNCH] = &s->launch;
	if (!t->split_hot || t->hot_on[DL_HOT_COPY])
		sets[DL_LINK_COPY_ENTER] = sets[DL_LINK_COPY_RETURN] = &s->copies;
	err = dl_tracer_attach_links(t, &a, sets);
	if (err) {
		a.fd = -1;   /* still the caller's */
		attach_free(&a, false);
		return err;
	}
	f->fd = -1;
	*dl_vec_push(&t->cuda) = a;
	index_attach(t, t->cuda.n - 1);
	if (t->file_probes)
		ride(t, t->cuda.n - 1, pid, m->path);
	return 1;
}

/*
 * One uprobe_multi link per program and library: detaching 20 single uprobes
 * takes ~2 s here, one multi link ~50 ms (measured on kernel 6.18). Offsets are resolved
 * here because libbpf 1.4.6 fails .syms on a library without .symtab.
 */
static int attach_library(struct dl_tracer *t, pid_t pid, const struct dl_mapping *m, int kind)
{
	uint64_t t0 = dl_now_ns();
	struct picks picks;
	struct link_sets sets;
	struct dl_tfile f;
	char why[160];
	int r = dl_tfile_open_mapped(pid, m->start, m->end, m->path, &f, why, sizeof(why));

	if (r) {
		refuse(t, pid, m, kind, r, "read", why);
		return kind != DL_LIB_NONE ? r : 0;
	}
	r = pick_symbols(t, f.fd, pid, m, &kind, &picks);
	if (r || kind == DL_LIB_NONE) {
		dl_tfile_close(&f);
		return r;
	}
	if (!picks.n) {
		if (kind != DL_LIB_LOADER)
			dl_warn("pid %d: %s has none of the CUDA functions dlbpf probes", pid, m->path);
		dl_tfile_close(&f);
		return 0;
	}
	partition(t, &picks, &sets, returns_harm(t, pid, kind));
	if (!sets.launch.n && !sets.other.n && !sets.calls.n && !sets.copies.n) {
		dl_tfile_close(&f);
		return 0;
	}
	/* Before the links: from now on a runtime launch keeps the frame a driver call nests in (cuda.bpf.c). */
	for (size_t i = 0; i < picks.n; i++)
		if (picks.v[i].api->driver)
			__atomic_store_n(&t->skel->bss->driver_probed, 1, __ATOMIC_SEQ_CST);
	r = attach_sets(t, pid, m, kind, &sets, &f);
	if (r < 0) {
		refuse(t, pid, m, kind, r, "probe",
		       r == -ENOTSUP && !t->uprobes.multi && !t->uprobes.cookies
			       ? "this kernel gives uprobes neither attach cookies nor a VMA cache to tell its calls apart"
			       : strerror(-r));
		dl_tfile_close(&f);
		return r;
	}
	t->last_attach_ns = dl_now_ns() - t0;
	/*
	 * Its children are held at their fork until attached to (bpf/proc.bpf.c): its probes do not fire in
	 * them. Probes that follow the file fire in them already.
	 */
	if (!t->file_probes && bpf_map__update_elem(t->skel->maps.fork_hold, &(uint32_t){ (uint32_t)pid },
						    sizeof(uint32_t), &(uint8_t){ 1 }, sizeof(uint8_t), BPF_ANY))
		dl_debug("pid %d: its children will not be held at fork: %s", pid, strerror(errno));
	dl_info("pid %d: attached %d %s functions in %s (%.1f ms)", pid, t->cuda.v[t->cuda.n - 1].nsyms,
		lib_kind_name(kind), m->path,
		(double)t->last_attach_ns / 1e6);
	return r;
}

struct scan_ctx {
	struct dl_tracer *t;
	pid_t pid;
	int attached;
	int err;
	size_t mappings;
};

static int scan_mapping(const struct dl_mapping *m, void *arg)
{
	struct scan_ctx *c = arg;
	struct dl_cuda_attach *a = find_attached(c->t, c->pid, mapping_dev(m), m->inode);
	int kind, r;

	c->mappings++;
	if (a) {
		a->seen = true;
		return 0;
	}
	/* A file already probed for every process: nothing to read, nothing to attach. */
	if (c->t->file_probes && (a = find_attached(c->t, 0, mapping_dev(m), m->inode)) != NULL) {
		int nsyms = a->nsyms;   /* read before the ride, whose push may move the vector */

		kind = a->kind;
		ride(c->t, (size_t)(a - c->t->cuda.v), c->pid, m->path);
		dl_info("pid %d: attached %d %s functions in %s (probed already, for every process that maps it)", c->pid,
			nsyms, lib_kind_name(kind), m->path);
		c->attached++;
		return 0;
	}
	if (is_refused(c->t, c->pid, mapping_dev(m), m->inode))
		return 0;
	kind = dl_lib_kind_by_name(m->path);
	/* Other files are read once, for a runtime linked into them; only code mappings (a deleted one too: map_files). */
	if (kind == DL_LIB_NONE &&
	    (m->perms[2] != 'x' || m->path[0] != '/' || is_plain(c->t, mapping_dev(m), m->inode)))
		return 0;
	r = attach_library(c->t, c->pid, m, kind);
	if (r > 0)
		c->attached += r;
	else if (r < 0 && !c->err)
		c->err = r;
	return 0;
}

int dl_tracer_scan_cuda(struct dl_tracer *t, pid_t pid, const struct dl_maps *maps)
{
	struct scan_ctx c = { .t = t, .pid = pid };
	size_t w = 0;
	int err;

	for (size_t i = 0; i < t->cuda.n; i++)
		if (t->cuda.v[i].pid == pid)
			t->cuda.v[i].seen = false;
	err = dl_maps_foreach_in(maps, pid, scan_mapping, &c);
	/* No file mapping at all: the process is exiting (its mm is gone), nothing was unmapped. */
	if (err < 0 || !c.mappings || !dl_proc_running(pid)) {
		for (size_t i = 0; i < t->cuda.n; i++)
			t->cuda.v[i].seen = true;
		return err;
	}
	/* A library no longer mapped (dlclose) is forgotten: its probes go. */
	for (size_t i = 0; i < t->cuda.n; i++) {
		if (t->cuda.v[i].pid == pid && !t->cuda.v[i].seen) {
			/* Probes that follow the file stay for the others that map it (and for this one, should it again). */
			if (t->file_probes)
				dl_info("pid %d: %s unmapped, forgotten (its probes stay for the others that map it)", pid,
					t->cuda.v[i].path);
			else
				dl_info("pid %d: %s unmapped, probes removed", pid, t->cuda.v[i].path);
			attach_free(&t->cuda.v[i], false);
			continue;
		}
		t->cuda.v[w++] = t->cuda.v[i];
	}
	if (w != t->cuda.n) {
		t->cuda.n = w;
		reindex(t);
	}
	return c.attached ? c.attached : c.err;
}

void dl_tracer_take_refused(struct dl_tracer *t, pid_t pid,
			    void (*fn)(pid_t pid, const char *path, int err, void *ctx), void *ctx)
{
	for (size_t i = 0; i < t->refused.n; i++) {
		struct dl_refused_file *r = &t->refused.v[i];

		if (r->pid != pid || r->told || r->kind == DL_LIB_NONE || r->kind == DL_LIB_LOADER)
			continue;
		r->told = true;
		fn(pid, r->path, r->err, ctx);
	}
}

void dl_tracer_take_fresh(struct dl_tracer *t, pid_t pid, void (*fn)(const struct dl_cuda_attach *a, void *ctx),
			  void *ctx)
{
	for (size_t i = 0; i < t->cuda.n; i++) {
		struct dl_cuda_attach *a = &t->cuda.v[i];

		if (a->pid == pid && a->fresh) {
			a->fresh = false;
			fn(a, ctx);
		}
	}
}

int dl_tracer_cuda_count(const struct dl_tracer *t, pid_t pid)
{
	int n = 0;

	for (size_t i = 0; i < t->cuda.n; i++)
		n += t->cuda.v[i].pid == pid && t->cuda.v[i].kind != DL_LIB_LOADER;
	return n;
}

void dl_tracer_forget_pid(struct dl_tracer *t, pid_t pid)
{
	size_t w = 0;

	forget_refused(t, pid);
	bpf_map__delete_elem(t->skel->maps.fork_hold, &(uint32_t){ (uint32_t)pid }, sizeof(uint32_t), 0);
	for (size_t i = 0; i < t->cuda.n; i++) {
		if (t->cuda.v[i].pid == pid) {
			attach_free(&t->cuda.v[i], true);
			continue;
		}
		t->cuda.v[w++] = t->cuda.v[i];
	}
	if (w != t->cuda.n) {
		t->cuda.n = w;
		reindex(t);
	}
}

int dl_tracer_inherit(struct dl_tracer *t, pid_t child, pid_t parent)
{
	size_t n = t->cuda.n;
	int added = 0;

	if (!t->file_probes)
		return 0;
	/* Only the entries there before: those pushed below are the child's. */
	for (size_t i = 0; i < n; i++) {
		const struct dl_cuda_attach *a = &t->cuda.v[i], *owner;
		char path[sizeof(a->path)];

		if (a->pid != parent || find_attached(t, child, a->dev, a->inode))
			continue;
		owner = find_attached(t, 0, a->dev, a->inode);
		if (!owner)
			continue;
		/* Copied: the push in ride may move the vector under a. */
		snprintf(path, sizeof(path), "%s", a->path);
		ride(t, (size_t)(owner - t->cuda.v), child, path);
		added++;
	}
	return added;
}

void dl_tracer_detach(struct dl_tracer *t)
{
	uint64_t t0 = dl_now_ns();
	const struct bpf_object_skeleton *sk = t->skel ? t->skel->skeleton : NULL;
	DL_VEC(struct bpf_link *) all = { 0 };
	size_t singles = 0;

	/*
	 * Classic uprobes go one by one in the kernel (each a grace period: ~100 ms on 6.18): a wait
	 * of seconds is said before it starts.
	 */
	for (size_t i = 0; i < t->cuda.n; i++)
		for (int k = 0; k < DL_LINK_MAX; k++)
			singles += dl_plink_single(t->cuda.v[i].links[k]) ? dl_plink_count(t->cuda.v[i].links[k]) : 0;
	if (singles > 16)
		dl_warn("detaching %zu probes one by one (this kernel has no uprobe_multi): this takes a few "
			"seconds; the traced processes run on meanwhile", singles);

	for (size_t i = 0; i < t->cuda.n; i++) {
		struct dl_cuda_attach *a = &t->cuda.v[i];

		for (int k = 0; k < DL_LINK_MAX; k++) {
			size_t n = dl_plink_count(a->links[k]);

			if (dl_plink_single(a->links[k]))
				continue;   /* attach_free detaches them in turn */
			for (size_t j = 0; j < n; j++)
				*dl_vec_push(&all) = NULL;
			dl_plink_take(a->links[k], all.v + all.n - n);
			a->links[k] = NULL;
		}
		attach_free(a, false);
	}
	t->cuda.n = 0;
	dl_u64map_free(&t->cuda_index);
	dl_pylines_detach(&t->pylines);
	/* The skeleton's links go in the same batch; dlbpf__destroy finds their slots empty. */
	for (int i = 0; sk && i < sk->prog_cnt; i++) {
		struct bpf_link **l = sk->progs[i].link;

		if (*l)
			*dl_vec_push(&all) = *l;
		*l = NULL;
	}
	dl_links_destroy_parallel(all.v, all.n);
	dl_vec_free(&all);
	dl_plinks_flush();
	dl_sysevents_release(&t->sysevents);
	/* Their links are gone; the events keep their counts until removed. */
	dl_kretprobes_read_missed(&t->krets);
	dl_kretprobes_remove(&t->krets);
	t->last_detach_ns = dl_now_ns() - t0;
}

void dl_tracer_exec_settled(struct dl_tracer *t, pid_t pid)
{
	__u32 key = (__u32)pid;

	for (size_t i = 0; i < t->cuda.n; i++) {
		const struct dl_cuda_attach *a = &t->cuda.v[i];

		if (a->pid == pid && a->kind == DL_LIB_LOADER && dl_is_libc_name(a->path)) {
			bpf_map_delete_elem(bpf_map__fd(t->skel->maps.exec_pending), &key);
			return;
		}
	}
}

void dl_tracer_destroy(struct dl_tracer *t)
{
	dl_tracer_detach(t);
	dl_vec_free(&t->cuda);
	dl_vec_free(&t->plain);
	dl_u64map_free(&t->plain_index);
	dl_vec_free(&t->refused);
	dl_u64map_free(&t->refused_index);
	dl_u64map_free(&t->warned);
	dl_tracer_unmap_consumer_flag(t);
	dlbpf__destroy(t->skel);
	memset(t, 0, sizeof(*t));
}

int dl_tracer_watch_comm(struct dl_tracer *t, const char *comm)
{
	char key[DL_COMM_LEN] = {};
	uint32_t one = 1;

	snprintf(key, sizeof(key), "%s", comm);
	if (bpf_map__update_elem(t->skel->maps.comm_watch, key, sizeof(key), &one, sizeof(one), BPF_ANY)) {
		dl_err("cannot watch for processes named %s: %s", comm, strerror(errno));
		return -errno;
	}
	return 0;
}

struct maps_cuda_ctx {
	struct dl_tracer *t;
	pid_t pid;
	bool found;
};

static int maps_cuda_one(const struct dl_mapping *m, void *arg)
{
	struct maps_cuda_ctx *c = arg;
	uint64_t dev = mapping_dev(m);
	struct dl_elf_syms syms;
	struct dl_tfile f;
	int kind = dl_lib_kind_by_name(m->path), err;

	if (kind == DL_LIB_RUNTIME || kind == DL_LIB_DRIVER || kind == DL_LIB_NCCL) {
		c->found = true;
		return 1;
	}
	if (kind != DL_LIB_NONE || m->perms[2] != 'x' || m->path[0] != '/' || is_plain(c->t, dev, m->inode) ||
	    is_refused(c->t, c->pid, dev, m->inode))
		return 0;
	err = dl_tfile_open_mapped(c->pid, m->start, m->end, m->path, &f, NULL, 0);
	if (!err) {
		err = dl_elf_syms_load_fd(f.fd, &syms);
		dl_tfile_close(&f);
	}
	if (err) {
		/* Every executable mapping of every process, at each --system-wide pass: a bad one is read once. */
		refuse(c->t, c->pid, m, DL_LIB_NONE, err, "read", NULL);
		return 0;
	}
	kind = dl_lib_kind_by_syms(&syms);
	dl_elf_syms_free(&syms);
	if (kind == DL_LIB_RUNTIME || kind == DL_LIB_NCCL) {
		c->found = true;
		return 1;
	}
	note_plain(c->t, dev, m->inode);
	return 0;
}

bool dl_tracer_maps_cuda(struct dl_tracer *t, pid_t pid)
{
	struct maps_cuda_ctx c = { .t = t, .pid = pid };

	dl_maps_foreach(pid, maps_cuda_one, &c);
	return c.found;
}
