// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "capture/pylines.h"
#include "dlbpf.skel.h"
#include "log.h"

void dl_pylines_choose(struct dl_pylines *pl, struct dlbpf *skel, bool walk_ok, bool want)
{
	memset(pl, 0, sizeof(*pl));
	pl->loaded = walk_ok && want;
	bpf_program__set_autoload(skel->progs.py_wait_switch, pl->loaded);
	bpf_program__set_autoload(skel->progs.py_cpu_sample, pl->loaded);
	bpf_map__set_autocreate(skel->maps.py_blocked, pl->loaded);
	bpf_map__set_autocreate(skel->maps.py_blocked_zero, pl->loaded);
	/* A perf event per CPU, opened here: libbpf has no section to attach it from. */
	bpf_program__set_autoattach(skel->progs.py_cpu_sample, false);
	/*
	 * Attached at the first CPython process: until then no switch of the
	 * machine runs it (what untraced tasks and jobs without Python pay).
	 */
	bpf_program__set_autoattach(skel->progs.py_wait_switch, false);
	skel->rodata->py_wait_min_ns = DL_PY_WAIT_MIN_NS;
}

static int open_clock(int cpu)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = DL_PY_SAMPLE_HZ,
		.freq = 1,
	};
	long fd = syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

void dl_pylines_attach(struct dl_pylines *pl, struct dlbpf *skel)
{
	int ncpu = libbpf_num_possible_cpus(), err = 0;

	if (!pl->loaded || pl->started || ncpu <= 0)
		return;
	pl->started = true;
	pl->on_switch = bpf_program__attach(skel->progs.py_wait_switch);
	if (!pl->on_switch)
		dl_warn("Python lines of waits are off (cannot attach to sched_switch: %s)", strerror(errno));
	pl->samplers = calloc((size_t)ncpu, sizeof(*pl->samplers));
	if (!pl->samplers)
		return;
	for (int cpu = 0; cpu < ncpu; cpu++) {
		int fd = open_clock(cpu);
		struct bpf_link *l;

		if (fd == -ENODEV)
			continue;   /* a possible CPU that is not online */
		if (fd < 0) {
			err = fd;
			break;
		}
		l = bpf_program__attach_perf_event(skel->progs.py_cpu_sample, fd);
		if (!l) {
			err = -errno;
			close(fd);
			break;
		}
		pl->samplers[pl->nsamplers++] = l;
	}
	if (err) {
		dl_warn("CPU samples of Python threads are off (a cpu-clock perf event: %s): host compute is not "
			"named by line", strerror(-err));
		for (int i = 0; i < pl->nsamplers; i++)
			bpf_link__destroy(pl->samplers[i]);
		pl->nsamplers = 0;
		return;
	}
	dl_info("Python lines: waits of %llu ms or more named where they blocked; CPU sampled at %d Hz on %d CPUs",
		DL_PY_WAIT_MIN_NS / 1000000, DL_PY_SAMPLE_HZ, pl->nsamplers);
}

void dl_pylines_detach(struct dl_pylines *pl)
{
	bpf_link__destroy(pl->on_switch);
	pl->on_switch = NULL;
	for (int i = 0; i < pl->nsamplers; i++)
		bpf_link__destroy(pl->samplers[i]);   /* closes the perf event's fd too */
	free(pl->samplers);
	pl->samplers = NULL;
	pl->nsamplers = 0;
}
