// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/perf_event.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "capture/env.h"
#include "capture/files.h"
#include "capture/net.h"
#include "capture/hooks.h"
#include "capture/seccomp_hazard.h"
#include "dlbpf/syscall_handler.h"
#include "log.h"

#define SYSFS_BTF "/sys/kernel/btf/vmlinux"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

int dl_env_check(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};

	if (syscall(SYS_capget, &hdr, data)) {
		dl_err("cannot read capabilities: %s", strerror(errno));
		return -errno;
	}
	/* Uprobes and tracepoints need CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN on older kernels. */
	if (!has_cap(data, CAP_SYS_ADMIN) && !(has_cap(data, CAP_BPF) && has_cap(data, CAP_PERFMON))) {
		dl_err("dlbpf needs root (or CAP_BPF and CAP_PERFMON) to load BPF programs: run it with sudo");
		return -EPERM;
	}
	if (access(SYSFS_BTF, R_OK)) {
		dl_err("the kernel exposes no BTF (%s: %s): dlbpf needs a kernel built with "
		       "CONFIG_DEBUG_INFO_BTF=y", SYSFS_BTF, strerror(errno));
		return -ENOENT;
	}
	return 0;
}

/* Parameters of a tracepoint's btf_trace_<name> prototype, the context pointer excluded; -1 if absent. */
static int tp_param_count(const struct btf *btf, const char *tp)
{
	char name[128];
	const struct btf_type *t;
	int id;

	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	id = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF);
	if (id < 0)
		return -1;
	t = btf__type_by_id(btf, id);
	/* typedef -> pointer -> func_proto */
	for (int hops = 0; t && !btf_is_func_proto(t) && hops < 4; hops++)
		t = btf__type_by_id(btf, t->type);
	if (!t || !btf_is_func_proto(t))
		return -1;
	return btf_vlen(t) - 1;
}

/*
 * uprobe_multi links, by a trial as libbpf's own probe does it: a program of
 * that attach type loads, and a link to a file that cannot hold probes ("/")
 * fails with EBADF where the kernel knows the link type, EINVAL where not.
 */
static bool struct_has_member(const struct btf *btf, const char *name, const char *member)
{
	int id = btf__find_by_name_kind(btf, name, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const struct btf_member *m = t ? btf_members(t) : NULL;

	for (int i = 0; t && i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, m[i].name_off), member))
			return true;
	return false;
}

static bool probe_uprobe_multi(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, lo, .expected_attach_type = BPF_TRACE_UPROBE_MULTI);
	LIBBPF_OPTS(bpf_link_create_opts, co);
	unsigned long offset = 0;
	int prog, link, err;

	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, sizeof(insns) / sizeof(insns[0]), &lo);
	if (prog < 0)
		return false;
	co.uprobe_multi.path = "/";
	co.uprobe_multi.offsets = &offset;
	co.uprobe_multi.cnt = 1;
	link = bpf_link_create(prog, -1, BPF_TRACE_UPROBE_MULTI, &co);
	err = link < 0 ? -errno : 0;
	if (link >= 0)
		close(link);
	if (link >= 0 || err != -EBADF) {
		close(prog);
		return false;
	}
	/*
	 * 6.6-6.9 before 46ba0e49b642 filtered a link's pid as a thread id: calls from the
	 * process's other threads (a framework's worker threads) went unseen. A fixed kernel checks
	 * the pid first, so pid -1 fails with EINVAL before the path is looked at (libbpf's probe).
	 */
	co.uprobe_multi.pid = -1;
	link = bpf_link_create(prog, -1, BPF_TRACE_UPROBE_MULTI, &co);
	err = link < 0 ? -errno : 0;
	if (link >= 0)
		close(link);
	close(prog);
	return link < 0 && err == -EINVAL;
}

/*
 * Global BPF functions with pointer arguments (py_walk, bpf/pyframes.bpf.h),
 * by a trial load: a program that passes a stack pointer to a global function
 * of one pointer argument. No type or helper came with the change (5.12).
 */
