// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/btf.h>
#include "capture/env.h"
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
	dl_debug("kernel: block_io_start %s, sched_switch prev_state %s, sched_process_exit group_dead %s, "
		 "block_bio_backmerge (%s)", f->block_io_start ? "yes" : "no", f->switch_prev_state ? "yes" : "no",
		 f->exit_group_dead ? "yes" : "no", f->bio_merge_bio_only ? "bio" : "q, rq, bio");
	btf__free(btf);
	return 0;
}
