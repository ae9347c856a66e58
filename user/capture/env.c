// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "capture/env.h"
#include "capture/hooks.h"
#include "capture/seccomp_hazard.h"
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
	out[n++] = (struct dl_feature_info){ "signal_task", f->signal_task,
		"a child forked by a process with CUDA probes is attached to at the next scan (within 250 ms): "
		"CUDA calls it makes before are not traced" };
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
		if (!info[i].have && strcmp(info[i].name, "block_io_start"))
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
	fprintf(out, "  %-18s %-3s  %s\n", "files", "-",
		"read and open attributed from syscall tracepoints: every task on the machine takes the "
		"kernel's traced syscall path while dlbpf runs (--no-files avoids it)");
	return 0;
}