static bool probe_global_ptr_args(void)
{
	/* main: *(u64 *)(r10 - 8) = 0; r1 = r10 - 8; call sub; exit.  sub(int *p): r0 = 0; exit. */
	const struct bpf_insn insns[] = {
		{ .code = BPF_ST | BPF_MEM | BPF_DW, .dst_reg = BPF_REG_10, .off = -8, .imm = 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_1, .src_reg = BPF_REG_10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_1, .imm = -8 },
		{ .code = BPF_JMP | BPF_CALL, .src_reg = BPF_PSEUDO_CALL, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	struct bpf_func_info fi[2] = { { .insn_off = 0 }, { .insn_off = 5 } };
	struct btf *btf = btf__new_empty();
	int id_int, id_ptr, id_main_proto, id_sub_proto, btf_fd = -1, prog = -1;
	bool ok = false;

	if (!btf)
		return false;
	id_int = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	id_ptr = btf__add_ptr(btf, id_int);
	id_main_proto = btf__add_func_proto(btf, id_int);
	id_sub_proto = btf__add_func_proto(btf, id_int);
	if (id_int < 0 || id_ptr < 0 || id_main_proto < 0 || id_sub_proto < 0 ||
	    btf__add_func_param(btf, "p", id_ptr) < 0)
		goto cleanup;
	fi[0].type_id = btf__add_func(btf, "main", BTF_FUNC_GLOBAL, id_main_proto);
	fi[1].type_id = btf__add_func(btf, "sub", BTF_FUNC_GLOBAL, id_sub_proto);
	if ((int)fi[0].type_id < 0 || (int)fi[1].type_id < 0 || btf__load_into_kernel(btf))
		goto cleanup;
	btf_fd = btf__fd(btf);
	{
		LIBBPF_OPTS(bpf_prog_load_opts, lo, .prog_btf_fd = btf_fd, .func_info = fi,
			    .func_info_rec_size = sizeof(fi[0]), .func_info_cnt = 2);

		prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, sizeof(insns) / sizeof(insns[0]), &lo);
	}
	ok = prog >= 0;
cleanup:
	if (prog >= 0)
		close(prog);
	btf__free(btf);
	return ok;
}

/*
 * The syscall handlers bpf/files.bpf.c attaches fentry or kprobes to: each a FUNC in BTF of
 * one argument, the saved registers (long __x64_sys_NAME(const struct pt_regs *), arm64's
 * __arm64_sys_NAME: dlbpf/syscall_handler.h).
 */
static const char *const files_handlers[] = {
	DL_SYSCALL_HANDLER("read"), DL_SYSCALL_HANDLER("pread64"), DL_SYSCALL_HANDLER("readv"),
	DL_SYSCALL_HANDLER("preadv"), DL_SYSCALL_HANDLER("openat"), DL_SYSCALL_HANDLER("close"),
};

/* t with its modifiers and typedefs skipped. */
static const struct btf_type *btf_skip(const struct btf *btf, __u32 id)
{
	const struct btf_type *t = btf__type_by_id(btf, id);

	for (int hops = 0; t && hops < 8 && (btf_is_mod(t) || btf_is_typedef(t)); hops++)
		t = btf__type_by_id(btf, t->type);
	return t;
}

/* The BTF id of a handler with the signature files.bpf.c reads its arguments by; -1 if not. */
static int handler_id(const struct btf *btf, const char *name)
{
	int id = btf__find_by_name_kind(btf, name, BTF_KIND_FUNC);
	const struct btf_type *fn = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const struct btf_type *proto = fn ? btf__type_by_id(btf, fn->type) : NULL, *arg, *ret;

	if (!proto || !btf_is_func_proto(proto) || btf_vlen(proto) != 1)
		return -1;
	ret = btf_skip(btf, proto->type);
	arg = btf_skip(btf, btf_params(proto)[0].type);
	if (!ret || !btf_is_int(ret) || ret->size != 8 || !arg || !btf_is_ptr(arg))
		return -1;
	arg = btf_skip(btf, arg->type);
	if (!arg || !btf_is_struct(arg) || strcmp(btf__name_by_offset(btf, arg->name_off), "pt_regs"))
		return -1;
	return id;
}

static bool handlers_in_btf(const struct btf *btf)
{
	for (size_t i = 0; i < sizeof(files_handlers) / sizeof(files_handlers[0]); i++)
		if (handler_id(btf, files_handlers[i]) < 0) {
			dl_debug("files: no %s of the expected signature in the kernel's BTF", files_handlers[i]);
			return false;
		}
	return true;
}

/*
 * fentry on the handlers: the program type first, then a trial, as nothing else answers for a
 * kernel that has the type and BTF and still refuses (a trampoline needs ftrace's direct calls;
 * this machine's 6.18 refuses the load): an empty fentry program loaded for close's handler and
 * attached, then closed. Every handler is made by the same macro, so one stands for all.
 */
static bool probe_fentry(const struct btf *btf)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int id = handler_id(btf, DL_SYSCALL_HANDLER("close")), prog, link;

	if (id < 0 || libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACING, NULL) != 1)
		return false;
	/*
	 * A read sleeps inside its fexit trampoline. Before e21aa341785c (5.12, in Debian's 5.10 as a
	 * backport) a detach freed the trampoline under such a task, which then returned into freed
	 * memory; the fix keeps each image alive while tasks are in it, as a struct bpf_tramp_image.
	 */
	if (btf__find_by_name_kind(btf, "bpf_tramp_image", BTF_KIND_STRUCT) < 0) {
		dl_debug("files: no bpf_tramp_image in BTF: fexit on a function that sleeps is not safe here");
		return false;
	}
	{
		LIBBPF_OPTS(bpf_prog_load_opts, lo, .expected_attach_type = BPF_TRACE_FENTRY, .attach_btf_id = id);

		prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, NULL, "GPL", insns, sizeof(insns) / sizeof(insns[0]), &lo);
	}
	if (prog < 0) {
		dl_debug("files: an fentry program for %s does not load: %s", DL_SYSCALL_HANDLER("close"), strerror(errno));
		return false;
	}
	link = bpf_link_create(prog, 0, BPF_TRACE_FENTRY, NULL);
	if (link < 0)
		link = bpf_raw_tracepoint_open(NULL, prog);   /* 5.5-5.7: no links of this type */
	if (link < 0)
		dl_debug("files: an fentry program does not attach to %s: %s", DL_SYSCALL_HANDLER("close"),
			 strerror(errno));
	else
		close(link);
	close(prog);
	return link >= 0;
}

/*
 * kprobes on the handlers: kprobe programs load (uprobes use the type too, so it says nothing of
 * kprobes) and the kernel makes a kprobe on close's handler, by the kprobe PMU libbpf uses; with no
 * PMU, libbpf's legacy way through tracefs, if it is there.
 */
static bool probe_kprobes(void)
{
	struct perf_event_attr attr = { .size = sizeof(attr) };
	static const char sym[] = DL_SYSCALL_HANDLER("close");
	char buf[24];
	ssize_t n;
	int fd, pfd;

	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_KPROBE, NULL) != 1)
		return false;
	fd = open("/sys/bus/event_source/devices/kprobe/type", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return access("/sys/kernel/tracing/kprobe_events", W_OK) == 0 ||
		       access("/sys/kernel/debug/tracing/kprobe_events", W_OK) == 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	attr.type = (__u32)strtoul(buf, NULL, 10);
	attr.config1 = (__u64)(uintptr_t)sym;   /* kprobe_func */
	pfd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0) {
		dl_debug("files: no kprobe on %s: %s", sym, strerror(errno));
		return false;
	}
	close(pfd);
	return true;
}

int dl_env_probe(struct dl_features *f)
{
	struct btf *btf = btf__load_vmlinux_btf();

	memset(f, 0, sizeof(*f));
	if (!btf) {
		dl_err("cannot load the kernel's BTF: %s", strerror(errno));
		return -errno;
	}
	f->block_io_start = tp_param_count(btf, "block_io_start") >= 1;
	f->switch_prev_state = tp_param_count(btf, "sched_switch") >= 4;
	f->exit_group_dead = tp_param_count(btf, "sched_process_exit") >= 2;
	f->bio_merge_bio_only = tp_param_count(btf, "block_bio_backmerge") == 1;
	f->getrq_bio_only = tp_param_count(btf, "block_getrq") == 1;
	/*
	 * The helper, not the map type: 5.11 has the map for LSM programs only (its helpers came
	 * to tracing programs in 5.12).
	 */
	f->task_storage = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_task_storage_get, NULL) == 1;
	f->task_btf = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_current_task_btf, NULL) == 1;
	f->attach_cookie = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie, NULL) == 1;
	f->uprobe_multi = probe_uprobe_multi();
	f->vma_cache = struct_has_member(btf, "task_struct", "vmacache");
	f->uretprobe_syscall = btf__find_by_name_kind(btf, "__x64_sys_uretprobe", BTF_KIND_FUNC) > 0 ||
			       btf__find_by_name_kind(btf, "__do_sys_uretprobe", BTF_KIND_FUNC) > 0;
	f->global_ptr_args = probe_global_ptr_args();
	if (handlers_in_btf(btf)) {
		f->fentry = probe_fentry(btf);
		f->kprobes = probe_kprobes();
	}
	f->signal_task = btf__find_by_name_kind(btf, "bpf_send_signal_task", BTF_KIND_FUNC) > 0;
	dl_debug("kernel: block_io_start %s, sched_switch prev_state %s, sched_process_exit group_dead %s, "
		 "block_bio_backmerge (%s)", f->block_io_start ? "yes" : "no", f->switch_prev_state ? "yes" : "no",
		 f->exit_group_dead ? "yes" : "no", f->bio_merge_bio_only ? "bio" : "q, rq, bio");
	btf__free(btf);
	return 0;
}

int dl_features_list(const struct dl_features *f, struct dl_feature_info out[DL_FEATURE_INFO_MAX])
{
	int n = 0;

	out[n++] = (struct dl_feature_info){ "uprobe_multi", f->uprobe_multi,
		"one classic uprobe per CUDA function: the kernel detaches them one by one, a grace period "
		"each (about 6 s for the 79 probes of one process's libcudart on 6.18, against 0.05 s)" };
	out[n++] = (struct dl_feature_info){ "attach_cookie", f->attach_cookie,
		f->vma_cache ? "CUDA probes find their API by file offset, through the kernel's VMA cache "
			       "(about 10 probe reads and a hash lookup per call)"
			     : "CUDA calls cannot be told apart (no VMA cache either): CUDA libraries are not probed" };
	out[n++] = (struct dl_feature_info){ "task_storage", f->task_storage,
		"per-thread state in hashes by thread id (a lookup per event, entries freed at thread exit)" };
	out[n++] = (struct dl_feature_info){ "task_btf", f->task_btf,
		"the current task read with probe reads (a helper call per field)" };
	out[n++] = (struct dl_feature_info){ "global_ptr_args", f->global_ptr_args,
		"no Python lines for CUDA calls (the BPF frame walk needs global functions with pointer arguments)" };
	out[n++] = (struct dl_feature_info){ "fentry", f->fentry,
		f->kprobes ? "the files source on kprobes (a kprobe and a return probe per read of every task)"
			   : "the files source on syscall tracepoints (below)" };
	out[n++] = (struct dl_feature_info){ "kprobes", f->kprobes,
		f->fentry ? "nothing while fentry is there" : "the files source on syscall tracepoints (below)" };
	out[n++] = (struct dl_feature_info){ "signal_task", f->signal_task,
		"where CUDA probes are per process (doc/manual.md, \"Processes that come and go\"), a child forked by "
		"a process with CUDA probes is attached to at the next scan (within 250 ms): CUDA calls it makes before "
		"are not traced" };
	out[n++] = (struct dl_feature_info){ "block_io_start", f->block_io_start,
		"block requests keyed at insert/issue (older tracepoints): same bytes" };
	return n;
}

static const char *kernel_release(struct utsname *u)
{
	if (uname(u)) {
		snprintf(u->release, sizeof(u->release), "?");
		snprintf(u->machine, sizeof(u->machine), "?");
	}
	return u->release;
}

void dl_features_log_missing(const struct dl_features *f)
{
	struct dl_feature_info info[DL_FEATURE_INFO_MAX];
	int n = dl_features_list(f, info);
	struct utsname u;
	const char *rel = kernel_release(&u);

	for (int i = 0; i < n; i++)
		/* The files source says in one line what it runs on (dl_files_choose). */
		if (!info[i].have && strcmp(info[i].name, "block_io_start") && strcmp(info[i].name, "fentry") &&
		    strcmp(info[i].name, "kprobes"))
			dl_warn("kernel %s has no %s: %s", rel, info[i].name, info[i].lost);
}

int dl_features_print(FILE *out)
{
	struct dl_feature_info info[DL_FEATURE_INFO_MAX];
	struct dl_features f;
	struct utsname u;
	int n, err = dl_env_check(), hazard;

	if (err)
		return err;
	err = dl_env_probe(&f);
	if (!err)
		err = dl_hooks_features(&f);
	if (err)
		return err;
	fprintf(out, "kernel %s (%s)\n", kernel_release(&u), u.machine);
	n = dl_features_list(&f, info);
	for (int i = 0; i < n; i++) {
		fprintf(out, "  %-18s %-3s", info[i].name, info[i].have ? "yes" : "no");
		if (!info[i].have)
			fprintf(out, "  %s", info[i].lost);
		fputc('\n', out);
	}
	/* Only a kernel whose return probes go through the system call needs the trial. */
	hazard = f.uretprobe_syscall ? dl_uretprobe_seccomp_hazard() : 0;
	fprintf(out, "  %-18s %-3s", "seccomp_uretprobe", hazard == 0 ? "yes" : "no");
	if (!f.uretprobe_syscall)
		fprintf(out, "  (no uretprobe system call here: return probes trap, which no seccomp filter sees)");
	else if (hazard > 0)
		fprintf(out, "  return probes kill processes under a seccomp filter here (no uretprobe pass-through): "
			"such processes get entry probes only, with no call durations");
	else if (hazard < 0)
		fprintf(out, "  cannot tell whether return probes are safe under seccomp (%s): such processes "
			"get entry probes only", strerror(-hazard));
	fputc('\n', out);
	{
		enum dl_files_mech m = dl_files_mechanism(&f);

		enum dl_net_mech nm = dl_net_mechanism(&f);
		char cost[512];

		fprintf(out, "  %-18s %-3s  %s\n", "files", dl_files_mech_name(m), dl_files_mech_cost(m));
		fprintf(out, "  %-18s %-3s  %s\n", "network", dl_net_mech_name(nm), dl_net_mech_cost(nm, m, cost, sizeof(cost)));
	}
	return 0;
}
